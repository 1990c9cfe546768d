package views

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lovoo/goka"

	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/memstore"
	"github.com/chime-sched/chime/schema"
)

// table is a typed goka view of one processor's group table, kept in
// memory. The typed views embed it and add their own getters.
//
// Rows are kept encoded (goka's view runs with a bytes codec) and decoded
// on read. The table also keeps the last decoded value of each key and
// hands it out again while the stored bytes are the same:
// the dispatcher asks the breaker and namespace views before every call,
// and decoding a row each time cost more than the call's bookkeeping. A
// value returned by get is therefore shared and read-only.
type table[T any] struct {
	lifecycle.Base
	name   string
	view   *goka.View
	decode func([]byte) (any, error)

	cacheMu sync.RWMutex
	cache   map[string]decoded[T]

	// goka's View.Run closes the view's partitions on its way out while
	// Get may be reading them (a data race inside goka). Stop therefore
	// stops Get, waiting for the reads in flight, before it lets the view
	// close.
	mu      sync.RWMutex
	closing bool
}

// errClosed is what Get answers once the view is shutting down.
var errClosed = errors.New("view is closed")

// decoded is a row's value as last decoded, with the bytes it came from.
type decoded[T any] struct {
	raw []byte
	val T
}

// newTable builds a view of group's table, kept in memory; name is the
// part's name (and names it in a refused setting), defaultClientID the
// client ID it takes when c has none.
func newTable[T any](name, defaultClientID, group string, codec goka.Codec, c processors.Client) (*table[T], error) {
	if err := c.Validate(name, defaultClientID); err != nil {
		return nil, err
	}
	opts := append(processors.ViewOptions(c), goka.WithViewStorageBuilder(memstore.Builder()))
	v, err := goka.NewView(c.Brokers, goka.GroupTable(goka.Group(group)), new(schema.BytesCodec), opts...)
	if err != nil {
		return nil, fmt.Errorf("view of %s: %w", goka.GroupTable(goka.Group(group)), err)
	}
	return &table[T]{name: name, view: v, decode: codec.Decode, cache: map[string]decoded[T]{}}, nil
}

// Name implements lifecycle.Part.
func (t *table[T]) Name() string { return t.name }

// Start keeps the view up to date until Stop or ctx ends; it is ready
// (Started, Ready) once it has caught up with the table, and stays ready
// while it runs: goka's partitions switch from recovering to following
// the table right after (Recovered is false meanwhile), and reconnect
// after a broker error, while the view answers from what it holds.
func (t *table[T]) Start(ctx context.Context) error { return t.Go(ctx, t.run) }

func (t *table[T]) run(ctx context.Context, ready func()) error {
	vctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	running := t.view.WaitRunning() // before Run: it cannot be missed
	go func() { done <- t.view.Run(vctx) }()
	for {
		select {
		case err := <-done:
			t.stopReads()
			return err
		case <-running:
			running = nil
			go t.whenRecovered(vctx, ready)
		case <-ctx.Done():
			t.stopReads()
			cancel()
			return <-done
		}
	}
}

// whenRecovered calls ready once every partition of the view has caught
// up. goka's view says Running as soon as the partitions that reported a
// state so far run: with an empty table, one partition can run before
// another has reported at all. Their own states (Recovered) are not
// signalled; they follow within milliseconds, so this waits for them in
// short steps.
func (t *table[T]) whenRecovered(ctx context.Context, ready func()) {
	step := time.NewTicker(5 * time.Millisecond)
	defer step.Stop()
	for !t.view.Recovered() {
		select {
		case <-ctx.Done():
			return
		case <-step.C:
		}
	}
	ready()
}

func (t *table[T]) stopReads() {
	t.mu.Lock()
	t.closing = true
	t.mu.Unlock()
}

// keys returns every key the view holds, sorted.
func (t *table[T]) keys() ([]string, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closing {
		return nil, errClosed
	}
	it, err := t.view.Iterator()
	if err != nil {
		return nil, err
	}
	defer it.Release()
	var keys []string
	for it.Next() {
		keys = append(keys, it.Key())
	}
	slices.Sort(keys)
	return keys, nil
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
	raw, _ := v.([]byte)
	if raw == nil {
		return row, false, nil
	}
	t.cacheMu.RLock()
	c, hit := t.cache[key]
	t.cacheMu.RUnlock()
	if hit && bytes.Equal(c.raw, raw) {
		return c.val, true, nil
	}
	d, err := t.decode(raw)
	if err != nil {
		return row, false, err
	}
	row, ok = d.(T)
	if ok {
		t.cacheMu.Lock()
		t.cache[key] = decoded[T]{raw: bytes.Clone(raw), val: row}
		t.cacheMu.Unlock()
	}
	return row, ok, nil
}
