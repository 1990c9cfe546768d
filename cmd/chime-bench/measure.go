package main

// Measurements of a run: what the receiver saw of the jobs (rate, lag,
// lost and repeated calls), what chime wrote to Kafka, and whether its
// consumers have caught up.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// deliveryStats are the receiver's figures for one run.
type deliveryStats struct {
	n                int
	rate             float64 // callbacks/s: n over (last arrival − first scheduled time)
	p50, p99, maxLag time.Duration
	lost, repeated   int
	stray            int64
}

func summarize(a arrivals, scheduled func(int) time.Time) deliveryStats {
	s := deliveryStats{n: len(a.first), stray: a.stray}
	var lags []time.Duration
	var first, last int64
	for i := range a.first {
		switch c := a.count[i]; {
		case c == 0:
			s.lost++
			continue
		case c > 1:
			s.repeated += int(c - 1)
		}
		sched := scheduled(i).UnixNano()
		if first == 0 || sched < first {
			first = sched
		}
		last = max(last, a.first[i])
		lags = append(lags, time.Duration(a.first[i]-sched))
	}
	s.p50, s.p99, s.maxLag = quantiles(lags)
	printTimeline(a, first)
	if last > first {
		s.rate = float64(len(lags)) / (float64(last-first) / 1e9)
	}
	return s
}

func (s deliveryStats) lagString() string {
	return fmt.Sprintf("%.2f / %.2f / %.2f s", s.p50.Seconds(), s.p99.Seconds(), s.maxLag.Seconds())
}

// waitIndexed waits until the scheduler holds n timers.
func (c *chimeProc) waitIndexed(ctx context.Context, n int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if c.metric(ctx, "chime_scheduler_pending_timers") >= float64(n) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// recordsWritten sums the end offsets of every chime topic.
func recordsWritten(ctx context.Context, adm *kadm.Client) int64 {
	td, err := adm.ListTopics(ctx)
	if err != nil {
		fail("list topics: %v", err)
	}
	var names []string
	for _, t := range td.Sorted() {
		if strings.HasPrefix(t.Topic, e2ePrefix) {
			names = append(names, t.Topic)
		}
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		fail("end offsets: %v", err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// groupsLag is the total lag of every consumer group on the broker that
// has committed offsets.
func groupsLag(ctx context.Context, adm *kadm.Client) (int64, error) {
	gs, err := adm.ListGroups(ctx)
	if err != nil {
		return 0, err
	}
	lags, err := adm.Lag(ctx, gs.Groups()...)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range lags {
		if l.Error() != nil {
			return 0, l.Error()
		}
		n += l.Lag.Total()
	}
	return n, nil
}

// waitQuiet waits until every consumer group has consumed everything (the
// breaker, the sink and the scheduler have seen every outcome and ack).
func waitQuiet(ctx context.Context, adm *kadm.Client, within time.Duration) bool {
	deadline := time.Now().Add(within)
	zeros := 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if n, err := groupsLag(ctx, adm); err == nil && n == 0 {
			zeros++
			if zeros >= 3 {
				return true
			}
		} else {
			zeros = 0
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

func mb(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/(1<<20)) }
