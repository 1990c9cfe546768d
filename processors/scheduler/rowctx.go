package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/lovoo/goka"

	"github.com/chime-sched/chime/schema"
)

// rowCtx is what a decision is read and applied through: goka's context
// for a command (an input record, on the partition's goroutine), the
// pump's for a tick. Both run under the partition storage's writer lock
// (timerStorage.writer), so a row has one writer at a time.
type rowCtx interface {
	Key() string
	Partition() int32
	// Value is the row as stored (*chimev1.JobState, nil for none).
	Value() any
	SetValue(value any, options ...goka.ContextOption)
	Delete(options ...goka.ContextOption)
	Emit(topic goka.Stream, key string, value any, options ...goka.ContextOption)
	// emitRaw writes bytes with headers (a Kafka-target delivery).
	emitRaw(topic, key string, value []byte, headers goka.Headers)
}

// gokaRow is a command's context.
type gokaRow struct{ goka.Context }

func (g gokaRow) emitRaw(topic, key string, value []byte, headers goka.Headers) {
	var opts []goka.ContextOption
	if len(headers) > 0 {
		opts = append(opts, goka.WithCtxEmitHeaders(headers))
	}
	g.Emit(goka.Stream(topic), key, value, opts...)
}

// A tick is not an input record: the pump decides it itself, on its own
// goroutine, under the partition storage's writer lock, and writes through
// the storage and the running processor's producer, as goka's context
// would. Nothing is produced or consumed to look at a row, and no input
// offset waits for the tick: a decision that is lost (the process dies
// before its records are stored) is made again from the row, which still
// holds the timer. A failed write fails the processor, which then recovers
// its partitions, as goka does for a callback's failed emit.
type tickCtx struct {
	s   *Scheduler
	st  *timerStorage
	out *tickOut
	key string
}

// tickOut is the processor incarnation the pump's ticks write through:
// its producer, once goka has built it, and how to fail it.
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
	if first {
		o.stop()
	}
}

// failed is the error that stopped the processor, if any.
func (o *tickOut) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func (c *tickCtx) Key() string      { return c.key }
func (c *tickCtx) Partition() int32 { return c.st.partition }

func (c *tickCtx) Value() any {
	raw, err := c.st.Get(c.key)
	if err != nil {
		c.out.fail(fmt.Errorf("scheduler: reading %q for a tick: %w", c.key, err))
		return nil
	}
	if raw == nil {
		return nil
	}
	v, err := schema.JobStateCodec{}.Decode(raw)
	if err != nil {
		c.s.cfg.Logger.Error("scheduler: a row does not decode; its tick is skipped", "key", c.key, "err", err)
		return nil
	}
	return v
}

func (c *tickCtx) SetValue(value any, _ ...goka.ContextOption) {
	raw, err := schema.JobStateCodec{}.Encode(value)
	if err == nil {
		err = c.st.Set(c.key, raw)
	}
	if err != nil {
		c.out.fail(fmt.Errorf("scheduler: writing %q for a tick: %w", c.key, err))
		return
	}
	c.produce(c.s.cfg.Topics.SchedulerTable(), c.key, raw, nil)
}

func (c *tickCtx) Delete(_ ...goka.ContextOption) {
	if err := c.st.Delete(c.key); err != nil {
		c.out.fail(fmt.Errorf("scheduler: deleting %q for a tick: %w", c.key, err))
		return
	}
	c.produce(c.s.cfg.Topics.SchedulerTable(), c.key, nil, nil)
}

func (c *tickCtx) Emit(topic goka.Stream, key string, value any, _ ...goka.ContextOption) {
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
