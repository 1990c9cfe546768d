// Package jobindex owns how listings of jobs are ordered, paged and
// merged: each namespace's jobs newest first, with their status, and the
// count of those that have not ended (the pending-jobs quota). The
// scheduler's store keeps the listing of each partition
// (processors/jobstore); a listing merges the partitions' pages (List),
// and the API merges the pages of the scheduler instances
// (views/jobquery) in the same order (Compare).
//
// chime's own jobs in a namespace (ids under schema.ReservedJobIDPrefix,
// such as the breaker's cool-off timer) are listed only when asked
// (Query.Internal), and the live count leaves them out, so a tripped
// breaker neither shows in a client's job list nor takes a place of its
// quota.
package jobindex

import (
	"encoding/base64"
	"errors"
	"slices"
	"sort"
	"strconv"
	"strings"

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

// internal says whether id is one of chime's own jobs.
func internal(id string) bool { return strings.HasPrefix(id, schema.ReservedJobIDPrefix) }

// Memory is a listing held in memory: for tests and tools that stand in
// for a scheduler. Not safe for concurrent use.
type Memory struct {
	ns     map[string]map[string]Entry
	labels map[string][]schema.Label // by ns/id
}

// NewMemory returns an empty listing.
func NewMemory() *Memory {
	return &Memory{ns: map[string]map[string]Entry{}, labels: map[string][]schema.Label{}}
}

// Change records a row's change to after (nil: no row), with its labels;
// before is not needed here, and kept so that a store's caller reads the
// same.
func (m *Memory) Change(ns, id string, _, after *schema.JobSummary, labels ...schema.Label) {
	m.labels[schema.JobKey(ns, id)] = labels
	if after == nil {
		delete(m.labels, schema.JobKey(ns, id))
		delete(m.ns[ns], id)
		if len(m.ns[ns]) == 0 {
			delete(m.ns, ns)
		}
		return
	}
	if m.ns[ns] == nil {
		m.ns[ns] = map[string]Entry{}
	}
	m.ns[ns][id] = Entry{ID: id, Created: after.Created, Status: after.Status}
}

// Live implements Source.
func (m *Memory) Live(ns string) int64 {
	var n int64
	for _, e := range m.ns[ns] {
		if !internal(e.ID) && !schema.JobEnded(e.Status) {
			n++
		}
	}
	return n
}

// Page implements Source.
func (m *Memory) Page(ns string, q Query, n int, out []Entry) []Entry {
	all := make([]Entry, 0, len(m.ns[ns]))
	for _, e := range m.ns[ns] {
		all = append(all, e)
	}
	slices.SortFunc(all, Compare)
	for _, e := range all {
		if n == 0 {
			break
		}
		if !q.After.IsZero() && !newer(Entry{ID: q.After.ID, Created: q.After.Created}, e) {
			continue
		}
		if q.Wants(e.Status) && (q.Internal || !internal(e.ID)) && hasAll(m.labels[schema.JobKey(ns, e.ID)], q.Labels) {
			out = append(out, e)
			n--
		}
	}
	return out
}

func hasAll(have, want []schema.Label) bool {
	for _, l := range want {
		if !slices.Contains(have, l) {
			return false
		}
	}
	return true
}

// Query selects a page of a namespace's jobs.
type Query struct {
	// Statuses, if not empty, keeps only jobs in one of them.
	Statuses []chimev1.JobStatus
	// Labels, if not empty, keeps only jobs that have every one of them
	// (the store intersects their indexes; their order does not matter).
	Labels []schema.Label
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

// Source is one partition's listing: the scheduler's store, or a Memory.
type Source interface {
	// Page appends up to n entries of ns after q.After that q wants,
	// newest first.
	Page(ns string, q Query, n int, out []Entry) []Entry
	// Live is the namespace's jobs that have not ended, chime's own left
	// out.
	Live(ns string) int64
}

// List returns a page of ns's jobs across the partitions' listings, newest
// first, and whether more follow.
//
// Asking every partition for a whole page would read partitions × page
// entries for one page (each a seek and more when the listing is filtered
// by labels). Jobs spread over the partitions by their keys' hash, so List
// asks each for its share of the page first, and more only of those that
// may hold entries newer than the page's end: an entry read is certain to
// be in its place once it is at least as new as the last entry read from
// every partition that may hold more (their unread entries are older than
// that). It reads about a page plus a few entries per partition.
func List[S Source](srcs []S, ns string, q Query) (page []Entry, more bool) {
	q.Limit = max(q.Limit, 1)
	want := q.Limit + 1 // one more than the page says whether more follow
	type part struct {
		after Cursor
		last  Entry
		open  bool // may hold more than was read
		ask   int  // entries to ask for in the next round
	}
	parts := make([]part, len(srcs))
	share := want/max(len(srcs), 1) + 2
	for i := range parts {
		parts[i] = part{after: q.After, open: true, ask: share}
	}
	var all []Entry
	for round := 0; ; round++ {
		for i := range parts {
			p := &parts[i]
			if !p.open || p.ask == 0 {
				continue
			}
			pq := q
			pq.After = p.after
			n := len(all)
			all = srcs[i].Page(ns, pq, p.ask, all)
			got := all[n:]
			if len(got) < p.ask {
				p.open = false
			} else {
				p.last = got[len(got)-1]
				p.after = CursorAt(p.last)
			}
			p.ask = 0
		}
		slices.SortFunc(all, Compare)
		// certain: the entries at least as new as every open partition's
		// last one.
		certain := len(all)
		for _, p := range parts {
			if p.open {
				certain = min(certain, sort.Search(len(all), func(j int) bool { return newer(p.last, all[j]) }))
			}
		}
		if certain >= want || certain == len(all) && !slices.ContainsFunc(parts, func(p part) bool { return p.open }) {
			break
		}
		// Read on from the open partitions whose last entry is newer than
		// where the page ends (all of them while fewer than a page are
		// read), twice as many as last time.
		for i := range parts {
			p := &parts[i]
			if p.open && (len(all) < want || newer(p.last, all[want-1])) {
				p.ask = share << min(round+1, 20)
			}
		}
	}
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
