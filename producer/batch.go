package producer

import (
	"context"
	"fmt"
	"sync"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
)

// ScheduleMany schedules every spec (one Upsert each), publishing them all
// at once and waiting for every acknowledgement.
//
// Every command is validated before any is published: if one is invalid
// (or, with [CheckNamespaces], names a namespace chime does not know),
// nothing is published and the error wraps its *schema.ValidationError (or
// [ErrUnknownNamespace]) with the spec's index. Otherwise receipts[i] answers specs[i]; if some commands
// were not acknowledged, the error is a *BatchError saying which, and their
// receipts have Partition and Offset -1. If ctx ends first, ScheduleMany
// returns at once with a *BatchError whose unanswered entries wrap
// ctx.Err(): those commands may still be published.
func (p *Producer) ScheduleMany(ctx context.Context, specs []*chimev1.JobSpec) ([]Receipt, error) {
	cmds := make([]*chimev1.JobCommand, len(specs))
	b := &batch{
		receipts: make([]Receipt, len(specs)),
		errs:     make([]error, len(specs)),
		answered: make([]bool, len(specs)),
		pending:  len(specs),
		done:     make(chan struct{}),
	}
	for i, spec := range specs {
		cmds[i] = command.Upsert(spec)
		r, err := p.prepare(cmds[i])
		if err != nil {
			return nil, fmt.Errorf("producer: specs[%d] (%s): %w", i, schema.JobKey(spec.GetNamespace(), spec.GetId()), err)
		}
		b.receipts[i] = r
	}
	for i, cmd := range cmds {
		if err := p.checkNamespace(ctx, cmd); err != nil {
			return nil, fmt.Errorf("producer: specs[%d] (%s): %w", i, schema.JobKey(cmd.GetNamespace(), cmd.GetJobId()), err)
		}
	}
	if len(cmds) == 0 {
		return b.receipts, nil
	}
	for i, cmd := range cmds {
		p.produce(ctx, cmd, b.receipts[i], func(r Receipt, err error) { b.answer(i, r, err) })
	}
	select {
	case <-b.done:
	case <-ctx.Done():
	}
	return b.finish(ctx)
}

// batch collects the answers of one ScheduleMany. Answers can arrive after
// ScheduleMany gave up on ctx; once closed, they are dropped.
type batch struct {
	mu       sync.Mutex
	receipts []Receipt
	errs     []error
	answered []bool
	pending  int
	closed   bool
	done     chan struct{}
}

func (b *batch) answer(i int, r Receipt, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.receipts[i], b.errs[i], b.answered[i] = r, err, true
	if b.pending--; b.pending == 0 {
		close(b.done)
	}
}

func (b *batch) finish(ctx context.Context) ([]Receipt, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	failed := false
	for i, ok := range b.answered {
		if !ok {
			b.errs[i] = fmt.Errorf("producer: command %s: outcome unknown, it may still be published: %w",
				b.receipts[i].CommandID, ctx.Err())
		}
		failed = failed || b.errs[i] != nil
	}
	if !failed {
		return b.receipts, nil
	}
	return b.receipts, &BatchError{Errs: b.errs}
}

// BatchError reports the commands of a batch that were not acknowledged.
type BatchError struct {
	// Errs has one entry per command of the batch, in order: nil for those
	// acknowledged.
	Errs []error
}

func (e *BatchError) Error() string {
	failed, first := 0, -1
	for i, err := range e.Errs {
		if err != nil {
			failed++
			if first < 0 {
				first = i
			}
		}
	}
	if first < 0 {
		return fmt.Sprintf("producer: all %d commands acknowledged", len(e.Errs))
	}
	return fmt.Sprintf("producer: %d of %d commands not acknowledged; first, specs[%d]: %v",
		failed, len(e.Errs), first, e.Errs[first])
}

// Unwrap returns the failures, so errors.Is and errors.As see them.
func (e *BatchError) Unwrap() []error {
	var out []error
	for _, err := range e.Errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}
