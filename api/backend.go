package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/views"
	"github.com/chime-sched/chime/views/jobquery"
)

// Backend is what the API needs from Kafka: the job producer, the
// namespace and breaker command publisher, the read models (views of the
// namespace and breaker tables) and the job reads, which go to the
// scheduler instances that own the jobs (views/jobquery): an API process
// holds no job rows.
type Backend struct {
	Producer   *producer.Producer
	Control    *KafkaControl
	Namespaces *views.Namespaces
	Breakers   *views.Breakers
	Jobs       JobView

	// run are the views this backend keeps itself (not shared ones).
	run []func(context.Context) error
	// jobsReady reports whether Jobs answers (nil: always).
	jobsReady func() bool
	// groupClient describes the scheduler group for the job reads.
	groupClient *kgo.Client
}

// AnalyticsStore answers the routes that read ClickHouse: breaker history,
// stats, a job's attempts and dead letters; *analytics.Store is one. Its
// errors wrap analytics.ErrInvalid (a 400) or analytics.ErrUnavailable (a
// 503).
type AnalyticsStore interface {
	BreakerHistory(ctx context.Context, namespace string, from, to time.Time) ([]analytics.Transition, error)
	Stats(ctx context.Context, namespace string, from, to time.Time, step time.Duration) ([]analytics.Point, error)
	Attempts(ctx context.Context, namespace, jobID string, q analytics.AttemptQuery) (page []analytics.Attempt, more bool, err error)
	ListDeadLetters(ctx context.Context, namespace string, q analytics.DeadLetterQuery) ([]analytics.DeadLetter, error)
	// GetDeadLetter returns nil, nil for an unknown id.
	GetDeadLetter(ctx context.Context, namespace, id string) (*analytics.DeadLetter, error)
	// CountDeadLetters counts what ListDeadLetters selects, without its
	// limit and cursor.
	CountDeadLetters(ctx context.Context, namespace string, q analytics.DeadLetterQuery) (int, error)
	// RecordReplays stores the Replay of each dead letter, once Kafka
	// confirmed its job (see replayOne).
	RecordReplays(ctx context.Context, ds []*analytics.DeadLetter) error
}

var _ AnalyticsStore = (*analytics.Store)(nil)

// BackendConfig says where Kafka is, and which read models the process
// already has.
type BackendConfig struct {
	Brokers  []string
	Topics   schema.Topics
	ClientID string // default "chime-api"
	// SASL is the credential the job producer and the command publisher
	// authenticate with; the zero value is none.
	SASL kafkaauth.Credential
	// ReplicationOf returns a table topic's replication factor, which goka
	// checks; nil means 1.
	ReplicationOf func(topic string) int
	Logger        *slog.Logger

	// Partitions of chime's topics (CHIME_PARTITIONS): a job's row is in
	// the scheduler table's partition of its key.
	Partitions int32
	// QuerySecret signs the job reads sent to the scheduler instances'
	// query servers (CHIME_QUERY_SECRET).
	QuerySecret string

	// Shared read models: a process that runs the processors too (chime
	// dev) hands the API what it already keeps, so the tables are not
	// consumed twice. The owner runs them. Unset ones the backend keeps
	// as views of its own.
	Namespaces *views.Namespaces
	Breakers   *views.Breakers
	// LocalJobs, if set, is this process's scheduler (chime dev): the
	// partitions it owns are read from it directly; LocalQueryAddr is the
	// query address it advertises. JobsReady says when job reads answer
	// (nil: always).
	LocalJobs      jobquery.Source
	LocalQueryAddr string
	JobsReady      func() bool
	// Jobs, if set, answers the job reads instead (tests).
	Jobs JobView
}

