package jobstore

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/schema/chimev1"
)

// filterReady waits until partition p's key filter answers (its scan of
// the rows the database held has ended) with room for at least n keys.
func filterReady(t *testing.T, db *DB, p int32, n uint) *keyFilter {
	t.Helper()
	k := db.keyFilter(p)
	kafkatest.WaitFor(t, 20*time.Second, "the key filter", func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.ready && !k.building && k.capacity >= n
	})
	return k
}

// TestKeyFilterKnowsEveryStoredRow: rows stored in an earlier run, and
// rows written while the filter's scan runs and after it, are all read
// back; keys never written are not looked up once the filter is ready.
// The filter grows (it is sized for 64 keys here) as rows are added, and
// never loses one.
func TestKeyFilterKnowsEveryStoredRow(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "db")
	small := func(o *Options) { o.AutoConfirm = true }
	value := row(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, t0, t0.Add(time.Hour))

	db := open(t, dir, small)
	part := recovered(t, db, 2)
	for i := range 3000 {
		require.NoError(t, part.Set(fmt.Sprintf("ns/old-%d", i), value))
	}
	require.NoError(t, part.flush())
	require.NoError(t, db.Close())

	db = open(t, dir, small)
	t.Cleanup(func() { _ = db.Close() })
	db.filterMin = 64
	part = recovered(t, db, 2)
	rng := rand.New(rand.NewPCG(3, 4))
	want := map[string]bool{}
	for i := range 3000 {
		want[fmt.Sprintf("ns/old-%d", i)] = true
	}
	check := func(key string) {
		t.Helper()
		got, err := part.Get(key)
		require.NoError(t, err)
		require.Equal(t, want[key], got != nil, "row %s", key)
		got, err = db.View(2).Get(key)
		require.NoError(t, err)
		require.Equal(t, want[key], got != nil, "row %s read by another goroutine", key)
	}
	// While the scan of the 3,000 rows runs, and after: writes, deletes,
	// flushes and reads, every one checked against what was written.
	for i := range 6000 {
		key := fmt.Sprintf("ns/new-%d", rng.IntN(2000))
		if rng.IntN(2) == 0 {
			key = fmt.Sprintf("ns/old-%d", rng.IntN(3000))
		}
		switch rng.IntN(6) {
		case 0:
			require.NoError(t, part.Delete(key))
			delete(want, key)
		case 1, 2:
			require.NoError(t, part.Set(key, value))
			want[key] = true
		default:
			check(key)
		}
		if i%500 == 499 {
			require.NoError(t, part.flush())
		}
	}
	require.NoError(t, part.flush())
	k := filterReady(t, db, 2, 3000)
	for i := range 3000 {
		check(fmt.Sprintf("ns/old-%d", i))
	}
	for i := range 2000 {
		check(fmt.Sprintf("ns/new-%d", i))
	}
	// Keys never written: the filter answers for nearly all of them.
	looked := 0
	for i := range 1000 {
		key := fmt.Sprintf("other/%d", i)
		if k.mayHold(key) {
			looked++
		}
		check(key)
	}
	require.Less(t, looked, 50, "keys the filter could not rule out, of 1000 never written")
}

// TestKeyFilterIsPartitionsOwn: a filter outlives goka's storage of its
// partition (made anew at each rebalance), and one partition's rows do not
// make another's keys look stored.
func TestKeyFilterIsPartitionsOwn(t *testing.T) {
	t.Parallel()
	db := open(t, "", func(o *Options) { o.AutoConfirm = true })
	t.Cleanup(func() { _ = db.Close() })
	value := row(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, t0, t0.Add(time.Hour))
	part := recovered(t, db, 0)
	require.NoError(t, part.Set("ns/a", value))
	require.NoError(t, part.flush())
	require.NoError(t, part.Close())

	again := recovered(t, db, 0)
	require.Same(t, part.keys, again.keys)
	got, err := again.Get("ns/a")
	require.NoError(t, err)
	require.NotNil(t, got)
	other := filterReady(t, db, 1, 0)
	require.False(t, other.mayHold("ns/a"))
	require.True(t, filterReady(t, db, 0, 0).mayHold("ns/a"))
}
