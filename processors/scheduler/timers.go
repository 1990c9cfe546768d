package scheduler

import (
	"sync"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"

	"github.com/chime-sched/chime/processors/jobstore"
	"github.com/chime-sched/chime/processors/memstore"
)

// timers is what every partition's timerStorage shares: the clock, the
// processor's current assignment, the pump's wake-up, and the registry of
// open storages.
type timers struct {
	cfg        Config
	now        func() time.Time
	tableTopic string
	// wake tells the pump a timer came earlier than it waits for.
	wake chan struct{}
	// onRecovered hears of each actively owned partition that recovered.
	onRecovered func(p int32)

	mu       sync.Mutex
	assigned map[int32]bool
	storages map[int32]*timerStorage
}

func newTimers(cfg Config, tableTopic string) *timers {
	return &timers{
		cfg:        cfg,
		now:        cfg.Now,
		tableTopic: tableTopic,
		wake:       make(chan struct{}, 1),
		assigned:   map[int32]bool{},
		storages:   map[int32]*timerStorage{},
	}
}

func (t *timers) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// missed says the window must not hold key's timer: unit tests of the
// sweep (Config.missTimer).
func (t *timers) missed(key string) bool {
	return t.cfg.missTimer != nil && t.cfg.missTimer(key)
}

// rebalanced records the active assignment; goka calls it before it builds
// the storages of the new assignment.
func (t *timers) rebalanced(a goka.Assignment) {
	t.mu.Lock()
	t.assigned = make(map[int32]bool, len(a))
	for p := range a {
		t.assigned[p] = true
	}
	t.mu.Unlock()
	// goka closes every storage on a rebalance, so this matters only when
	// the callback comes after a storage finished recovering.
	t.signal()
}

// forget drops a closed storage from the registry.
func (t *timers) forget(p int32, s *timerStorage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.storages[p] == s {
		delete(t.storages, p)
	}
}

func (t *timers) active(p int32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.assigned[p]
}

func (t *timers) indexed(p int32, n int) {
	if t.cfg.Logger != nil {
		t.cfg.Logger.Debug("timer index built", "partition", p, "timers", n)
	}
}

// builder gives the scheduler table's partitions their storage in db.
// goka also calls the builder for lookup tables, joins, hot-standby and
// recover-ahead partitions; the scheduler has none of them, and anything
// but its table would get a plain in-memory storage.
func (t *timers) builder(db *jobstore.DB) storage.Builder {
	return func(topic string, partition int32) (storage.Storage, error) {
		if topic != t.tableTopic {
			return memstore.Builder()(topic, partition)
		}
		ts := newTimerStorage(db.Partition(partition), partition, t)
		t.mu.Lock()
		t.storages[partition] = ts
		t.mu.Unlock()
		return ts, nil
	}
}

// storage returns partition p's storage, nil if none is open.
func (t *timers) storage(p int32) *timerStorage {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.storages[p]
}

// activeStorages are the storages of the partitions actively owned.
func (t *timers) activeStorages() []*timerStorage {
	t.mu.Lock()
	defer t.mu.Unlock()
	var sts []*timerStorage
	for p, s := range t.storages {
		if t.assigned[p] {
			sts = append(sts, s)
		}
	}
	return sts
}

// Pending returns the number of rows with a timer in the partitions this
// instance actively owns, as last written.
func (t *timers) Pending() int {
	n := 0
	for _, s := range t.activeStorages() {
		n += s.pendingTimers()
	}
	return n
}

// Stored returns the number of those rows the store holds on disk.
func (t *timers) Stored() int {
	n := 0
	for _, s := range t.activeStorages() {
		n += s.storedTimers()
	}
	return n
}

// InWindow returns the number of timers held in memory (the near window)
// in the partitions this instance actively owns.
func (t *timers) InWindow() int {
	n := 0
	for _, s := range t.activeStorages() {
		n += s.windowTimers()
	}
	return n
}
