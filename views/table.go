package views

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"

	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/memstore"
	"github.com/chime-sched/chime/schema"
)

// table is a typed goka view of one processor's group table, kept in
// memory. The typed views embed it and add their own getters.
//
// Rows are kept encoded (goka's view runs with a bytes codec) and decoded
// on read. The dispatcher asks the breaker and namespace views before
// every call, and a goka read (hash the key, find the partition, read the
// storage) then a decode cost more than the call's bookkeeping; so the
// table keeps each key's last decoded value, and the view's update
// callback drops a key's value when the key is written. A read that finds
// it touches neither goka nor the codec. A value returned by get is
// therefore shared and read-only.
type table[T any] struct {
	lifecycle.Base
	name   string
	view   *goka.View
	decode func([]byte) (any, error)

	cacheMu sync.RWMutex
	cache   map[string]cached[T]
	// writes counts the view's writes: a value read from the storage is
	// kept only if no write came between the read and keeping it (it
	// could be the older value, kept after the write dropped the key).
	writes uint64

	// goka's View.Run closes the view's partitions on its way out while
	// Get may be reading them (a data race inside goka). Stop therefore
	// stops Get, waiting for the reads in flight, before it lets the view
	// close.
	mu      sync.RWMutex
	closing bool
}

// cached is a key's last decoded value; ok is false for a key the table
// does not hold (the namespaces that keep the defaults have no row, and are
// asked as often).
type cached[T any] struct {
	val T
	ok  bool
}

// errClosed is what Get answers once the view is shutting down.
var errClosed = errors.New("view is closed")

// newTable builds a view of group's table, kept in memory; name is the
// part's name (and names it in a refused setting), defaultClientID the
// client ID it takes when c has none.
func newTable[T any](name, defaultClientID, group string, codec goka.Codec, c processors.Client) (*table[T], error) {
	if err := c.Validate(name, defaultClientID); err != nil {
		return nil, err
	}
	t := &table[T]{name: name, decode: codec.Decode, cache: map[string]cached[T]{}}
	opts := append(processors.ViewOptions(c), goka.WithViewStorageBuilder(memstore.Builder()), goka.WithViewCallback(t.update))
	v, err := goka.NewView(c.Brokers, goka.GroupTable(goka.Group(group)), new(schema.BytesCodec), opts...)
	if err != nil {
		return nil, fmt.Errorf("view of %s: %w", goka.GroupTable(goka.Group(group)), err)
	}
	t.view = v
	return t, nil
}

// update stores a write of the table, as goka would, and drops the key's
// decoded value. goka calls it for every record, while recovering too.
func (t *table[T]) update(ctx goka.UpdateContext, s storage.Storage, key string, value []byte) error {
	err := goka.DefaultUpdate(ctx, s, key, value)
	t.cacheMu.Lock()
	delete(t.cache, key)
	t.writes++
	t.cacheMu.Unlock()
	return err
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
	t.cacheMu.RLock()
	c, hit := t.cache[key]
	writes := t.writes
	t.cacheMu.RUnlock()
	if hit {
		return c.val, c.ok, nil
	}
	v, err := t.view.Get(key)
	if err != nil {
		return row, false, err
	}
	if raw, _ := v.([]byte); raw != nil {
		d, err := t.decode(raw)
		if err != nil {
			return row, false, err
		}
		row, ok = d.(T)
	}
	t.cacheMu.Lock()
	if t.writes == writes {
		t.cache[key] = cached[T]{val: row, ok: ok}
	}
	t.cacheMu.Unlock()
	return row, ok, nil
}
