// Package api owns chime's HTTP facade: a fiber app that turns JSON
// requests into job, namespace and breaker commands on Kafka, and answers
// reads from views of the namespace and breaker tables and, for jobs, from
// the scheduler instances that own them (views/jobquery). Every error is an
// RFC 9457 problem; docs/api.md and GET /openapi.json describe the routes.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/gofiber/fiber/v2"
	fiberrecover "github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/chime-sched/chime/api/quota"
	"github.com/chime-sched/chime/internal/bodybudget"
	"github.com/chime-sched/chime/internal/setting"
	"github.com/chime-sched/chime/processors/scheduler/jobindex"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views/jobquery"
)

// MaxConnections bounds the connections the API serves at once; beyond
// it new ones are answered 503 and closed.
const MaxConnections = 10_000

// MaxBatch is the most jobs one POST .../jobs:batch may carry.
const MaxBatch = 1000

// JobPublisher publishes job commands; *producer.Producer is one.
type JobPublisher interface {
	Publish(ctx context.Context, cmd *chimev1.JobCommand) (producer.Receipt, error)
	PublishAsync(ctx context.Context, cmd *chimev1.JobCommand, done func(producer.Receipt, error))
}

// ControlPublisher publishes namespace and breaker commands, keyed by
// namespace; *KafkaControl is one.
type ControlPublisher interface {
	PublishNamespace(ctx context.Context, cmd *chimev1.NamespaceCommand) error
	PublishBreaker(ctx context.Context, cmd *chimev1.BreakerCommand) error
}

// NamespaceView reads the namespace-config table; *views.Namespaces is one.
type NamespaceView interface {
	// Get returns the stored configuration, nil for an unknown namespace.
	Get(ns string) (*chimev1.NamespaceConfig, error)
	// Names lists the namespaces with a stored configuration, sorted.
	Names() ([]string, error)
}

// BreakerView reads the breaker table; *views.Breakers is one.
type BreakerView interface {
	Get(ns string) *chimev1.BreakerStatus
}

// JobView reads the scheduler's job table where it lives, in the
// scheduler instances that own its partitions; *jobquery.Router is one.
// An error means a part of the table cannot be read right now (its owner
// recovering, moving, behind or unreachable): the request answers 503
// with Retry-After, never a partial answer. Listings and counts show the
// effect of the job commands after locates (this process's commands of
// the namespace: read-your-writes).
type JobView interface {
	// Get returns the job's row, nil if there is none, and how far its
	// partition had applied the job commands before it was read
	// (read-your-writes without waiting: recentJobs).
	Get(ns, id string) (*chimev1.JobState, jobquery.Offsets, error)
	// LiveJobs counts the namespace's jobs that have not ended
	// (scheduled, paused or firing), for the pending-jobs quota; chime's
	// own jobs in it are not the namespace's and do not count.
	LiveJobs(ns string, after jobquery.Offsets) (int64, error)
	// ListJobs returns a page of the namespace's jobs with their rows,
	// newest first, and whether more follow; chime's own jobs only with
	// q.Internal.
	ListJobs(ns string, q jobindex.Query, after jobquery.Offsets) ([]jobquery.Job, bool, error)
}

