// Package topics owns provisioning chime's Kafka topics: it creates the
// topics schema.Topics lists with the right partition count and cleanup
// policy, and refuses to run on existing topics that would break chime
// (co-partitioned topics with another partition count, tables that are not
// compacted).
//
// chime creates every topic up front instead of letting the broker
// auto-create it: an auto-created topic gets cleanup.policy=delete and the
// broker's default partition count, which goka rejects for tables and which
// silently splits a job's commands from its table row.
package topics

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/chime-sched/chime/schema"
)

// Settings given to every compacted topic besides cleanup.policy. Kafka
// never compacts the active segment, so with its default segment.ms (7 days)
// a table's changelog would hold a week of row versions that every recovery
// replays; a lower dirty ratio compacts sooner for the same reason. Brokers
// that ignore them (kfake compacts everything but the last batch) lose
// nothing.
const (
	CompactSegmentMS              = "3600000" // 1 hour
	CompactMinCleanableDirtyRatio = "0.1"
)

// createVisibleTimeout bounds how long Ensure waits for topics it created to
// show up in metadata (real clusters propagate it asynchronously).
const createVisibleTimeout = 30 * time.Second

// Option adjusts Ensure.
type Option func(*settings)

type settings struct {
	warnf func(format string, args ...any)
}

// WithWarnf receives the differences Ensure accepts but an operator should
// know about: a topic that is not co-partitioned having another partition
// count, or fewer replicas than asked for. Without it they are dropped.
func WithWarnf(fn func(format string, args ...any)) Option {
	return func(s *settings) { s.warnf = fn }
}

// Configs returns the topic configs Ensure creates a topic with.
func Configs(sp schema.Spec) map[string]*string {
	cfg := map[string]*string{"cleanup.policy": ptr(sp.Cleanup)}
	if sp.Cleanup == schema.CleanupCompact {
		cfg["segment.ms"] = ptr(CompactSegmentMS)
		cfg["min.cleanable.dirty.ratio"] = ptr(CompactMinCleanableDirtyRatio)
	}
	if sp.Retention > 0 {
		cfg["retention.ms"] = ptr(strconv.FormatInt(sp.Retention.Milliseconds(), 10))
	}
	return cfg
}

// Ensure creates the topics in specs that do not exist, with partitions
// partitions and min(replication, number of brokers) replicas, then checks
// every one of them:
//   - a CoPartitioned topic must have exactly partitions partitions, because
//     goka refuses to run a group whose inputs and table differ;
//   - the cleanup policy must be the spec's.
//
// All problems are reported together. Running Ensure again, or from several
// processes at once, is safe: a topic another process created first counts
// as created, and is then checked like any other.
func Ensure(ctx context.Context, adm *kadm.Client, specs []schema.Spec, partitions int32, replication int16, opts ...Option) error {
	s := settings{warnf: func(string, ...any) {}}
	for _, o := range opts {
		o(&s)
	}
	// kadm answers metadata from the kgo client's cache (up to
	// MetadataMinAge, 5 s by default), which right after a create or a
	// delete still shows the old state. Asking for authorized operations is
	// kadm's only way to force a direct request.
	ctx = kadm.WithAuthorizedOps(ctx)
	specs, err := validate(specs, partitions, replication)
	if err != nil {
		return err
	}
	if len(specs) == 0 {
		return nil
	}

	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return fmt.Errorf("provision topics: list brokers: %w", err)
	}
	if len(brokers) == 0 {
		return errors.New("provision topics: the cluster reports no brokers")
	}
	repl := min(replication, int16(min(len(brokers), 1<<15-1)))

	names := make([]string, len(specs))
	for i, sp := range specs {
		names[i] = sp.Name
	}
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("provision topics: list topics: %w", err)
	}
	var missing []schema.Spec
	for _, sp := range specs {
		d, ok := details[sp.Name]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			missing = append(missing, sp)
		case d.Err != nil:
			return fmt.Errorf("provision topics: describe %q: %w", sp.Name, d.Err)
		}
	}
	if len(missing) > 0 && len(missing) < len(specs) {
		// Refuse before creating anything: topics created with the
		// requested count next to mismatching old ones would leave the
		// operator two sets to reconcile instead of one.
		existing := slices.DeleteFunc(slices.Clone(specs), func(sp schema.Spec) bool {
			return slices.ContainsFunc(missing, func(m schema.Spec) bool { return m.Name == sp.Name })
		})
		if err := check(ctx, adm, existing, details, partitions, repl, func(string, ...any) {}); err != nil {
			return err
		}
	}
	if err := create(ctx, adm, missing, partitions, repl); err != nil {
		return err
	}
	if len(missing) > 0 {
		if details, err = WaitVisible(ctx, adm, names...); err != nil {
			return err
		}
	}
	return check(ctx, adm, specs, details, partitions, repl, s.warnf)
}

