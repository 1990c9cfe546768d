package scheduler

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

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
	tm := newTimers(cfg, "table", nil)
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
