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
	// dispatchers' committed offsets are read while the dispatchers keep
	// up (every due event completed), backlogBehindEvery while some are
	// behind: the pump's gate (FlowBacklog) opens on those samples, and
	// every sample it waits for is time the dispatchers may run dry. The
	// dispatchers commit every 500 ms (their CommitInterval), so reading
	// more often would see nothing new.
	backlogEvery       = 2 * time.Second
	backlogBehindEvery = 500 * time.Millisecond
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
// dispatchers' committed offsets into, per partition, the age of the
// oldest due event the dispatchers have not completed. Not safe for
// concurrent use: the watcher owns it and publishes the results.
type backlogMeter struct {
	samples []backlogSample // oldest first
	// busy is when each partition last took a due event or was behind.
	busy []time.Time
}

// backlog is what the meter says after a sample.
type backlog struct {
	// worst is the largest partition's backlog: redelivery waits for it.
	worst time.Duration
	// flow is the smallest backlog among the busy partitions (those that
	// took a due event within backlogBusy or are behind): above
	// FlowBacklog every busy partition is behind, which is the machine or
	// the dispatchers running out, not one namespace's endpoint hanging,
	// and the pump holds fires back (pump.go). A hanging namespace's
	// partition alone never holds back the others'.
	flow time.Duration
}

// backlogBusy is how recently a partition must have taken a due event to
// count as busy.
const backlogBusy = time.Minute

// observe records the end offsets at now and returns the backlogs. A
// partition's backlog is 0 when its committed offset reaches its end,
// else now minus the time of the latest sample its committed offset is
// past (every due event written before it has been completed), or minus
// the oldest sample when it is past none. A partition the group never
// committed in has none: nothing says it is behind, and redelivery there
// is by the ack timeout alone, as without a meter.
func (m *backlogMeter) observe(now time.Time, ends, committed []int64) backlog {
	for len(m.samples) > 0 && now.Sub(m.samples[0].at) > backlogSpan {
		m.samples = m.samples[1:]
	}
	var prev []int64
	if len(m.samples) > 0 {
		prev = m.samples[len(m.samples)-1].ends
	}
	m.samples = append(m.samples, backlogSample{at: now, ends: ends})
	for len(m.busy) < len(ends) {
		m.busy = append(m.busy, time.Time{})
	}
	var b backlog
	flow := time.Duration(-1)
	for p, end := range ends {
		c := int64(-1)
		if p < len(committed) {
			c = committed[p]
		}
		lag := time.Duration(0)
		if c >= 0 && c < end {
			lag = now.Sub(m.samples[0].at)
			for i := len(m.samples) - 1; i >= 0; i-- {
				if e := m.samples[i].ends; p >= len(e) || c >= e[p] {
					lag = now.Sub(m.samples[i].at)
					break
				}
			}
		}
		if lag > 0 || (p < len(prev) && end > prev[p]) {
			m.busy[p] = now
		}
		b.worst = max(b.worst, lag)
		if !m.busy[p].IsZero() && now.Sub(m.busy[p]) <= backlogBusy && (flow < 0 || lag < flow) {
			flow = lag
		}
	}
	b.flow = max(flow, 0)
	return b
}

// watchBacklog samples the due topic and the dispatchers' group every
// backlogEvery (backlogBehindEvery while they are behind) until ctx ends
// and stores the backlogs (nanoseconds) in worst and flow. A failed read
// keeps the last values: it says nothing about the backlog.
func watchBacklog(ctx context.Context, cl *kgo.Client, topic, group string, worst, flow *atomic.Int64) {
	adm := kadm.NewClient(cl)
	var m backlogMeter
	t := time.NewTimer(backlogEvery)
	defer t.Stop()
	for {
		every := backlogEvery
		if ends, committed, ok := readBacklog(ctx, adm, topic, group); ok {
			b := m.observe(time.Now(), ends, committed)
			worst.Store(int64(b.worst))
			flow.Store(int64(b.flow))
			if b.worst > 0 {
				every = backlogBehindEvery
			}
		}
		t.Reset(every)
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
