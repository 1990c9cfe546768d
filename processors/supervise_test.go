package processors

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRestartBackOff(t *testing.T) {
	t.Parallel()
	b := restartBackOff()
	var got []time.Duration
	for range 8 {
		got = append(got, b.NextBackOff())
	}
	s := time.Second
	require.Equal(t, []time.Duration{s / 2, s, 2 * s, 4 * s, 8 * s, 15 * s, 15 * s, 15 * s}, got)
	b.Reset()
	require.Equal(t, s/2, b.NextBackOff())
}

// countingBackOff waits no time and counts how often the waits started
// over.
type countingBackOff struct {
	mu     sync.Mutex
	resets int
	waits  int
}

func (c *countingBackOff) NextBackOff() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits++
	return 0
}

func (c *countingBackOff) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resets++
}

// Supervise restarts a run that failed or stopped, starts its waits over
// after a run that lasted, and returns nil once ctx ends.
func TestSupervise(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name       string
		runs       []time.Duration // how long each run lasts (on the test's clock) before it fails
		wantResets int             // RetryNotify's own at the start, then one per healthy run
	}{
		{"quick failures keep backing off", []time.Duration{time.Second, time.Second, time.Second}, 1},
		{"a run that lasted starts over", []time.Duration{time.Second, healthyRun, time.Second}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var (
				clock = time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
				wait  countingBackOff
				calls int
			)
			s := supervisor{name: "test", log: slog.New(slog.NewTextHandler(io.Discard, nil)), wait: &wait, now: func() time.Time { return clock }}
			err := s.supervise(ctx, func(context.Context) error {
				if calls == len(tt.runs) {
					cancel() // the last run ends with its context
					return context.Canceled
				}
				clock = clock.Add(tt.runs[calls])
				calls++
				if calls == 2 {
					return nil // a processor that stopped without an error is restarted too
				}
				return errors.New("broker went away")
			})
			require.NoError(t, err)
			require.Equal(t, len(tt.runs), calls)
			require.Equal(t, len(tt.runs), wait.waits, "one wait before each restart")
			require.Equal(t, tt.wantResets, wait.resets)
		})
	}
}
