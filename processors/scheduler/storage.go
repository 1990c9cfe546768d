package scheduler

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/chime-sched/chime/internal/timerindex"
	"github.com/chime-sched/chime/processors/jobstore"
	"github.com/chime-sched/chime/schema"
)

// timerStorage is the scheduler table's storage for one partition: the
// rows and their indexes on disk (processors/jobstore), and in memory the
// timers of the near window, which the pump (pump.go) turns into ticks.
// goka has no timers; the storage sees every write to the table
// (ctx.SetValue and ctx.Delete arrive here synchronously on the
// partition's goroutine), so it is the one place that can keep the timers
// exact without a second source of truth.
//
// A pending job costs memory only once its timer is within the window
// (Config.TimerWindow) of now: the window holds the index entries of
// (time, key) below windowEnd, and the pump extends it from the store's
// time index and its write cache, in time order, as the clock moves on.
//
// Each index entry's action time is the row's timer until the pump takes
// it for a tick; it is then parked until the tick is over, and the row's
// next write moves it. A tick that changed nothing (the row was not due
// after all, or its decision could not be written) is tried again after
// TickResend; nothing else is ever sent twice.
//
// Lifecycle (verified on goka v1.1.17):
//   - writes before MarkRecovered are the changelog's, replayed into the
//     store; the window is loaded from the store's index at MarkRecovered,
//     with the rows that hold work of an earlier incarnation due at once;
//   - MarkRecovered runs on its own goroutine and can race Close;
//   - only partitions in the active assignment are ticked (hot-standby and
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
	// ticking are the entries taken for the tick in progress.
	ticking []timerindex.Item

	// writer makes the partition's rows have one writer at a time: the
	// command callback on goka's goroutine, or the pump's tick. Held
	// before mu.
	writer sync.Mutex
	// dues are the due events decided and not sent yet (duebatch.go),
	// guarded by writer.
	dues dueBatcher
}

// parked is the action time of an entry whose tick is in progress.
const parked = math.MaxInt64

func newTimerStorage(part *jobstore.Partition, partition int32, t *timers) *timerStorage {
	return &timerStorage{Partition: part, partition: partition, timers: t, idx: timerindex.New()}
}

// Set implements storage.Storage: it writes a row and places its timer.
func (s *timerStorage) Set(key string, value []byte) error {
	at, ok := schema.JobStateTimer(value)
	if !ok {
		at = 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A timer the window takes is the window's to keep until the row's
	// next write: the store need not order it too (SetHeld). Rows the
	// sweep reads from the store are those the window does not hold.
	set := s.Partition.Set
	if s.recovered && s.holds(key, at) {
		set = s.Partition.SetHeld
	}
	if err := set(key, value); err != nil {
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
	if !s.holds(key, at) {
		s.idx.Remove(key)
		return
	}
	if s.idx.Set(key, at) {
		s.timers.signal()
	}
}

// holds says the window takes key's timer at: set, below the window's
// end, and not one a test makes it miss. s.mu is held.
func (s *timerStorage) holds(key string, at int64) bool {
	return at != 0 && (jobstore.Timer{At: at, Key: key}).Less(s.windowEnd) && !s.timers.missed(key)
}

// MarkRecovered implements storage.Storage: it loads the window from the
// store; the pump ticks this partition if it is actively owned.
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
	s.timers.signal()
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
		end, err := s.Partition.Timers(s.windowEnd, jobstore.Timer{At: to}, refillChunk, func(t jobstore.Timer) {
			if !s.timers.missed(t.Key) {
				s.idx.Set(t.Key, t.At)
			}
		})
		if err != nil {
			s.mu.Unlock()
			return err
		}
		s.windowEnd = end
		s.mu.Unlock()
	}
}

// take takes up to max entries due by now for a tick (parking them), and
// with sweep the rows whose timer is more than SweepOverdue past that the
// window does not hold at all: those the window missed. It returns how
// many it took and how many of them the sweep found.
func (s *timerStorage) take(now time.Time, max int, sweep bool) (n, missed int, err error) {
	cfg := s.timers.cfg
	if now.UnixNano() >= s.refillAt() {
		if err := s.refill(now.Add(cfg.TimerWindow).UnixNano()); err != nil {
			return 0, 0, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || !s.recovered {
		return 0, 0, nil
	}
	s.ticking = s.idx.Due(now.UnixNano(), parked, max, s.ticking[:0])
	if sweep {
		var lost []timerindex.Item
		_, err = s.Partition.Timers(jobstore.Timer{}, jobstore.Timer{At: now.Add(-cfg.SweepOverdue).UnixNano()}, max, func(t jobstore.Timer) {
			if _, ok := s.idx.Get(t.Key); !ok {
				lost = append(lost, timerindex.Item{At: t.At, Key: t.Key})
			}
		})
		s.ticking = append(s.ticking, lost...)
		missed = len(lost)
	}
	return len(s.ticking), missed, err
}

// ticked ends the tick of the entries taken: an entry still parked (its
// row did not change) is tried again after TickResend, or at once if the
// tick did not happen (failed).
func (s *timerStorage) ticked(failed bool, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	again := now.Add(s.timers.cfg.TickResend).UnixNano()
	for _, it := range s.ticking {
		if at, ok := s.idx.Get(it.Key); ok && at == parked {
			if failed {
				s.idx.Set(it.Key, it.At)
			} else {
				s.idx.Set(it.Key, again)
			}
		}
	}
	s.ticking = s.ticking[:0]
}

// next is when the pump next has something to do here: the earliest
// entry, or the window's refill; 0 for nothing.
func (s *timerStorage) next() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || !s.recovered {
		return 0
	}
	n := s.idx.Next()
	if n == 0 || n == parked {
		n = math.MaxInt64
	}
	return min(n, s.refillAtLocked())
}

func (s *timerStorage) refillAt() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refillAtLocked()
}

func (s *timerStorage) refillAtLocked() int64 {
	return s.windowEnd.At - int64(s.timers.cfg.TimerWindow/2)
}

// takenKeys are the keys taken for the tick in progress, each once.
func (s *timerStorage) takenKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, len(s.ticking))
	for i, it := range s.ticking {
		keys[i] = it.Key
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

func (s *timerStorage) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close implements storage.Storage. It waits for a tick in progress.
func (s *timerStorage) Close() error {
	s.writer.Lock()
	defer s.writer.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.timers.forget(s.partition, s)
	return s.Partition.Close()
}

// pendingTimers reports the partition's rows with a timer (for metrics and
// the benchmark), as last written.
func (s *timerStorage) pendingTimers() int { return int(s.Partition.TimerCount()) }

// storedTimers reports those the database holds.
func (s *timerStorage) storedTimers() int { return int(s.Partition.StoredTimerCount()) }

// windowTimers reports the timers held in memory.
func (s *timerStorage) windowTimers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idx.Len()
}
