package topics_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/chime-sched/chime/infra/topics"
	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/schema"
)

type testBundle struct {
	cluster *kafkatest.Cluster
	adm     *kadm.Client
	tt      schema.Topics
	ctx     context.Context
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	c := kafkatest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return &testBundle{cluster: c, adm: c.Admin(t), tt: c.Topics(), ctx: ctx}
}

// precreate makes a topic the way an operator (or an older chime) might have.
func (b *testBundle) precreate(t *testing.T, name string, partitions int32, cleanup string) {
	t.Helper()
	resp, err := b.adm.CreateTopic(b.ctx, partitions, 1, map[string]*string{"cleanup.policy": &cleanup}, name)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	// As an operator would, wait until the cluster shows it: on real
	// Kafka a topic just created is unknown to an immediate metadata
	// request, and Ensure would then take it for missing.
	_, err = topics.WaitVisible(b.ctx, b.adm, name)
	require.NoError(t, err)
}

// describe returns partition count, replication and configs of each topic,
// bypassing kadm's metadata cache.
func (b *testBundle) describe(t *testing.T, names ...string) (kadm.TopicDetails, map[string]map[string]string) {
	t.Helper()
	ctx := kadm.WithAuthorizedOps(b.ctx)
	details, err := b.adm.ListTopics(ctx, names...)
	require.NoError(t, err)
	rcs, err := b.adm.DescribeTopicConfigs(ctx, names...)
	require.NoError(t, err)
	configs := map[string]map[string]string{}
	for _, rc := range rcs {
		require.NoError(t, rc.Err)
		configs[rc.Name] = map[string]string{}
		for _, c := range rc.Configs {
			if c.Value != nil {
				configs[rc.Name][c.Key] = *c.Value
			}
		}
	}
	return details, configs
}

func TestEnsureCreatesEveryTopic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	specs := b.tt.All()

	// Replication 3 on a one-broker cluster is capped, not refused.
	require.NoError(t, topics.Ensure(b.ctx, b.adm, specs, 6, 3))
	brokers, err := b.adm.ListBrokers(b.ctx)
	require.NoError(t, err)
	wantRepl := min(3, len(brokers))

	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	details, configs := b.describe(t, names...)
	for _, s := range specs {
		d := details[s.Name]
		require.NoError(t, d.Err, s.Name)
		require.Len(t, d.Partitions, 6, s.Name)
		require.Equal(t, wantRepl, d.Partitions.NumReplicas(), s.Name)
		require.Equal(t, s.Cleanup, configs[s.Name]["cleanup.policy"], s.Name)
		if s.Cleanup == schema.CleanupCompact {
			require.Equal(t, topics.CompactSegmentMS, configs[s.Name]["segment.ms"], s.Name)
			require.Equal(t, topics.CompactMinCleanableDirtyRatio, configs[s.Name]["min.cleanable.dirty.ratio"], s.Name)
		}
		if s.Retention > 0 {
			require.Equal(t, strconv.FormatInt(s.Retention.Milliseconds(), 10), configs[s.Name]["retention.ms"], s.Name)
		}
	}

	// Running again changes nothing and reports nothing.
	var warnings []string
	warnf := func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) }
	require.NoError(t, topics.Ensure(b.ctx, b.adm, append(specs, specs...), 6, 3, topics.WithWarnf(warnf)))
	require.Empty(t, warnings)
}

func TestEnsureConcurrentCreatorsAllSucceed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const creators = 4
	errs := make([]error, creators)
	var wg sync.WaitGroup
	for i := range creators {
		// Each creator has its own client, as separate processes would.
		adm := b.cluster.Admin(t)
		wg.Go(func() { errs[i] = topics.Ensure(b.ctx, adm, b.tt.All(), 4, 1) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "creator %d", i)
	}
	details, _ := b.describe(t, b.tt.JobCommands())
	require.Len(t, details[b.tt.JobCommands()].Partitions, 4)
}

func TestEnsureRejectsMismatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// pre lists the topics that exist before Ensure runs.
		pre      func(tt schema.Topics) []preTopic
		wantErr  []string // substrings, all required; nil means success
		wantWarn []string
	}{
		{
			name: "co-partitioned topic with other count, all agreeing",
			pre: func(tt schema.Topics) []preTopic {
				return []preTopic{
					{tt.JobCommands(), 6, schema.CleanupDelete},
					{tt.BreakerTimers(), 6, schema.CleanupDelete},
					{tt.SchedulerTable(), 6, schema.CleanupCompact},
				}
			},
			wantErr: []string{
				`has 6 partitions, want 12`,
				`set --partitions=6 (CHIME_PARTITIONS=6)`,
				`goka requires`,
			},
		},
		{
			name: "one co-partitioned topic with another count",
			pre: func(tt schema.Topics) []preTopic {
				return []preTopic{{tt.BreakerTimers(), 6, schema.CleanupDelete}}
			},
			// Nothing was created yet, so the existing topic alone
			// decides: matching it is the cheap fix.
			wantErr: []string{`breaker-timers" has 6 partitions, want 12`, `set --partitions=6`},
		},
		{
			name: "co-partitioned topics disagreeing among themselves",
			pre: func(tt schema.Topics) []preTopic {
				return []preTopic{
					{tt.BreakerTimers(), 6, schema.CleanupDelete},
					{tt.JobCommands(), 12, schema.CleanupDelete},
				}
			},
			wantErr: []string{`breaker-timers" has 6 partitions, want 12`, `recreate them with 12 partitions`},
		},
		{
			name: "table that is not compacted",
			pre: func(tt schema.Topics) []preTopic {
				return []preTopic{{tt.BreakerTable(), 12, schema.CleanupDelete}}
			},
			wantErr: []string{`breaker-table" has cleanup.policy=delete, want compact`, `--add-config cleanup.policy=compact`},
		},
		{
			name: "stream that is compacted",
			pre: func(tt schema.Topics) []preTopic {
				return []preTopic{{tt.Outcomes(), 12, schema.CleanupCompact}}
			},
			wantErr: []string{`outcomes" has cleanup.policy=compact, want delete`},
		},
		{
			name: "both problems are reported at once",
			pre: func(tt schema.Topics) []preTopic {
				return []preTopic{
					{tt.BreakerTimers(), 3, schema.CleanupDelete},
					{tt.NamespaceTable(), 12, schema.CleanupDelete},
				}
			},
			wantErr: []string{`breaker-timers" has 3 partitions`, `namespaces-table" has cleanup.policy=delete`},
		},
		{
			name: "stream that is not co-partitioned may differ",
			pre: func(tt schema.Topics) []preTopic {
				return []preTopic{{tt.Due(), 3, schema.CleanupDelete}}
			},
			wantWarn: []string{`due" has 3 partitions, chime asked for 12; accepted`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			for _, p := range tc.pre(b.tt) {
				b.precreate(t, p.name, p.partitions, p.cleanup)
			}
			var warnings []string
			warnf := func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) }
			err := topics.Ensure(b.ctx, b.adm, b.tt.All(), 12, 3, topics.WithWarnf(warnf))
			if tc.wantErr == nil {
				require.NoError(t, err)
			}
			for _, want := range tc.wantErr {
				require.ErrorContains(t, err, want)
			}
			if tc.wantErr != nil {
				// A refusal creates nothing the operator would then
				// have to clean up.
				listed, err := b.adm.ListTopics(kadm.WithAuthorizedOps(b.ctx))
				require.NoError(t, err)
				var pre, mine []string
				for _, p := range tc.pre(b.tt) {
					pre = append(pre, p.name)
				}
				for _, name := range listed.Names() {
					if strings.HasPrefix(name, b.tt.Prefix) { // the cluster may be shared
						mine = append(mine, name)
					}
				}
				require.ElementsMatch(t, pre, mine)
			}
			require.Len(t, warnings, len(tc.wantWarn), "warnings: %q", warnings)
			for i, want := range tc.wantWarn {
				require.Contains(t, warnings[i], want)
			}
		})
	}
}

type preTopic struct {
	name       string
	partitions int32
	cleanup    string
}

func TestEnsureValidatesArguments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ok := schema.Spec{Name: "a", Cleanup: schema.CleanupDelete}
	for _, tc := range []struct {
		name        string
		specs       []schema.Spec
		partitions  int32
		replication int16
		want        string
	}{
		{"zero partitions", []schema.Spec{ok}, 0, 1, "partitions 0 must be positive"},
		{"negative replication", []schema.Spec{ok}, 1, -1, "replication -1 must be positive"},
		{"empty name", []schema.Spec{{Cleanup: schema.CleanupDelete}}, 1, 1, "empty topic name"},
		{"unknown cleanup", []schema.Spec{{Name: "a", Cleanup: "forever"}}, 1, 1, `cleanup policy "forever" must be "delete" or "compact"`},
		{"conflicting duplicates", []schema.Spec{ok, {Name: "a", Cleanup: schema.CleanupCompact}}, 1, 1, `"a" is listed twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := topics.Ensure(b.ctx, b.adm, tc.specs, tc.partitions, tc.replication)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
