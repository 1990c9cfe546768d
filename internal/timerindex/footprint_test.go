package timerindex

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Not parallel: it reads the process heap, which parallel tests disturb.
func TestFootprintIsMeasured(t *testing.T) {
	b := Footprint(10_000)
	// A sanity range, not a performance assertion: the index holds a copy
	// of each key (25 bytes) plus its bookkeeping.
	require.Greater(t, b, 25.0)
	require.Less(t, b, 10_000.0)
}
