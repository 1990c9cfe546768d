package scheduler

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/lovoo/goka/storage"

	"github.com/chime-sched/chime/infra/dirlock"
	"github.com/chime-sched/chime/processors/diskstore"
)

// cleanMarker is present in a state dir only while no process uses
// it and the last one stopped cleanly.
const cleanMarker = "CLEAN"

// LocalState is the scheduler's on-disk cache of its table
// (processors/diskstore).
//
// goka writes a row to local storage before Kafka has acknowledged the
// row's table record and the events emitted with it. After a kill -9 the
// local copy can be ahead of Kafka: a row says "fired" while its due event
// never reached the broker, and the replayed tick then finds nothing due.
// Kafka is the truth, so a dir that was not closed cleanly is wiped and the
// table is recovered from Kafka. After a clean stop the cache is kept and
// saves that recovery.
//
// The same holds when the processor is restarted inside the process after
// an error (Scheduler.Run does that): Reset wipes the cache before it.
type LocalState struct {
	dir    string
	lock   *dirlock.Lock
	logger *slog.Logger

	// db is the one database of every partition, opened by the first
	// storage built and closed by Reset and Close.
	mu sync.Mutex
	db *diskstore.DB
}

// tableDir is the database's directory in the state dir. Anything else
// there (the one-database-per-partition layout of earlier versions) is
// removed at open.
const tableDir = "table"

// OpenLocalState locks dir for this process (a lock file beside it, since
// the dir itself may be wiped), wipes it if the previous run did not stop
// cleanly, and removes the clean marker until Close.
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
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("scheduler state dir %q: %w", dir, err)
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(dir, cleanMarker)); err != nil {
			logger.Warn("scheduler state was not closed cleanly; rebuilding it from Kafka", "dir", dir)
			if err := os.RemoveAll(dir); err != nil {
				return nil, fmt.Errorf("wiping scheduler state dir %q: %w", dir, err)
			}
			break
		}
		for _, e := range entries {
			if e.Name() != tableDir && e.Name() != cleanMarker {
				if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
					return nil, fmt.Errorf("scheduler state dir %q: %w", dir, err)
				}
			}
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("scheduler state dir %q: %w", dir, err)
	}
	if err := os.Remove(filepath.Join(dir, cleanMarker)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("scheduler state dir %q: %w", dir, err)
	}
	return &LocalState{dir: dir, logger: logger}, nil
}

// Reset wipes the cache; every storage in it must be closed.
func (l *LocalState) Reset() error {
	l.logger.Warn("scheduler restarting after an error; rebuilding its local state from Kafka", "dir", l.dir)
	if err := l.closeDB(); err != nil {
		l.logger.Warn("closing the scheduler's local database before wiping it", "err", err)
	}
	if err := os.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("wiping scheduler state dir %q: %w", l.dir, err)
	}
	return os.MkdirAll(l.dir, 0o700)
}

// Builder is the disk storage in the state dir (processors/diskstore),
// which keeps what it writes in memory until a clean close: safe because
// an unclean stop wipes the dir.
func (l *LocalState) Builder() storage.Builder {
	return func(topic string, partition int32) (storage.Storage, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.db == nil {
			db, err := diskstore.OpenDB(filepath.Join(l.dir, tableDir), diskstore.Options{})
			if err != nil {
				return nil, err
			}
			l.db = db
		}
		return l.db.Store(topic, partition)
	}
}

func (l *LocalState) closeDB() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.db == nil {
		return nil
	}
	err := l.db.Close()
	l.db = nil
	return err
}

// Close marks the state clean and unlocks it; call it after the
// scheduler's Run returned (every storage is closed by then). A database
// that does not close cleanly is not marked clean.
func (l *LocalState) Close() error {
	if err := l.closeDB(); err != nil {
		return errors.Join(fmt.Errorf("closing the scheduler's local database: %w", err), l.lock.Release())
	}
	err := os.WriteFile(filepath.Join(l.dir, cleanMarker), nil, 0o600)
	return errors.Join(err, l.lock.Release())
}
