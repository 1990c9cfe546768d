package diskstore

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

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
	return out
}

// open is a database in a test's temporary directory.
func open(t *testing.T, path string, o Options) *DB {
	t.Helper()
	db, err := OpenDB(path, o)
	require.NoError(t, err)
	return db
}

func TestReadsSeeBufferedWrites(t *testing.T) {
	t.Parallel()
	db := open(t, filepath.Join(t.TempDir(), "db"), Options{MaxPending: 3})
	defer db.Close()
	s := db.Store("table", 0)
	defer s.Close()
	// Another partition's rows stay out of this one's reads and iterators.
	other := db.Store("table", 1)
	require.NoError(t, other.Set("a", []byte("other")))
	require.NoError(t, other.Set("b0", []byte("vb0")))
	require.NoError(t, other.Flush())

	require.NoError(t, s.Set("a", []byte("va")))
	require.NoError(t, s.Set("b", []byte("vb")))
	// Two buffered, nothing in LevelDB yet.
	require.Len(t, s.pending, 2)
	v, err := s.Get("a")
	require.NoError(t, err)
	require.Equal(t, "va", string(v))

	require.NoError(t, s.Set("c", []byte("vc"))) // the third write flushes
	require.Empty(t, s.pending)
	require.NoError(t, s.Delete("b"))
	ok, err := s.Has("b")
	require.NoError(t, err)
	require.False(t, ok, "a buffered delete hides the stored row")
	v, err = s.Get("c")
	require.NoError(t, err)
	require.Equal(t, "vc", string(v))
	missing, err := s.Get("zz")
	require.NoError(t, err)
	require.Nil(t, missing)

	// Iterators see the buffer and never the offset.
	require.NoError(t, s.SetOffset(41))
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
}

func TestCloseKeepsEverythingAndTheOffset(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "db")
	db := open(t, path, Options{MaxPending: 1000})
	s := db.Store("table", 7)
	off, err := s.GetOffset(-2)
	require.NoError(t, err)
	require.EqualValues(t, -2, off, "no offset yet: the default")
	for i := range 10 {
		require.NoError(t, s.Set(fmt.Sprint("k", i), []byte(fmt.Sprint("vk", i))))
		require.NoError(t, s.SetOffset(int64(i)))
	}
	require.NoError(t, s.Delete("k3"))
	off, err = s.GetOffset(-2)
	require.NoError(t, err)
	require.EqualValues(t, 9, off)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "a second close is harmless")
	_, err = s.Get("k1")
	require.ErrorIs(t, err, errClosed)
	require.NoError(t, db.Close())

	db = open(t, path, Options{})
	defer db.Close()
	s = db.Store("table", 7)
	defer s.Close()
	off, err = s.GetOffset(-2)
	require.NoError(t, err)
	require.EqualValues(t, 9, off)
	got := keys(t, s, "", "")
	require.Len(t, got, 9)
	require.NotContains(t, got, "k3")
}

func TestBuilderGivesEachPartitionItsStore(t *testing.T) {
	t.Parallel()
	db := open(t, filepath.Join(t.TempDir(), "db"), Options{})
	defer db.Close()
	st, err := db.Builder()("chime.scheduler-table", 3)
	require.NoError(t, err)
	require.NoError(t, st.Set("x", []byte("vx")))
	require.NoError(t, st.Close())
	s := db.Store("chime.scheduler-table", 3)
	defer s.Close()
	require.Equal(t, []string{"x"}, keys(t, s, "", ""))
	it, err := s.Iterator()
	require.NoError(t, err)
	defer it.Release()
	require.True(t, it.Seek([]byte("x")))
	require.Equal(t, "x", string(it.Key()))
	require.Empty(t, keys(t, db.Store("chime.scheduler-table", 4), "", ""))
}
