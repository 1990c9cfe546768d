package scheduler

import (
	"sync"

	"github.com/chime-sched/chime/processors/jobstore"
	"github.com/chime-sched/chime/schema"
)

// unwritten holds rows whose last decision only fired: due events went out
// and the row now records the open fires, but the row was not written to
// the table. The dispatcher's answer (ack, retry or defer) follows within
// moments and writes the row once, with the fire and its answer together:
// a fired one-shot costs two table writes (created, settled) instead of
// three, and the tick's callback no longer encodes, stores and produces the
// row.
//
// Why that keeps every guarantee: the stored row still holds the timer
// that fired. If this process dies (or the partition moves) before the
// row is written, the next owner recovers the stored row and fires the
// same occurrence again with the same fire_seq and emit_seq (they come
// from the stored row), so the idempotency key and the emission are the
// same and the dispatcher suppresses the repeat when it can. That is what
// a crash did before too: a fire in flight at a crash is re-emitted
// (recover_at). An answer that reaches the next owner before the repeat
// makes the row catch up on the lost fire first (ahead.go).
//
// Rules:
//   - only a tick's decision that emits due events and nothing else (no
//     job event, no Kafka-target write, no rejection, no delete) is held;
//     commands are always written;
//   - a row holds at most one unwritten decision: the next decision on it
//     writes it (so a recurring job whose answers do not come is written
//     at its next fire);
//   - at most max rows are held (memory stays bounded when the
//     dispatchers are down); beyond that decisions are written;
//   - entries of partitions this processor no longer owns are dropped at
//     the rebalance, and all of them when the processor restarts.
//
// Only the partition's goroutine takes and puts a key; readers (the API)
// peek.
type unwritten struct {
	mu   sync.Mutex
	rows map[string]unwrittenRow
	max  int
}

type unwrittenRow struct {
	partition int32
	value     []byte // encoded by schema.JobStateCodec
	// stored is the row as the table's store holds it (its index entries),
	// when known: the write that ends the hold replaces it, and the store
	// then need not read it again (jobstore.Partition.Hint).
	stored   *jobstore.RowIndex
	storedOK bool
}

func newUnwritten(max int) *unwritten {
	return &unwritten{rows: map[string]unwrittenRow{}, max: max}
}

// take removes and returns the key's held row.
func (u *unwritten) take(key string, partition int32) (unwrittenRow, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	r, ok := u.rows[key]
	if !ok || r.partition != partition {
		return unwrittenRow{}, false
	}
	delete(u.rows, key)
	return r, true
}

// put holds r for key; false when full.
func (u *unwritten) put(key string, r unwrittenRow) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.rows) >= u.max {
		return false
	}
	u.rows[key] = r
	return true
}

// peek returns the key's held row without taking it.
func (u *unwritten) peek(key string) ([]byte, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	r, ok := u.rows[key]
	return r.value, ok
}

// has says whether key's row is held.
func (u *unwritten) has(key string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.rows[key]
	return ok
}

// keep drops the rows of partitions not in assigned (nil: every row).
func (u *unwritten) keep(assigned map[int32]bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, r := range u.rows {
		if !assigned[r.partition] {
			delete(u.rows, k)
		}
	}
}

func (u *unwritten) len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.rows)
}

// timerOf is the timer in an encoded row's header (0: none).
func timerOf(value []byte) int64 {
	at, _ := schema.JobStateTimer(value)
	return at
}
