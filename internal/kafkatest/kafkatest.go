// Package kafkatest owns the Kafka cluster that chime's integration tests run
// against: by default a fresh embedded broker (infra/broker) per test, on a
// free 127.0.0.1 port with its own data directory; or, when the
// CHIME_TEST_BROKERS environment variable lists seed brokers, that external
// cluster, shared by tests that keep apart through a unique topic prefix
// each. The same tests thus run against kfake and against real Kafka, as
// franz-go's own tests do with KGO_SEEDS.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/infra/broker"
	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/infra/topics"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// EnvBrokers names the environment variable that, when set to a
// comma-separated list of host:port, makes New use that cluster instead of
// starting an embedded broker. Reading it here is the one exception to "only
// cmd/ reads the environment": it is how a test run is pointed at a cluster.
const EnvBrokers = "CHIME_TEST_BROKERS"

// TestCleanerBackoff is the compaction period of embedded test brokers:
// short, so tests of compacted tables see compaction within their deadline.
const TestCleanerBackoff = 500 * time.Millisecond

// Option adjusts New.
type Option func(*options)

type options struct {
	cleanerBackoff time.Duration
	logs           bool
	seeds          []string
	sasl           kafkaauth.Credential
}

// WithExternalBrokers uses the cluster at seeds as if CHIME_TEST_BROKERS
// named it, overriding the variable.
func WithExternalBrokers(seeds ...string) Option {
	return func(o *options) { o.seeds = seeds }
}

// WithCleanerBackoff sets the embedded broker's compaction period
// (default TestCleanerBackoff). It has no effect on an external cluster.
func WithCleanerBackoff(d time.Duration) Option {
	return func(o *options) { o.cleanerBackoff = d }
}

// WithSASL makes the embedded broker require SASL/PLAIN with cred, as
// `chime dev`'s broker does; the cluster's own clients (Client, Admin,
// Provision, the cleanup) authenticate with it. A test that uses it is
// skipped on an external cluster, whose credentials it cannot know.
func WithSASL(cred kafkaauth.Credential) Option {
	return func(o *options) { o.sasl = cred }
}

// WithBrokerLogs sends the embedded broker's warnings and errors to t.Logf.
func WithBrokerLogs() Option {
	return func(o *options) { o.logs = true }
}

// Cluster is the Kafka cluster of one test.
type Cluster struct {
	opts     options
	external bool
	prefix   string
	logf     func(format string, args ...any)

	mu      sync.Mutex
	b       *broker.Broker // nil for an external cluster
	dir     string
	brokers []string
}

// New returns the test's cluster, closed (or, if external, cleared of the
// test's topics) when the test ends.
func New(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	c := &Cluster{
		opts:   options{cleanerBackoff: TestCleanerBackoff},
		prefix: UniquePrefix(t),
		logf:   t.Logf,
	}
	for _, o := range opts {
		o(&c.opts)
	}
	seeds := c.opts.seeds
	if len(seeds) == 0 {
		seeds = splitSeeds(os.Getenv(EnvBrokers))
	}
	if len(seeds) > 0 && c.opts.sasl.Enabled() {
		t.Skipf("kafkatest: the test needs the embedded broker with SASL, but runs on the external cluster %v", seeds)
	}
	if len(seeds) > 0 {
		c.external = true
		c.brokers = seeds
		t.Cleanup(func() { c.deletePrefixed(t) })
		return c
	}
	c.dir = t.TempDir()
	c.start(t)
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.b != nil {
			if err := c.b.Close(); err != nil {
				t.Errorf("kafkatest: close broker: %v", err)
			}
			c.b = nil
		}
	})
	return c
}

func splitSeeds(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// start runs the embedded broker on c.dir: on the port it had before, if
// any and still free (the broker remembers it), else on a free one. c.mu
// must be held or c not yet shared.
func (c *Cluster) start(t testing.TB) {
	t.Helper()
	opts := broker.Options{DataDir: c.dir, CleanerBackoff: c.opts.cleanerBackoff, SASL: c.opts.sasl}
	if c.opts.logs {
		opts.Logf = c.logf
	}
	b, err := broker.Start(opts)
	if err != nil {
		t.Fatalf("kafkatest: start embedded broker: %v", err)
	}
	if was := b.Moved(); was != 0 {
		// Tests that must keep the address would fail anyway, the rest
		// go on.
		t.Logf("kafkatest: port %d is taken, restarted on %v (clients seeded with the old address must be recreated)", was, b.Addrs())
	}
	c.b = b
	c.brokers = b.Addrs()
}

// Brokers returns the seed brokers (host:port).
func (c *Cluster) Brokers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.brokers...)
}

// DataDir returns the embedded broker's data directory, "" for an external
// cluster.
func (c *Cluster) DataDir() string { return c.dir }

