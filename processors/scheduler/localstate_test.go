package scheduler

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLocalStateIsWipedAfterAnUncleanStop(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "scheduler")
	row := filepath.Join(dir, "table.0", "000001.log")

	l, err := OpenLocalState(dir, nil)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(row), 0o755))
	require.NoError(t, os.WriteFile(row, []byte("x"), 0o644))
	require.NoError(t, l.Close())

	// Clean stop: the cache is kept.
	l, err = OpenLocalState(dir, nil)
	require.NoError(t, err)
	require.FileExists(t, row)
	// No Close: as if killed. The next start wipes it.
	_, err = OpenLocalState(dir, nil)
	require.NoError(t, err)
	require.NoFileExists(t, row)
	_ = l
}
