package dispatcher

import (
	"container/list"
	"strconv"
	"sync"
)

// dedup remembers recently completed emissions, so a due event replayed
// after a rebalance (its offset was not yet committed when the partition
// moved) is not called again. It is best effort: it only knows what this
// process completed, and forgets the oldest beyond its size. Receivers
// still deduplicate on the Idempotency-Key.
//
// It also tracks emissions in flight: a replay arriving while the first
// copy is still being called waits for that copy instead of calling again,
// and counts as done only if the copy's results reached Kafka.
type dedup struct {
	mu       sync.Mutex
	size     int
	order    *list.List // of string, oldest at the front
	done     map[string]*list.Element
	inflight map[string]*flight
}

type flight struct {
	done chan struct{}
	ok   bool // set before done is closed
}

func newDedup(size int) *dedup {
	return &dedup{size: size, order: list.New(), done: map[string]*list.Element{}, inflight: map[string]*flight{}}
}

func emissionKey(idempotencyKey string, emitSeq uint64) string {
	return idempotencyKey + "#" + strconv.FormatUint(emitSeq, 10)
}

// begin claims key. It returns (nil, true) when key already completed, a
// flight to wait on when a copy is in flight, or (mine, false) with a
// fresh flight the caller must end with finish.
func (d *dedup) begin(key string) (f *flight, mine bool, seen bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.done[key]; ok {
		return nil, false, true
	}
	if f, ok := d.inflight[key]; ok {
		return f, false, false
	}
	f = &flight{done: make(chan struct{})}
	d.inflight[key] = f
	return f, true, false
}

// finish ends the flight begun for key; ok says whether its results are
// in Kafka, and only then is it remembered as completed.
func (d *dedup) finish(key string, f *flight, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.inflight, key)
	f.ok = ok
	close(f.done)
	if !ok || d.size <= 0 {
		return
	}
	if _, exists := d.done[key]; exists {
		return
	}
	d.done[key] = d.order.PushBack(key)
	for d.order.Len() > d.size {
		old := d.order.Front()
		d.order.Remove(old)
		delete(d.done, old.Value.(string))
	}
}
