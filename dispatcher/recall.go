package dispatcher

import (
	"sync"
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
	// keys are the recalled emissions (emissionKey), remembered while a
	// due event of theirs could still arrive: its hold is bounded by
	// maxEarly.
	keys *expirable.LRU[string, struct{}]

	mu sync.Mutex
	// held wakes the hold of an emission waiting for its fire_at.
	held map[string]chan struct{}
}

// recallMemory bounds the recalls remembered.
const recallMemory = 1 << 16

func newRecalls() *recalls {
	return &recalls{keys: expirable.NewLRU[string, struct{}](recallMemory, nil, maxEarly+time.Minute), held: map[string]chan struct{}{}}
}

// recall takes the emission of due (a recall) back.
func (r *recalls) recall(due *chimev1.Due) {
	key := emissionKey(due.GetIdempotencyKey(), due.GetEmitSeq())
	r.keys.Add(key, struct{}{})
	r.mu.Lock()
	if ch, ok := r.held[key]; ok {
		close(ch)
		delete(r.held, key)
	}
	r.mu.Unlock()
}

// recalled says whether due's emission was taken back.
func (r *recalls) recalled(due *chimev1.Due) bool {
	return r.keys.Contains(emissionKey(due.GetIdempotencyKey(), due.GetEmitSeq()))
}

// hold registers an emission held for its fire_at; the channel closes if
// it is recalled. Call release when the hold ends.
func (r *recalls) hold(due *chimev1.Due) (recalled <-chan struct{}, release func()) {
	key := emissionKey(due.GetIdempotencyKey(), due.GetEmitSeq())
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
