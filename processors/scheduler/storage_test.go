package scheduler

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/internal/timerindex"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/jobstore"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// TestWindowMissesNoTimer: while rows are written (and the store applies
// them in the background), the window is extended again and again; every
// row's timer ends up in the window once it reaches the row's time, however
// a write, its application and a refill interleave.
func TestWindowMissesNoTimer(t *testing.T) {
	t.Parallel()
	cfg := Config{Config: processors.Config{Now: func() time.Time { return t0 }}, TimerWindow: time.Minute}
	require.NoError(t, cfg.validate())
	db, err := jobstore.Open(jobstore.Options{AutoConfirm: true, FlushInterval: time.Millisecond, FlushAfter: 7})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	tm := newTimers(cfg, "table")
	s := newTimerStorage(db.Partition(0), 0, tm)
	require.NoError(t, s.Open())
	require.NoError(t, s.MarkRecovered())

	const rows = 20000
	span := 10 * time.Minute
	timerOfRow := func(i int) time.Time { return t0.Add(time.Duration(i*7919%rows) * span / rows) }
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range rows {
			b, err := schema.JobStateCodec{}.Encode(&chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED, TimerAt: timestamppb.New(timerOfRow(i))})
			require.NoError(t, err)
			require.NoError(t, s.Set(fmt.Sprintf("ns/j%05d", i), b))
		}
	})
	wg.Go(func() {
		for to := t0; !to.After(t0.Add(span)); to = to.Add(time.Second) {
			require.NoError(t, s.refill(to.UnixNano()))
		}
	})
	wg.Wait()
	require.NoError(t, s.refill(t0.Add(2*span).UnixNano()))
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, rows, s.idx.Len())
	for i := range rows {
		at, ok := s.idx.Get(fmt.Sprintf("ns/j%05d", i))
		require.True(t, ok, "row %d", i)
		require.Equal(t, timerOfRow(i).UnixNano(), at, "row %d", i)
	}
}

// TestHeldTimersAndTicksAreSentOnce: a fire waiting in the write cache
// keeps its timer (the window takes it from the cache), and a timer taken
// for a tick is not taken again while the tick runs, nor after a tick that
// moved the row; one whose tick changed nothing is taken again after
// TickResend, however long the ticks took.
func TestHeldTimersAndTicksAreSentOnce(t *testing.T) {
	t.Parallel()
	cfg := Config{Config: processors.Config{Now: func() time.Time { return t0 }}, TimerWindow: time.Minute, TickResend: 10 * time.Second}
	require.NoError(t, cfg.validate())
	db, err := jobstore.Open(jobstore.Options{AutoConfirm: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	tm := newTimers(cfg, "table")
	tm.assigned[0] = true
	s := newTimerStorage(db.Partition(0), 0, tm)
	require.NoError(t, s.Open())
	require.NoError(t, s.MarkRecovered())

	// A fire waiting in the write cache for its answer: its redelivery is
	// AckTimeout away, beyond the window; the window takes it from the
	// cache when it reaches it.
	redeliver := t0.Add(2 * time.Minute)
	fired, err := schema.JobStateCodec{}.Encode(&chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED, TimerAt: timestamppb.New(redeliver)})
	require.NoError(t, err)
	require.NoError(t, s.Set("ns/fired", fired))
	_, ok := s.idx.Get("ns/fired")
	require.False(t, ok, "beyond the window")
	require.NoError(t, s.refill(t0.Add(150*time.Second).UnixNano()))
	at, ok := s.idx.Get("ns/fired")
	require.True(t, ok, "the window reached it")
	require.Equal(t, redeliver.UnixNano(), at)

	b, err := schema.JobStateCodec{}.Encode(&chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED, TimerAt: timestamppb.New(t0)})
	require.NoError(t, err)
	require.NoError(t, s.Set("ns/a", b))
	require.NoError(t, s.Set("ns/b", b))
	taken := func(now time.Time) []string {
		n, _, err := s.take(now, 100, false)
		require.NoError(t, err)
		var keys []string
		for _, it := range s.ticking[:n] {
			keys = append(keys, it.Key)
		}
		return keys
	}
	require.ElementsMatch(t, []string{"ns/a", "ns/b"}, taken(t0))
	// The tick is slow (overload): nothing is taken again meanwhile.
	require.Empty(t, taken(t0.Add(time.Minute)))
	s.ticking = []timerindex.Item{{At: t0.UnixNano(), Key: "ns/a"}, {At: t0.UnixNano(), Key: "ns/b"}}
	// a's tick moved its row; b's changed nothing.
	moved, err := schema.JobStateCodec{}.Encode(&chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED, TimerAt: timestamppb.New(t0.Add(time.Hour))})
	require.NoError(t, err)
	require.NoError(t, s.Set("ns/a", moved))
	s.ticked(false, t0.Add(time.Minute))
	require.Empty(t, taken(t0.Add(time.Minute+9*time.Second)))
	require.Equal(t, []string{"ns/b"}, taken(t0.Add(time.Minute+10*time.Second)), "a tick that changed nothing is tried again once")
}
