package scheduler

import (
	"context"
	"sync"
	"time"

	"github.com/chime-sched/chime/internal/timerindex"
	"github.com/chime-sched/chime/processors/jobstore"
	"github.com/chime-sched/chime/schema"
)

// timerStorage is the scheduler table's storage for one partition: the
// rows and their indexes on disk (processors/jobstore), and in memory the
// timers of the near window, which the pump turns into ticks. goka has no
// timers; the storage sees every write to the table (ctx.SetValue and
// ctx.Delete arrive here synchronously on the partition's goroutine), so
// it is the one place that can keep the timers exact without a second
// source of truth.
//
// A pending job costs memory only once its timer is within the window
// (Config.TimerWindow) of now: the window holds the index entries of
// (time, key) below windowEnd, and the pump extends it from the store's
// time index, in time order, as the clock moves on.
//
// Lifecycle (verified on goka v1.1.17):
//   - writes before MarkRecovered are the changelog's, replayed into the
//     store; the window is loaded from the store's index at MarkRecovered,
//     with the rows that hold work of an earlier incarnation due at once;
//   - MarkRecovered runs on its own goroutine and can race Close;
//   - only partitions in the active assignment pump (hot-standby and
//     recover-ahead storages are also marked recovered).
type timerStorage struct {
	*jobstore.Partition
	partition int32
	timers    *timers

	// mu orders writes with the window's refills: a write and a refill
	// never interleave, so no timer is missed or left stale. Held before
	// the store's own lock.
	mu        sync.Mutex
	idx       *timerindex.Index
	windowEnd jobstore.Timer
	recovered bool
	closed    bool
	pumping   bool
	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	ctx       context.Context
	cancel    context.CancelFunc
}

