package credential_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/infra/credential"
)

func TestLoadOrCreateKeepsOneCredential(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "cred")
	var wg sync.WaitGroup
	got := make([]credential.Credential, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := credential.LoadOrCreate(path, "chime")
			require.NoError(t, err)
			got[i] = c
		}()
	}
	wg.Wait()
	for _, c := range got {
		require.Equal(t, got[0], c, "processes starting at once share one credential")
	}
	require.Equal(t, "chime", got[0].User)
	require.Len(t, got[0].Password, 48)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left behind")

	again, err := credential.Load(path)
	require.NoError(t, err)
	require.Equal(t, got[0], again)
}

func TestLoadSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "cred")
	require.NoError(t, os.WriteFile(path, []byte("no-colon\n"), 0o600))
	_, err := credential.LoadOrCreate(path, "chime")
	require.ErrorContains(t, err, "want user:password on one line")
}
