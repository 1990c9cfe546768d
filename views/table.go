package views

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/lovoo/goka"

	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/memstore"
)

// table is a typed goka view of one processor's group table, kept in
// memory. The typed views embed it and add their own getters.
type table[T any] struct {
	view *goka.View
}

func newTable[T any](brokers []string, group string, codec goka.Codec, clientID string, replication int, logger *slog.Logger) (*table[T], error) {
	if logger == nil {
		logger = slog.Default()
	}
	opts := append(processors.ViewOptions(clientID, replication, logger), goka.WithViewStorageBuilder(memstore.Builder()))
	v, err := goka.NewView(brokers, goka.GroupTable(goka.Group(group)), codec, opts...)
	if err != nil {
		return nil, fmt.Errorf("view of %s: %w", goka.GroupTable(goka.Group(group)), err)
	}
	return &table[T]{view: v}, nil
}

// Run keeps the view up to date until ctx is done.
func (t *table[T]) Run(ctx context.Context) error { return t.view.Run(ctx) }

// Recovered reports whether the view has caught up with the table.
func (t *table[T]) Recovered() bool { return t.view.Recovered() }

// WaitReady blocks until the view has caught up.
func (t *table[T]) WaitReady(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !t.view.Recovered() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// get returns the row under key; ok is false when there is none.
func (t *table[T]) get(key string) (row T, ok bool, err error) {
	v, err := t.view.Get(key)
	if err != nil || v == nil {
		return row, false, err
	}
	row, ok = v.(T)
	return row, ok, nil
}