// External reports whether the cluster is an external one
// (CHIME_TEST_BROKERS or WithExternalBrokers).
func (c *Cluster) External() bool { return c.external }

// Prefix is the test's topic and group name prefix (see UniquePrefix).
func (c *Cluster) Prefix() string { return c.prefix }

// Topics returns chime's topic names under the test's prefix. The embedded
// broker is private to the test and would not need it; using it there too
// keeps tests honest for shared clusters.
func (c *Cluster) Topics() schema.Topics { return schema.NewTopics(c.prefix) }

// Restart closes the embedded broker and starts it again on the same data
// directory and, if it is still free, the same port, as a process restart
// would. Tests of restarts are skipped on an external cluster.
func (c *Cluster) Restart(t testing.TB) {
	t.Helper()
	if c.external {
		t.Skipf("kafkatest: Restart needs the embedded broker, but the test runs on the external cluster %v", c.brokers)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.b != nil {
		if err := c.b.Close(); err != nil {
			t.Fatalf("kafkatest: close broker for restart: %v", err)
		}
		c.b = nil
	}
	c.start(t)
}

// Client returns a franz-go client seeded with the cluster, closed when the
// test ends. Options are appended after the seeds.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers()...)}, c.opts.sasl.Kgo()...), opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns an admin client for the cluster, closed when the test ends.
func (c *Cluster) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(c.Client(t))
}

// Provision creates every topic of tt with partitions partitions (replication
// 3, capped by the broker count), failing the test on any mismatch.
func (c *Cluster) Provision(t testing.TB, tt schema.Topics, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := topics.Ensure(ctx, c.Admin(t), tt.All(), partitions, 3, topics.WithWarnf(t.Logf))
	if err != nil {
		t.Fatalf("kafkatest: provision topics: %v", err)
	}
}

// deletePrefixed keeps a shared cluster from filling up with the topics and
// consumer groups of finished tests. Failing to delete is not the test's
// failure.
func (c *Cluster) deletePrefixed(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append(c.opts.sasl.Kgo(), kgo.SeedBrokers(c.Brokers()...))...)
	if err != nil {
		t.Logf("kafkatest: cleanup: %v", err)
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	if groups, err := adm.ListGroups(ctx); err != nil {
		t.Logf("kafkatest: cleanup: list groups: %v", err)
	} else if mine := c.withPrefix(groups.Groups()); len(mine) > 0 {
		if _, err := adm.DeleteGroups(ctx, mine...); err != nil {
			t.Logf("kafkatest: cleanup: delete groups %v: %v", mine, err)
		}
	}

	all, err := adm.ListTopics(kadm.WithAuthorizedOps(ctx)) // uncached, see topics.Ensure
	if err != nil {
		t.Logf("kafkatest: cleanup: list topics: %v", err)
		return
	}
	if mine := c.withPrefix(all.Names()); len(mine) > 0 {
		if _, err := adm.DeleteTopics(ctx, mine...); err != nil {
			t.Logf("kafkatest: cleanup: delete topics %v: %v", mine, err)
		}
	}
}

func (c *Cluster) withPrefix(names []string) []string {
	var mine []string
	for _, n := range names {
		if strings.HasPrefix(n, c.prefix) {
			mine = append(mine, n)
		}
	}
	return mine
}

// prefixes holds the prefix of each running test, keyed by its testing.TB:
// a test run with -count=N runs the same name N times in one process, and
// a shared cluster deletes topics asynchronously, so the name alone would
// hand the second run the first one's half-deleted topics.
var prefixes sync.Map // testing.TB -> string

// UniquePrefix returns a topic and group name prefix such as "t3f9a0c12de."
// that is the same for every call in one test and differs between tests,
// between repeats of one test (-count) and between test runs, so tests
// sharing a cluster never see each other's topics or consumer groups.
func UniquePrefix(t testing.TB) string {
	if p, ok := prefixes.Load(t); ok {
		return p.(string)
	}
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	p, loaded := prefixes.LoadOrStore(t, "t"+hex.EncodeToString(b)+".")
	if !loaded {
		t.Cleanup(func() { prefixes.Delete(t) })
	}
	return p.(string)
}

// EveryNamespace is a namespace source (schema.NamespaceSource) in which
// every namespace exists, with no settings of its own: for tests of a
// processor that publish jobs without creating their namespaces (the
// scheduler holds, then rejects, jobs of namespaces it does not know).
type EveryNamespace struct{}

// Get implements schema.NamespaceSource.
func (EveryNamespace) Get(ns string) (*chimev1.NamespaceConfig, error) {
	return &chimev1.NamespaceConfig{Namespace: ns}, nil
}
