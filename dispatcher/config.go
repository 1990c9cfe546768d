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
	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/internal/setting"
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

// Config configures a Dispatcher. A field left at its zero value takes
// the default named on it; a negative one is refused by New, except the
// value Off where a field says it takes it.
type Config struct {
	Brokers []string
	Topics  schema.Topics
	// ClientID is the Kafka client.id. Default DefaultClientID.
	ClientID string
	// SASL is the credential the Kafka clients (the consumer and the
	// producer of its commands) authenticate with; the zero value is none.
	SASL kafkaauth.Credential
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
	// cool-off, when longer, is used instead. Default DefaultBreakerRamp.
	BreakerRamp time.Duration

	// Guard is the SSRF guard of the HTTP client's dialer.
	Guard Guard

	// DefaultTimeout is a call's timeout when the job sets none. Default
	// DefaultCallTimeout; at most schema.MaxHTTPTimeout, which bounds
	// every call (a job's timeout is validated against it).
	DefaultTimeout time.Duration
	// IdleConnTimeout: a pooled connection idle this long is closed
	// rather than reused. Default DefaultIdleConnTimeout.
	IdleConnTimeout time.Duration
	// MaxInFlight bounds concurrent calls over all namespaces. Default
	// DefaultMaxInFlight.
	MaxInFlight int
	// AdmissionWait is how long a due may wait for its namespace's rate
	// limit or concurrency cap before it is deferred. Default
	// DefaultAdmissionWait. A namespace's own cap is its max_concurrency
	// (schema.NamespaceDefaults when it sets none).
	AdmissionWait time.Duration
	// MaxQueued bounds the dues of one namespace waiting for a
	// concurrency slot; more are deferred at once. It keeps one hanging
	// namespace from filling its partition's buffer (which would pause
	// fetching for every namespace there) and must stay well above a
	// namespace's normal burst. Default MaxBuffered/2.
	MaxQueued int
	// DeferDelay: a deferred due comes back after a random delay in
	// [DeferDelay, 2*DeferDelay). Default DefaultDeferDelay.
	DeferDelay time.Duration
	// MaxBuffered bounds the due events taken from Kafka and not yet
	// completed; beyond it fetching is paused until half of them complete,
	// so a backlog waits in Kafka rather than in admission queues (where
	// it would be deferred). It also bounds the dues waiting for
	// admission: those a fetch brought beyond it (one record may hold
	// thousands) wait their turn in the consumer, where AdmissionWait does
	// not run. Default BufferedPerInFlight*MaxInFlight.
	MaxBuffered int
	// CommitInterval is how often completed offsets are committed.
	// Default DefaultCommitInterval.
	CommitInterval time.Duration
	// AnswerLinger is how long the answers to the scheduler (Ack, Retry,
	// Defer) gather before they go out, a record per job-commands
	// partition (answers.go). Default DefaultAnswerLinger.
	AnswerLinger time.Duration
	// HoldTick is the grid a due that came before its fire_at is started
	// on: at the first multiple of HoldTick at or after fire_at, so never
	// early and less than HoldTick late (hold.go), while a grid point
	// gathers at most holdGroupMax dues. Default
	// DefaultHoldTick; Off starts each at its own fire_at.
	HoldTick time.Duration
	// RevokeWait bounds how long a revoked partition's calls may finish
	// before its offsets are committed and it is let go. Default
	// DefaultRevokeWait.
	RevokeWait time.Duration
	// DedupSize is how many completed emissions are remembered to skip
	// replays. Default DefaultDedupSize; Off remembers none.
	DedupSize int
	// BodySnippet is how much of a response body outcomes carry.
	// Default DefaultBodySnippet.
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
	// KgoOptions are appended to the Kafka clients' options (TLS, another
	// SASL mechanism, logging). They cannot undo manual commits or acks=all.
	KgoOptions []kgo.Opt
}

