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

func TestReadsSeeBufferedWrites(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "p"), Options{MaxPending: 3})
	require.NoError(t, err)
	defer s.Close()

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
	path := filepath.Join(t.TempDir(), "p")
	s, err := Open(path, Options{MaxPending: 1000})
	require.NoError(t, err)
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

	s, err = Open(path, Options{})
	require.NoError(t, err)
	defer s.Close()
	off, err = s.GetOffset(-2)
	require.NoError(t, err)
	require.EqualValues(t, 9, off)
	got := keys(t, s, "", "")
	require.Len(t, got, 9)
	require.NotContains(t, got, "k3")
}

func TestBuilderLayout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := Builder(dir, Options{})("chime.scheduler-table", 3)
	require.NoError(t, err)
	require.NoError(t, st.Set("x", []byte("vx")))
	require.NoError(t, st.Close())
	s, err := Open(filepath.Join(dir, "chime.scheduler-table.3"), Options{})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, []string{"x"}, keys(t, s, "", ""))
}
