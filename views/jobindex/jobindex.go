// Package jobindex owns the listing index of jobs: per table partition,
// each namespace's jobs ordered newest first, with their status, and the
// count of those that have not ended (the pending-jobs quota).
//
// The scheduler keeps one beside each partition of its table (it knows a
// row before and after each change), and the API's view of the table keeps
// one per partition from the writes its storage sees; a listing merges the
// partitions' indexes (List). Memory: about 80 bytes a job plus its id.
package jobindex

import (
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/btree"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Entry is one job as listings show it.
type Entry struct {
	ID      string
	Created int64 // Unix nanoseconds
	Status  chimev1.JobStatus
}

// newer orders entries newest first; equal times by id, descending.
func newer(a, b Entry) bool {
	if a.Created != b.Created {
		return a.Created > b.Created
	}
	return a.ID > b.ID
}

// Index is one partition's jobs. Safe for concurrent use.
type Index struct {
	mu sync.RWMutex
	ns map[string]*nsJobs
}

type nsJobs struct {
	tree *btree.BTreeG[Entry]
	live int64
}

// New returns an empty index.
func New() *Index { return &Index{ns: map[string]*nsJobs{}} }

// Change records a row's change from before to after (nil: no row).
func (x *Index) Change(ns, id string, before, after *schema.JobSummary) {
	if before == nil && after == nil {
		return
	}
	if before != nil && after != nil && *before == *after {
		// Most writes of a row (a fire emitted, an attempt retried) leave
		// what listings show as it was: no descent into the tree, whose
		// cache misses cost a burst 4 % of the scheduler's CPU.
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	j := x.ns[ns]
	if j == nil {
		if after == nil {
			return
		}
		j = &nsJobs{tree: btree.NewG(16, newer)}
		x.ns[ns] = j
	}
	if before != nil && (after == nil || before.Created != after.Created) {
		if _, ok := j.tree.Delete(Entry{ID: id, Created: before.Created}); ok && before.Live() {
			j.live--
		}
		before = nil
	}
	if after != nil {
		prev, replaced := j.tree.ReplaceOrInsert(Entry{ID: id, Created: after.Created, Status: after.Status})
		if replaced && !schema.JobEnded(prev.Status) {
			j.live--
		}
		if after.Live() {
			j.live++
		}
	}
	if j.tree.Len() == 0 {
		delete(x.ns, ns)
	}
}

// Live is the namespace's jobs that have not ended.
func (x *Index) Live(ns string) int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if j := x.ns[ns]; j != nil {
		return j.live
	}
	return 0
}

// Query selects a page of a namespace's jobs.
type Query struct {
	// Statuses, if not empty, keeps only jobs in one of them.
	Statuses []chimev1.JobStatus
	// After is the last entry of the previous page (zero: the newest).
	After Cursor
	// Limit is the page size (at least 1).
	Limit int
}

func (q Query) wants(e Entry) bool {
	return len(q.Statuses) == 0 || slices.Contains(q.Statuses, e.Status)
}

// page appends up to n entries of ns after q.After that q wants.
func (x *Index) page(ns string, q Query, n int, out []Entry) []Entry {
	x.mu.RLock()
	defer x.mu.RUnlock()
	j := x.ns[ns]
	if j == nil {
		return out
	}
	pivot := Entry{ID: q.After.ID, Created: q.After.Created}
	visit := func(e Entry) bool {
		if !q.After.IsZero() && e.ID == pivot.ID && e.Created == pivot.Created {
			return true // the cursor's own entry ended the previous page
		}
		if q.wants(e) {
			out = append(out, e)
			n--
		}
		return n > 0
	}
	if q.After.IsZero() {
		j.tree.Ascend(visit)
	} else {
		j.tree.AscendGreaterOrEqual(pivot, visit)
	}
	return out
}

// List returns a page of ns's jobs across the partitions' indexes, newest
// first, and whether more follow.
func List(idxs []*Index, ns string, q Query) (page []Entry, more bool) {
	q.Limit = max(q.Limit, 1)
	var all []Entry
	for _, x := range idxs {
		all = x.page(ns, q, q.Limit+1, all)
	}
	slices.SortFunc(all, func(a, b Entry) int {
		switch {
		case newer(a, b):
			return -1
		case newer(b, a):
			return 1
		}
		return 0
	})
	if len(all) > q.Limit {
		return all[:q.Limit], true
	}
	return all, false
}

// LiveIn sums ns's live jobs over the indexes.
func LiveIn(idxs []*Index, ns string) int64 {
	var n int64
	for _, x := range idxs {
		n += x.Live(ns)
	}
	return n
}

// Cursor is a position in a listing: the last entry returned.
type Cursor struct {
	Created int64
	ID      string
}

// IsZero says the cursor is the start.
func (c Cursor) IsZero() bool { return c == Cursor{} }

// CursorAt is the cursor after e.
func CursorAt(e Entry) Cursor { return Cursor{Created: e.Created, ID: e.ID} }

// String encodes the cursor opaquely for an API answer.
func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.Created, 10) + ":" + c.ID))
}

// ErrBadCursor is ParseCursor's error.
var ErrBadCursor = errors.New("not a cursor this API returned")

// ParseCursor decodes a cursor from String ("" is the start).
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, ErrBadCursor
	}
	created, id, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(created, 10, 64)
	if !ok || err != nil || id == "" {
		return Cursor{}, ErrBadCursor
	}
	return Cursor{Created: n, ID: id}, nil
}
