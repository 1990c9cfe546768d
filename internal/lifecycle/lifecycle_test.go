package lifecycle_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/internal/lifecycle"
)

// part is a test part: ready when told, failing when told.
type part struct {
	ready chan struct{} // closed: calls ready
	fail  chan error    // a value: returns it
	ran   atomic.Int32
	lifecycle.Part
}

func newPart(name string) *part {
	p := &part{ready: make(chan struct{}), fail: make(chan error, 1)}
	p.Part = lifecycle.Func(name, func(ctx context.Context, ready func()) error {
		p.ran.Add(1)
		readyC := p.ready
		for {
			select {
			case <-readyC:
				ready()
				readyC = nil
			case err := <-p.fail:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
	return p
}

// closed reports whether c is closed within a second.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	case <-time.After(time.Second):
		return false
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func TestPart(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name string
		// act drives the part after Start.
		act       func(t *testing.T, p *part)
		wantReady bool // Started closed while it runs
		wantErr   error
	}{
		{"ready then stopped", func(t *testing.T, p *part) {
			close(p.ready)
			require.True(t, closed(p.Started()))
			require.NoError(t, p.Ready())
			p.Stop()
		}, true, nil},
		{"stopped before ready", func(t *testing.T, p *part) {
			require.ErrorIs(t, p.Ready(), lifecycle.ErrStarting)
			p.Stop()
			require.True(t, isClosed(p.Started()), "Started closes on stop, so waiters learn")
		}, false, nil},
		{"fails before ready", func(t *testing.T, p *part) {
			p.fail <- boom
			require.True(t, closed(p.Stopped()))
			require.ErrorContains(t, lifecycle.Wait(context.Background(), p), "t stopped before it was ready: boom")
		}, false, boom},
		{"fails after ready", func(t *testing.T, p *part) {
			close(p.ready)
			require.True(t, closed(p.Started()))
			p.fail <- boom
			require.True(t, closed(p.Stopped()))
			require.ErrorIs(t, p.Ready(), boom)
		}, true, boom},
		{"ends by itself without error", func(t *testing.T, p *part) {
			p.fail <- nil
			require.True(t, closed(p.Stopped()))
			require.Error(t, p.Err(), "a part that ends by itself has failed")
		}, false, errors.New("stopped by itself")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newPart("t")
			require.NoError(t, p.Start(context.Background()))
			tt.act(t, p)
			p.Stop() // a second Stop waits as the first
			require.True(t, isClosed(p.Stopped()))
			if tt.wantErr == nil {
				require.NoError(t, p.Err())
				require.ErrorIs(t, p.Ready(), lifecycle.ErrStopped)
			} else {
				require.EqualError(t, p.Err(), tt.wantErr.Error())
			}
			require.Error(t, p.Start(context.Background()), "a stopped part does not start again")
		})
	}
}

func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	p := newPart("t")
	started := p.Started() // waited on before Start
	p.Stop()
	require.True(t, isClosed(started))
	require.True(t, isClosed(p.Stopped()))
	require.Error(t, p.Start(context.Background()), "a part stopped first does not start")
	require.Zero(t, p.ran.Load())
	require.ErrorContains(t, lifecycle.Wait(context.Background(), p), "stopped before it was ready")
}

func TestStartTwice(t *testing.T) {
	t.Parallel()
	p := newPart("t")
	require.NoError(t, p.Start(context.Background()))
	t.Cleanup(p.Stop)
	require.ErrorIs(t, p.Start(context.Background()), lifecycle.ErrAlreadyStarted)
}

func TestContextEndStopsCleanly(t *testing.T) {
	t.Parallel()
	p := newPart("t")
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, p.Start(ctx))
	cancel()
	require.True(t, closed(p.Stopped()))
	require.NoError(t, p.Err())
}

func TestWaitAndReady(t *testing.T) {
	t.Parallel()
	a, b := newPart("a"), newPart("b")
	for _, p := range []*part{a, b} {
		require.NoError(t, p.Start(context.Background()))
		t.Cleanup(p.Stop)
	}
	err := lifecycle.Ready(a, b)
	require.ErrorContains(t, err, "a: starting")
	require.ErrorContains(t, err, "b: starting")
	close(a.ready)
	require.True(t, closed(a.Started()))
	require.EqualError(t, lifecycle.Ready(a, b), "b: starting")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, lifecycle.Wait(ctx, a, b), context.DeadlineExceeded)
	close(b.ready)
	require.NoError(t, lifecycle.Wait(context.Background(), a, b))
	require.NoError(t, lifecycle.Ready(a, b))
}

// order records the order parts start and stop in.
type order struct {
	events chan string
}

func (o *order) part(name string) lifecycle.Part {
	return lifecycle.Func(name, func(ctx context.Context, ready func()) error {
		o.events <- "start " + name
		ready()
		<-ctx.Done()
		o.events <- "stop " + name
		return nil
	})
}

func (o *order) next(t *testing.T) string {
	t.Helper()
	select {
	case e := <-o.events:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
		return ""
	}
}

func TestGroupStagesStartInOrderAndStopInReverse(t *testing.T) {
	t.Parallel()
	o := &order{events: make(chan string, 16)}
	views, proc := o.part("views"), o.part("processor")
	readyCalled := make(chan struct{})
	g := (&lifecycle.Group{}).Add(views).Add(proc).OnReady(func() { close(readyCalled) }, views, proc)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	require.Equal(t, "start views", o.next(t))
	require.Equal(t, "start processor", o.next(t))
	require.True(t, closed(readyCalled))
	cancel()
	require.Equal(t, "stop processor", o.next(t))
	require.Equal(t, "stop views", o.next(t))
	require.NoError(t, <-done)
}

