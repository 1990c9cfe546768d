package dispatcher

import (
	"sync"
	"time"
)

// workerIdle is how long a worker may sit idle before it exits.
// Reusing workers keeps their grown stacks: a goroutine per due paid for
// growing its stack through the HTTP client on every call.
const workerIdle = 5 * time.Second

// workerMaxIdle bounds the idle workers: one beyond it exits when its call
// ends. The dues buffered before a burst's instant (MaxBuffered) all start
// at once, and most then wait for their host's gate; without the bound
// the pool kept ~2,800 idle workers through the 100k burst, 45 MB of
// stacks the collector counts against the memory limit (make bench).
// 256 is as many calls as one host takes at a time (maxConnsPerHost).
const workerMaxIdle = 256

// workers runs calls on reused goroutines. Idle workers wait in a stack
// and the most recently idle one is handed the next call (as fasthttp's
// worker pool does): under a steady load only as many workers as it keeps
// busy are reused, and those left over from a burst sit at the bottom of
// the stack until the janitor ends them. With one shared channel instead,
// every worker got a call now and then, none was ever idle for long, and
// the pool kept the size of its largest burst for good (the soak showed
// +500 goroutines after the machine was briefly loaded).
type workers struct {
	idle    time.Duration
	maxIdle int

	mu    sync.Mutex
	ready []*worker // idle, most recently idle last
	stop  chan struct{}
	done  chan struct{}
	count int // live workers, for tests and metrics
}

type worker struct {
	calls     chan func()
	idleSince time.Time
}

func newWorkers(idle time.Duration, maxIdle int) *workers {
	w := &workers{idle: idle, maxIdle: maxIdle, stop: make(chan struct{}), done: make(chan struct{})}
	go w.janitor()
	return w
}

// spawn runs f on the most recently idle worker, or on a new one.
func (p *workers) spawn(f func()) {
	p.mu.Lock()
	if n := len(p.ready); n > 0 {
		w := p.ready[n-1]
		p.ready[n-1] = nil
		p.ready = p.ready[:n-1]
		p.mu.Unlock()
		w.calls <- f
		return
	}
	p.count++
	p.mu.Unlock()
	w := &worker{calls: make(chan func(), 1)}
	go p.run(w, f)
}

func (p *workers) run(w *worker, f func()) {
	defer func() {
		p.mu.Lock()
		p.count--
		p.mu.Unlock()
	}()
	for f != nil {
		f()
		p.mu.Lock()
		select {
		case <-p.stop:
			p.mu.Unlock()
			return
		default:
		}
		if len(p.ready) >= p.maxIdle {
			p.mu.Unlock()
			return
		}
		w.idleSince = time.Now()
		p.ready = append(p.ready, w)
		p.mu.Unlock()
		f = <-w.calls // nil: the janitor or close ended it
	}
}

// janitor ends the workers idle for longer than idle, oldest first.
func (p *workers) janitor() {
	defer close(p.done)
	t := time.NewTicker(p.idle / 2)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			p.mu.Lock()
			for _, w := range p.ready {
				w.calls <- nil
			}
			p.ready = nil
			p.mu.Unlock()
			return
		case <-t.C:
		}
		cutoff := time.Now().Add(-p.idle)
		p.mu.Lock()
		n := 0
		for n < len(p.ready) && p.ready[n].idleSince.Before(cutoff) {
			p.ready[n].calls <- nil
			n++
		}
		p.ready = append(p.ready[:0], p.ready[n:]...)
		p.mu.Unlock()
	}
}

// live is how many workers exist.
func (p *workers) live() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

// close ends the idle workers and, as they finish, the busy ones.
func (p *workers) close() {
	close(p.stop)
	<-p.done
}
