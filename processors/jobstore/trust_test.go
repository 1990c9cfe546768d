package jobstore

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/internal/clocktest"
	"github.com/chime-sched/chime/schema/chimev1"
)

// The store must never disagree with the changelog: these tests hold it to
// what it mirrors, where it stands, and the order of its writes.

var sched = chimev1.JobStatus_JOB_STATUS_SCHEDULED

// withRow returns a store holding ns/a in partition 0 at offset 7,
// recorded as a copy of m.
func withRow(t *testing.T, dir string, m Mirror, bounds LogBounds, mutate ...func(*Options)) *DB {
	t.Helper()
	db := open(t, dir, mutate...)
	require.NoError(t, db.Verify(m, bounds))
	part := db.Partition(0)
	require.NoError(t, part.Open())
	require.NoError(t, part.Set("ns/a", row(t, sched, t0, t0.Add(time.Hour))))
	require.NoError(t, part.SetOffset(7))
	require.NoError(t, part.MarkRecovered())
	require.NoError(t, part.Close())
	return db
}

func fixed(start, end int64) LogBounds {
	return func(int32) (int64, int64, error) { return start, end, nil }
}

// hasRow opens partition 0 as goka would (GetOffset first) and says
// whether ns/a is still there.
func hasRow(t *testing.T, db *DB) (offset int64, ok bool) {
	t.Helper()
	part := db.Partition(0)
	require.NoError(t, part.Open())
	off, err := part.GetOffset(-2)
	require.NoError(t, err)
	v, err := part.Get("ns/a")
	require.NoError(t, err)
	require.NoError(t, part.Close())
	return off, v != nil
}

// TestStoreRebuiltForAnotherChangelog: a store built from one changelog
// is wiped when the processor starts on another (the topic created again,
// another cluster, prefix or partition count), and kept for the same one.
func TestStoreRebuiltForAnotherChangelog(t *testing.T) {
	t.Parallel()
	m := Mirror{Cluster: "c1", Topic: "chime.scheduler-table", TopicID: "00ff", Partitions: 8}
	for _, tc := range []struct {
		name string
		now  Mirror
		kept bool
	}{
		{"same", m, true},
		{"topic created again", Mirror{Cluster: "c1", Topic: m.Topic, TopicID: "0100", Partitions: 8}, false},
		{"another cluster", Mirror{Cluster: "c2", Topic: m.Topic, TopicID: "00ff", Partitions: 8}, false},
		{"another prefix", Mirror{Cluster: "c1", Topic: "other.scheduler-table", TopicID: "00ff", Partitions: 8}, false},
		{"another partition count", Mirror{Cluster: "c1", Topic: m.Topic, TopicID: "00ff", Partitions: 16}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "db")
			db := withRow(t, dir, m, nil)
			require.NoError(t, db.Close())
			db = open(t, dir)
			t.Cleanup(func() { _ = db.Close() })
			require.NoError(t, db.Verify(tc.now, nil))
			_, ok := hasRow(t, db)
			require.Equal(t, tc.kept, ok)
		})
	}
}

// TestStoreOfAnEarlierLayoutIsRebuilt: a store an earlier version wrote
// (its keys in another layout, without an index this version reads) is
// rebuilt from the changelog, so that its indexes are whole.
func TestStoreOfAnEarlierLayoutIsRebuilt(t *testing.T) {
	t.Parallel()
	m := Mirror{Cluster: "c", Topic: "t", Partitions: 1}
	dir := filepath.Join(t.TempDir(), "db")
	db := withRow(t, dir, m, nil)
	earlier, err := json.Marshal(m) // Layout 0: before it was recorded
	require.NoError(t, err)
	require.NoError(t, db.pdb.Set([]byte{kindMirror}, earlier, pebble.Sync))
	require.NoError(t, db.Close())
	db = open(t, dir)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, db.Verify(m, nil))
	_, ok := hasRow(t, db)
	require.False(t, ok, "rebuilt")
}

// TestStoreThatCannotSayWhatItMirrorsIsRebuilt: rows from a store with no
// record of its changelog (an earlier version's) are not served.
func TestStoreThatCannotSayWhatItMirrorsIsRebuilt(t *testing.T) {
	t.Parallel()
	db := open(t, "")
	t.Cleanup(func() { _ = db.Close() })
	part := db.Partition(0)
	require.NoError(t, part.Open())
	require.NoError(t, part.Set("ns/a", row(t, sched, t0, t0.Add(time.Hour))))
	require.NoError(t, part.SetOffset(7))
	require.NoError(t, part.MarkRecovered())
	require.NoError(t, part.Close())
	require.NoError(t, db.Verify(Mirror{Cluster: "c", Topic: "t", Partitions: 1}, nil))
	_, ok := hasRow(t, db)
	require.False(t, ok)
}

