package processors

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/infra/kafkaauth"
	"github.com/chime-sched/chime/internal/setting"
	"github.com/chime-sched/chime/schema"
)

// Client is how a chime goka component (a processor or a view) reaches
// Kafka: the settings every one of them passes to goka and sarama.
type Client struct {
	Brokers  []string
	ClientID string // default: the component's own (its DefaultClientID)
	// Replication is the replication factor of the component's table
	// topic, which goka insists on matching. Default 1.
	Replication int
	// SASL is the credential the component's clients authenticate with;
	// the zero value is none.
	SASL   kafkaauth.Credential
	Logger *slog.Logger // default slog.Default()
}

// Validate applies the defaults to the fields left unset and refuses a
// negative Replication; part names the component in the error
// ("breaker: Replication is -1: ...").
func (c *Client) Validate(part, defaultClientID string) error {
	if c.ClientID == "" {
		c.ClientID = defaultClientID
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return setting.Positive(part, "Replication", &c.Replication, 1)
}

// Config is what every chime goka processor shares: its connection, the
// installation's topics, its part in its consumer group, its clock and
// where its metrics go. Each processor's Config embeds it and adds its
// own settings.
type Config struct {
	Client
	Topics schema.Topics // default schema.NewTopics("")
	// Membership is the processor's part in its consumer group
	// (session timeout, static membership).
	Membership groups.Membership
	Now        func() time.Time // default time.Now
	// Registerer, if set, gets the processor's metrics (each processor's
	// Config says which).
	Registerer prometheus.Registerer
}

// Validate applies the defaults to the fields left unset and refuses the
// values a processor cannot work with, naming part and the field in each
// error; defaultClientID is the processor's own.
func (c *Config) Validate(part, defaultClientID string) error {
	if c.Topics.Prefix == "" {
		c.Topics = schema.NewTopics("")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	var membership error
	if err := c.Membership.Validate(); err != nil {
		membership = fmt.Errorf("%s: Membership: %w", part, err)
	}
	return errors.Join(c.Client.Validate(part, defaultClientID), membership)
}
