package dispatcher

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWorkersShrinkAfterABurst: after a burst needed 50 workers, a steady
// trickle reuses the most recently idle ones and the rest end, instead of
// the pool keeping its largest size while every worker gets a call now and
// then.
func TestWorkersShrinkAfterABurst(t *testing.T) {
	t.Parallel()
	p := newWorkers(100*time.Millisecond, 100)
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(50)
	for range 50 {
		p.spawn(func() { started.Done(); <-release })
	}
	started.Wait()
	require.Equal(t, 50, p.live())
	close(release)

	// A trickle, one call at a time, for ten idle periods.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		done := make(chan struct{})
		p.spawn(func() { close(done) })
		<-done
		time.Sleep(5 * time.Millisecond)
	}
	require.LessOrEqual(t, p.live(), 3, "the burst's workers ended")

	p.close()
	require.Eventually(t, func() bool { return p.live() == 0 }, 5*time.Second, 10*time.Millisecond)
}

// TestWorkersBeyondMaxIdleEnd: the workers a burst needed beyond maxIdle
// end as their calls end, without waiting for the janitor; those kept
// take the next calls.
func TestWorkersBeyondMaxIdleEnd(t *testing.T) {
	t.Parallel()
	p := newWorkers(time.Hour, 10)
	defer p.close()
	release := make(chan struct{})
	var started, finished sync.WaitGroup
	started.Add(50)
	finished.Add(50)
	for range 50 {
		p.spawn(func() { defer finished.Done(); started.Done(); <-release })
	}
	started.Wait()
	require.Equal(t, 50, p.live())
	close(release)
	finished.Wait()
	require.Eventually(t, func() bool { return p.live() == 10 }, 5*time.Second, time.Millisecond, "40 workers ended, 10 idle")

	// The idle ones are reused: ten calls at once start no new worker.
	block := make(chan struct{})
	started.Add(10)
	for range 10 {
		p.spawn(func() { started.Done(); <-block })
	}
	started.Wait()
	require.Equal(t, 10, p.live())
	close(block)
}
