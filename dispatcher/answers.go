package dispatcher

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
)

// The dispatcher's answers to the scheduler (Ack, Retry, Defer) go out in
// batches, a record per job-commands partition (command.Batch) holding
// what was answered there within AnswerLinger: the scheduler then reads,
// and goka hands it, one record for many fires instead of one per fire. A
// fire's due is completed (its offset committed) once the batch holding
// its answer is stored, as before once its own record was.
type answers struct {
	d *Dispatcher
	// partitions is the job-commands topic's partition count, read from
	// the cluster at start (0 until known: then each answer goes alone).
	partitions atomic.Int32

	mu     sync.Mutex
	byPart map[int32]*answerBatch
	// armed: answers wait and run's timer is set (or kick tells it to
	// be); the first answer after a flush arms it.
	armed bool
	kick  chan struct{}
	// draining: the dispatcher is stopping and waits for its calls, whose
	// dues complete only once their answers are stored; they go out at
	// once rather than after AnswerLinger.
	draining bool
}

type answerBatch struct {
	cmds  []*chimev1.JobCommand
	dones []func(error)
	bytes int
}

// answerBatchMax bounds a batch: at most this many answers, and half a
// record's worth of bytes (a Retry carries the failed attempt).
const answerBatchMax = 500

func newAnswers(d *Dispatcher) *answers {
	return &answers{d: d, byPart: map[int32]*answerBatch{}, kick: make(chan struct{}, 1)}
}

// publish hands an answer over; done gets whether it was stored.
func (a *answers) publish(ctx context.Context, cmd *chimev1.JobCommand, done func(error)) {
	n := a.partitions.Load()
	if n <= 0 || a.d.cfg.AnswerLinger <= 0 {
		a.d.cmds.PublishAsync(ctx, cmd, func(_ producer.Receipt, err error) { done(err) })
		return
	}
	p := schema.PartitionOf(schema.JobKey(cmd.GetNamespace(), cmd.GetJobId()), n)
	a.mu.Lock()
	if a.draining {
		a.mu.Unlock()
		a.send(&answerBatch{cmds: []*chimev1.JobCommand{cmd}, dones: []func(error){done}})
		return
	}
	b := a.byPart[p]
	if b == nil {
		b = &answerBatch{}
		a.byPart[p] = b
	}
	b.cmds = append(b.cmds, cmd)
	b.dones = append(b.dones, done)
	b.bytes += 64 + len(cmd.GetRetry().GetOutcome().GetError()) + len(cmd.GetRetry().GetOutcome().GetBodySnippet()) + len(cmd.GetAck().GetDetail())
	full := len(b.cmds) >= answerBatchMax || b.bytes >= schema.MaxRecordBytes/2
	if full {
		delete(a.byPart, p)
	}
	arm := !a.armed
	a.armed = true
	a.mu.Unlock()
	if arm {
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
	if full {
		a.send(b)
	}
}

// run sends the batches AnswerLinger after the first answer since the
// last send, until ctx ends, then what is left. It does not tick while
// nothing is answered: a ticker every AnswerLinger was 100 wake-ups a
// second of an idle dispatcher.
func (a *answers) run(ctx context.Context) {
	go a.learnPartitions(ctx)
	t := time.NewTimer(a.d.cfg.AnswerLinger)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			a.flush()
			return
		case <-a.kick:
			t.Reset(a.d.cfg.AnswerLinger)
		case <-t.C:
			a.flush()
		}
	}
}

// drain sends every batch, and each later answer at once.
func (a *answers) drain() {
	a.mu.Lock()
	a.draining = true
	a.mu.Unlock()
	a.flush()
}

// flush sends every batch.
func (a *answers) flush() {
	a.mu.Lock()
	bs := a.byPart
	a.byPart = map[int32]*answerBatch{}
	a.armed = false
	a.mu.Unlock()
	for _, b := range bs {
		a.send(b)
	}
}

func (a *answers) send(b *answerBatch) {
	rec := b.cmds[0]
	if len(b.cmds) > 1 {
		rec = command.Batch(b.cmds)
	}
	a.d.cmds.PublishAsync(context.Background(), rec, func(_ producer.Receipt, err error) {
		for _, done := range b.dones {
			done(err)
		}
	})
}

// learnPartitions reads the job-commands topic's partition count.
func (a *answers) learnPartitions(ctx context.Context) {
	adm := kadm.NewClient(a.d.cmds.Client())
	topic := a.d.cfg.Topics.JobCommands()
	for wait := 100 * time.Millisecond; ctx.Err() == nil; wait = min(2*wait, 10*time.Second) {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		td, err := adm.ListTopics(rctx, topic)
		cancel()
		if d, ok := td[topic]; err == nil && ok && d.Err == nil && len(d.Partitions) > 0 {
			a.partitions.Store(int32(len(d.Partitions)))
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}
