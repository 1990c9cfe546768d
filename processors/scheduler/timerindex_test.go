package scheduler

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTimerIndex(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ops  func(x *timerIndex)
		now  int64
		want []string
		left int
	}{
		{
			name: "due in timer order",
			ops: func(x *timerIndex) {
				x.set("b", 20)
				x.set("a", 10)
				x.set("c", 30)
			},
			now: 25, want: []string{"a", "b"}, left: 3,
		},
		{
			name: "upsert is idempotent and moves the entry",
			ops: func(x *timerIndex) {
				x.set("a", 10)
				x.set("a", 10)
				x.set("a", 40)
				x.set("b", 5)
			},
			now: 25, want: []string{"b"}, left: 2,
		},
		{
			name: "zero removes",
			ops: func(x *timerIndex) {
				x.set("a", 10)
				x.set("a", 0)
				x.set("b", 0)
				x.remove("c")
			},
			now: 25, want: nil, left: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			x := newTimerIndex()
			tt.ops(x)
			var got []string
			for _, it := range x.due(tt.now, tt.now+100, 100, nil) {
				got = append(got, it.key)
			}
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.left, x.len())
			require.Equal(t, tt.left, x.tree.Len())
		})
	}
}

func TestTimerIndexResend(t *testing.T) {
	t.Parallel()
	x := newTimerIndex()
	x.set("a", 10)
	require.Len(t, x.due(10, 110, 10, nil), 1)
	// Sent: not due again until the resend time, unless the row changes.
	require.Empty(t, x.due(50, 150, 10, nil))
	require.EqualValues(t, 110, x.next())
	require.Len(t, x.due(110, 210, 10, nil), 1)
	x.set("a", 500)
	require.Empty(t, x.due(300, 400, 10, nil))
	require.EqualValues(t, 500, x.next())
}

func TestTimerIndexEarliest(t *testing.T) {
	t.Parallel()
	x := newTimerIndex()
	require.True(t, x.set("a", 100))
	require.False(t, x.set("b", 200))
	require.True(t, x.set("c", 50))
	require.False(t, x.set("c", 50))
}

func TestTimerIndexBatchBound(t *testing.T) {
	t.Parallel()
	x := newTimerIndex()
	for i := range 100 {
		x.set(fmt.Sprintf("k%03d", i), int64(i+1))
	}
	require.Len(t, x.due(1000, 2000, 30, nil), 30)
	require.Len(t, x.due(1000, 2000, 100, nil), 70)
	require.Empty(t, x.due(1000, 2000, 100, nil))
	require.Equal(t, 100, x.len())
}

// BenchmarkTimerIndexMemory reports index bytes per pending timer.
func BenchmarkTimerIndexMemory(b *testing.B) {
	for range b.N {
		b.StopTimer()
		x := newTimerIndex()
		b.StartTimer()
		for i := range 100_000 {
			x.set(fmt.Sprintf("namespace-%02d/job-%08d", i%50, i), int64(i))
		}
	}
}

// Removed keys are garbage in the arena until it is rewritten; the keys
// left come out intact.
func TestTimerIndexCompactsKeys(t *testing.T) {
	t.Parallel()
	x := newTimerIndex()
	const n = 100_000
	for i := range n {
		x.set(fmt.Sprintf("namespace-%02d/job-%08d", i%50, i), int64(i+1))
	}
	before := len(x.keys)
	for i := range n {
		if i%10 != 0 {
			x.remove(fmt.Sprintf("namespace-%02d/job-%08d", i%50, i))
		}
	}
	require.LessOrEqual(t, len(x.keys), before/2, "the arena was rewritten")
	require.Equal(t, n/10, x.len())
	got := x.due(n+1, n+100, n, nil)
	require.Len(t, got, n/10)
	for j, it := range got {
		i := j * 10
		require.Equal(t, fmt.Sprintf("namespace-%02d/job-%08d", i%50, i), it.key)
		require.EqualValues(t, i+1, it.at)
	}
}
