package scheduler

import (
	"github.com/google/btree"
)

// timerIndex orders one partition's rows by when they next need a tick.
//
// Each row has one entry. Its position ("action time") starts as the row's
// timer; when the pump sends a tick for it, the entry moves to
// sentAt+resendAfter, so a tick that got lost (rebalance window, zombie
// owner) is sent again without rescanning entries already handled. The
// entry leaves or moves only when the row itself changes: the index never
// decides that a timer was served.
//
// Memory matters (a partition may hold millions of pending jobs): an entry
// is one btree item (int64 + string header) and one map slot; the key's
// bytes are shared between the two.
//
// Not safe for concurrent use; the owning storage serialises access.
type timerIndex struct {
	tree *btree.BTreeG[timerItem]
	at   map[string]int64
}

type timerItem struct {
	at  int64 // Unix nanoseconds
	key string
}

func lessTimer(a, b timerItem) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.key < b.key
}

func newTimerIndex() *timerIndex {
	return &timerIndex{
		tree: btree.NewG(32, lessTimer),
		at:   make(map[string]int64),
	}
}

// set records the row's timer (0 removes it). It is an idempotent upsert:
// recovery may replay a row twice. It reports whether the new entry is the
// earliest, so the pump can be woken.
func (x *timerIndex) set(key string, at int64) (earliest bool) {
	if old, ok := x.at[key]; ok {
		if old == at {
			return false
		}
		it, _ := x.tree.Delete(timerItem{at: old, key: key})
		key = it.key
		if at == 0 {
			delete(x.at, key)
			return false
		}
		// key is now the stored string, so its bytes are not held twice.
		x.tree.ReplaceOrInsert(timerItem{at: at, key: key})
		x.at[key] = at
	} else {
		if at == 0 {
			return false
		}
		key = cloneString(key)
		x.tree.ReplaceOrInsert(timerItem{at: at, key: key})
		x.at[key] = at
	}
	min, _ := x.tree.Min()
	return min.key == key && min.at == at
}

func (x *timerIndex) remove(key string) { x.set(key, 0) }

// due collects up to max entries whose action time is <= now and moves
// each to resendAt. It returns the keys and the timers they were due at.
func (x *timerIndex) due(now, resendAt int64, max int, out []timerItem) []timerItem {
	out = out[:0]
	x.tree.Ascend(func(it timerItem) bool {
		if it.at > now || len(out) >= max {
			return false
		}
		out = append(out, it)
		return true
	})
	for _, it := range out {
		x.tree.Delete(it)
		x.tree.ReplaceOrInsert(timerItem{at: resendAt, key: it.key})
		x.at[it.key] = resendAt
	}
	return out
}

// next returns the earliest action time, or 0 when the index is empty.
func (x *timerIndex) next() int64 {
	if it, ok := x.tree.Min(); ok {
		return it.at
	}
	return 0
}

func (x *timerIndex) len() int { return len(x.at) }

// cloneString copies a key that may alias a buffer owned by the caller
// (goka passes keys converted from record bytes; storage iterators reuse
// theirs).
func cloneString(s string) string {
	b := make([]byte, len(s))
	copy(b, s)
	return string(b)
}