func TestGroupEndsWhenAPartFails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// failFirst: the first stage's part fails before it is ready, so
		// the second never starts.
		failFirst bool
	}{
		{"before ready", true},
		{"after ready", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b := newPart("a"), newPart("b")
			if !tt.failFirst {
				close(a.ready)
				close(b.ready)
			}
			g := (&lifecycle.Group{Logger: slog.New(slog.DiscardHandler)}).Add(a).Add(b)
			done := make(chan error, 1)
			go func() { done <- g.Run(context.Background()) }()
			if !tt.failFirst {
				require.True(t, closed(b.Started()))
			}
			a.fail <- errors.New("boom")
			select {
			case err := <-done:
				require.ErrorContains(t, err, "a")
				require.ErrorContains(t, err, "boom")
			case <-time.After(5 * time.Second):
				t.Fatal("Run did not end")
			}
			if tt.failFirst {
				require.Zero(t, b.ran.Load(), "a stage starts once the one before is ready")
			}
			require.True(t, isClosed(b.Stopped()), "Run stops every part")
		})
	}
}

func TestGroupStoppedBeforeReady(t *testing.T) {
	t.Parallel()
	a := newPart("a") // never ready
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&lifecycle.Group{}).Add(a).Run(ctx) }()
	cancel()
	require.NoError(t, <-done)
	require.True(t, isClosed(a.Stopped()))
}

func TestNoGoroutineLeft(t *testing.T) {
	// Not parallel: it counts the process's goroutines.
	before := runtime.NumGoroutine()
	for range 50 {
		o := &order{events: make(chan string, 4)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- (&lifecycle.Group{}).Add(o.part("a")).Add(o.part("b")).Run(ctx) }()
		o.next(t)
		o.next(t)
		cancel()
		require.NoError(t, <-done)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left behind", runtime.NumGoroutine()-before)
		}
		runtime.Gosched()
	}
}

// TestGroupStartThenRun: a process starts its first stage (the embedded
// broker), builds the rest from it, adds and runs them; the first stage
// stops last, after the ones Run started.
func TestGroupStartThenRun(t *testing.T) {
	t.Parallel()
	o := &order{events: make(chan string, 16)}
	g := (&lifecycle.Group{}).Add(o.part("broker"))
	require.NoError(t, g.Start(context.Background()))
	require.Equal(t, "start broker", o.next(t))
	readyCalled := make(chan struct{})
	proc := o.part("processor")
	g.Add(o.part("views")).Add(proc).OnReady(func() { close(readyCalled) }, proc)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	require.Equal(t, "start views", o.next(t))
	require.Equal(t, "start processor", o.next(t))
	require.True(t, closed(readyCalled), "OnReady added after Start is called too")
	cancel()
	require.NoError(t, <-done)
	for _, want := range []string{"stop processor", "stop views", "stop broker"} {
		require.Equal(t, want, o.next(t))
	}
	g.Stop() // a second Stop does nothing more
}

// TestGroupStartedWithoutRun: a process that fails while building the parts
// after its first stage stops the group itself; a part of the first stage
// that failed meanwhile ends Run.
func TestGroupStartedWithoutRun(t *testing.T) {
	t.Parallel()
	t.Run("stopped", func(t *testing.T) {
		t.Parallel()
		first, later := newPart("first"), newPart("later")
		close(first.ready)
		g := (&lifecycle.Group{}).Add(first)
		require.NoError(t, g.Start(context.Background()))
		g.Add(later)
		g.Stop()
		require.True(t, isClosed(first.Stopped()))
		require.NoError(t, first.Err(), "a stop the group makes is not a failure")
		require.True(t, isClosed(later.Stopped()))
		require.Zero(t, later.ran.Load(), "a part not started never starts")
	})
	t.Run("failed before Run", func(t *testing.T) {
		t.Parallel()
		first, later := newPart("first"), newPart("later")
		close(first.ready)
		close(later.ready)
		g := (&lifecycle.Group{Logger: slog.New(slog.DiscardHandler)}).Add(first)
		require.NoError(t, g.Start(context.Background()))
		first.fail <- errors.New("boom")
		require.True(t, closed(first.Stopped()))
		err := g.Add(later).Run(context.Background())
		require.ErrorContains(t, err, "first: boom")
		require.True(t, isClosed(later.Stopped()))
	})
}

func TestCloser(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  bool // the group runs; else it is stopped without starting
	}{
		{"after the parts of later stages", true},
		{"never started", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := &order{events: make(chan string, 16)}
			c := lifecycle.Closer("store", func() { o.events <- "close store" })
			require.Equal(t, "store", c.Name())
			g := (&lifecycle.Group{}).Add(c).Add(o.part("processor"))
			if !tt.run {
				g.Stop()
				require.Equal(t, "close store", o.next(t))
				return
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- g.Run(ctx) }()
			require.Equal(t, "start processor", o.next(t))
			require.NoError(t, c.Ready())
			cancel()
			require.NoError(t, <-done)
			require.Equal(t, "stop processor", o.next(t))
			require.Equal(t, "close store", o.next(t))
			c.Stop()
			select {
			case e := <-o.events:
				t.Fatalf("closed twice: %s", e)
			default:
			}
		})
	}
}
