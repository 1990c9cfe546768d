package lifecycle_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/internal/lifecycle"
)

// builds hands out a new test part for each Build of a supervision, and
// the parts built so far.
type builds struct {
	mu    sync.Mutex
	parts []*part
	made  chan *part
}

func newBuilds() *builds { return &builds{made: make(chan *part, 16)} }

func (b *builds) build() (lifecycle.Part, error) {
	p := newPart("analytics")
	b.mu.Lock()
	b.parts = append(b.parts, p)
	b.mu.Unlock()
	b.made <- p
	return p, nil
}

// next is the next part built, within 5 s.
func (b *builds) next(t *testing.T) *part {
	t.Helper()
	select {
	case p := <-b.made:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no part built")
		return nil
	}
}

func supervision(b *builds, essential bool) lifecycle.Supervision {
	return lifecycle.Supervision{
		Build:     b.build,
		Essential: essential,
		BackOff:   func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) },
		Logger:    slog.New(slog.DiscardHandler),
	}
}

// readyWithin waits until p answers Ready with nil.
func readyWithin(t *testing.T, p lifecycle.Part) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready: %v", p.Name(), p.Ready())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDegradablePartFailsAlone: a supervised part that fails does not stop
// the group; it is not ready until a new one, built and started after the
// back-off, is.
func TestDegradablePartFailsAlone(t *testing.T) {
	t.Parallel()
	for _, failBeforeReady := range []bool{false, true} {
		name := map[bool]string{false: "after ready", true: "before ready"}[failBeforeReady]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			core, b, after := newPart("scheduler"), newBuilds(), newPart("after")
			close(core.ready)
			close(after.ready)
			s := lifecycle.Supervise("analytics", supervision(b, false))
			g := (&lifecycle.Group{Logger: slog.New(slog.DiscardHandler)}).Add(core).Add(s).Add(after)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- g.Run(ctx) }()

			first := b.next(t)
			if !failBeforeReady {
				close(first.ready)
				readyWithin(t, s)
			}
			first.fail <- errors.New("ClickHouse is shutting down")
			require.True(t, closed(after.Started()), "the stage after a failed degradable part starts")
			require.True(t, closed(first.Stopped()))
			second := b.next(t)
			require.ErrorContains(t, s.Ready(), "starting", "not ready until the new part is")
			close(second.ready)
			readyWithin(t, s)
			require.EqualValues(t, 1, s.Restarts())
			require.NoError(t, core.Ready(), "the others ran throughout")
			require.NoError(t, after.Ready())

			cancel()
			require.NoError(t, <-done)
			require.True(t, isClosed(second.Stopped()), "Stop stops the part running")
			require.NoError(t, s.Err())
		})
	}
}

// TestPermanentFailure: a part that fails with lifecycle.Permanent is not
// restarted. A degradable one stays down, saying why, while the group
// runs; an essential one stops the group with its error.
func TestPermanentFailure(t *testing.T) {
	t.Parallel()
	notInstalled := errors.New("local ClickHouse is not installed")
	for _, essential := range []bool{false, true} {
		t.Run(map[bool]string{false: "degradable", true: "essential"}[essential], func(t *testing.T) {
			t.Parallel()
			core, b := newPart("scheduler"), newBuilds()
			close(core.ready)
			s := lifecycle.Supervise("analytics", supervision(b, essential))
			g := (&lifecycle.Group{Logger: slog.New(slog.DiscardHandler)}).Add(core, s)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- g.Run(ctx) }()

			b.next(t).fail <- lifecycle.Permanent(notInstalled)
			if essential {
				select {
				case err := <-done:
					require.ErrorIs(t, err, notInstalled)
				case <-time.After(5 * time.Second):
					t.Fatal("the group did not stop")
				}
				return
			}
			require.True(t, closed(s.Started()))
			require.ErrorIs(t, s.Ready(), notInstalled)
			select {
			case p := <-b.made:
				t.Fatalf("a part that failed for good was built again: %v", p.Name())
			case err := <-done:
				t.Fatalf("the group stopped: %v", err)
			case <-time.After(200 * time.Millisecond):
			}
			require.NoError(t, core.Ready())
			cancel()
			require.NoError(t, <-done)
		})
	}
}

// TestSupervisedBuildFails: an error from Build is a failure like any
// other: retried after the back-off.
func TestSupervisedBuildFails(t *testing.T) {
	t.Parallel()
	b := newBuilds()
	failures := 2
	cfg := supervision(b, true)
	cfg.Build = func() (lifecycle.Part, error) {
		if failures > 0 {
			failures--
			return nil, errors.New("cannot reach ClickHouse")
		}
		return b.build()
	}
	s := lifecycle.Supervise("analytics", cfg)
	require.NoError(t, s.Start(context.Background()))
	close(b.next(t).ready)
	readyWithin(t, s)
	require.EqualValues(t, 2, s.Restarts())
	s.Stop()
	require.NoError(t, s.Err())
}
