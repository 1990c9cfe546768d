// Package jobindex owns the listing index of jobs: per table partition,
// each namespace's jobs ordered newest first, with their status, and the
// count of those that have not ended (the pending-jobs quota).
//
// chime's own jobs in a namespace (ids under schema.ReservedJobIDPrefix,
// such as the breaker's cool-off timer) are indexed too, but they are not
// the namespace's: a listing shows them only when asked (Query.Internal),
// and the live count leaves them out, so a tripped breaker neither shows
// in a client's job list nor takes a place of its quota.
//
// The scheduler keeps one beside each partition of its table (it knows a
// row before and after each change); a listing merges the partitions'
// indexes (List), and the API merges the pages of the scheduler instances
// (views/jobquery) in the same order (Compare). Memory: about 30 bytes a job plus its id,
// with no pointer for the collector to follow.
package jobindex

import (
	"encoding/base64"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

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

// Compare orders entries as listings show them (newest first, equal times
// by id, descending), for slices.SortFunc: pages of several indexes, or of
// several scheduler instances, merge into one listing with it.
func Compare(a, b Entry) int {
	switch {
	case newer(a, b):
		return -1
	case newer(b, a):
		return 1
	}
	return 0
}

// Index is one partition's jobs. Safe for concurrent use.
type Index struct {
	mu sync.Mutex // the tree's order reads the probe: even lookups write
	ns map[string]*nsJobs
}

// item is a job in a namespace's tree: its id lives in the namespace's
// arena, so items hold no pointer. With a string per item, two million
// pending jobs cost 50 B more each and every collection scanned them all.
type item struct {
	created int64
	off     uint32 // the id is ids[off:off+n]; probeOff: the probe
	n       uint8
	status  uint8
}

// probeOff marks the item a lookup builds, whose id is nsJobs.probe.
const probeOff = ^uint32(0)

// The arena is compacted when more than half of it, and at least this
// much, is ids of jobs no longer in the tree.
const minCompact = 64 << 10

type nsJobs struct {
	tree    *btree.BTreeG[item]
	ids     []byte // every id, appended as jobs are added
	garbage int    // bytes of ids whose jobs left the tree
	probe   string
	live    int64
}

func newNSJobs() *nsJobs {
	j := &nsJobs{}
	j.tree = btree.NewG(16, func(a, b item) bool {
		if a.created != b.created {
			return a.created > b.created
		}
		return j.id(a) > j.id(b)
	})
	return j
}

// id is an item's id, without copying it: only for comparisons.
func (j *nsJobs) id(it item) string {
	if it.off == probeOff {
		return j.probe
	}
	b := j.ids[it.off : it.off+uint32(it.n)]
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func (j *nsJobs) entry(it item) Entry {
	return Entry{ID: strings.Clone(j.id(it)), Created: it.created, Status: chimev1.JobStatus(it.status)}
}

// find looks the job up.
func (j *nsJobs) find(id string, created int64) (item, bool) {
	j.probe = id
	it, ok := j.tree.Get(item{created: created, off: probeOff})
	j.probe = ""
	return it, ok
}

func (j *nsJobs) remove(id string, created int64) (item, bool) {
	j.probe = id
	it, ok := j.tree.Delete(item{created: created, off: probeOff})
	j.probe = ""
	if ok {
		j.garbage += int(it.n)
		j.compact()
	}
	return it, ok
}

// put adds the job or changes its status.
func (j *nsJobs) put(id string, created int64, status chimev1.JobStatus) (prev item, replaced bool) {
	if it, ok := j.find(id, created); ok {
		next := it
		next.status = uint8(status)
		j.tree.ReplaceOrInsert(next)
		return it, true
	}
	it := item{created: created, off: uint32(len(j.ids)), n: uint8(len(id)), status: uint8(status)}
	j.ids = append(j.ids, id...)
	j.tree.ReplaceOrInsert(it)
	return item{}, false
}

// compact rewrites the arena with the ids still in the tree.
func (j *nsJobs) compact() {
	if j.garbage < minCompact || j.garbage*2 < len(j.ids) {
		return
	}
	items := make([]item, 0, j.tree.Len())
	ids := make([]byte, 0, len(j.ids)-j.garbage)
	j.tree.Ascend(func(it item) bool {
		id := j.id(it)
		it.off = uint32(len(ids))
		ids = append(ids, id...)
		items = append(items, it)
		return true
	})
	j.ids, j.garbage = ids, 0
	// The order is unchanged: the new items go in as they came out.
	j.tree.Clear(false)
	for _, it := range items {
		j.tree.ReplaceOrInsert(it)
	}
}

// internal says whether id is one of chime's own jobs.
func internal(id string) bool { return strings.HasPrefix(id, schema.ReservedJobIDPrefix) }

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
	if len(id) > math.MaxUint8 {
		return // longer than any valid job id (schema.MaxJobIDLen)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	j := x.ns[ns]
	if j == nil {
		if after == nil {
			return
		}
		j = newNSJobs()
		x.ns[ns] = j
	}
	counted := !internal(id)
	if before != nil && (after == nil || before.Created != after.Created) {
		if it, ok := j.remove(id, before.Created); ok && counted && !schema.JobEnded(chimev1.JobStatus(it.status)) {
			j.live--
		}
	}
	if after != nil {
		prev, replaced := j.put(id, after.Created, after.Status)
		if replaced && counted && !schema.JobEnded(chimev1.JobStatus(prev.status)) {
			j.live--
		}
		if counted && after.Live() {
			j.live++
		}
	}
	if j.tree.Len() == 0 {
		delete(x.ns, ns)
	}
}

// Live is the namespace's jobs that have not ended, chime's own left out.
func (x *Index) Live(ns string) int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
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
	// Internal lists chime's own jobs in the namespace too (ids under
	// schema.ReservedJobIDPrefix); without it a listing shows the
	// namespace's jobs only.
	Internal bool
}

// Wants says whether the query keeps a job in status.
func (q Query) Wants(status chimev1.JobStatus) bool {
	return len(q.Statuses) == 0 || slices.Contains(q.Statuses, status)
}

// Source is one partition's listing: an Index, or the scheduler's store.
type Source interface {
	// Page appends up to n entries of ns after q.After that q wants,
	// newest first.
	Page(ns string, q Query, n int, out []Entry) []Entry
	// Live is the namespace's jobs that have not ended, chime's own left
	// out.
	Live(ns string) int64
}

// Page implements Source.
func (x *Index) Page(ns string, q Query, n int, out []Entry) []Entry {
	x.mu.Lock()
	defer x.mu.Unlock()
	j := x.ns[ns]
	if j == nil {
		return out
	}
	visit := func(it item) bool {
		if !q.After.IsZero() && it.created == q.After.Created && j.id(it) == q.After.ID {
			return true // the cursor's own entry ended the previous page
		}
		if q.Wants(chimev1.JobStatus(it.status)) && (q.Internal || !internal(j.id(it))) {
			out = append(out, j.entry(it))
			n--
		}
		return n > 0
	}
	if q.After.IsZero() {
		j.tree.Ascend(visit)
		return out
	}
	j.probe = q.After.ID
	pivot := item{created: q.After.Created, off: probeOff}
	// The probe stays set while the tree compares against the pivot; the
	// visits compare items of the tree only.
	j.tree.AscendGreaterOrEqual(pivot, visit)
	j.probe = ""
	return out
}

// List returns a page of ns's jobs across the partitions' listings, newest
// first, and whether more follow.
func List[S Source](srcs []S, ns string, q Query) (page []Entry, more bool) {
	q.Limit = max(q.Limit, 1)
	var all []Entry
	for _, x := range srcs {
		all = x.Page(ns, q, q.Limit+1, all)
	}
	slices.SortFunc(all, Compare)
	if len(all) > q.Limit {
		return all[:q.Limit], true
	}
	return all, false
}

// LiveIn sums ns's live jobs over the partitions, chime's own left out.
func LiveIn[S Source](srcs []S, ns string) int64 {
	var n int64
	for _, x := range srcs {
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