// Config is what New needs. Jobs, Control, Namespaces, Breakers and JobStates
// are required.
type Config struct {
	Jobs       JobPublisher
	Control    ControlPublisher
	Namespaces NamespaceView
	Breakers   BreakerView
	JobStates  JobView
	// Partitions is the job-commands topic's partition count: a batch of
	// creates is published as one record per partition it falls on (a
	// command.Batch); 0 publishes a record per job.
	Partitions int32

	// Analytics answers breaker history, stats, attempts and dead letters
	// from ClickHouse. Nil: those routes answer 503 (not configured).
	Analytics AnalyticsStore
	// AnalyticsTimeout bounds one analytics query; default
	// DefaultAnalyticsTimeout.
	AnalyticsTimeout time.Duration

	// AdminToken is accepted on every route. Empty disables admin access.
	AdminToken string
	// Ready reports whether the parts the API reads are ready
	// (lifecycle.Ready: the views have caught up with their tables);
	// nil means always ready. GET /readyz answers 503 with its error.
	Ready func() error
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Registerer gets the API's metrics and Gatherer serves /metrics;
	// both default to a new registry of the app's own.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer

	// ConsistencyWait bounds how long a namespace write waits for the view
	// to show it, so the next request sees it. Default
	// DefaultConsistencyWait.
	ConsistencyWait time.Duration
	// RecentTTL is how long a job command accepted by this process answers
	// GET .../jobs/{id} while the jobs table does not show it yet.
	// Default DefaultRecentTTL.
	RecentTTL time.Duration
	// IdempotencyTTL is how long an Idempotency-Key is remembered with its
	// request; default DefaultIdempotencyTTL. IdempotencyMax bounds the
	// keys kept (the oldest are forgotten first); default
	// DefaultIdempotencyMax.
	IdempotencyTTL time.Duration
	IdempotencyMax int
	// Quotas bound each namespace's requests and job creations on this
	// process (package api/quota: a field left at 0 takes its default,
	// quota.Unlimited turns it off).
	Quotas quota.Limits
	// PublishTimeout bounds one publish; default DefaultPublishTimeout.
	PublishTimeout time.Duration

	// Bodies is the process's budget of request body bytes held at once
	// (shared with the scheduler's query server in chime dev); nil: one
	// of bodybudget.Default bytes of the API's own.
	Bodies *bodybudget.Budget
	// HeaderTimeout bounds how long a request's line and headers take to
	// arrive, from its first byte (a new connection: from the accept);
	// default DefaultHeaderTimeout. BodyTimeout bounds how long an
	// authenticated request's body takes after its headers; default
	// DefaultBodyTimeout. Unauthenticated bodies are never read.
	HeaderTimeout time.Duration
	BodyTimeout   time.Duration
}

// The defaults of Config's fields; a field left at 0 takes its default, a
// negative one is refused by New.
const (
	DefaultAnalyticsTimeout = 15 * time.Second
	DefaultConsistencyWait  = 5 * time.Second
	DefaultRecentTTL        = 2 * time.Minute
	DefaultIdempotencyTTL   = 24 * time.Hour
	DefaultIdempotencyMax   = 100_000
	DefaultPublishTimeout   = 10 * time.Second
	DefaultHeaderTimeout    = 10 * time.Second
	DefaultBodyTimeout      = 30 * time.Second
)

// validate applies the defaults to the fields left unset and refuses the
// values the API cannot work with, naming each.
func (c *Config) validate() error {
	if c.Jobs == nil || c.Control == nil || c.Namespaces == nil || c.Breakers == nil || c.JobStates == nil {
		return errors.New("api: Config needs Jobs, Control, Namespaces, Breakers and JobStates")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Bodies == nil {
		c.Bodies, _ = bodybudget.New(bodybudget.Default) // a positive constant
	}
	return errors.Join(
		setting.Positive("api", "AnalyticsTimeout", &c.AnalyticsTimeout, DefaultAnalyticsTimeout),
		setting.Positive("api", "ConsistencyWait", &c.ConsistencyWait, DefaultConsistencyWait),
		setting.Positive("api", "RecentTTL", &c.RecentTTL, DefaultRecentTTL),
		setting.Positive("api", "IdempotencyTTL", &c.IdempotencyTTL, DefaultIdempotencyTTL),
		setting.Positive("api", "IdempotencyMax", &c.IdempotencyMax, DefaultIdempotencyMax),
		setting.Positive("api", "PublishTimeout", &c.PublishTimeout, DefaultPublishTimeout),
		setting.Positive("api", "HeaderTimeout", &c.HeaderTimeout, DefaultHeaderTimeout),
		setting.Positive("api", "BodyTimeout", &c.BodyTimeout, DefaultBodyTimeout),
		c.Quotas.Validate(),
	)
}

type server struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	idem    *idempotencyStore
	recent  *recentJobs
	metrics *metrics
	quotas  *quota.Limiters
	allow   *allowTable
	bodies  *bodybudget.Budget
	// published are the job commands' offsets this process's listings and
	// counts must show; live, the pending-jobs quota's counts.
	published *published
	live      *liveCounts
}

