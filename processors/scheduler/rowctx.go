package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/lovoo/goka"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// rowCtx is what a decision is read and applied through: goka's context
// for a command (an input record, on the partition's goroutine), the
// pump's for a tick. Both run under the partition storage's writer lock
// (timerStorage.writer), so a row has one writer at a time, and both read
// and write the row in the storage itself: the table's records are
// produced by the store's write cache
// (processors/jobstore, overlay.go), not by goka.
type rowCtx interface {
	Key() string
	Partition() int32
	// row is the row as last written (nil: none).
	row() *chimev1.JobState
	// setRow writes the row (a decision's, which nothing changes after).
	setRow(st *chimev1.JobState)
	// deleteRow removes the row.
	deleteRow()
	// holdDue holds a due event (or recall) for the partition's next
	// batch (duebatch.go): the command record's, or the pump round's.
	holdDue(key string, due *chimev1.Due)
	Emit(topic goka.Stream, key string, value any, options ...goka.ContextOption)
	// emitRaw writes bytes with headers (a Kafka-target delivery).
	emitRaw(topic, key string, value []byte, headers goka.Headers)
}

// rowStore reads and writes rows in a partition's storage; failures go to
// fail.
type rowStore struct {
	s    *Scheduler
	st   *timerStorage
	key  string
	fail func(error)
}

func (r rowStore) Key() string      { return r.key }
func (r rowStore) Partition() int32 { return r.st.partition }

func (r rowStore) row() *chimev1.JobState {
	raw, ok := r.rawRow()
	if !ok {
		return nil
	}
	return r.decodeRow(raw)
}

// rawRow is the row as stored (nil: none); ok is false when it cannot be
// read, and the processor fails.
func (r rowStore) rawRow() (_ []byte, ok bool) {
	raw, err := r.st.Get(r.key)
	if err != nil {
		r.fail(fmt.Errorf("scheduler: reading %q: %w", r.key, err))
		return nil, false
	}
	return raw, true
}

// decodeRow is the row rawRow read, decoded (nil: none, or it does not
// decode).
func (r rowStore) decodeRow(raw []byte) *chimev1.JobState {
	if len(raw) == 0 {
		return nil
	}
	v, err := schema.JobStateCodec{}.Decode(raw)
	if err != nil {
		r.s.cfg.Logger.Error("scheduler: a row does not decode; it is left as it is", "key", r.key, "err", err)
		return nil
	}
	return v.(*chimev1.JobState)
}

func (r rowStore) setRow(st *chimev1.JobState) {
	raw, err := schema.JobStateCodec{}.Encode(st)
	if err != nil {
		r.fail(fmt.Errorf("scheduler: writing %q: %w", r.key, err))
		return
	}
	r.setRaw(raw)
}

// setRaw writes an encoded row.
func (r rowStore) setRaw(raw []byte) {
	if err := r.st.Set(r.key, raw); err != nil {
		r.fail(fmt.Errorf("scheduler: writing %q: %w", r.key, err))
	}
}

func (r rowStore) holdDue(key string, due *chimev1.Due) { r.st.dues.add(key, due) }

func (r rowStore) deleteRow() {
	if err := r.st.Delete(r.key); err != nil {
		r.fail(fmt.Errorf("scheduler: deleting %q: %w", r.key, err))
	}
}

// gokaRow is a command's context: rows in the storage, records emitted
// through goka (which commits the command once they are stored, and the
// commit gate no further than the rows it wrote are).
type gokaRow struct {
	goka.Context
	rowStore
}

func newGokaRow(s *Scheduler, ctx goka.Context, st *timerStorage) gokaRow {
	return gokaRow{Context: ctx, rowStore: rowStore{s: s, st: st, key: ctx.Key(), fail: ctx.Fail}}
}

func (g gokaRow) Key() string      { return g.rowStore.Key() }
func (g gokaRow) Partition() int32 { return g.rowStore.Partition() }

func (g gokaRow) emitRaw(topic, key string, value []byte, headers goka.Headers) {
	var opts []goka.ContextOption
	if len(headers) > 0 {
		opts = append(opts, goka.WithCtxEmitHeaders(headers))
	}
	g.Emit(goka.Stream(topic), key, value, opts...)
}

// A tick is not an input record: the pump decides it itself, on its own
// goroutine, under the partition storage's writer lock, and emits through
// the running processor's producer. Nothing is produced or consumed to
// look at a row, and no input offset waits for the tick: a decision that
// is lost (the process dies before its records are stored) is made again
// from the stored row, which still holds the timer. A failed emit fails
// the processor, which then recovers its partitions, as goka does for a
// callback's failed emit.
type tickCtx struct {
	rowStore
	out *tickOut
}

func newTickCtx(s *Scheduler, st *timerStorage, out *tickOut, key string) *tickCtx {
	return &tickCtx{rowStore: rowStore{s: s, st: st, key: key, fail: out.fail}, out: out}
}

// tickOut is the processor incarnation the pump's ticks emit through: its
// producer, once goka has built it, and how to fail it.
type tickOut struct {
	mu   sync.Mutex
	prod goka.Producer
	err  error
	stop context.CancelFunc
}

func (o *tickOut) set(p goka.Producer) {
	o.mu.Lock()
	o.prod = p
	o.mu.Unlock()
}

func (o *tickOut) ready() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.prod != nil && o.err == nil
}

func (o *tickOut) producer() goka.Producer {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.prod
}

// fail stops the processor after a failed write; its run returns err.
func (o *tickOut) fail(err error) {
	o.mu.Lock()
	first := o.err == nil
	if first {
		o.err = err
	}
	o.mu.Unlock()
	if first && o.stop != nil {
		o.stop()
	}
}

// failed is the error that stopped the processor, if any.
func (o *tickOut) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func (c *tickCtx) Emit(topic goka.Stream, key string, value any, _ ...goka.ContextOption) {
	c.encode(topic, key, value)
}

// encode writes value to topic with its codec.
func (c *tickCtx) encode(topic goka.Stream, key string, value any) {
	codec := c.s.codecs[string(topic)]
	if codec == nil {
		c.out.fail(fmt.Errorf("scheduler: a tick emits to %q, which is not an output", topic))
		return
	}
	raw, err := codec.Encode(value)
	if err != nil {
		c.out.fail(fmt.Errorf("scheduler: encoding for %q: %w", topic, err))
		return
	}
	c.produce(string(topic), key, raw, nil)
}

func (c *tickCtx) emitRaw(topic, key string, value []byte, headers goka.Headers) {
	c.produce(topic, key, value, headers)
}

func (c *tickCtx) produce(topic, key string, value []byte, headers goka.Headers) {
	p := c.out.producer()
	if p == nil {
		c.out.fail(errNoProducer)
		return
	}
	p.EmitWithHeaders(topic, key, value, headers).Then(func(err error) {
		if err != nil {
			c.out.fail(fmt.Errorf("scheduler: a tick's record to %s not stored: %w", topic, err))
		}
	})
}

var errNoProducer = errors.New("scheduler: no processor is running")
