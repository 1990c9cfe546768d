package jobindex

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

const (
	scheduled = chimev1.JobStatus_JOB_STATUS_SCHEDULED
	paused    = chimev1.JobStatus_JOB_STATUS_PAUSED
	cancelled = chimev1.JobStatus_JOB_STATUS_CANCELLED
)

func sum(created int64, st chimev1.JobStatus) *schema.JobSummary {
	return &schema.JobSummary{Created: created, Status: st}
}

// TestPagesCoverEveryJobOnce: pages of any size, across partitions and
// with equal creation times, list each job once, newest first.
func TestPagesCoverEveryJobOnce(t *testing.T) {
	t.Parallel()
	idxs := []*Memory{NewMemory(), NewMemory(), NewMemory()}
	var want []string
	for i := 29; i >= 0; i-- {
		want = append(want, fmt.Sprintf("j%02d", i))
	}
	for i := range 30 {
		idxs[i%3].Change("ns", fmt.Sprintf("j%02d", i), nil, sum(int64(i/2), scheduled)) // pairs share a time
		idxs[i%3].Change("other", fmt.Sprintf("o%d", i), nil, sum(int64(i), scheduled))
	}
	for _, limit := range []int{1, 2, 7, 30, 100} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			t.Parallel()
			var got []string
			q := Query{Limit: limit}
			for range 40 {
				page, more := List(idxs, "ns", q)
				for _, e := range page {
					got = append(got, e.ID)
				}
				if !more {
					break
				}
				c, err := ParseCursor(CursorAt(page[len(page)-1]).String())
				require.NoError(t, err)
				q.After = c
			}
			require.Equal(t, want, got)
		})
	}
}

// TestStatusAndLiveCount: changes move a job between statuses; the filter
// and the live count follow, and a removed job is gone.
func TestStatusAndLiveCount(t *testing.T) {
	t.Parallel()
	x := NewMemory()
	x.Change("ns", "a", nil, sum(1, scheduled))
	x.Change("ns", "b", nil, sum(2, scheduled))
	x.Change("ns", "c", nil, sum(3, scheduled))
	require.EqualValues(t, 3, x.Live("ns"))
	x.Change("ns", "b", sum(2, scheduled), sum(2, paused))
	x.Change("ns", "c", sum(3, scheduled), sum(3, cancelled))
	require.EqualValues(t, 2, x.Live("ns"), "paused counts, cancelled does not")
	x.Change("ns", "c", sum(3, cancelled), sum(3, cancelled))
	require.EqualValues(t, 2, x.Live("ns"), "a repeated change")
	page, more := List([]*Memory{x}, "ns", Query{Limit: 10, Statuses: []chimev1.JobStatus{paused, cancelled}})
	require.False(t, more)
	require.Equal(t, []Entry{{ID: "c", Created: 3, Status: cancelled}, {ID: "b", Created: 2, Status: paused}}, page)
	x.Change("ns", "a", sum(1, scheduled), sum(5, scheduled)) // re-created later
	page, _ = List([]*Memory{x}, "ns", Query{Limit: 1})
	require.Equal(t, "a", page[0].ID)
	require.EqualValues(t, 2, x.Live("ns"))
	x.Change("ns", "a", sum(5, scheduled), nil)
	x.Change("ns", "b", sum(2, paused), nil)
	x.Change("ns", "c", sum(3, cancelled), nil)
	require.Zero(t, x.Live("ns"))
	require.Empty(t, x.ns, "an empty namespace is dropped")
}

// TestInternalJobs: chime's own jobs in a namespace (ids under
// schema.ReservedJobIDPrefix, such as the breaker's cool-off timer) are
// not the namespace's: a listing shows them only when asked for, and the
// live count behind the pending-jobs quota never counts them, whatever
// their status does.
func TestInternalJobs(t *testing.T) {
	t.Parallel()
	coolOff := schema.ReservedJobIDPrefix + "breaker-cooloff"
	idxs := []*Memory{NewMemory(), NewMemory()}
	idxs[0].Change("ns", "a", nil, sum(1, scheduled))
	idxs[1].Change("ns", coolOff, nil, sum(2, scheduled))
	idxs[0].Change("ns", "b", nil, sum(3, paused))
	idxs[1].Change("other", coolOff, nil, sum(4, scheduled))

	tests := []struct {
		name     string
		q        Query
		want     []string
		wantMore bool
	}{
		{name: "the namespace's jobs", q: Query{Limit: 10}, want: []string{"b", "a"}},
		{name: "internal ones too", q: Query{Limit: 10, Internal: true}, want: []string{"b", coolOff, "a"}},
		{name: "a full page is not made up of internal jobs", q: Query{Limit: 1, After: Cursor{Created: 3, ID: "b"}}, want: []string{"a"}},
		{name: "internal ones page like the rest", q: Query{Limit: 1, Internal: true, After: Cursor{Created: 3, ID: "b"}}, want: []string{coolOff}, wantMore: true},
		{name: "by status", q: Query{Limit: 10, Statuses: []chimev1.JobStatus{scheduled}}, want: []string{"a"}},
		{name: "by status, internal too", q: Query{Limit: 10, Statuses: []chimev1.JobStatus{scheduled}, Internal: true}, want: []string{coolOff, "a"}},
		{name: "a namespace with internal jobs only", q: Query{Limit: 10}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns := "ns"
			if tt.want == nil {
				ns = "other"
			}
			page, more := List(idxs, ns, tt.q)
			var got []string
			for _, e := range page {
				got = append(got, e.ID)
			}
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.wantMore, more)
		})
	}

	t.Run("live count", func(t *testing.T) {
		t.Parallel()
		x := NewMemory()
		x.Change("ns", "a", nil, sum(1, scheduled))
		steps := []struct {
			before, after *schema.JobSummary
		}{
			{nil, sum(2, scheduled)},               // armed
			{sum(2, scheduled), sum(2, cancelled)}, // fired, ended
			{sum(2, cancelled), sum(5, scheduled)}, // re-armed at the next trip
			{sum(5, scheduled), sum(5, paused)},
			{sum(5, paused), nil}, // removed
		}
		for i, st := range steps {
			x.Change("ns", coolOff, st.before, st.after)
			require.EqualValues(t, 1, x.Live("ns"), "step %d: only a counts", i)
			require.EqualValues(t, 1, LiveIn([]*Memory{x}, "ns"))
		}
		x.Change("other", coolOff, nil, sum(1, scheduled))
		require.Zero(t, x.Live("other"))
	})
}