// New builds the app. Serve it with app.Listen; stop it with
// app.ShutdownWithContext.
func New(cfg Config) (*fiber.App, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Registerer == nil || cfg.Gatherer == nil {
		reg := prometheus.NewRegistry()
		cfg.Registerer, cfg.Gatherer = reg, reg
	}
	cfg.Namespaces = namespaceReader{cfg.Namespaces}
	cfg.JobStates = jobReader{cfg.JobStates}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	quotas, err := quota.New(cfg.Quotas, MaxBatch)
	if err != nil {
		return nil, err
	}
	s := &server{
		cfg:     cfg,
		log:     cfg.Logger,
		now:     cfg.Now,
		idem:    newIdempotencyStore(cfg.IdempotencyTTL, cfg.IdempotencyMax),
		recent:  newRecentJobs(cfg.RecentTTL, maxRecentJobs),
		metrics: m,
		quotas:  quotas,
		bodies:  cfg.Bodies,

		published: newPublished(),
	}
	s.live = newLiveCounts(s.liveJobs, cfg.Now, m.liveCountRead)
	s.cfg.Jobs = ackingPublisher{JobPublisher: cfg.Jobs, acked: s.acked}
	if err := s.registerState(cfg.Registerer); err != nil {
		return nil, err
	}
	app := fiber.New(fiber.Config{
		AppName: "chime",
		// Bodies are streamed, admitted by admitBody and read by
		// readBody (body.go); with streaming, fasthttp reads at most 8
		// KiB of an admitted body ahead of the handler, whatever the
		// limit says.
		StreamRequestBody: true,
		BodyLimit:         MaxBodyBytes,
		// Bounds the connections one server holds open.
		Concurrency:           MaxConnections,
		DisableStartupMessage: true,
		// Handlers keep params and bodies (idempotency store, recent
		// jobs); fiber's zero-copy strings would change under them.
		Immutable:    true,
		ErrorHandler: s.errorHandler,
		JSONEncoder:  marshalJSON,
		// fasthttp's read deadline is set before the headers are read;
		// admitBody sets the body's.
		ReadTimeout:  cfg.HeaderTimeout,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  2 * time.Minute,
	})
	// Metrics outside recover, so a panic is counted as the 500 it becomes.
	app.Server().HeaderReceived = s.admitBody
	app.Use(s.metrics.middleware)
	app.Use(closeUnread)
	app.Use(fiberrecover.New(fiberrecover.Config{
		EnableStackTrace: true,
		StackTraceHandler: func(c *fiber.Ctx, e any) {
			s.log.Error("api: handler panicked", "method", c.Method(), "path", c.Path(), "panic", e, "stack", string(debug.Stack()))
		},
	}))
	s.routes(app)
	s.allow = newAllowTable(app)
	answerUnknownMethods(app, s.allow)
	return app, nil
}

// answerUnknownMethods makes a request with a method fiber does not know
// (BREW, QUERY) get a problem like every other error: fiber answers it with
// a text/plain 400 before any handler or error handler runs. The answer is
// the 405 a known method gets on a path that does not take it (RFC 9110
// also allows 501; clients and API checkers expect 405 for any method a
// path does not declare).
func answerUnknownMethods(app *fiber.App, allow *allowTable) {
	srv := app.Server()
	next := srv.Handler
	srv.Handler = func(ctx *fasthttp.RequestCtx) {
		if slices.Contains(fiber.DefaultMethods, string(ctx.Method())) {
			next(ctx)
			return
		}
		if methods := allow.of(string(ctx.Path())); methods != "" {
			ctx.Response.Header.Set(fiber.HeaderAllow, methods)
		}
		p := *problem(fiber.StatusMethodNotAllowed, "method-not-allowed", "chime does not know the method %q; GET /openapi.json lists the routes and their methods", ctx.Method())
		p.Instance = string(ctx.RequestURI())
		body, _ := marshalJSON(&p)
		ctx.SetStatusCode(p.Status)
		ctx.SetContentType("application/problem+json")
		ctx.SetBody(body)
		if hasBody(&ctx.Request.Header) {
			ctx.SetConnectionClose() // its body is not read (see closeUnread)
		}
	}
}

