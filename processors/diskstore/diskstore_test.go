package diskstore

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func open(t *testing.T, dir string, o Options) *DB {
	t.Helper()
	db, err := OpenDB(dir, o)
	require.NoError(t, err)
	return db
}

func store(t *testing.T, db *DB, partition int32) *Store {
	t.Helper()
	s, err := db.Store("table", partition)
	require.NoError(t, err)
	return s
}

// keys lists a store's rows (iteration is in disk order; sorted here),
// checking each value is "v"+key.
func keys(t *testing.T, s *Store, start, limit string) []string {
	t.Helper()
	var st, lt []byte
	if start != "" {
		st = []byte(start)
	}
	if limit != "" {
		lt = []byte(limit)
	}
	it, err := s.IteratorWithRange(st, lt)
	require.NoError(t, err)
	defer it.Release()
	var out []string
	for it.Next() {
		v, err := it.Value()
		require.NoError(t, err)
		require.Equal(t, "v"+string(it.Key()), string(v))
		out = append(out, string(it.Key()))
	}
	require.NoError(t, it.Err())
	slices.Sort(out)
	return out
}

func get(t *testing.T, s *Store, key string) string {
	t.Helper()
	v, err := s.Get(key)
	require.NoError(t, err)
	return string(v)
}

func TestReadsSeeBufferedAndAppendedWrites(t *testing.T) {
	t.Parallel()
	db := open(t, t.TempDir(), Options{MaxPending: 3})
	defer db.Close()
	s := store(t, db, 0)
	defer s.Close()
	// Another partition's rows stay out of this one's reads and iterators.
	other := store(t, db, 1)
	require.NoError(t, other.Set("a", []byte("other")))
	require.NoError(t, other.Set("b0", []byte("vb0")))
	require.NoError(t, other.Flush())

	require.NoError(t, s.Set("a", []byte("va")))
	require.NoError(t, s.Set("b", []byte("vb")))
	require.Len(t, s.pending, 2, "buffered, not appended yet")
	require.Equal(t, "va", get(t, s, "a"))

	require.NoError(t, s.Set("c", []byte("vc"))) // the third write appends
	require.Empty(t, s.pending)
	require.Equal(t, "vc", get(t, s, "c"), "read back from the segment")
	require.NoError(t, s.Delete("b"))
	ok, err := s.Has("b")
	require.NoError(t, err)
	require.False(t, ok, "a buffered delete hides the stored row")
	require.Empty(t, get(t, s, "zz"))
	require.Equal(t, "other", get(t, other, "a"))

	require.NoError(t, s.Set("d", []byte("vd")))
	tests := []struct {
		start, limit string
		want         []string
	}{
		{"", "", []string{"a", "c", "d"}},
		{"c", "", []string{"c"}}, // prefix, as goka's LevelDB storage
		{"a", "d", []string{"a", "c"}},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, keys(t, s, tt.start, tt.limit), "range [%q,%q)", tt.start, tt.limit)
	}
	require.Equal(t, []string{"b0"}, keys(t, other, "b", ""))
}

func TestCloseKeepsEverythingAndTheOffset(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := open(t, dir, Options{MaxPending: 4})
	s := store(t, db, 7)
	off, err := s.GetOffset(-2)
	require.NoError(t, err)
	require.EqualValues(t, -2, off, "no offset yet: the default")
	for i := range 10 {
		require.NoError(t, s.Set(fmt.Sprint("k", i), []byte(fmt.Sprint("vk", i))))
		require.NoError(t, s.SetOffset(int64(i)))
	}
	require.NoError(t, s.Set("k1", []byte("vk1"))) // replaced: the old record is garbage
	require.NoError(t, s.Delete("k3"))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "a second close is harmless")
	_, err = s.Get("k1")
	require.ErrorIs(t, err, errClosed)

	// The partition opened again in the same process finds its rows.
	s = store(t, db, 7)
	require.Equal(t, "vk9", get(t, s, "k9"))
	require.NoError(t, s.Close())
	require.NoError(t, db.Close())

	db = open(t, dir, Options{})
	defer db.Close()
	s = store(t, db, 7)
	defer s.Close()
	off, err = s.GetOffset(-2)
	require.NoError(t, err)
	require.EqualValues(t, 9, off)
	got := keys(t, s, "", "")
	require.Len(t, got, 9)
	require.NotContains(t, got, "k3")
	require.Empty(t, keys(t, store(t, db, 8), "", ""))
}

