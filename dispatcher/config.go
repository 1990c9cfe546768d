package dispatcher

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Namespaces returns a namespace's configuration; nil means the defaults.
// The namespace-config table (and its view) will implement it; until then
// StaticNamespaces does.
type Namespaces interface {
	Namespace(ns string) *chimev1.NamespaceConfig
}

// NamespacesFunc adapts a function to Namespaces.
type NamespacesFunc func(ns string) *chimev1.NamespaceConfig

// Namespace implements Namespaces.
func (f NamespacesFunc) Namespace(ns string) *chimev1.NamespaceConfig { return f(ns) }

// StaticNamespaces is a fixed set of namespace configurations; namespaces
// not in it take the defaults.
type StaticNamespaces map[string]*chimev1.NamespaceConfig

// Namespace implements Namespaces.
func (s StaticNamespaces) Namespace(ns string) *chimev1.NamespaceConfig { return s[ns] }

// DefaultIdleConnTimeout is how long a callback connection may sit idle in
// the pool: shorter than the idle timeouts endpoints commonly close
// keep-alive connections after, so the dispatcher closes first and seldom
// sends on a connection the endpoint is closing. The shortest common one
// is Node.js's http.Server keepAliveTimeout, 5 s by default
// (https://nodejs.org/api/http.html#serverkeepalivetimeout; Apache's
// KeepAliveTimeout is 5 s too); 1 s below it leaves room for a call's
// trip. An endpoint that closes sooner costs a resend, not a fire
// (callClient.do). Go's own net/http keeps 90 s.
const DefaultIdleConnTimeout = 4 * time.Second

// Config configures a Dispatcher. Zero fields take the defaults documented
// on each.
type Config struct {
	Brokers []string
	Topics  schema.Topics
	// ClientID is the Kafka client.id. Default "chime-dispatcher".
	ClientID string
	// ID names this dispatcher in outcomes. Default: hostname-pid-random.
	ID         string
	Now        func() time.Time // default time.Now
	Logger     *slog.Logger     // default slog.Default()
	Namespaces Namespaces       // default: every namespace takes the defaults
	// Breakers is the namespaces' breaker state (views.Breakers), asked
	// before every call (gate.go). Nil: every breaker is closed.
	Breakers Breakers
	// BreakerRamp is the shortest window over which callbacks deferred by
	// an open breaker come back after its next check; the breaker's
	// cool-off, when longer, is used instead. Default 5s.
	BreakerRamp time.Duration

	// Guard is the SSRF guard of the HTTP client's dialer.
	Guard Guard

	// DefaultTimeout is a call's timeout when the job sets none. Default 10s.
	DefaultTimeout time.Duration
	// MaxTimeout caps a job's timeout. Default 60s.
	MaxTimeout time.Duration
	// IdleConnTimeout: a pooled connection idle this long is closed
	// rather than reused. Default DefaultIdleConnTimeout.
	IdleConnTimeout time.Duration
	// MaxInFlight bounds concurrent calls over all namespaces. Default 1024.
	MaxInFlight int
	// DefaultMaxConcurrency bounds concurrent calls of a namespace whose
	// config sets no max_concurrency. Default: the namespace default
	// (schema.NamespaceDefaults).
	DefaultMaxConcurrency int
	// AdmissionWait is how long a due may wait for its namespace's rate
	// limit or concurrency cap before it is deferred. Default 2s.
	AdmissionWait time.Duration
	// MaxQueued bounds the dues of one namespace waiting for a
	// concurrency slot; more are deferred at once. It keeps one hanging
	// namespace from filling its partition's buffer (which would pause
	// fetching for every namespace there) and must stay well above a
	// namespace's normal burst. Default MaxBuffered/2.
	MaxQueued int
	// DeferDelay: a deferred due comes back after a random delay in
	// [DeferDelay, 2*DeferDelay). Default 1s.
	DeferDelay time.Duration
	// MaxBuffered bounds the due events taken from Kafka and not yet
	// completed; beyond it fetching is paused until half of them complete,
	// so a backlog waits in Kafka rather than in admission queues (where
	// it would be deferred). Default 4*MaxInFlight.
	MaxBuffered int
	// CommitInterval is how often completed offsets are committed.
	// Default 500ms.
	CommitInterval time.Duration
	// RevokeWait bounds how long a revoked partition's calls may finish
	// before its offsets are committed and it is let go. Default 5s.
	RevokeWait time.Duration
	// DedupSize is how many completed emissions are remembered to skip
	// replays. Default 100000; negative disables.
	DedupSize int
	// BodySnippet is how much of a response body outcomes carry.
	// Default 1024.
	BodySnippet int

	// Registerer, if set, gets the dispatcher's metrics: its counters
	// (Stats), read when scraped.
	Registerer prometheus.Registerer
	// OnDispatch, if set, is called with the time a due was taken from
	// Kafka and the time its request was handed to the HTTP client: the
	// benchmark's per-call overhead, at a resolution (and with a maximum)
	// a metric's buckets would not keep. It must be fast.
	OnDispatch func(consumed, sent time.Time)
	// Membership is the consumer's part in the dispatcher group (session
	// timeout, static membership).
	Membership groups.Membership
	// KgoOptions are appended to the Kafka clients' options (TLS, SASL,
	// logging). They cannot undo manual commits or acks=all.
	KgoOptions []kgo.Opt
}

func (c *Config) defaults() error {
	if len(c.Brokers) == 0 {
		return errors.New("dispatcher: no brokers: set Config.Brokers")
	}
	if c.Topics.Prefix == "" {
		c.Topics = schema.NewTopics("")
	}
	if c.ClientID == "" {
		c.ClientID = "chime-dispatcher"
	}
	if c.ID == "" {
		host, _ := os.Hostname()
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		c.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Namespaces == nil {
		c.Namespaces = StaticNamespaces(nil)
	}
	if c.BreakerRamp <= 0 {
		c.BreakerRamp = 5 * time.Second
	}
	if c.DefaultTimeout <= 0 {
		c.DefaultTimeout = 10 * time.Second
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = 60 * time.Second
	}
	if c.IdleConnTimeout <= 0 {
		c.IdleConnTimeout = DefaultIdleConnTimeout
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 1024
	}
	if c.DefaultMaxConcurrency <= 0 {
		c.DefaultMaxConcurrency = int(schema.NamespaceDefaults().GetMaxConcurrency())
	}
	if c.AdmissionWait <= 0 {
		c.AdmissionWait = 2 * time.Second
	}
	if c.DeferDelay <= 0 {
		c.DeferDelay = time.Second
	}
	if c.MaxBuffered <= 0 {
		c.MaxBuffered = 4 * c.MaxInFlight
	}
	if c.MaxQueued <= 0 {
		c.MaxQueued = max(1, c.MaxBuffered/2)
	}
	if c.CommitInterval <= 0 {
		c.CommitInterval = 500 * time.Millisecond
	}
	if c.RevokeWait <= 0 {
		c.RevokeWait = 5 * time.Second
	}
	if c.DedupSize == 0 {
		c.DedupSize = 100_000
	}
	if c.BodySnippet <= 0 {
		c.BodySnippet = 1024
	}
	return nil
}