func (s *server) routes(app *fiber.App) {
	app.Get("/healthz", s.healthz)
	app.Get("/readyz", s.readyz)
	app.Get("/metrics", s.publicMetrics(), s.authenticate, s.metricsHandler())
	app.Get("/openapi.json", s.openapi)
	s.consoleRoutes(app)

	app.Get("/v1/namespaces", s.authenticate, s.adminOnly, s.listNamespaces)
	app.Post("/v1/schedules\\:preview", s.authenticateAnyKey, s.readBody, s.previewSchedule)
	// Bodies are read once the request is authenticated and within its
	// namespace's request quota.
	v1 := app.Group("/v1/namespaces/:ns", s.authenticate, s.limitRequests, s.readBody)
	v1.Put("", s.adminOnly, s.putNamespace)
	v1.Get("", s.getNamespace)
	v1.Post("/keys", s.adminOnly, s.createKey)
	v1.Get("/keys", s.adminOnly, s.listKeys)
	v1.Delete("/keys/:id", s.adminOnly, s.revokeKey)
	v1.Post("/signing-secret\\:rotate", s.adminOnly, s.rotateSigningSecret)
	v1.Get("/jobs", s.listJobs)
	v1.Post("/jobs", s.createJob)
	v1.Post("/jobs\\:batch", s.createJobs)
	v1.Get("/jobs/:id", s.getJob)
	v1.Get("/jobs/:id/attempts", s.getAttempts)
	v1.Delete("/jobs/:id", s.cancelJob)
	v1.Post("/jobs/:id/pause", s.pauseJob)
	v1.Post("/jobs/:id/resume", s.resumeJob)
	v1.Post("/jobs/:id/trigger", s.triggerJob)
	v1.Post("/jobs/:id/backfill", s.backfillJob)
	v1.Get("/breaker", s.getBreaker)
	v1.Put("/breaker", s.adminOnly, s.putBreaker)
	v1.Post("/breaker/reset", s.adminOnly, s.resetBreaker)
	v1.Get("/breaker/history", s.getBreakerHistory)
	v1.Get("/stats", s.getStats)
	v1.Get("/dead-letters", s.listDeadLetters)
	v1.Post("/dead-letters/:id/replay", s.replayDeadLetter)
	v1.Post("/dead-letters\\:replay", s.replayDeadLetters)
}

func (s *server) healthz(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok"})
}

func (s *server) readyz(c *fiber.Ctx) error {
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(); err != nil {
			return problem(fiber.StatusServiceUnavailable, "not-ready", "not ready: %v", err)
		}
	}
	return c.JSON(fiber.Map{"status": "ready"})
}

// publishCtx bounds a publish by the request and PublishTimeout.
func (s *server) publishCtx(c *fiber.Ctx) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.UserContext(), s.cfg.PublishTimeout)
}

// unavailable is the problem for a publish that failed or timed out: the
// command may or may not be on Kafka, so retrying (with the same
// Idempotency-Key) is the answer.
func unavailable(what string, err error) *Problem {
	return problem(fiber.StatusServiceUnavailable, "unavailable", "%s could not be confirmed by Kafka (%v); retry the request (with the same Idempotency-Key, if any)", what, err)
}

// A view that cannot answer (not running, storage failing) makes the
// request a 503, not a 500: it is chime's state, and retrying helps.
type namespaceReader struct{ NamespaceView }

func (r namespaceReader) Get(ns string) (*chimev1.NamespaceConfig, error) {
	cfg, err := r.NamespaceView.Get(ns)
	if err != nil {
		return nil, viewUnavailable("namespace", err)
	}
	return cfg, nil
}

type jobReader struct{ JobView }

func (r jobReader) Get(ns, id string) (*chimev1.JobState, jobquery.Offsets, error) {
	st, reached, err := r.JobView.Get(ns, id)
	if err != nil {
		return nil, nil, viewUnavailable("job", err)
	}
	return st, reached, nil
}

func (r jobReader) LiveJobs(ns string, after jobquery.Offsets) (int64, error) {
	n, err := r.JobView.LiveJobs(ns, after)
	if err != nil {
		return 0, viewUnavailable("job", err)
	}
	return n, nil
}

func (r jobReader) ListJobs(ns string, q jobindex.Query, after jobquery.Offsets) ([]jobquery.Job, bool, error) {
	jobs, more, err := r.JobView.ListJobs(ns, q, after)
	if err != nil {
		return nil, false, viewUnavailable("job", err)
	}
	return jobs, more, nil
}

// liveJobs counts ns's live jobs with read-your-writes: what this process
// published for it shows in the count.
func (s *server) liveJobs(ns string) (int64, error) {
	return s.cfg.JobStates.LiveJobs(ns, s.published.offsets(ns))
}

// viewRetryAfter is the Retry-After of a table that cannot be read: a
// partition moving between scheduler instances is served again within
// seconds.
const viewRetryAfter = time.Second

func viewUnavailable(what string, err error) *Problem {
	p := problem(fiber.StatusServiceUnavailable, "unavailable", "the %s table cannot be read right now (%v); retry shortly", what, err)
	p.retryAfter = viewRetryAfter
	return p
}

// marshalJSON is every JSON answer's encoder: like json.Marshal, but
// without escaping <, > and & (a URL or a callback body with "a&b" reads
// as written, not "a\u0026b").
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}
