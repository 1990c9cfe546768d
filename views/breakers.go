package views

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/lovoo/goka"

	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/memstore"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Breakers is a view of the breaker table: every dispatcher keeps one and
// asks breaker.Gate with what Get returns.
type Breakers struct {
	view *goka.View
}

// NewBreakers builds the view; Run must be running for Get to answer.
func NewBreakers(brokers []string, topics schema.Topics, clientID string, replication int, logger *slog.Logger) (*Breakers, error) {
	if logger == nil {
		logger = slog.Default()
	}
	opts := append(processors.ViewOptions(clientID, replication, logger), goka.WithViewStorageBuilder(memstore.Builder()))
	v, err := goka.NewView(brokers, goka.GroupTable(goka.Group(topics.BreakerGroup())), new(schema.BreakerStatusCodec), opts...)
	if err != nil {
		return nil, fmt.Errorf("breakers view: %w", err)
	}
	return &Breakers{view: v}, nil
}

// Run keeps the view up to date until ctx is done.
func (b *Breakers) Run(ctx context.Context) error { return b.view.Run(ctx) }

// Recovered reports whether the view has caught up with the table.
func (b *Breakers) Recovered() bool { return b.view.Recovered() }

// WaitReady blocks until the view has caught up.
func (b *Breakers) WaitReady(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !b.view.Recovered() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Get returns the namespace's breaker status. A namespace the breaker has
// not seen, or a read that fails, is closed: the breaker holds callbacks
// back only on evidence.
func (b *Breakers) Get(ns string) *chimev1.BreakerStatus {
	v, err := b.view.Get(ns)
	if st, ok := v.(*chimev1.BreakerStatus); err == nil && ok && st != nil {
		return st
	}
	return &chimev1.BreakerStatus{Namespace: ns, State: chimev1.BreakerState_BREAKER_STATE_CLOSED}
}