// NewBackend connects; Run must run for the views to answer.
func NewBackend(cfg BackendConfig) (*Backend, error) {
	if cfg.ClientID == "" {
		cfg.ClientID = "chime-api"
	}
	if cfg.ReplicationOf == nil {
		cfg.ReplicationOf = func(string) int { return 1 }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &Backend{Namespaces: cfg.Namespaces, Breakers: cfg.Breakers, Jobs: cfg.Jobs, jobsReady: cfg.JobsReady}
	var err error
	if b.Producer, err = producer.New(producer.Brokers(cfg.Brokers), producer.TopicPrefix(cfg.Topics.Prefix), producer.ClientID(cfg.ClientID),
		producer.SASLPlain(cfg.SASL.User, cfg.SASL.Password)); err != nil {
		return nil, err
	}
	if b.Control, err = NewKafkaControl(cfg.Brokers, cfg.Topics, append(cfg.SASL.Kgo(), kgo.ClientID(cfg.ClientID+"-control"))...); err != nil {
		b.Close()
		return nil, err
	}
	log := cfg.Logger.With("component", "api-views")
	if b.Namespaces == nil {
		if b.Namespaces, err = views.NewNamespaces(cfg.Brokers, cfg.Topics, cfg.ClientID+"-namespaces", cfg.ReplicationOf(cfg.Topics.NamespaceTable()), log); err != nil {
			b.Close()
			return nil, err
		}
		b.run = append(b.run, b.Namespaces.Run)
	}
	if b.Breakers == nil {
		if b.Breakers, err = views.NewBreakers(cfg.Brokers, cfg.Topics, cfg.ClientID+"-breakers", cfg.ReplicationOf(cfg.Topics.BreakerTable()), log); err != nil {
			b.Close()
			return nil, err
		}
		b.run = append(b.run, b.Breakers.Run)
	}
	if b.Jobs == nil {
		if b.groupClient, err = kgo.NewClient(append(cfg.SASL.Kgo(), kgo.SeedBrokers(cfg.Brokers...), kgo.ClientID(cfg.ClientID+"-jobs"))...); err != nil {
			b.Close()
			return nil, err
		}
		router, err := jobquery.NewRouter(jobquery.RouterConfig{
			Admin:      kadm.NewClient(b.groupClient),
			Group:      cfg.Topics.SchedulerGroup(),
			Topic:      cfg.Topics.JobCommands(),
			Partitions: cfg.Partitions,
			Secret:     cfg.QuerySecret,
			Local:      cfg.LocalJobs,
			LocalAddr:  cfg.LocalQueryAddr,
			Logger:     cfg.Logger.With("component", "api-jobs"),
		})
		if err != nil {
			b.Close()
			return nil, err
		}
		b.Jobs = router
	}
	return b, nil
}

// Run keeps the backend's own views up to date until ctx is done.
func (b *Backend) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, run := range b.run {
		g.Go(func() error { return run(ctx) })
	}
	return g.Wait()
}

// Ready says which read models have not caught up yet.
func (b *Backend) Ready() error {
	var missing []error
	if !b.Namespaces.Recovered() {
		missing = append(missing, errors.New("namespaces view recovering"))
	}
	if !b.Breakers.Recovered() {
		missing = append(missing, errors.New("breakers view recovering"))
	}
	if b.jobsReady != nil && !b.jobsReady() {
		missing = append(missing, errors.New("scheduler recovering"))
	}
	return errors.Join(missing...)
}

// WaitReady blocks until every read model has caught up.
func (b *Backend) WaitReady(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for b.Ready() != nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Config returns an api.Config wired to the backend; set AdminToken,
// Logger and the rest on it.
func (b *Backend) Config() Config {
	return Config{
		Jobs:       b.Producer,
		Control:    b.Control,
		Namespaces: b.Namespaces,
		Breakers:   b.Breakers,
		JobStates:  b.Jobs,
		Ready:      b.Ready,
	}
}

// Close flushes and closes the Kafka clients.
func (b *Backend) Close() {
	if b.Producer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = b.Producer.Flush(ctx)
		cancel()
		b.Producer.Close()
	}
	if b.Control != nil {
		b.Control.Close()
	}
	if b.groupClient != nil {
		b.groupClient.Close()
	}
}

// Serve answers on ln until ctx is done, then stops taking requests and
// waits (at most 10s) for those in flight.
func Serve(ctx context.Context, app *fiber.App, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- app.Listener(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("api: %w", err)
	case <-ctx.Done():
	}
	if err := app.ShutdownWithTimeout(10 * time.Second); err != nil {
		return fmt.Errorf("api: shutdown: %w", err)
	}
	return <-errc
}
