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

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/internal/lifecycle"
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
	// SecretProbe checks that the scheduler instances accept the query
	// secret (nil when BackendConfig.Jobs was given): the caller runs it
	// with the read models and counts it in the API's readiness.
	SecretProbe *jobquery.SecretProbe

	// groupClient describes the scheduler group for the job reads.
	groupClient *kgo.Client
	// partitions is the job-commands topic's partition count.
	partitions int32
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

// BackendConfig says where Kafka is, and which read models the API reads.
type BackendConfig struct {
	Brokers  []string
	Topics   schema.Topics
	ClientID string // default "chime-api"
	// SASL is the credential the job producer and the command publisher
	// authenticate with; the zero value is none.
	SASL   kafkaauth.Credential
	Logger *slog.Logger

	// Partitions of chime's topics (CHIME_PARTITIONS): a job's row is in
	// the scheduler table's partition of its key.
	Partitions int32
	// QuerySecret signs the job reads sent to the scheduler instances'
	// query servers (CHIME_QUERY_SECRET).
	QuerySecret string

	// The read models, required: the caller starts them (lifecycle.Group)
	// before the API answers and stops them after. A process that runs
	// the processors too (chime dev) hands the API the ones its roles
	// share, so the tables are not consumed twice.
	Namespaces *views.Namespaces
	Breakers   *views.Breakers
	// LocalJobs, if set, is this process's scheduler (chime dev): the
	// partitions it owns are read from it directly; LocalQueryAddr is the
	// query address it advertises.
	LocalJobs      jobquery.Source
	LocalQueryAddr string
	// Jobs, if set, answers the job reads instead (tests).
	Jobs JobView
}

// NewBackend connects the producer, the command publisher and the job
// reads.
func NewBackend(cfg BackendConfig) (*Backend, error) {
	if cfg.Namespaces == nil || cfg.Breakers == nil {
		return nil, errors.New("api: BackendConfig needs the Namespaces and Breakers views (views.NewNamespaces, views.NewBreakers), started by the caller")
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "chime-api"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &Backend{Namespaces: cfg.Namespaces, Breakers: cfg.Breakers, Jobs: cfg.Jobs, partitions: cfg.Partitions}
	var err error
	if b.Producer, err = producer.New(producer.Brokers(cfg.Brokers), producer.TopicPrefix(cfg.Topics.Prefix), producer.ClientID(cfg.ClientID),
		producer.SASLPlain(cfg.SASL.User, cfg.SASL.Password)); err != nil {
		return nil, err
	}
	if b.Control, err = NewKafkaControl(cfg.Brokers, cfg.Topics, append(cfg.SASL.Kgo(), kgo.ClientID(cfg.ClientID+"-control"))...); err != nil {
		b.Close()
		return nil, err
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
		b.SecretProbe = jobquery.NewSecretProbe(router, 0)
	}
	return b, nil
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
		Partitions: b.partitions,
		// What the API reads; chime dev adds its scheduler.
		Ready: func() error { return lifecycle.Ready(b.Namespaces, b.Breakers) },
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

// Listen is the part (lifecycle.Part) that answers app's requests on ln,
// ready once it listens (GET /readyz says when the views it reads are);
// stopped, it stops taking requests and waits (at most 10s) for those in
// flight.
func Listen(app *fiber.App, ln net.Listener) lifecycle.Part {
	return lifecycle.Func("api", func(ctx context.Context, ready func()) error {
		errc := make(chan error, 1)
		go func() { errc <- app.Listener(ln) }()
		ready() // ln is open: requests wait in its backlog until fiber takes them
		select {
		case err := <-errc:
			return fmt.Errorf("api: %w", err)
		case <-ctx.Done():
		}
		if err := app.ShutdownWithTimeout(10 * time.Second); err != nil {
			return fmt.Errorf("api: shutdown: %w", err)
		}
		return <-errc
	})
}
