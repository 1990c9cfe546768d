// Package lifecycle owns how chime's long-running parts (the processors,
// the views, the dispatcher, the sink, the API, query and metrics servers,
// the embedded broker, the local ClickHouse) start, say they are ready,
// and stop: one shape, Part, that each implements by embedding Base, and
// one way to run a list of them, Group: each chime process (chime dev and
// every role command) runs all its parts in one.
//
// Readiness is a signal, not a poll: a part closes its Started channel the
// first time it is ready (a goka processor or view once it has recovered
// its partitions, a server once it listens), and Wait blocks on those
// channels. Ready answers the question again at any time (GET /readyz):
// a processor or view that is recovering after a rebalance or reconnect
// is not ready, though it started long ago.
//
// A part is essential (its failure stops the group) unless it is wrapped
// by Supervise, which makes it degradable: restarted with back-off when it
// fails, while the others run (supervise.go).
//
// Modelled on River's rivershared/startstop.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Part is a long-running part of a chime process.
type Part interface {
	// Name says what the part is in logs and readiness errors
	// ("scheduler", "namespaces view").
	Name() string
	// Start starts the part in the background and returns at once. The
	// part runs until Stop, until ctx ends, or until it fails. An error
	// means it did not start: it was started or stopped before.
	Start(ctx context.Context) error
	// Started is closed once the part is ready for the first time, or
	// once it stopped without getting there (Stopped says which).
	Started() <-chan struct{}
	// Ready is nil while the part is ready now; otherwise it says why
	// not (starting, recovering, stopped).
	Ready() error
	// Stop stops the part and waits until it has. Stop before Start
	// keeps the part from starting; a second Stop waits as the first.
	Stop()
	// Stopped is closed once the part has stopped, for whatever reason.
	Stopped() <-chan struct{}
	// Err is why the part stopped: nil while it runs and after a clean
	// stop by Stop or its context; what failed otherwise (a part that
	// ends by itself has failed, even without an error).
	Err() error
}

// ErrStarting is what Ready answers before a part is ready the first time.
var ErrStarting = errors.New("starting")

// ErrStopped is what Ready answers once a part has stopped cleanly.
var ErrStopped = errors.New("stopped")

// Base implements Part but Name and Start. A part embeds it and starts
// its work with Go from its own Start.
//
//	func (s *Server) Start(ctx context.Context) error { return s.Go(ctx, s.run) }
//
// The zero Base is ready to use; it must not be copied after first use.
type Base struct {
	mu      sync.Mutex
	state   int
	cancel  context.CancelFunc
	started chan struct{}
	stopped chan struct{}
	once    sync.Once
	err     error
}

const (
	idle = iota
	running
	done
)

// ErrAlreadyStarted is what Go answers for a part started before.
var ErrAlreadyStarted = errors.New("lifecycle: started twice")

// errStoppedFirst is what Go answers for a part stopped before it started.
var errStoppedFirst = errors.New("lifecycle: stopped before it started")

// channels allocates the signals on first use, so that Started and Stopped
// can be waited on before Start. b.mu is held.
func (b *Base) channels() {
	if b.started == nil {
		b.started = make(chan struct{})
		b.stopped = make(chan struct{})
	}
}

// Go runs run in its own goroutine under a context that Stop cancels and
// that ends with ctx. run calls ready once the part is ready (more calls
// do nothing) and returns once ctx is done, or with the error that stopped
// it. A part that returns without calling ready is never ready.
func (b *Base) Go(ctx context.Context, run func(ctx context.Context, ready func()) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.channels()
	switch b.state {
	case running:
		return ErrAlreadyStarted
	case done:
		return errStoppedFirst
	}
	rctx, cancel := context.WithCancel(ctx)
	b.state, b.cancel = running, cancel
	ready := func() { b.once.Do(func() { close(b.started) }) }
	go func() {
		err := run(rctx, ready)
		switch {
		case rctx.Err() != nil && errors.Is(err, context.Canceled):
			err = nil // stopped as asked
		case rctx.Err() == nil && err == nil:
			err = errors.New("stopped by itself")
		}
		cancel()
		b.mu.Lock()
		b.err = err
		b.state = done
		b.mu.Unlock()
		// Stopped first: whoever Started wakes finds it stopped, not ready.
		close(b.stopped)
		ready()
	}()
	return nil
}

// Started implements Part.
func (b *Base) Started() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.channels()
	return b.started
}

// Stopped implements Part.
func (b *Base) Stopped() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.channels()
	return b.stopped
}

// Err implements Part.
func (b *Base) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Ready implements Part: nil from the first ready until the part stops.
// A part that can lose its readiness (a goka processor or view while it
// recovers) answers with its own Ready, which asks this one first.
func (b *Base) Ready() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.channels()
	select {
	case <-b.stopped:
		if b.err != nil {
			return fmt.Errorf("stopped: %w", b.err)
		}
		return ErrStopped
	default:
	}
	select {
	case <-b.started:
		return nil
	default:
		return ErrStarting
	}
}

// Stop implements Part.
func (b *Base) Stop() {
	b.mu.Lock()
	b.channels()
	switch b.state {
	case idle:
		// Never started: it never will, and whoever waits learns so.
		b.state = done
		close(b.stopped)
		b.once.Do(func() { close(b.started) })
	case running:
		b.cancel()
	}
	stopped := b.stopped
	b.mu.Unlock()
	<-stopped
}

// Func is a Part made of a run function, for what is too small to be a
// type of its own (see Base.Go for run).
func Func(name string, run func(ctx context.Context, ready func()) error) Part {
	return &funcPart{name: name, run: run}
}

type funcPart struct {
	Base
	name string
	run  func(ctx context.Context, ready func()) error
}

func (f *funcPart) Name() string                    { return f.name }
func (f *funcPart) Start(ctx context.Context) error { return f.Go(ctx, f.run) }

// Closer is a part for what is opened before a group runs and used by the
// parts of later stages (a Kafka producer, a local store): ready at once,
// it calls close once it stops, so after the parts that use it. It calls
// close also when it is stopped without having started (a process that
// failed before running its group), so what it holds is closed whatever
// happens: add it to the group as soon as what it closes is open.
func Closer(name string, close func()) Part {
	c := &closer{name: name}
	c.close = func() { c.once.Do(close) }
	return c
}

type closer struct {
	Base
	name  string
	close func()
	once  sync.Once
}

func (c *closer) Name() string { return c.name }

func (c *closer) Start(ctx context.Context) error {
	return c.Go(ctx, func(ctx context.Context, ready func()) error {
		ready()
		<-ctx.Done()
		c.close()
		return nil
	})
}

func (c *closer) Stop() {
	c.Base.Stop()
	c.close()
}

// Wait blocks until every part is ready. It fails when ctx ends first or
// a part stopped before it was ready.
func Wait(ctx context.Context, parts ...Part) error {
	for _, p := range parts {
		select {
		case <-p.Started():
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", p.Name(), ctx.Err())
		}
		select {
		case <-p.Stopped():
			return fmt.Errorf("%s stopped before it was ready: %w", p.Name(), errOf(p))
		default:
		}
	}
	return nil
}

// Ready says which of parts are not ready now, each by name; nil when all
// are. It is what GET /readyz answers with.
func Ready(parts ...Part) error {
	var errs []error
	for _, p := range parts {
		if err := p.Ready(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name(), err))
		}
	}
	return errors.Join(errs...)
}
