package broker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCompactionSpacingBoundsTheStall(t *testing.T) {
	t.Parallel()
	for _, took := range []time.Duration{time.Millisecond, time.Second, 15 * time.Second} {
		gap := compactionSpacing(took)
		require.InDelta(t, compactionStallShare, float64(took)/float64(gap), 1e-9, "took %s", took)
	}
	require.Less(t, compactionSpacing(time.Millisecond), 50*time.Millisecond, "small tables compact as they grow")
}
