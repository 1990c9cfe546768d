package schema

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The callback timeout's limit is one number, MaxHTTPTimeout: the
// validation refuses a job's timeout above it and the dispatcher gives no
// call more. The docs that state it say this one.
func TestDocsSayTheCallbackTimeoutLimit(t *testing.T) {
	t.Parallel()
	limit, def := int(MaxHTTPTimeout/time.Second), int(DefaultHTTPTimeout/time.Second)
	for path, want := range map[string]string{
		"../docs/guarantees.md": fmt.Sprintf("| HTTP timeout | (0, %d s]; %d s when unset |", limit, def),
		"../docs/dispatcher.md": fmt.Sprintf("at most %d s (`schema.MaxHTTPTimeout`)", limit),
		"../docs/api.md":        fmt.Sprintf("| `callback.timeout` | %d s |", limit),
	} {
		doc, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Contains(t, string(doc), want, path)
	}
}
