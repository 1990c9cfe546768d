package dispatcher

import (
	"sync"
	"time"
)

// workerIdle is how long a worker may sit idle before it exits.
// Reusing workers keeps their grown stacks: a goroutine per due paid for
// growing its stack through the HTTP client on every call.
const workerIdle = 5 * time.Second

// The idle workers are bounded by the dispatcher's MaxBuffered, which
// bounds the dues started at once and so the workers anyway: through a
// burst every worker is reused, and the janitor ends them workerIdle
// after it. A bound of 256 (the calls one host takes at a time) was
// tried to keep the stacks of the workers a 100k burst starts (45 MB
// when it was measured) from counting against the memory limit; but
// then most dues ran on a new goroutine that grew its stack through the
// HTTP client again, and in alternated runs of make bench's burst chime
// spent 2.42-2.52 times the receiver's CPU with every worker kept
// against 2.56-2.64 with 256, at the same peak RSS (495-510 MB: the
// memory limit holds it).

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
