package dispatcher

import (
	"strconv"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
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
	mu sync.Mutex
	// done forgets the oldest beyond its size; nil when the size is 0
	// (remember nothing).
	done     *simplelru.LRU[string, struct{}]
	inflight map[string]*flight
}

type flight struct {
	done chan struct{}
	ok   bool // set before done is closed
}

func newDedup(size int) *dedup {
	d := &dedup{inflight: map[string]*flight{}}
	if size > 0 {
		d.done, _ = simplelru.NewLRU[string, struct{}](size, nil) // errs only for size <= 0
	}
	return d
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
	if d.done != nil && d.done.Contains(key) {
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
	// Only a first completion is added (and Contains does not refresh
	// one): the oldest completed are forgotten first.
	if ok && d.done != nil && !d.done.Contains(key) {
		d.done.Add(key, struct{}{})
	}
}
