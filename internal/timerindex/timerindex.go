// Package timerindex holds the scheduler's index of timers: one
// partition's rows ordered by when they next need a tick, in about 100
// bytes a timer and with no pointer per entry. It is its own package so
// that the benchmark can measure it (Footprint); the scheduler
// (processors/scheduler) keeps one per partition of its table.
package timerindex

import (
	"encoding/binary"

	"github.com/google/btree"

	"github.com/cespare/xxhash/v2"
)

// Index orders one partition's rows by when they next need a tick.
//
// Each row has one entry. Its position ("action time") starts as the row's
// timer; when the pump sends a tick for it, the entry moves to
// sentAt+resendAfter, so a tick that got lost (rebalance window, zombie
// owner) is sent again without rescanning entries already handled. The
// entry leaves or moves only when the row itself changes: the index never
// decides that a timer was served.
//
// Memory matters (a partition may hold millions of pending jobs), and so
// does the garbage collector, which marks every pointer of a live heap at
// each cycle: with string keys, a million pending jobs were a million
// strings to mark, again and again, while they fired. So nothing here
// holds a pointer per entry. The btree orders (time, 128-bit key hash), the
// map finds an entry by hash, and the keys themselves sit in one byte
// arena that the map points into (needed only to name the ticks the pump
// sends). About 100 bytes per timer.
//
// Not safe for concurrent use; the owning storage serialises access.
type Index struct {
	tree *btree.BTreeG[timerEntry]
	at   map[keyHash]indexed
	// keys holds each entry's key as uvarint length + bytes; dead counts
	// the bytes of keys no longer referenced, reclaimed by compactKeys.
	keys []byte
	dead int
}

// keyHash is a key's 128-bit hash (xxhash and FNV-1a 64): the index
// finds entries by it instead of holding a string per entry; a collision
// of both is not to be expected among a partition's keys.
type keyHash [2]uint64

func hashKey(key string) keyHash {
	f := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		f ^= uint64(key[i])
		f *= 1099511628211
	}
	return keyHash{xxhash.Sum64String(key), f}
}

// timerEntry is a btree item: ordered by time, then by key hash.
type timerEntry struct {
	at int64 // Unix nanoseconds
	h  keyHash
}

// indexed is an entry's time and where its key is in the arena.
type indexed struct {
	at  int64
	ref uint32
}

// Item is a due entry as the pump uses it.
type Item struct {
	At  int64 // Unix nanoseconds
	Key string
}

func lessTimer(a, b timerEntry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.h[0] != b.h[0] {
		return a.h[0] < b.h[0]
	}
	return a.h[1] < b.h[1]
}

// New returns an empty index.
func New() *Index {
	return &Index{
		tree: btree.NewG(32, lessTimer),
		at:   make(map[keyHash]indexed),
	}
}

// Set records the row's timer (0 removes it). It is an idempotent upsert:
// recovery may replay a row twice. It reports whether the new entry is the
// earliest, so the pump can be woken.
func (x *Index) Set(key string, at int64) (earliest bool) {
	h := hashKey(key)
	old, ok := x.at[h]
	switch {
	case ok && old.at == at:
		return false
	case ok:
		x.tree.Delete(timerEntry{at: old.at, h: h})
		if at == 0 {
			delete(x.at, h)
			x.dead += x.keyLen(old.ref)
			x.compactKeys()
			return false
		}
		x.at[h] = indexed{at: at, ref: old.ref}
	default:
		if at == 0 {
			return false
		}
		x.at[h] = indexed{at: at, ref: x.addKey(key)}
	}
	e := timerEntry{at: at, h: h}
	x.tree.ReplaceOrInsert(e)
	min, _ := x.tree.Min()
	return min == e
}

// Remove drops key's entry.
func (x *Index) Remove(key string) { x.Set(key, 0) }

// Get returns key's action time.
func (x *Index) Get(key string) (int64, bool) {
	ix, ok := x.at[hashKey(key)]
	return ix.at, ok
}

// Due collects up to max entries whose action time is <= now and moves
// each to resendAt. It returns the keys and the timers they were due at.
func (x *Index) Due(now, resendAt int64, max int, out []Item) []Item {
	out = out[:0]
	var es []timerEntry
	x.tree.Ascend(func(e timerEntry) bool {
		if e.at > now || len(es) >= max {
			return false
		}
		es = append(es, e)
		return true
	})
	for _, e := range es {
		x.tree.Delete(e)
		x.tree.ReplaceOrInsert(timerEntry{at: resendAt, h: e.h})
		ix := x.at[e.h]
		x.at[e.h] = indexed{at: resendAt, ref: ix.ref}
		out = append(out, Item{At: e.at, Key: x.key(ix.ref)})
	}
	return out
}

// Next returns the earliest action time, or 0 when the index is empty.
func (x *Index) Next() int64 {
	if e, ok := x.tree.Min(); ok {
		return e.at
	}
	return 0
}

// Len is the number of entries.
func (x *Index) Len() int { return len(x.at) }

// addKey appends key to the arena and returns where it starts.
func (x *Index) addKey(key string) uint32 {
	ref := uint32(len(x.keys))
	x.keys = binary.AppendUvarint(x.keys, uint64(len(key)))
	x.keys = append(x.keys, key...)
	return ref
}

// key returns the key at ref as a new string.
func (x *Index) key(ref uint32) string {
	n, w := binary.Uvarint(x.keys[ref:])
	start := int(ref) + w
	return string(x.keys[start : start+int(n)])
}

// keyLen is the arena bytes of the key at ref.
func (x *Index) keyLen(ref uint32) int {
	n, w := binary.Uvarint(x.keys[ref:])
	return w + int(n)
}

// compactKeys rewrites the arena once more than half of it (and at least a
// MiB) is keys of removed entries.
func (x *Index) compactKeys() {
	if x.dead < 1<<20 || x.dead*2 < len(x.keys) {
		return
	}
	live := len(x.keys) - x.dead
	keys := make([]byte, 0, live+live/4)
	for h, ix := range x.at {
		ref := uint32(len(keys))
		n := x.keyLen(ix.ref)
		keys = append(keys, x.keys[ix.ref:int(ix.ref)+n]...)
		x.at[h] = indexed{at: ix.at, ref: ref}
	}
	x.keys, x.dead = keys, 0
}
