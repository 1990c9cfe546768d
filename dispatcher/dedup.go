package dispatcher

import (
	"strconv"
	"sync"

	"github.com/chime-sched/chime/schema/chimev1"
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
	// done are the completed emissions remembered, the oldest forgotten
	// first beyond len(ring) (a replay does not refresh one): ring holds
	// them in completion order, next is where the next one goes. A ring
	// and a set rather than an LRU list: every due adds one, and a list
	// element per due was an allocation each.
	done     map[emission]struct{}
	ring     []emission // grows to size, then wraps
	size     int
	next     int
	inflight map[emission]*flight
}

// flight is an emission being called. done is made only when a copy of
// the emission waits for it (rare: a replay), under dedup.mu.
type flight struct {
	done chan struct{}
	ok   bool // set before done is closed
}

func newDedup(size int) *dedup {
	return &dedup{inflight: map[emission]*flight{}, done: map[emission]struct{}{}, size: max(size, 0)}
}

// remembered says whether key completed (and is still remembered).
func (d *dedup) remembered(key emission) bool {
	_, ok := d.done[key]
	return ok
}

// remember adds a completed key, forgetting the oldest beyond the size.
func (d *dedup) remember(key emission) {
	if d.size == 0 || d.remembered(key) {
		return
	}
	d.done[key] = struct{}{}
	if len(d.ring) < d.size {
		d.ring = append(d.ring, key)
		return
	}
	delete(d.done, d.ring[d.next])
	d.ring[d.next] = key
	d.next = (d.next + 1) % d.size
}

// emission names one due event of a job: its idempotency key and emit_seq.
// A struct rather than their concatenation: it is the key of the maps
// every due passes through, and building the string cost an allocation
// each time.
type emission struct {
	key string
	seq uint64
}

func emissionOf(due *chimev1.Due) emission {
	return emission{key: due.GetIdempotencyKey(), seq: due.GetEmitSeq()}
}

// eventID is the ID of an event about the emission: prefix, then key#seq.
// One allocation, the string's (the number's bytes are on the stack).
func (e emission) eventID(prefix string) string {
	var buf [20]byte
	return prefix + e.key + "#" + string(strconv.AppendUint(buf[:0], e.seq, 10))
}

// begin claims key. It returns (nil, true) when key already completed, a
// flight to wait on when a copy is in flight, or (mine, false) with a
// fresh flight the caller must end with finish.
func (d *dedup) begin(key emission) (f *flight, mine bool, seen bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.remembered(key) {
		return nil, false, true
	}
	if f, ok := d.inflight[key]; ok {
		if f.done == nil {
			f.done = make(chan struct{})
		}
		return f, false, false
	}
	f = &flight{}
	d.inflight[key] = f
	return f, true, false
}

// finish ends the flight begun for key; ok says whether its results are
// in Kafka, and only then is it remembered as completed.
func (d *dedup) finish(key emission, f *flight, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.inflight, key)
	f.ok = ok
	if f.done != nil {
		close(f.done)
	}
	if ok {
		d.remember(key)
	}
}
