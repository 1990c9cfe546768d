package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
)

// Producer publishes job commands to the job-commands topic. It is safe for
// concurrent use; create one per process and share it.
type Producer struct {
	cl    *kgo.Client
	topic string
	now   func() time.Time
	dials *dials
	// namespaces checks a job's namespace before it is published
	// (CheckNamespaces); nil, not checked.
	namespaces *namespaceCheck
}

// Receipt identifies a published command.
type Receipt struct {
	// CommandID is the command's command_id, echoed by the scheduler's
	// events and rejections. Set whenever the command got that far, even
	// when publishing failed.
	CommandID string
	// Partition and Offset locate the acknowledged record; both are -1 when
	// the command was not acknowledged.
	Partition int32
	Offset    int64
}

// New returns a Producer for the brokers given with [Brokers]. It does not
// contact them: the first publish does. If every seed broker refuses the
// connection, and none was ever made, that publish fails at once with an
// [*UnreachableError] (nothing listens there; the command was not
// published) rather than when its context ends.
// The job-commands topic must exist (chime provisions it); the producer
// never creates it.
func New(opts ...Option) (*Producer, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	d := newDials(c.brokers)
	kopts := append(c.clientOpts(), kgo.WithHooks(d))
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("producer: kafka client: %w", err)
	}
	if off, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool); off {
		cl.Close()
		return nil, errors.New("producer: KgoOptions: kgo.DisableIdempotentWrite is not allowed: " +
			"without it, retries after a lost connection can publish a command twice")
	}
	p := &Producer{cl: cl, topic: schema.NewTopics(c.prefix).JobCommands(), now: c.now, dials: d}
	if c.checkNamespaces {
		p.namespaces = newNamespaceCheck(schema.NewTopics(c.prefix).NamespaceTable(), kopts)
	}
	return p, nil
}

// Schedule creates the job spec describes, or replaces its spec and
// reschedules it (an Upsert), and waits for Kafka's acknowledgement.
func (p *Producer) Schedule(ctx context.Context, spec *chimev1.JobSpec) (Receipt, error) {
	return p.Publish(ctx, command.Upsert(spec))
}

// Cancel stops the job for good.
func (p *Producer) Cancel(ctx context.Context, namespace, id, reason string) (Receipt, error) {
	return p.Publish(ctx, command.Cancel(namespace, id, reason))
}

// Pause stops the job from firing until Resume.
func (p *Producer) Pause(ctx context.Context, namespace, id string) (Receipt, error) {
	return p.Publish(ctx, command.Pause(namespace, id))
}

// Resume lets a paused job fire again.
func (p *Producer) Resume(ctx context.Context, namespace, id string) (Receipt, error) {
	return p.Publish(ctx, command.Resume(namespace, id))
}

// Trigger fires the job once now, beside its schedule: the fire takes its
// own fire number (so its own idempotency key) and the schedule's next
// occurrence is unchanged.
func (p *Producer) Trigger(ctx context.Context, namespace, id string) (Receipt, error) {
	return p.Publish(ctx, command.Trigger(namespace, id))
}

// Backfill fires now the occurrences of the job's schedule in the past
// range [from, to), each with its own fire number and idempotency key,
// under the job's overlap policy; the scheduler rejects a range holding
// more than schema.MaxBackfill occurrences, or reaching past now.
func (p *Producer) Backfill(ctx context.Context, namespace, id string, from, to time.Time) (Receipt, error) {
	return p.Publish(ctx, command.Backfill(namespace, id, from, to))
}

// Retry re-arms the timer of the occurrence e answers for a new attempt,
// not before notBefore, charging an attempt. e names the Due emission
// being answered ([command.EmissionOf] of a Due); the scheduler ignores a
// stale one.
func (p *Producer) Retry(ctx context.Context, e command.Emission, attempt uint32, notBefore time.Time, reason string) (Receipt, error) {
	return p.Publish(ctx, command.Retry(e, attempt, notBefore, reason, nil))
}

// Defer re-arms the timer of the occurrence e answers, not before
// notBefore, without charging an attempt (breaker open, rate limit,
// concurrency cap).
func (p *Producer) Defer(ctx context.Context, e command.Emission, notBefore time.Time, reason string) (Receipt, error) {
	return p.Publish(ctx, command.Defer(e, notBefore, reason))
}

// Ack closes the occurrence e answers with its result.
func (p *Producer) Ack(ctx context.Context, e command.Emission, attempt uint32, result chimev1.AckResult, detail string) (Receipt, error) {
	return p.Publish(ctx, command.Ack(e, attempt, result, detail))
}

// Publish validates cmd and waits until Kafka has acknowledged it. It fills in
// cmd's command_id and issued_at if they are unset (a republished command
// keeps its ID). A validation failure returns the *schema.ValidationError
// as is and publishes nothing. If ctx ends first, Publish returns an error
// wrapping ctx.Err(), and the command may still be published.
func (p *Producer) Publish(ctx context.Context, cmd *chimev1.JobCommand) (Receipt, error) {
	r, err := p.prepare(cmd)
	if err == nil {
		err = p.checkNamespace(ctx, cmd)
	}
	if err != nil {
		return r, err
	}
	answer := make(chan struct{})
	var (
		got    Receipt
		gotErr error
	)
	p.produce(ctx, cmd, r, func(rr Receipt, err error) {
		got, gotErr = rr, err
		close(answer)
	})
	select {
	case <-answer:
		return got, gotErr
	case <-ctx.Done():
		select {
		case <-answer: // answered as ctx ended: report what happened
			return got, gotErr
		default:
		}
		return r, fmt.Errorf("producer: %s command %s for %s: outcome unknown, it may still be published: %w",
			command.Kind(cmd), r.CommandID, schema.JobKey(cmd.GetNamespace(), cmd.GetJobId()), ctx.Err())
	}
}

