package scheduler

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/chime-sched/chime/infra/dirlock"
	"github.com/chime-sched/chime/processors/jobstore"
)

// LocalState is the scheduler's table on disk (processors/jobstore) in a
// state dir, locked for one process.
//
// The store holds only what Kafka has confirmed, with the changelog offset
// it stands at, in atomic batches: after a clean stop, a kill -9 or a
// processor restarted after an error, the scheduler reads only the
// changelog records after that offset. A store that does not open is
// wiped and rebuilt from Kafka; so is a partition whose offset is older
// than the changelog's tombstones may live (jobstore.Options).
type LocalState struct {
	dir    string
	lock   *dirlock.Lock
	logger *slog.Logger
	store  *jobstore.DB
}

// tableDir is the store's directory in the state dir. It held the
// hand-written disk store of earlier versions, which Pebble does not open:
// the store is then rebuilt from Kafka. Anything else in the state dir
// (the one-database-per-partition layout of older ones, their CLEAN
// marker) is removed.
const tableDir = "table"

// OpenLocalState locks dir for this process (a lock file beside it, since
// the store may be wiped) and opens the store in it.
func OpenLocalState(dir string, logger *slog.Logger) (*LocalState, error) {
	if logger == nil {
		logger = slog.Default()
	}
	dir = filepath.Clean(dir)
	lock, err := dirlock.Acquire(filepath.Dir(dir), filepath.Base(dir)+".lock", "scheduler state dir")
	if err != nil {
		return nil, err
	}
	l, err := openLocked(dir, logger)
	if err != nil {
		_ = lock.Release()
		return nil, err
	}
	l.lock = lock
	return l, nil
}

func openLocked(dir string, logger *slog.Logger) (*LocalState, error) {
	entries, err := os.ReadDir(dir)
	switch {
	case err != nil && !os.IsNotExist(err):
		return nil, fmt.Errorf("scheduler state dir %q: %w", dir, err)
	case err == nil:
		for _, e := range entries {
			if e.Name() != tableDir {
				if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
					return nil, fmt.Errorf("scheduler state dir %q: %w", dir, err)
				}
			}
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("scheduler state dir %q: %w", dir, err)
	}
	store, err := jobstore.Open(jobstore.Options{Dir: filepath.Join(dir, tableDir), Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("scheduler state dir %q: %w", dir, err)
	}
	return &LocalState{dir: dir, logger: logger, store: store}, nil
}

// Size is the bytes the store takes on disk.
func (l *LocalState) Size() (int64, error) {
	var n int64
	err := filepath.WalkDir(l.dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

// Close closes the store and unlocks the dir; call it after the
// scheduler stopped (every storage is closed by then).
func (l *LocalState) Close() error {
	err := l.store.Close()
	if rerr := l.lock.Release(); err == nil {
		err = rerr
	}
	return err
}
