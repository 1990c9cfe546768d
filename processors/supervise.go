package processors

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Supervise runs run until ctx is done, restarting it after an error.
// goka ends Processor.Run when the broker goes away with writes in flight;
// the state is in Kafka, so a fresh processor picks up where it stopped.
// Restarts wait 0.5 s, doubling to 15 s; a run that lasted a minute
// starts the waits over.
func Supervise(ctx context.Context, name string, logger *slog.Logger, run func(context.Context) error) error {
	s := supervisor{name: name, log: logger, wait: restartBackOff(), now: time.Now}
	return s.supervise(ctx, run)
}

// healthyRun is how long a run must last for the next restart to wait the
// shortest time again: it failed for a new reason, not the same one.
const healthyRun = time.Minute

// restartBackOff is the wait before each restart: 0.5 s, 1 s, 2 s, ...
// up to 15 s, without end. No jitter: processes restart on their own
// broker trouble, not in a herd.
func restartBackOff() backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 500 * time.Millisecond
	b.Multiplier = 2
	b.RandomizationFactor = 0
	b.MaxInterval = 15 * time.Second
	b.MaxElapsedTime = 0
	return b
}

type supervisor struct {
	name string
	log  *slog.Logger
	wait backoff.BackOff
	now  func() time.Time
}

func (s supervisor) supervise(ctx context.Context, run func(context.Context) error) error {
	restart := func() error {
		start := s.now()
		err := run(ctx)
		if ctx.Err() != nil {
			return nil // stopped as asked
		}
		if err == nil {
			err = errors.New("stopped without error")
		}
		if s.now().Sub(start) >= healthyRun {
			s.wait.Reset()
		}
		return err
	}
	notify := func(err error, in time.Duration) {
		s.log.Error("processor stopped; restarting", "processor", s.name, "err", err, "in", in)
	}
	// RetryNotify ends only when ctx does (the back-off never gives up),
	// and then there is nothing to report.
	_ = backoff.RetryNotify(restart, backoff.WithContext(s.wait, ctx), notify)
	return nil
}
