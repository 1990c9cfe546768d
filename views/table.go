package views

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/lovoo/goka"

	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/memstore"
)

// table is a typed goka view of one processor's group table, kept in
// memory. The typed views embed it and add their own getters.
type table[T any] struct {
	view *goka.View

	// goka's View.Run closes the view's partitions on its way out while
	// Get may be reading them (a data race inside goka). Run therefore
	// stops Get, waiting for the reads in flight, before it lets the view
	// close.
	mu      sync.RWMutex
	closing bool
}

// errClosed is what Get answers once the view is shutting down.
var errClosed = errors.New("view is closed")

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
func (t *table[T]) Run(ctx context.Context) error {
	vctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- t.view.Run(vctx) }()
	select {
	case err := <-done:
		t.stopReads()
		return err
	case <-ctx.Done():
	}
	t.stopReads()
	cancel()
	return <-done
}

func (t *table[T]) stopReads() {
	t.mu.Lock()
	t.closing = true
	t.mu.Unlock()
}

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
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closing {
		return row, false, errClosed
	}
	v, err := t.view.Get(key)
	if err != nil || v == nil {
		return row, false, err
	}
	row, ok = v.(T)
	return row, ok, nil
}
