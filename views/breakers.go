package views

import (
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Breakers is a view of the breaker table: every dispatcher keeps one and
// asks circuit.Gate with what Get returns.
type Breakers struct {
	*table[*chimev1.BreakerStatus]
}

// NewBreakers builds the view of topics' breaker table, connected as c
// says (c.ClientID defaults to "chime-breakers-view"); it answers Get once
// started (lifecycle.Part) and caught up.
func NewBreakers(c processors.Client, topics schema.Topics) (*Breakers, error) {
	t, err := newTable[*chimev1.BreakerStatus]("breakers view", "chime-breakers-view", topics.BreakerGroup(), new(schema.BreakerStatusCodec), c)
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
