package dispatcher

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/chime-sched/chime/schema/chimev1"
)

// Recalls: the scheduler emits a due event up to its FireLead before its
// fire_at, and a cancel, pause or update applied before that time takes
// it back with a recall, a due event with recall set, keyed like the
// emission so that it follows it on its partition
// (processors/scheduler/recall.go). The dispatcher drops a recalled
// emission it holds for its fire_at, and one that still waits for
// admission when the recall arrives; it reports nothing for it (the
// scheduler has taken it out of the job's row). A recall that comes after
// the call started is too late and changes nothing.
type recalls struct {
	// keys are the recalled emissions, remembered while a due event of
	// theirs could still arrive: its hold is bounded by maxEarly.
	keys *expirable.LRU[emission, struct{}]
	// any is set by the first recall: until then no due asks keys (a
	// lock each time).
	any atomic.Bool

	mu sync.Mutex
	// held wakes the hold of an emission waiting for its fire_at.
	held map[emission]chan struct{}
}

// recallMemory bounds the recalls remembered.
const recallMemory = 1 << 16

func newRecalls() *recalls {
	return &recalls{keys: expirable.NewLRU[emission, struct{}](recallMemory, nil, maxEarly+time.Minute), held: map[emission]chan struct{}{}}
}

// recall takes the emission of due (a recall) back.
func (r *recalls) recall(due *chimev1.Due) {
	key := emissionOf(due)
	r.keys.Add(key, struct{}{})
	r.any.Store(true)
	r.mu.Lock()
	if ch, ok := r.held[key]; ok {
		close(ch)
		delete(r.held, key)
	}
	r.mu.Unlock()
}

// recalled says whether the emission was taken back.
func (r *recalls) recalled(em emission) bool {
	return r.any.Load() && r.keys.Contains(em)
}

// hold registers an emission held for its fire_at; the channel closes if
// it is recalled. Call release when the hold ends.
func (r *recalls) hold(key emission) (recalled <-chan struct{}, release func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.held[key] = ch
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		if r.held[key] == ch {
			delete(r.held, key)
		}
		r.mu.Unlock()
	}
}
