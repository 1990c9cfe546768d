package views

import (
	"log/slog"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Breakers is a view of the breaker table: every dispatcher keeps one and
// asks circuit.Gate with what Get returns.
type Breakers struct {
	*table[*chimev1.BreakerStatus]
}

// NewBreakers builds the view; it answers Get once started
// (lifecycle.Part) and caught up.
func NewBreakers(brokers []string, topics schema.Topics, clientID string, replication int, logger *slog.Logger) (*Breakers, error) {
	t, err := newTable[*chimev1.BreakerStatus]("breakers view", brokers, topics.BreakerGroup(), new(schema.BreakerStatusCodec), clientID, replication, logger)
	if err != nil {
		return nil, err
	}
	return &Breakers{t}, nil
}

// Get returns the namespace's breaker status. A namespace the breaker has
// not seen, or a read that fails, is closed: the breaker holds callbacks
// back only on evidence.
func (b *Breakers) Get(ns string) *chimev1.BreakerStatus {
	if st, ok, err := b.get(ns); err == nil && ok && st != nil {
		return st
	}
	return &chimev1.BreakerStatus{Namespace: ns, State: chimev1.BreakerState_BREAKER_STATE_CLOSED}
}
