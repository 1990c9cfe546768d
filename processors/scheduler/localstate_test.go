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
	row := filepath.Join(dir, tableDir, "000001.log")
	// A database per partition, as earlier versions kept it.
	old := filepath.Join(dir, "chime.scheduler-table.0", "000001.log")

	l, err := OpenLocalState(dir, nil)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(row), 0o755))
	require.NoError(t, os.WriteFile(row, []byte("x"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Dir(old), 0o755))
	require.NoError(t, os.WriteFile(old, []byte("x"), 0o644))
	require.NoError(t, l.Close())

	// Clean stop: the cache is kept, the old layout goes.
	l, err = OpenLocalState(dir, nil)
	require.NoError(t, err)
	require.FileExists(t, row)
	require.NoDirExists(t, filepath.Dir(old))

	// A second process cannot open (or wipe) it meanwhile.
	_, err = OpenLocalState(dir, nil)
	require.ErrorContains(t, err, "in use")
	require.FileExists(t, row)

	// No Close: as if killed (the lock goes with the process). The next
	// start wipes it.
	require.NoError(t, l.lock.Release())
	l, err = OpenLocalState(dir, nil)
	require.NoError(t, err)
	require.NoFileExists(t, row)

	// An in-process restart after an error wipes it too.
	require.NoError(t, os.MkdirAll(filepath.Dir(row), 0o755))
	require.NoError(t, os.WriteFile(row, []byte("x"), 0o644))
	require.NoError(t, l.Reset())
	require.NoFileExists(t, row)
	require.NoError(t, l.Close())
}