func TestParseCursor(t *testing.T) {
	t.Parallel()
	c := Cursor{Created: 1764000000000000000, ID: "job:with:colons"}
	got, err := ParseCursor(c.String())
	require.NoError(t, err)
	require.Equal(t, c, got)
	for _, bad := range []string{"!!", "bm9jb2xvbg", "MTox"[:3], "YWJjOmRlZg"} {
		_, err := ParseCursor(bad)
		require.ErrorIs(t, err, ErrBadCursor, bad)
	}
}

// BenchmarkStatusChange is a fire's path through the index: a job of a
// namespace with 100k jobs changes status and back.
func BenchmarkStatusChange(b *testing.B) {
	x := NewMemory()
	const n = 100_000
	for i := range n {
		x.Change("ns", "job-"+strconv.Itoa(i), nil, sum(int64(i), chimev1.JobStatus_JOB_STATUS_SCHEDULED))
	}
	sched, firing := sum(0, chimev1.JobStatus_JOB_STATUS_SCHEDULED), sum(0, chimev1.JobStatus_JOB_STATUS_COMPLETED)
	b.ResetTimer()
	for i := range b.N {
		j := i % n
		id := "job-" + strconv.Itoa(j)
		sched.Created, firing.Created = int64(j), int64(j)
		x.Change("ns", id, sched, sched) // a fire that changes no status
		x.Change("ns", id, sched, firing)
		x.Change("ns", id, firing, sched)
	}
}

// TestListReadsSharesYetListsExactly: List, which asks each partition for
// its share of a page first, lists exactly what reading a whole page from
// every partition lists, however the jobs are spread (evenly, all in one
// partition, a few in some) and filtered, page after page.
func TestListReadsSharesYetListsExactly(t *testing.T) {
	t.Parallel()
	naive := func(srcs []*Memory, q Query) ([]Entry, bool) {
		var all []Entry
		for _, x := range srcs {
			all = x.Page("ns", q, q.Limit+1, all)
		}
		slices.SortFunc(all, Compare)
		if len(all) > q.Limit {
			return all[:q.Limit], true
		}
		return all, false
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 200 {
		parts := make([]*Memory, 1+rng.IntN(8))
		for i := range parts {
			parts[i] = NewMemory()
		}
		skew := rng.IntN(3) // 0: even, 1: mostly one partition, 2: a few partitions
		for j := range rng.IntN(300) {
			p := rng.IntN(len(parts))
			switch {
			case skew == 1 && rng.IntN(10) > 0:
				p = 0
			case skew == 2:
				p = rng.IntN(min(2, len(parts)))
			}
			st := []chimev1.JobStatus{scheduled, paused, cancelled}[rng.IntN(3)]
			parts[p].Change("ns", "j"+strconv.Itoa(j), nil, sum(int64(rng.IntN(50)), st))
		}
		q := Query{Limit: 1 + rng.IntN(60)}
		if rng.IntN(3) == 0 {
			q.Statuses = []chimev1.JobStatus{paused}
		}
		for range 400 {
			got, gotMore := List(parts, "ns", q)
			want, wantMore := naive(parts, q)
			require.Equal(t, want, got, "trial %d", trial)
			require.Equal(t, wantMore, gotMore, "trial %d", trial)
			if !gotMore {
				break
			}
			q.After = CursorAt(got[len(got)-1])
		}
	}
}

// countingSource counts the entries a listing reads.
type countingSource struct {
	*Memory
	read *int
}

func (c countingSource) Page(ns string, q Query, n int, out []Entry) []Entry {
	before := len(out)
	out = c.Memory.Page(ns, q, n, out)
	*c.read += len(out) - before
	return out
}

// TestListReadsAboutAPage: over 24 partitions holding jobs spread by their
// keys, a page of 50 reads about 50 entries and a few per partition (160),
// not 24 × 51.
func TestListReadsAboutAPage(t *testing.T) {
	t.Parallel()
	read := 0
	parts := make([]countingSource, 24)
	for i := range parts {
		parts[i] = countingSource{NewMemory(), &read}
	}
	for j := range 10_000 {
		id := "j" + strconv.Itoa(j)
		parts[schema.PartitionOf(schema.JobKey("ns", id), 24)].Change("ns", id, nil, sum(int64(j), scheduled))
	}
	page, more := List(parts, "ns", Query{Limit: 50})
	require.Len(t, page, 50)
	require.True(t, more)
	require.Less(t, read, 24*51/5, "entries read for a page of 50: a fifth of asking every partition for a page, at most")
}