// validate rejects arguments that cannot be provisioned and drops exact
// duplicates (callers may concatenate spec lists).
func validate(specs []schema.Spec, partitions int32, replication int16) ([]schema.Spec, error) {
	if partitions <= 0 {
		return nil, fmt.Errorf("provision topics: partitions %d must be positive", partitions)
	}
	if replication <= 0 {
		return nil, fmt.Errorf("provision topics: replication %d must be positive", replication)
	}
	seen := make(map[string]schema.Spec, len(specs))
	out := make([]schema.Spec, 0, len(specs))
	for _, sp := range specs {
		if sp.Name == "" {
			return nil, errors.New("provision topics: a spec has an empty topic name")
		}
		if sp.Cleanup != schema.CleanupDelete && sp.Cleanup != schema.CleanupCompact {
			return nil, fmt.Errorf("provision topics: topic %q: cleanup policy %q must be %q or %q",
				sp.Name, sp.Cleanup, schema.CleanupDelete, schema.CleanupCompact)
		}
		if prev, ok := seen[sp.Name]; ok {
			if !reflect.DeepEqual(prev, sp) {
				return nil, fmt.Errorf("provision topics: topic %q is listed twice with different specs (%+v and %+v)", sp.Name, prev, sp)
			}
			continue
		}
		seen[sp.Name] = sp
		out = append(out, sp)
	}
	return out, nil
}

