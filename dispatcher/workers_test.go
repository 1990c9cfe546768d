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
	release := occupy(p, 50)
	require.Equal(t, 50, p.live())
	release()

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
	release := occupy(p, 50)
	require.Equal(t, 50, p.live())
	release()
	require.Eventually(t, func() bool { return p.live() == 10 }, 5*time.Second, time.Millisecond, "40 workers ended, 10 idle")

	// The idle ones are reused: ten calls at once start no new worker.
	release = occupy(p, 10)
	require.Equal(t, 10, p.live())
	release()
}

// occupy starts n calls that block, waits until each runs, and returns
// what releases them and waits until they returned.
func occupy(p *workers, n int) (release func()) {
	block := make(chan struct{})
	var started, finished sync.WaitGroup
	started.Add(n)
	finished.Add(n)
	for range n {
		p.spawn(func() { defer finished.Done(); started.Done(); <-block })
	}
	started.Wait()
	return func() { close(block); finished.Wait() }
}
