package dispatcher

import (
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
}

// recallMemory bounds the recalls remembered.
const recallMemory = 1 << 16

func newRecalls() *recalls {
	return &recalls{keys: expirable.NewLRU[emission, struct{}](recallMemory, nil, maxEarly+time.Minute)}
}

// recall takes the emission of due (a recall) back: a due of it that
// arrives, or waits for admission, is dropped (process). The consumer
// takes one held for its fire_at out of the holder.
func (r *recalls) recall(due *chimev1.Due) {
	r.keys.Add(emissionOf(due), struct{}{})
	r.any.Store(true)
}

// recalled says whether the emission was taken back.
func (r *recalls) recalled(em emission) bool {
	return r.any.Load() && r.keys.Contains(em)
}