func create(ctx context.Context, adm *kadm.Client, missing []schema.Spec, partitions int32, repl int16) error {
	// One request per config set (cleanup policy, retention): kadm
	// applies one to all topics of a request.
	type group struct {
		spec  schema.Spec
		names []string
	}
	groups := map[string]*group{}
	for _, sp := range missing {
		k := sp.Cleanup + "/" + sp.Retention.String()
		if groups[k] == nil {
			groups[k] = &group{spec: sp}
		}
		groups[k].names = append(groups[k].names, sp.Name)
	}
	var errs []error
	for _, k := range sortedKeys(groups) {
		g := groups[k]
		cleanup := g.spec.Cleanup
		resps, err := adm.CreateTopics(ctx, partitions, repl, Configs(g.spec), g.names...)
		if err != nil {
			return fmt.Errorf("provision topics: create %s: %w", strings.Join(g.names, ", "), err)
		}
		for _, r := range resps.Sorted() {
			// Another process won the race: its topic is checked below
			// like any existing one.
			if r.Err == nil || errors.Is(r.Err, kerr.TopicAlreadyExists) {
				continue
			}
			msg := ""
			if r.ErrMessage != "" {
				msg = " (" + r.ErrMessage + ")"
			}
			errs = append(errs, fmt.Errorf("create topic %q with %d partitions, replication %d, cleanup.policy=%s: %w%s",
				r.Topic, partitions, repl, cleanup, r.Err, msg))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("provision topics: %w", errors.Join(errs...))
	}
	return nil
}

// WaitVisible polls metadata until every topic in names is listed with its
// partitions: a real cluster acknowledges CreateTopics before every broker
// knows the topic, and a metadata request right after the create answers
// UNKNOWN_TOPIC_OR_PARTITION. Whoever creates topics and then uses them
// waits here (for at most 30 s).
func WaitVisible(ctx context.Context, adm *kadm.Client, names ...string) (kadm.TopicDetails, error) {
	ctx = kadm.WithAuthorizedOps(ctx) // uncached, see Ensure
	var (
		details kadm.TopicDetails
		err     error
		pending []string
	)
	if werr := pollVisible(ctx, func(ctx context.Context) bool {
		details, err = adm.ListTopics(ctx, names...)
		pending = pending[:0]
		if err != nil {
			return false
		}
		for _, n := range names {
			if d, ok := details[n]; !ok || d.Err != nil || len(d.Partitions) == 0 {
				pending = append(pending, n)
			}
		}
		return len(pending) == 0
	}); werr != nil {
		if err == nil {
			err = fmt.Errorf("not yet in metadata: %s", strings.Join(pending, ", "))
		}
		return nil, fmt.Errorf("provision topics: waiting for created topics: %w (%w)", err, werr)
	}
	return details, nil
}

// pollVisible calls try, pausing between calls (50 ms, doubling up to 1 s),
// until it reports done or createVisibleTimeout passes: how long a real
// cluster may take to make a topic known to every broker. The error is the
// context's when it gave up.
func pollVisible(ctx context.Context, try func(context.Context) bool) error {
	ctx, cancel := context.WithTimeout(ctx, createVisibleTimeout)
	defer cancel()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		if try(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

func check(ctx context.Context, adm *kadm.Client, specs []schema.Spec, details kadm.TopicDetails, partitions int32, repl int16, warnf func(string, ...any)) error {
	names := make([]string, len(specs))
	for i, sp := range specs {
		names[i] = sp.Name
	}
	configs, err := describeConfigs(ctx, adm, names)
	if err != nil {
		return err
	}
	policies := make(map[string]string, len(configs))
	for _, rc := range configs {
		if rc.Err != nil {
			return fmt.Errorf("provision topics: describe configs of %q: %w", rc.Name, rc.Err)
		}
		// A broker that does not report the key uses Kafka's default.
		policies[rc.Name] = schema.CleanupDelete
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" && c.Value != nil {
				policies[rc.Name] = *c.Value
			}
		}
	}

	// What the co-partitioned topics already have, to suggest a fix.
	coCounts := map[int]bool{}
	for _, sp := range specs {
		if sp.CoPartitioned {
			coCounts[len(details[sp.Name].Partitions)] = true
		}
	}

	var errs []error
	for _, sp := range specs {
		d := details[sp.Name]
		if got := len(d.Partitions); got != int(partitions) {
			if sp.CoPartitioned {
				errs = append(errs, coPartitionError(sp.Name, got, partitions, coCounts))
			} else {
				warnf("topic %q has %d partitions, chime asked for %d; accepted, it is not co-partitioned with anything", sp.Name, got, partitions)
			}
		}
		if got := d.Partitions.NumReplicas(); got < int(repl) {
			warnf("topic %q has replication factor %d, less than the %d chime asked for; goka checks its own tables' replication and may refuse them", sp.Name, got, repl)
		}
		got, ok := policies[sp.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("topic %q: the broker returned no configs for it, so its cleanup policy cannot be checked", sp.Name))
			continue
		}
		if !samePolicy(got, sp.Cleanup) {
			errs = append(errs, cleanupError(sp, got))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("provision topics: existing topics do not match what chime needs:\n%w", errors.Join(errs...))
	}
	return nil
}

// describeConfigs reads the topics' configs. A broker learns of a topic
// another process just created a moment after the broker that listed it:
// until then it answers UNKNOWN_TOPIC_OR_PARTITION, so that answer is
// asked again (for at most createVisibleTimeout).
func describeConfigs(ctx context.Context, adm *kadm.Client, names []string) (kadm.ResourceConfigs, error) {
	var (
		configs kadm.ResourceConfigs
		err     error
	)
	// Giving up is not an error here: check reports the topic's own.
	_ = pollVisible(ctx, func(ctx context.Context) bool {
		if configs, err = adm.DescribeTopicConfigs(ctx, names...); err != nil {
			return true
		}
		for _, rc := range configs {
			if errors.Is(rc.Err, kerr.UnknownTopicOrPartition) {
				return false
			}
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("provision topics: describe topic configs: %w", err)
	}
	return configs, nil
}

func coPartitionError(topic string, got int, want int32, coCounts map[int]bool) error {
	fix := fmt.Sprintf("delete chime's co-partitioned topics and let chime recreate them with %d partitions (this drops their data)", want)
	if len(coCounts) == 1 {
		// Every co-partitioned topic agrees with each other: the
		// configuration is what changed, so matching it keeps the data.
		fix = fmt.Sprintf("set --partitions=%d (CHIME_PARTITIONS=%d) to match the existing topics, or %s", got, got, fix)
	}
	return fmt.Errorf("topic %q has %d partitions, want %d: goka requires a group's inputs and its table to have the same partition count, "+
		"and Kafka cannot shrink a topic or re-partition its keys in place; %s", topic, got, want, fix)
}

func cleanupError(sp schema.Spec, got string) error {
	why := "a goka table must be compacted, or retention deletes rows that are still live"
	if sp.Cleanup == schema.CleanupDelete {
		why = "a stream must be trimmed by retention; compacting it keeps stale events per key forever"
	}
	return fmt.Errorf("topic %q has cleanup.policy=%s, want %s: %s; fix it with "+
		"`kafka-configs.sh --bootstrap-server HOST:PORT --alter --entity-type topics --entity-name %s --add-config cleanup.policy=%s`",
		sp.Name, got, sp.Cleanup, why, sp.Name, sp.Cleanup)
}

// samePolicy compares cleanup policies as the sets Kafka treats them as
// ("compact,delete" equals "delete, compact").
func samePolicy(got, want string) bool {
	norm := func(s string) []string {
		var out []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(got), norm(want))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func ptr(s string) *string { return &s }
