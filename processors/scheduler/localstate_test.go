package scheduler

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLocalStateOpensOverOldLayouts: a state dir left by earlier versions
// (a database per partition, the hand-written store in table/, the CLEAN
// marker) opens: what is not the store is removed, a store Pebble cannot
// open is rebuilt. A second process cannot open it meanwhile.
func TestLocalStateOpensOverOldLayouts(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "scheduler")
	oldStore := filepath.Join(dir, tableDir, "segment-000001")
	oldPerPartition := filepath.Join(dir, "chime.scheduler-table.0", "000001.log")
	for _, f := range []string{oldStore, oldPerPartition, filepath.Join(dir, "CLEAN")} {
		require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
		require.NoError(t, os.WriteFile(f, []byte("x"), 0o644))
	}
	l, err := OpenLocalState(dir, nil)
	require.NoError(t, err)
	require.NoDirExists(t, filepath.Dir(oldPerPartition))
	require.NoFileExists(t, filepath.Join(dir, "CLEAN"))
	require.NoFileExists(t, oldStore)
	require.DirExists(t, filepath.Join(dir, tableDir), "a Pebble store")

	_, err = OpenLocalState(dir, nil)
	require.ErrorContains(t, err, "in use")
	require.NoError(t, l.Close())

	// Reopened after a clean close, as it is.
	l, err = OpenLocalState(dir, nil)
	require.NoError(t, err)
	require.DirExists(t, filepath.Join(dir, tableDir))
	require.NoError(t, l.Close())
}
