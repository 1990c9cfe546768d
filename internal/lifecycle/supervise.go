package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// A process's parts are essential or degradable. An essential part (the
// broker, the scheduler and its store, the views, the dispatcher, the API)
// is added to a Group as it is: when it stops by itself the group stops
// every part, and the process ends for its supervisor (systemd,
// Kubernetes) to restart it whole, since the others cannot do their work
// without it. A degradable part (analytics: the local ClickHouse and the
// sink) is added wrapped by Supervise: when it fails, the process runs on
// without it, and Supervise builds it again and restarts it, with
// exponential back-off, until it runs.

// Supervision configures Supervise.
type Supervision struct {
	// Build makes the part to run, afresh for each start: a part runs
	// once. An error from Build counts as a failure of the part.
	Build func() (Part, error)
	// Essential makes a permanent failure stop the supervising part with
	// its error, and so the process's group: where the part is what the
	// process is for (`chime sink`). Otherwise the part stays down after
	// a permanent failure, not ready, while the others run.
	Essential bool
	// BackOff is the wait between restarts; nil: exponential from
	// DefaultRestartBackOff to DefaultMaxRestartBackOff, with jitter,
	// without end. It starts over once a part has been ready for
	// ResetAfter.
	BackOff func() backoff.BackOff
	// ResetAfter is how long a restarted part must have been ready for
	// its next failure to be retried at once again; 0 means
	// DefaultResetAfter.
	ResetAfter time.Duration
	// Logger gets a line for each failure and restart; nil:
	// slog.Default().
	Logger *slog.Logger
}

// The defaults of Supervision.
const (
	DefaultRestartBackOff    = time.Second
	DefaultMaxRestartBackOff = 30 * time.Second
	DefaultResetAfter        = time.Minute
)

// Permanent marks err as a failure that a restart does not mend (an engine
// that is not installed, a configuration that is wrong): Supervise does
// not restart a part that fails with it.
func Permanent(err error) error { return backoff.Permanent(err) }

// Supervised is the part Supervise returns.
type Supervised struct {
	Base
	name string
	cfg  Supervision

	mu      sync.Mutex
	current Part  // the part running now, if any
	down    error // why no part runs now (nil while one does)

	restarts atomic.Int64
}

// Supervise returns a part that runs the parts cfg.Build makes, one at a
// time, under name: a degradable part of the process (see the top of this
// file). It is ready once the first part is, or once the first one has
// failed, so that the stages after it start without it; Ready says whether
// a part runs and is ready now. When a part stops by itself it is logged,
// and after a back-off another is built and started; one that fails with
// Permanent is not restarted. Stop stops the part running.
func Supervise(name string, cfg Supervision) *Supervised {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BackOff == nil {
		cfg.BackOff = func() backoff.BackOff {
			b := backoff.NewExponentialBackOff()
			b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = DefaultRestartBackOff, DefaultMaxRestartBackOff, 0
			return b
		}
	}
	if cfg.ResetAfter <= 0 {
		cfg.ResetAfter = DefaultResetAfter
	}
	return &Supervised{name: name, cfg: cfg, down: ErrStarting}
}

// Name implements Part.
func (s *Supervised) Name() string { return s.name }

// Start implements Part.
func (s *Supervised) Start(ctx context.Context) error { return s.Go(ctx, s.run) }

// Ready implements Part: nil while a part runs and is ready; otherwise why
// not (starting, recovering, or failed and waiting to be restarted).
func (s *Supervised) Ready() error {
	if err := s.Base.Ready(); err != nil && !errors.Is(err, ErrStarting) {
		return err
	}
	s.mu.Lock()
	current, down := s.current, s.down
	s.mu.Unlock()
	switch {
	case down != nil:
		return down
	case current == nil:
		return ErrStarting // between a failure and its restart's back-off
	}
	return current.Ready()
}

// Restarts counts the parts started after the first.
func (s *Supervised) Restarts() int64 { return s.restarts.Load() }

func (s *Supervised) run(ctx context.Context, ready func()) error {
	bo := s.cfg.BackOff()
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			s.restarts.Add(1)
		}
		readyAt, err := s.runOnce(ctx, ready)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = errors.New("stopped by itself")
		}
		var perm *backoff.PermanentError
		if errors.As(err, &perm) {
			err = perm.Err
			s.setDown(err)
			if s.cfg.Essential {
				return err
			}
			s.cfg.Logger.Warn("part failed and will not be restarted; the others run without it", "part", s.name, "err", err)
			ready() // as ready as it gets: the stages after it start
			<-ctx.Done()
			return nil
		}
		if !readyAt.IsZero() && time.Since(readyAt) >= s.cfg.ResetAfter {
			bo.Reset()
		}
		wait := bo.NextBackOff()
		s.setDown(fmt.Errorf("%w; restarting in %s", err, wait.Round(time.Millisecond)))
		s.cfg.Logger.Warn("part failed; restarting it, the others run meanwhile", "part", s.name, "err", err, "in", wait.Round(time.Millisecond))
		ready()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// runOnce builds a part and runs it until it stops or ctx ends, and
// returns when it was ready (zero if never) and why it stopped.
func (s *Supervised) runOnce(ctx context.Context, ready func()) (time.Time, error) {
	p, err := s.cfg.Build()
	if err != nil {
		return time.Time{}, err
	}
	s.mu.Lock()
	s.current, s.down = p, nil
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.current = nil
		s.mu.Unlock()
	}()
	if err := p.Start(ctx); err != nil {
		return time.Time{}, err
	}
	var readyAt time.Time
	select {
	case <-p.Started():
		select {
		case <-p.Stopped():
		default:
			readyAt = time.Now()
			ready()
		}
	case <-ctx.Done():
	}
	select {
	case <-p.Stopped():
	case <-ctx.Done():
		p.Stop()
	}
	return readyAt, p.Err()
}

func (s *Supervised) setDown(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = err
}