// TestCheckpointOutsideTheLogIsRebuilt: a stored offset at or past the
// changelog's end (the topic was emptied or replaced, goka would warn and
// carry on, or fail with "delete your local cache") or before its start
// (records in between are gone) makes the partition start over.
func TestCheckpointOutsideTheLogIsRebuilt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		start, end int64
		kept       bool
	}{
		{"inside", 0, 8, true},
		{"at the end", 0, 7, false},
		{"log emptied", 0, 0, false},
		{"start past it", 9, 20, false},
		{"start right after it", 8, 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := Mirror{Cluster: "c", Topic: "t", Partitions: 1}
			db := withRow(t, "", m, fixed(tc.start, tc.end))
			t.Cleanup(func() { _ = db.Close() })
			off, ok := hasRow(t, db)
			require.Equal(t, tc.kept, ok)
			if tc.kept {
				require.EqualValues(t, 7, off)
			} else {
				require.EqualValues(t, -2, off, "recovered from the start of the changelog")
			}
		})
	}
}

// TestAgeCountsFromWhenLastHeld: a partition held all along, though
// quiet, is not rebuilt; one not held for longer than MaxCheckpointAge is,
// and is removed from disk meanwhile.
func TestAgeCountsFromWhenLastHeld(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(t0)
	db := open(t, "", func(o *Options) { o.Now = clock.Now })
	t.Cleanup(func() { _ = db.Close() })
	part := db.Partition(0)
	require.NoError(t, part.Open())
	require.NoError(t, part.Set("ns/a", row(t, sched, t0, t0.Add(time.Hour))))
	require.NoError(t, part.SetOffset(7))
	require.NoError(t, part.MarkRecovered())
	for range 30 {
		clock.Advance(time.Hour)
		require.NoError(t, part.touch(), "the flusher records it is held")
	}
	require.NoError(t, part.Close())
	clock.Advance(19 * time.Hour)
	off, ok := hasRow(t, db)
	require.True(t, ok, "quiet for 49 h, held until 19 h ago")
	require.EqualValues(t, 7, off)

	clock.Advance(2 * time.Hour)
	require.NoError(t, db.removeAbandoned())
	v, err := get(db.pdb, rowKey(0, "ns/a"))
	require.NoError(t, err)
	require.Nil(t, v, "not held for 21 h: removed")
}

// TestFailedOrReorderedWritesAreNotApplied: each write is confirmed by its
// own record. A failed record is never taken as stored (not even when a
// later write of the same key is), records out of order or with another
// writer's in between are not applied, and the partition then refuses
// writes until it is recovered: the database stays a prefix of the
// changelog.
func TestFailedOrReorderedWritesAreNotApplied(t *testing.T) {
	t.Parallel()
	a1 := row(t, sched, t0, t0.Add(time.Hour))
	a2 := row(t, sched, t0, t0.Add(2*time.Hour))
	b := row(t, sched, t0, t0.Add(3*time.Hour))
	for _, tc := range []struct {
		name string
		// run writes and confirms; the changelog's end was 10 at recovery.
		run func(t *testing.T, part *Partition)
		// applied are the rows the database may hold after, and the offset.
		applied map[string][]byte
		offset  int64
	}{
		{
			name: "failed, then the same key stored",
			run: func(t *testing.T, part *Partition) {
				w1 := set(t, part, "ns/a", a1)
				w2 := set(t, part, "ns/a", a2)
				w1.Failed(errors.New("broker down"))
				w2.Stored(10)
			},
			applied: map[string][]byte{}, offset: -1,
		},
		{
			name: "reordered",
			run: func(t *testing.T, part *Partition) {
				wa := set(t, part, "ns/a", a1)
				wb := set(t, part, "ns/b", b)
				wa.Stored(11)
				wb.Stored(10)
			},
			applied: map[string][]byte{}, offset: -1,
		},
		{
			name: "another writer in between",
			run: func(t *testing.T, part *Partition) {
				wa := set(t, part, "ns/a", a1)
				wb := set(t, part, "ns/b", b)
				wa.Stored(10)
				wb.Stored(12) // 11 is a zombie owner's
			},
			applied: map[string][]byte{"ns/a": a1}, offset: 10,
		},
		{
			name: "in order",
			run: func(t *testing.T, part *Partition) {
				wa := set(t, part, "ns/a", a1)
				wb := set(t, part, "ns/b", b)
				wa.Stored(10)
				wb.Stored(11)
			},
			applied: map[string][]byte{"ns/a": a1, "ns/b": b}, offset: 11,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := open(t, "")
			t.Cleanup(func() { _ = db.Close() })
			require.NoError(t, db.Verify(Mirror{Cluster: "c", Topic: "t", Partitions: 1}, fixed(0, 10)))
			part := recovered(t, db, 0)
			tc.run(t, part)
			require.NoError(t, part.flush())
			for _, key := range []string{"ns/a", "ns/b"} {
				v, err := get(db.pdb, rowKey(0, key))
				require.NoError(t, err)
				require.Equal(t, tc.applied[key], v, key)
			}
			cp, err := get(db.pdb, prefix(kindOffset, 0, 0))
			require.NoError(t, err)
			if tc.offset < 0 {
				require.Nil(t, cp)
			} else {
				off, _, ok := parseCheckpoint(cp)
				require.True(t, ok)
				require.Equal(t, tc.offset, off)
			}
			if len(tc.applied) < 2 {
				require.Error(t, db.Health())
				require.Error(t, part.Set("ns/c", b), "the partition takes no more writes")
			} else {
				require.NoError(t, db.Health())
			}
		})
	}
}