func newTimerStorage(part *jobstore.Partition, partition int32, t *timers) *timerStorage {
	ctx, cancel := context.WithCancel(context.Background())
	s := &timerStorage{
		ctx:       ctx,
		cancel:    cancel,
		Partition: part,
		partition: partition,
		timers:    t,
		idx:       timerindex.New(),
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	// The sweep (Scheduler.sweep) visits the rows whose timer is overdue,
	// not every row of the table.
	part.SetIterateBefore(func() int64 { return t.now().Add(-t.cfg.SweepOverdue).UnixNano() })
	return s
}

// Set implements storage.Storage.
func (s *timerStorage) Set(key string, value []byte) error {
	at, ok := schema.JobStateTimer(value)
	if !ok {
		at = 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.Partition.Set(key, value); err != nil {
		return err
	}
	if s.recovered {
		s.place(key, at)
	}
	return nil
}

// Delete implements storage.Storage.
func (s *timerStorage) Delete(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.Partition.Delete(key); err != nil {
		return err
	}
	if s.recovered {
		s.idx.Remove(key)
	}
	return nil
}

// place puts key's timer in the window, or takes it out when the timer
// is beyond the window (the store's index has it) or gone. s.mu is held.
func (s *timerStorage) place(key string, at int64) {
	if at == 0 || !(jobstore.Timer{At: at, Key: key}).Less(s.windowEnd) {
		s.idx.Remove(key)
		return
	}
	if s.idx.Set(key, at) {
		s.signal()
	}
}

// noteTimer sets key's timer to at (0 removes it) without a write: a row
// held unwritten (unwritten.go) changes its timer in memory only.
func (s *timerStorage) noteTimer(key string, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recovered {
		s.place(key, at)
	}
}

// MarkRecovered implements storage.Storage: it loads the window from the
// store and starts the pump if this partition is actively owned.
func (s *timerStorage) MarkRecovered() error {
	if err := s.Partition.MarkRecovered(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed || s.recovered {
		s.mu.Unlock()
		return nil
	}
	s.recovered = true
	s.mu.Unlock()
	if err := s.refill(s.timers.now().Add(s.timers.cfg.TimerWindow).UnixNano()); err != nil {
		return err
	}
	// A row holding fires or Kafka writes of an earlier incarnation is
	// ticked at once, not at its timer: they may have been lost with it
	// (chimev1.JobState.recover_at). They are few: the fires in flight.
	s.mu.Lock()
	err := s.Partition.Recovering(func(t jobstore.Timer) {
		if at, ok := s.idx.Get(t.Key); !ok || t.At < at {
			s.idx.Set(t.Key, t.At)
		}
	})
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.timers.indexed(s.partition, s.pendingTimers())
	s.startPump()
	if s.timers.active(s.partition) && s.timers.onRecovered != nil {
		s.timers.onRecovered(s.partition)
	}
	return nil
}

// refillChunk bounds the index entries one refill step reads while it
// holds the storage's lock (and so delays the partition's writes).
const refillChunk = 4096

// refill extends the window to end at to: the timers in [windowEnd, to)
// come into memory from the store's index (rows written since they were
// applied come from the store's overlay), in steps of refillChunk.
func (s *timerStorage) refill(to int64) error {
	for {
		s.mu.Lock()
		if s.closed || !s.recovered || s.windowEnd.At >= to {
			s.mu.Unlock()
			return nil
		}
		end, err := s.Partition.Timers(s.windowEnd, jobstore.Timer{At: to}, refillChunk, func(t jobstore.Timer) { s.idx.Set(t.Key, t.At) })
		if err != nil {
			s.mu.Unlock()
			return err
		}
		s.windowEnd = end
		s.mu.Unlock()
		s.signal()
	}
}

// startPump starts the pump if the storage is recovered, open and its
// partition actively owned. It is called when recovery ends and when the
// assignment changes, whichever comes last.
func (s *timerStorage) startPump() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pumping || s.closed || !s.recovered || !s.timers.active(s.partition) {
		return
	}
	s.pumping = true
	go s.pump()
}

// Close implements storage.Storage: the pump stops before the store closes.
func (s *timerStorage) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	pumping := s.pumping
	close(s.stop)
	s.cancel()
	s.mu.Unlock()
	if pumping {
		<-s.done
	}
	s.timers.forget(s.partition, s)
	return s.Partition.Close()
}

func (s *timerStorage) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// pendingTimers reports the partition's rows with a timer (for metrics and
// the benchmark), as the store has applied them.
func (s *timerStorage) pendingTimers() int { return int(s.Partition.TimerCount()) }

// windowTimers reports the timers held in memory.
func (s *timerStorage) windowTimers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idx.Len()
}

// pump turns due window entries into ticks for this partition, and keeps
// the window TimerWindow ahead of the clock.
func (s *timerStorage) pump() {
	defer close(s.done)
	cfg := s.timers.cfg
	var buf []timerindex.Item
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	for {
		now := s.timers.now().UnixNano()
		s.mu.Lock()
		refillAt := s.windowEnd.At - int64(cfg.TimerWindow/2)
		s.mu.Unlock()
		if now >= refillAt {
			if err := s.refill(now + int64(cfg.TimerWindow)); err != nil && s.ctx.Err() == nil {
				s.timers.cfg.Logger.Error("scheduler: reading timers from the table store failed; retrying", "partition", s.partition, "err", err)
			}
			s.mu.Lock()
			refillAt = s.windowEnd.At - int64(cfg.TimerWindow/2)
			s.mu.Unlock()
		}
		s.mu.Lock()
		buf = s.idx.Due(now, now+int64(cfg.TickResend), cfg.TickBatch, buf)
		next := s.idx.Next()
		s.mu.Unlock()
		if len(buf) > 0 {
			s.timers.send(s.ctx, s.partition, buf, now)
			if len(buf) == cfg.TickBatch {
				select {
				case <-s.stop:
					return
				default:
					continue
				}
			}
		}
		wait := cfg.PumpIdle
		if next > 0 {
			wait = min(wait, time.Duration(next-now))
		}
		wait = max(min(wait, time.Duration(refillAt-now)), time.Millisecond)
		idle.Reset(wait)
		select {
		case <-s.stop:
			return
		case <-s.wake:
		case <-idle.C:
		}
	}
}
