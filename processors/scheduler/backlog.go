package scheduler

// The dispatchers' backlog, as a duration: how long ago the oldest due
// event they have not completed was emitted. Redelivery (redeliver.go)
// waits for it on top of the ack timeout: a due event queued behind a
// backlog is not lost, it is late, and sending it again would only put a
// second copy at the end of the same queue: called twice once the
// dispatcher's memory of what it completed (DedupSize) no longer spans
// the two, and more work for a pipeline that is already behind. So under
// overload nothing is sent twice, and redelivery keeps its purpose:
// recovering a due event that was lost, measured from when the
// dispatchers were past it.

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// backlogEvery is how often the due topic's end offsets and the
	// dispatchers' committed offsets are read.
	backlogEvery = 2 * time.Second
	// backlogSpan is how far back the samples reach: a backlog older
	// than this counts as this old.
	backlogSpan = 2 * time.Hour
)

// backlogSample is the due topic's end offsets at one time.
type backlogSample struct {
	at   time.Time
	ends []int64 // by partition
}

// backlogMeter turns samples of the due topic's end offsets and of the
// dispatchers' committed offsets into the age of the oldest due event the
// dispatchers have not completed. Not safe for concurrent use: the
// watcher owns it and publishes the result.
type backlogMeter struct {
	samples []backlogSample // oldest first
}

// observe records the end offsets at now and returns how far the
// committed offsets are behind, as a duration: 0 when they reach the
// end, else now minus the time of the latest sample they are past (every
// due event written before it has been completed), or minus the oldest
// sample when they are past none.
func (m *backlogMeter) observe(now time.Time, ends, committed []int64) time.Duration {
	for len(m.samples) > 0 && now.Sub(m.samples[0].at) > backlogSpan {
		m.samples = m.samples[1:]
	}
	m.samples = append(m.samples, backlogSample{at: now, ends: ends})
	for i := len(m.samples) - 1; i >= 0; i-- {
		if past(committed, m.samples[i].ends) {
			return now.Sub(m.samples[i].at)
		}
	}
	return now.Sub(m.samples[0].at)
}

// past says whether committed reaches ends in every partition the group
// committed in (-1: never, or its commit expired; such a partition says
// nothing, and redelivery there is by the ack timeout alone, as without
// a meter).
func past(committed, ends []int64) bool {
	for p, end := range ends {
		if p < len(committed) && committed[p] >= 0 && committed[p] < end {
			return false
		}
	}
	return true
}

// watchBacklog samples the due topic and the dispatchers' group every
// backlogEvery until ctx ends and stores the backlog in out (nanoseconds).
// A failed read keeps the last value: it says nothing about the backlog.
func watchBacklog(ctx context.Context, cl *kgo.Client, topic, group string, out *atomic.Int64) {
	adm := kadm.NewClient(cl)
	var m backlogMeter
	t := time.NewTicker(backlogEvery)
	defer t.Stop()
	for {
		if ends, committed, ok := readBacklog(ctx, adm, topic, group); ok {
			out.Store(int64(m.observe(time.Now(), ends, committed)))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readBacklog reads the due topic's end offsets and the group's committed
// offsets of it, by partition (-1 where the group committed nothing).
func readBacklog(ctx context.Context, adm *kadm.Client, topic, group string) (ends, committed []int64, ok bool) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	listed, err := adm.ListEndOffsets(rctx, topic)
	if err != nil || listed.Error() != nil {
		return nil, nil, false
	}
	offs, err := adm.FetchOffsets(rctx, group)
	if err != nil {
		return nil, nil, false
	}
	listed.Each(func(o kadm.ListedOffset) {
		for int(o.Partition) >= len(ends) {
			ends = append(ends, 0)
			committed = append(committed, -1)
		}
		ends[o.Partition] = o.Offset
		if c, found := offs.Lookup(topic, o.Partition); found && c.Err == nil {
			committed[o.Partition] = c.At
		}
	})
	return ends, committed, len(ends) > 0
}