// PublishAsync validates cmd (a batch: every command in it; see
// command.Batches) and hands it to the client's buffer; done is
// called once with the outcome. If cmd fails validation, done runs on the
// caller's goroutine before PublishAsync returns. Otherwise it runs on the
// client's promise goroutine, one call at a time, in order per partition: it
// must be quick and must not publish synchronously or Flush (start a
// goroutine for that). A nil done drops the outcome.
//
// cmd is stamped like in Publish and encoded before PublishAsync returns, so
// the caller may reuse it then. PublishAsync blocks while the client holds
// its maximum of buffered commands (100k by default), until ctx ends.
func (p *Producer) PublishAsync(ctx context.Context, cmd *chimev1.JobCommand, done func(Receipt, error)) {
	if done == nil {
		done = func(Receipt, error) {}
	}
	r, err := p.prepare(cmd)
	if err == nil {
		err = p.checkNamespace(ctx, cmd)
	}
	if err != nil {
		done(r, err)
		return
	}
	p.produce(ctx, cmd, r, done)
}

// ScheduleAsync is the asynchronous Schedule; see PublishAsync.
func (p *Producer) ScheduleAsync(ctx context.Context, spec *chimev1.JobSpec, done func(Receipt, error)) {
	p.PublishAsync(ctx, command.Upsert(spec), done)
}

// Flush sends everything buffered and waits for the acknowledgements (and
// the done callbacks) of every command published before it was called, or
// for ctx to end.
func (p *Producer) Flush(ctx context.Context) error {
	if err := p.cl.Flush(ctx); err != nil {
		return fmt.Errorf("producer: flush: %w", err)
	}
	return nil
}

// Close releases the client. It does not wait: commands still buffered fail
// with kgo.ErrClientClosed. Call Flush first to publish them.
func (p *Producer) Close() { p.cl.Close() }

// Client is the franz-go client the producer publishes with (acks=all,
// idempotent, goka's partitioner), for records published beside commands:
// the dispatcher sends its outcomes through it, so each produce request
// carries both.
func (p *Producer) Client() *kgo.Client { return p.cl }

// prepare stamps and validates cmd. The Receipt carries the command ID.
func (p *Producer) prepare(cmd *chimev1.JobCommand) (Receipt, error) {
	r := Receipt{Partition: -1, Offset: -1}
	now := p.now()
	if cmd == nil {
		// Validation is the one place that says what is wrong with a
		// command, nil included.
		if err := schema.ValidateCommand(nil, schema.ValidateOptions{Now: now}); err != nil {
			return r, err
		}
		return r, errors.New("producer: command is nil")
	}
	command.Stamp(cmd, now)
	r.CommandID = cmd.GetCommandId()
	if b := cmd.GetBatch(); b != nil {
		for _, sub := range b.GetCommands() {
			command.Stamp(sub, now)
		}
		return r, schema.ValidateBatch(cmd, schema.ValidateOptions{Now: now})
	}
	return r, schema.ValidateCommand(cmd, schema.ValidateOptions{Now: now})
}

// produce encodes a prepared command and hands it to the client. done gets
// the outcome exactly once.
func (p *Producer) produce(ctx context.Context, cmd *chimev1.JobCommand, r Receipt, done func(Receipt, error)) {
	key := schema.JobKey(cmd.GetNamespace(), cmd.GetJobId())
	value, err := schema.MarshalInput(cmd)
	if err != nil {
		done(r, fmt.Errorf("producer: encode command %s for %s: %w", r.CommandID, key, err))
		return
	}
	rctx, release := p.dials.bind(ctx)
	rec := &kgo.Record{Topic: p.topic, Key: []byte(key), Value: value, Context: rctx}
	if kind := command.Kind(cmd); kind != "" {
		rec.Headers = []kgo.RecordHeader{{Key: HeaderCommand, Value: []byte(kind)}}
	}
	p.cl.Produce(ctx, rec, func(rec *kgo.Record, err error) {
		u := unreachable(rctx)
		release()
		if err != nil {
			switch {
			case u != nil && errors.Is(err, context.Canceled):
				err = fmt.Errorf("%w; it was not published: is the broker running, and is that its address? "+
					"(chime dev writes its broker's address to <state dir>/kafka-brokers)", u)
			case errors.Is(err, kerr.UnknownTopicOrPartition):
				err = fmt.Errorf("%w (create topic %q with the scheduler's partition count first)", err, p.topic)
			}
			done(r, fmt.Errorf("producer: publish command %s for %s: %w", r.CommandID, key, err))
			return
		}
		r.Partition, r.Offset = rec.Partition, rec.Offset
		done(r, nil)
	})
}
