package api

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views/jobquery"
)

// published gives the job listings and counts read-your-writes: by
// namespace, the job-commands offsets of the commands this process
// published, which every listing and count of the namespace carries
// (jobquery.Offsets) so that the schedulers answer once they have applied
// them. Only the newest offset of each partition is kept: a partition's
// commands are applied in order.
//
// A namespace's offsets are needed until its owners have applied them,
// which takes the schedulers' lag; they are forgotten publishedTTL after
// the namespace's last command, by then long applied.
type published struct {
	// mu makes reading a namespace's offsets and raising one a step.
	mu sync.Mutex
	by *expirable.LRU[string, jobquery.Offsets]
}

const (
	publishedTTL = 10 * time.Minute
	// publishedMax bounds the namespaces remembered (their count is
	// bounded by the namespace quota too).
	publishedMax = 100_000
)

func newPublished() *published {
	return &published{by: expirable.NewLRU[string, jobquery.Offsets](publishedMax, nil, publishedTTL)}
}

// record remembers a command of ns acknowledged at offset off of
// partition p.
func (w *published) record(ns string, p int32, off int64) {
	if p < 0 || off < 0 {
		return // not acknowledged: nothing to wait for
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.by.Get(ns)
	if !ok {
		o = jobquery.Offsets{}
	}
	o.Add(p, off)
	w.by.Add(ns, o) // refreshes its TTL
}

// offsets is the token of ns's reads: nil if this process published
// nothing for it lately.
func (w *published) offsets(ns string) jobquery.Offsets {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.by.Peek(ns)
	if !ok {
		return nil
	}
	return maps.Clone(o)
}

// ackingPublisher is the job publisher that tells acked about every
// command Kafka acknowledged: its namespace, whether it is a cancel, and
// where it went.
type ackingPublisher struct {
	JobPublisher
	acked func(ns string, cancel bool, r producer.Receipt)
}

func (p ackingPublisher) Publish(ctx context.Context, cmd *chimev1.JobCommand) (producer.Receipt, error) {
	r, err := p.JobPublisher.Publish(ctx, cmd)
	if err == nil {
		p.acked(cmd.GetNamespace(), cmd.GetCancel() != nil, r)
	}
	return r, err
}

func (p ackingPublisher) PublishAsync(ctx context.Context, cmd *chimev1.JobCommand, done func(producer.Receipt, error)) {
	// done may run after the caller reused cmd.
	ns, cancel := cmd.GetNamespace(), cmd.GetCancel() != nil
	p.JobPublisher.PublishAsync(ctx, cmd, func(r producer.Receipt, err error) {
		if err == nil {
			p.acked(ns, cancel, r)
		}
		if done != nil {
			done(r, err)
		}
	})
}
