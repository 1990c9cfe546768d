package memstore

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func keysOf(t *testing.T, s *Store, start, limit string) []string {
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
	return out
}

func TestStore(t *testing.T) {
	t.Parallel()
	s := New()
	for _, k := range []string{"c", "a", "b", "d"} {
		require.NoError(t, s.Set(k, []byte("v"+k)))
	}
	require.NoError(t, s.Set("a", []byte("va"))) // overwrite keeps one key
	require.NoError(t, s.Delete("d"))
	require.NoError(t, s.Delete("zz"))
	require.Error(t, s.Set("x", nil))

	tests := []struct {
		start, limit string
		want         []string
	}{
		{"", "", []string{"a", "b", "c"}},
		{"b", "", []string{"b", "c"}},
		{"", "c", []string{"a", "b"}},
		{"b", "c", []string{"b"}},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, keysOf(t, s, tt.start, tt.limit), "range [%q,%q)", tt.start, tt.limit)
	}
	ok, _ := s.Has("b")
	require.True(t, ok)
	require.Equal(t, 3, s.Len())

	off, _ := s.GetOffset(-2)
	require.EqualValues(t, -2, off)
	require.NoError(t, s.SetOffset(42))
	off, _ = s.GetOffset(-2)
	require.EqualValues(t, 42, off)

	it, _ := s.Iterator()
	require.True(t, it.Seek([]byte("bb")))
	require.Equal(t, "c", string(it.Key()))
	require.False(t, it.Next())
}

func TestIteratorIsASnapshotOfKeys(t *testing.T) {
	t.Parallel()
	s := New()
	for i := range 100 {
		require.NoError(t, s.Set(fmt.Sprintf("k%03d", i), []byte("x")))
	}
	it, _ := s.Iterator()
	require.NoError(t, s.Set("k999", []byte("x")))
	n := 0
	for it.Next() {
		n++
	}
	require.Equal(t, 100, n)
}

// BenchmarkSet shows inserts stay O(log n): goka's memory storage re-sorts
// every key on every insert.
func BenchmarkSet(b *testing.B) {
	s := New()
	v := []byte("value")
	for i := 0; b.Loop(); i++ {
		_ = s.Set(fmt.Sprintf("namespace/job-%09d", i), v)
	}
}
