package scheduler

import (
	"context"
	"sync"
	"time"

	"github.com/lovoo/goka/storage"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/views/jobindex"
)

// timerStorage wraps the scheduler table's storage for one partition and
// keeps the partition's timer index beside it. goka has no timers; the
// storage sees every write to the table (ctx.SetValue/ctx.Delete arrive
// here synchronously on the partition's goroutine), so it is the one place
// that can keep an index of next timers exact without a second source of
// truth.
//
// Lifecycle (see DESIGN.md, verified on goka v1.1.17):
//   - writes before MarkRecovered are table replay; they are ignored, and
//     the index is built by scanning the recovered storage instead (disk
//     rows from before a restart are never replayed through Set);
//   - MarkRecovered runs on its own goroutine and can race Close;
//   - only partitions in the active assignment pump (hot-standby and
//     recover-ahead storages are also marked recovered).
type timerStorage struct {
	storage.Storage
	partition int32
	timers    *timers

	mu  sync.Mutex
	idx *timerIndex
	// jobs lists the partition's jobs per namespace and counts those not
	// ended (listings, the pending-jobs quota): built by the recovery
	// scan, kept by the processor (noteJob), which knows a row before and
	// after each change without decoding it again.
	jobs      *jobindex.Index
	recovered bool
	closed    bool
	pumping   bool
	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	ctx       context.Context
	cancel    context.CancelFunc
}

func newTimerStorage(inner storage.Storage, partition int32, t *timers) *timerStorage {
	ctx, cancel := context.WithCancel(context.Background())
	return &timerStorage{
		ctx:       ctx,
		cancel:    cancel,
		Storage:   inner,
		partition: partition,
		timers:    t,
		idx:       newTimerIndex(),
		jobs:      jobindex.New(),
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
}

// Set implements storage.Storage.
func (s *timerStorage) Set(key string, value []byte) error {
	if err := s.Storage.Set(key, value); err != nil {
		return err
	}
	at, ok := schema.JobStateTimer(value)
	if !ok {
		at = 0
	}
	s.mu.Lock()
	if s.recovered && s.idx.set(key, at) {
		s.signal()
	}
	s.mu.Unlock()
	return nil
}

// noteTimer sets key's index entry to at (0 removes it) without a write.
func (s *timerStorage) noteTimer(key string, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.recovered {
		return
	}
	if at == 0 {
		s.idx.remove(key)
		return
	}
	if s.idx.set(key, at) {
		s.signal()
	}
}

// noteJob records a row's change in the listing index.
func (s *timerStorage) noteJob(ns, id string, before, after *schema.JobSummary) {
	s.mu.Lock()
	recovered := s.recovered
	s.mu.Unlock()
	if recovered {
		s.jobs.Change(ns, id, before, after)
	}
}

// Delete implements storage.Storage.
func (s *timerStorage) Delete(key string) error {
	if err := s.Storage.Delete(key); err != nil {
		return err
	}
	s.mu.Lock()
	if s.recovered {
		s.idx.remove(key)
	}
	s.mu.Unlock()
	return nil
}

// MarkRecovered implements storage.Storage: it builds the index from the
// recovered rows and starts the pump if this partition is actively owned.
func (s *timerStorage) MarkRecovered() error {
	if err := s.Storage.MarkRecovered(); err != nil {
		return err
	}
	// Holding mu during the scan orders it with concurrent writes: a write
	// that reached the inner store before the scan is seen by it, one that
	// blocks on mu re-applies its timer afterwards.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.recovered {
		return nil
	}
	it, err := s.Storage.Iterator()
	if err != nil {
		return err
	}
	for it.Next() {
		v, err := it.Value()
		if err != nil {
			continue
		}
		if sum, ok := schema.JobStateSummary(v); ok {
			if ns, id, ok := schema.SplitJobKey(string(it.Key())); ok {
				s.jobs.Change(ns, id, nil, &sum)
			}
		}
		at, ok := schema.JobStateTimer(v)
		if !ok {
			continue
		}
		// A row holding fires or Kafka writes of an earlier incarnation is
		// ticked at once, not at its timer: they may have been lost with
		// it (chimev1.JobState.recover_at).
		if r := schema.JobStateRecoverAt(v); r != 0 && (at == 0 || r < at) {
			at = r
		}
		if at != 0 {
			s.idx.set(string(it.Key()), at)
		}
	}
	it.Release()
	s.recovered = true
	s.timers.indexed(s.partition, s.idx.len())
	s.startPumpLocked()
	return nil
}

// startPump starts the pump if the storage is recovered, open and its
// partition actively owned. It is called when recovery ends and when the
// assignment changes, whichever comes last.
func (s *timerStorage) startPump() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startPumpLocked()
}

func (s *timerStorage) startPumpLocked() {
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
	return s.Storage.Close()
}

func (s *timerStorage) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// pendingTimers reports the index size (for metrics and the memory
// benchmark).
func (s *timerStorage) pendingTimers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idx.len()
}

// pump turns due index entries into ticks for this partition.
func (s *timerStorage) pump() {
	defer close(s.done)
	cfg := s.timers.cfg
	var buf []timerItem
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	for {
		now := s.timers.now().UnixNano()
		s.mu.Lock()
		buf = s.idx.due(now, now+int64(cfg.TickResend), cfg.TickBatch, buf)
		next := s.idx.next()
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
			if d := time.Duration(next - now); d < wait {
				wait = d
			}
		}
		if wait <= 0 {
			wait = time.Millisecond
		}
		idle.Reset(wait)
		select {
		case <-s.stop:
			return
		case <-s.wake:
		case <-idle.C:
		}
	}
}