// Without Close (a killed process) there is no index: the next open starts
// empty, as the scheduler's local state must after an unclean stop.
func TestOpenWithoutIndexStartsEmpty(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := open(t, dir, Options{MaxPending: 1})
	s := store(t, db, 0)
	require.NoError(t, s.Set("a", []byte("va")))
	require.NoError(t, s.SetOffset(5))
	require.NoError(t, s.Close())
	db.closeFiles() // no index written: as if killed

	db = open(t, dir, Options{})
	defer db.Close()
	s = store(t, db, 0)
	require.Empty(t, keys(t, s, "", ""))
	off, _ := s.GetOffset(-1)
	require.EqualValues(t, -1, off)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1, "only the new active segment")
}

// Replaced and deleted rows are garbage; once a sealed segment is mostly
// garbage its live rows are rewritten and the file removed. Rows written
// meanwhile win over the copies.
func TestGarbageIsCollected(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := open(t, dir, Options{MaxPending: 1, SegmentSize: 4 << 10})
	s := store(t, db, 0)
	value := func(k string) []byte { return []byte("v" + k) }
	const n = 200
	for round := range 5 {
		for i := range n {
			k := fmt.Sprint("k", i)
			if round == 4 && i%2 == 1 {
				require.NoError(t, s.Delete(k))
				continue
			}
			require.NoError(t, s.Set(k, value(k)))
		}
	}
	require.NoError(t, s.Flush())
	// Rows written 5 times over into 4 KiB segments: without collection
	// there would be dozens of files.
	require.Eventually(t, func() bool {
		db.mu.Lock()
		defer db.mu.Unlock()
		var size, live int64
		for _, sg := range db.segs {
			size += sg.size
			live += sg.live
		}
		return float64(size-live) <= 0.6*float64(size)+float64(db.o.SegmentSize)
	}, 10*time.Second, 10*time.Millisecond, "garbage is collected")
	var want []string
	for i := 0; i < n; i += 2 {
		want = append(want, fmt.Sprint("k", i))
	}
	slices.Sort(want)
	require.Equal(t, want, keys(t, s, "", ""))
	for i := range n {
		k := fmt.Sprint("k", i)
		if i%2 == 0 {
			require.Equal(t, "v"+k, get(t, s, k))
		} else {
			require.Empty(t, get(t, s, k))
		}
	}
	require.NoError(t, s.Close())
	require.NoError(t, db.Close())
	db = open(t, dir, Options{})
	defer db.Close()
	require.Equal(t, want, keys(t, store(t, db, 0), "", ""), "the same after a clean reopen")
}

// Readers and the writer run concurrently with collection.
func TestConcurrentReadersAndCollection(t *testing.T) {
	t.Parallel()
	db := open(t, t.TempDir(), Options{MaxPending: 8, SegmentSize: 8 << 10})
	defer db.Close()
	s := store(t, db, 0)
	defer s.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := range 50 {
					k := fmt.Sprint("k", i)
					if v, err := s.Get(k); err != nil || (v != nil && string(v) != "v"+k) {
						t.Errorf("get %s: %q %v", k, v, err)
						return
					}
				}
			}
		}()
	}
	for range 200 {
		for i := range 50 {
			k := fmt.Sprint("k", i)
			require.NoError(t, s.Set(k, []byte("v"+k)))
		}
	}
	close(stop)
	wg.Wait()
	require.Len(t, keys(t, s, "", ""), 50)
}

func TestBuilderGivesEachPartitionItsStore(t *testing.T) {
	t.Parallel()
	db := open(t, t.TempDir(), Options{})
	defer db.Close()
	st, err := db.Builder()("chime.scheduler-table", 3)
	require.NoError(t, err)
	require.NoError(t, st.Set("x", []byte("vx")))
	require.NoError(t, st.Close())
	s, err := db.Store("chime.scheduler-table", 3)
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, "vx", get(t, s, "x"))
	other, err := db.Store("chime.scheduler-table", 4)
	require.NoError(t, err)
	require.Empty(t, keys(t, other, "", ""))
	it, err := s.Iterator()
	require.NoError(t, err)
	defer it.Release()
	require.False(t, it.Seek([]byte("x")), "rows are not in key order: no seek")
}
