package dispatcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// heldLog records what the holder did with each due, in order.
type heldLog struct {
	mu     sync.Mutex
	events []string
}

func (l *heldLog) add(s string) {
	l.mu.Lock()
	l.events = append(l.events, s)
	l.mu.Unlock()
}

func (l *heldLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

func (l *heldLog) hold(h *holder, at time.Time, name string) {
	h.add(at, emission{key: name}, heldFuncs{func() {
		if time.Now().Before(at) {
			l.add("early " + name)
			return
		}
		l.add("start " + name)
	}, func() { l.add("recalled " + name) }, func() { l.add("drop " + name) }})
}

// heldFuncs is a heldRun of three functions.
type heldFuncs struct{ onStart, onRecalled, onDrop func() }

func (f heldFuncs) start()    { f.onStart() }
func (f heldFuncs) recalled() { f.onRecalled() }
func (f heldFuncs) drop()     { f.onDrop() }

// The holder starts each due at its time, never before, in time order and
// in arrival order within an instant; an earlier due added later goes
// first; a recall takes its due out at once; closing drops the rest. On a
// grid (HoldTick) as on each due's own time.
func TestHolderStartsDuesAtTheirTime(t *testing.T) {
	t.Parallel()
	for _, tick := range []time.Duration{0, 20 * time.Millisecond} {
		t.Run(tick.String(), func(t *testing.T) {
			t.Parallel()
			h := newHolder(context.Background(), tick)
			var log heldLog
			base := time.Now().Add(150 * time.Millisecond)
			log.hold(h, base.Add(100*time.Millisecond), "c")
			log.hold(h, base, "a1")
			log.hold(h, base, "a2")
			log.hold(h, base.Add(50*time.Millisecond), "recalled")
			log.hold(h, base.Add(time.Hour), "later")
			log.hold(h, base.Add(-100*time.Millisecond), "first") // earlier than all, added last
			require.Equal(t, 6, h.held())
			h.recall(emission{key: "recalled"})
			require.Equal(t, []string{"recalled recalled"}, log.get(), "taken out at once")

			deadline := time.Now().Add(10 * time.Second)
			for len(log.get()) < 5 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			require.Equal(t, []string{"recalled recalled", "start first", "start a1", "start a2", "start c"}, log.get())
			require.Equal(t, 1, h.held())
			h.close()
			require.Equal(t, "drop later", log.get()[5], "closing drops what is held")
			require.Zero(t, h.held())
			log.hold(h, time.Now(), "after")
			require.Equal(t, "drop after", log.get()[6], "a closed holder drops what it is given")
		})
	}
}

// On a grid, the dues of one tick wait for its end together: one just
// after a grid point waits almost the whole tick, none starts early.
func TestHolderStartsOnItsGrid(t *testing.T) {
	t.Parallel()
	const tick = 100 * time.Millisecond
	h := newHolder(context.Background(), tick)
	defer h.close()
	g := holdWake(time.Now().Add(300*time.Millisecond), tick)
	ats := map[string]time.Time{"early in the tick": g.Add(-tick + time.Millisecond), "late in the tick": g.Add(-time.Millisecond)}
	var mu sync.Mutex
	started := map[string]time.Time{}
	for name, at := range ats {
		h.add(at, emission{key: name}, heldFuncs{func() {
			mu.Lock()
			started[name] = time.Now()
			mu.Unlock()
		}, func() {}, func() {}})
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.held() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, started, 2)
	for name, at := range started {
		require.False(t, at.Before(g), "%s started %s before the grid point", name, g.Sub(at))
		require.Less(t, at.Sub(ats[name]), tick+time.Second, "%s started long after its tick", name)
	}
}

// The grid holds while a grid point gathers few dues, and gives way to
// each due's own time when it would gather many.
func TestGridTick(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, c := range []struct {
		tick time.Duration
		rate float64
		want time.Duration
	}{
		{20 * ms, 0, 20 * ms},
		{20 * ms, 2000, 20 * ms}, // 40 a grid point
		{20 * ms, 3200, 20 * ms}, // 64
		{20 * ms, 3300, 0},
		{20 * ms, 12500, 0},
		{0, 12500, 0},
	} {
		require.Equal(t, c.want, gridTick(c.tick, c.rate), "%s at %.0f/s", c.tick, c.rate)
	}
}

// The rate is the dues started over the last full second.
func TestHolderCountsItsRate(t *testing.T) {
	t.Parallel()
	h := &holder{}
	t0 := time.Unix(1000, 0)
	h.count(t0, 0)
	for i := 1; i <= 100; i++ {
		h.count(t0.Add(time.Duration(i)*10*time.Millisecond), 30)
	}
	require.InDelta(t, 3000, h.rate, 1)
	h.count(t0.Add(2500*time.Millisecond), 0)
	require.Zero(t, h.rate, "a quiet second brings it back to nothing")
}

func TestHoldWake(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	at := func(n int64) time.Time { return time.Unix(0, n) }
	for _, c := range []struct {
		at   time.Time
		tick time.Duration
		want time.Time
	}{
		{at(1_000_000_123), 0, at(1_000_000_123)},
		{at(1_000_000_123), -1, at(1_000_000_123)},
		{at(1_000_000_000), 5 * ms, at(1_000_000_000)},
		{at(1_000_000_001), 5 * ms, at(1_005_000_000)},
		{at(1_004_999_999), 5 * ms, at(1_005_000_000)},
		{at(-1), 5 * ms, at(0)},
		{at(-5_000_001), 5 * ms, at(-5_000_000)},
	} {
		require.Equal(t, c.want, holdWake(c.at, c.tick), "%d on %s", c.at.UnixNano(), c.tick)
	}
}

// Cutting the calls (the context) drops every held due.
func TestHolderDropsWhenTheCallsAreCut(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	h := newHolder(ctx, 0)
	defer h.close()
	var log heldLog
	log.hold(h, time.Now().Add(time.Hour), "x")
	log.hold(h, time.Now().Add(time.Hour), "y")
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for len(log.get()) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.ElementsMatch(t, []string{"drop x", "drop y"}, log.get())
}