// TestHeldWritesAreBounded: writes the store cannot apply are held up to
// MaxHeld, then refused (the processor fails and recovers) instead of
// growing without bound while the scheduler says it is ready.
func TestHeldWritesAreBounded(t *testing.T) {
	t.Parallel()
	db := open(t, "", func(o *Options) { o.MaxHeld = 3 })
	t.Cleanup(func() { _ = db.Close() })
	part := recovered(t, db, 0)
	for i := range 3 {
		set(t, part, "ns/"+string(rune('a'+i)), row(t, sched, t0, t0))
	}
	require.NoError(t, db.Health())
	require.ErrorContains(t, part.Set("ns/d", row(t, sched, t0, t0)), "3 writes are held in memory")
	require.Error(t, db.Health())
}

// TestOpenFailureIsNotAWipe: only a store that is unreadable is wiped; a
// failure to open it for another reason is an error that names it.
func TestOpenFailureIsNotAWipe(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "db")
	require.NoError(t, os.WriteFile(dir, []byte("a file where the store's directory should be"), 0o600))
	_, err := Open(Options{Dir: dir})
	require.Error(t, err)
	raw, rerr := os.ReadFile(dir)
	require.NoError(t, rerr)
	require.Contains(t, string(raw), "a file where", "left as it was")
}

// TestReadsSeeWritesBeforeTheyAreApplied: listings and live counts show a
// write at once, before Kafka confirmed it (read-your-writes), and a View
// reads the database alone once the partition's storage is closed.
func TestReadsSeeWritesBeforeTheyAreApplied(t *testing.T) {
	t.Parallel()
	db := open(t, "")
	t.Cleanup(func() { _ = db.Close() })
	part := recovered(t, db, 0)
	wa := set(t, part, "ns/a", row(t, sched, t0, t0))
	set(t, part, "ns/b", row(t, sched, t0.Add(time.Second), t0))
	require.EqualValues(t, 2, part.Live("ns"))
	var ids []string
	require.NoError(t, db.View(0).List("ns", nil, 0, "", func(l Listed) bool { ids = append(ids, l.ID); return true }))
	require.Equal(t, []string{"b", "a"}, ids)
	n, err := db.View(0).Live("ns")
	require.NoError(t, err)
	require.EqualValues(t, 2, n)

	set(t, part, "ns/a", row(t, chimev1.JobStatus_JOB_STATUS_CANCELLED, t0, time.Time{}))
	require.EqualValues(t, 1, part.Live("ns"), "a cancel counts at once")
	wa.Stored(0)
	require.NoError(t, part.flush())
	require.EqualValues(t, 1, part.Live("ns"))
	require.NoError(t, part.Close())
	v, err := db.View(0).Get("ns/a")
	require.NoError(t, err)
	require.NotNil(t, v, "the applied write, read from the database")
	v, err = db.View(0).Get("ns/b")
	require.NoError(t, err)
	require.Nil(t, v, "never stored: gone with the storage")
}
