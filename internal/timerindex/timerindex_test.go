package timerindex

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTimerIndex(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ops  func(x *Index)
		now  int64
		want []string
		left int
	}{
		{
			name: "due in timer order",
			ops: func(x *Index) {
				x.Set("b", 20)
				x.Set("a", 10)
				x.Set("c", 30)
			},
			now: 25, want: []string{"a", "b"}, left: 3,
		},
		{
			name: "upsert is idempotent and moves the entry",
			ops: func(x *Index) {
				x.Set("a", 10)
				x.Set("a", 10)
				x.Set("a", 40)
				x.Set("b", 5)
			},
			now: 25, want: []string{"b"}, left: 2,
		},
		{
			name: "zero removes",
			ops: func(x *Index) {
				x.Set("a", 10)
				x.Set("a", 0)
				x.Set("b", 0)
				x.Remove("c")
			},
			now: 25, want: nil, left: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			x := New()
			tt.ops(x)
			var got []string
			for _, it := range x.Due(tt.now, tt.now+100, 100, nil) {
				got = append(got, it.Key)
			}
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.left, x.Len())
			require.Equal(t, tt.left, x.tree.Len())
		})
	}
}

func TestTimerIndexResend(t *testing.T) {
	t.Parallel()
	x := New()
	x.Set("a", 10)
	require.Len(t, x.Due(10, 110, 10, nil), 1)
	// Sent: not due again until the resend time, unless the row changes.
	require.Empty(t, x.Due(50, 150, 10, nil))
	require.EqualValues(t, 110, x.Next())
	require.Len(t, x.Due(110, 210, 10, nil), 1)
	x.Set("a", 500)
	require.Empty(t, x.Due(300, 400, 10, nil))
	require.EqualValues(t, 500, x.Next())
}

func TestTimerIndexEarliest(t *testing.T) {
	t.Parallel()
	x := New()
	require.True(t, x.Set("a", 100))
	require.False(t, x.Set("b", 200))
	require.True(t, x.Set("c", 50))
	require.False(t, x.Set("c", 50))
}

func TestTimerIndexBatchBound(t *testing.T) {
	t.Parallel()
	x := New()
	for i := range 100 {
		x.Set(fmt.Sprintf("k%03d", i), int64(i+1))
	}
	require.Len(t, x.Due(1000, 2000, 30, nil), 30)
	require.Len(t, x.Due(1000, 2000, 100, nil), 70)
	require.Empty(t, x.Due(1000, 2000, 100, nil))
	require.Equal(t, 100, x.Len())
}

// BenchmarkTimerIndexMemory reports index bytes per pending timer.
func BenchmarkTimerIndexMemory(b *testing.B) {
	for range b.N {
		b.StopTimer()
		x := New()
		b.StartTimer()
		for i := range 100_000 {
			x.Set(fmt.Sprintf("namespace-%02d/job-%08d", i%50, i), int64(i))
		}
	}
}

// Removed keys are garbage in the arena until it is rewritten; the keys
// left come out intact.
func TestTimerIndexCompactsKeys(t *testing.T) {
	t.Parallel()
	x := New()
	const n = 100_000
	for i := range n {
		x.Set(fmt.Sprintf("namespace-%02d/job-%08d", i%50, i), int64(i+1))
	}
	before := len(x.keys)
	for i := range n {
		if i%10 != 0 {
			x.Remove(fmt.Sprintf("namespace-%02d/job-%08d", i%50, i))
		}
	}
	require.LessOrEqual(t, len(x.keys), before/2, "the arena was rewritten")
	require.Equal(t, n/10, x.Len())
	got := x.Due(n+1, n+100, n, nil)
	require.Len(t, got, n/10)
	for j, it := range got {
		i := j * 10
		require.Equal(t, fmt.Sprintf("namespace-%02d/job-%08d", i%50, i), it.Key)
		require.EqualValues(t, i+1, it.At)
	}
}