// The defaults of Config's fields (docs/dispatcher.md lists them; a test
// holds it to these).
const (
	DefaultClientID       = "chime-dispatcher"
	DefaultBreakerRamp    = 5 * time.Second
	DefaultCallTimeout    = schema.DefaultHTTPTimeout
	DefaultMaxInFlight    = 1024
	DefaultAdmissionWait  = 2 * time.Second
	DefaultDeferDelay     = time.Second
	DefaultCommitInterval = 500 * time.Millisecond
	DefaultAnswerLinger   = 10 * time.Millisecond
	DefaultHoldTick       = 20 * time.Millisecond
	DefaultRevokeWait     = 5 * time.Second
	DefaultDedupSize      = 100_000
	DefaultBodySnippet    = 1024
	// BufferedPerInFlight is MaxBuffered's default per MaxInFlight: the
	// buffer holds a few rounds of calls, so fetching is not paused
	// while every slot is busy. The buffer also holds the dues whose
	// results wait for Kafka, which under load is a round of its own:
	// two rounds were measured (30 November 2026) and kept the calls to
	// a host short of its connections under a sustained overload
	// (15,000 dues a second offered: 12.0-12.7k dispatched against
	// 14.0-14.1k with four), though a burst spent 4.5 % less CPU a job.
	// Not because fewer dues were parked waiting for admission: the dues
	// waiting for their host's connections were then queued at the
	// host's gate without a goroutine, and the burst's CPU did not move.
	BufferedPerInFlight = 4
)

// Off, as Config.DedupSize, remembers no emissions; as Config.HoldTick, it
// starts each held due at its own fire_at (0 takes the default).
const Off = -1

// validate applies the defaults to the fields left unset and refuses the
// values the dispatcher cannot work with, naming each.
func (c *Config) validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("dispatcher: no brokers: set Config.Brokers")
	}
	if c.Topics.Prefix == "" {
		c.Topics = schema.NewTopics("")
	}
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
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
	const o = "dispatcher"
	errs := []error{
		setting.Positive(o, "BreakerRamp", &c.BreakerRamp, DefaultBreakerRamp),
		setting.Positive(o, "DefaultTimeout", &c.DefaultTimeout, DefaultCallTimeout),
		setting.Positive(o, "IdleConnTimeout", &c.IdleConnTimeout, DefaultIdleConnTimeout),
		setting.Positive(o, "MaxInFlight", &c.MaxInFlight, DefaultMaxInFlight),
		setting.Positive(o, "AdmissionWait", &c.AdmissionWait, DefaultAdmissionWait),
		setting.Positive(o, "DeferDelay", &c.DeferDelay, DefaultDeferDelay),
		setting.Positive(o, "CommitInterval", &c.CommitInterval, DefaultCommitInterval),
		setting.Positive(o, "AnswerLinger", &c.AnswerLinger, DefaultAnswerLinger),
		setting.PositiveOr(o, "HoldTick", &c.HoldTick, DefaultHoldTick, Off, "dispatcher.Off", "to start each held due at its own fire_at"),
		setting.Positive(o, "RevokeWait", &c.RevokeWait, DefaultRevokeWait),
		setting.PositiveOr(o, "DedupSize", &c.DedupSize, DefaultDedupSize, Off, "dispatcher.Off", "to remember none"),
		setting.Positive(o, "BodySnippet", &c.BodySnippet, DefaultBodySnippet),
	}
	// Their defaults follow MaxInFlight, set above: one statement each, as
	// the order in which a list's operands are read is not defined.
	errs = append(errs, setting.Positive(o, "MaxBuffered", &c.MaxBuffered, BufferedPerInFlight*c.MaxInFlight))
	errs = append(errs, setting.Positive(o, "MaxQueued", &c.MaxQueued, max(1, c.MaxBuffered/2)))
	if c.DefaultTimeout > schema.MaxHTTPTimeout {
		errs = append(errs, fmt.Errorf("dispatcher: DefaultTimeout is %s: a callback's timeout is at most %s (schema.MaxHTTPTimeout)", c.DefaultTimeout, schema.MaxHTTPTimeout))
	}
	if err := c.Membership.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("dispatcher: Membership: %w", err))
	}
	return errors.Join(errs...)
}
