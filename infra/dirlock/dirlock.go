//go:build unix

// Package dirlock owns the exclusive directory locks chime takes on its
// state dirs (the embedded broker's data, the scheduler's table), so
// two processes never use, or wipe, one dir at the same time.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Lock is an exclusive flock on a lock file. flock is tied to the open
// file description, so the kernel drops it when the holder dies, even by
// kill -9: a stale file left behind never blocks a restart. The file itself
// is never removed: unlinking a lock file lets a racing opener lock an inode
// nobody else can see.
type Lock struct {
	f *os.File
}

// Acquire takes the lock file name in dir (creating dir), without
// waiting. what names the dir in errors ("broker data dir").
func Acquire(dir, name, what string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, dir, err)
	}
	path := filepath.Join(dir, name)
	// os.OpenFile sets O_CLOEXEC, so a child we exec does not inherit (and
	// keep alive) the lock.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s %q: open lock file: %w", what, dir, err)
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readHolder(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s %q is in use by %s (lock %s): stop that process or use another dir",
				what, dir, holder, path)
		}
		return nil, fmt.Errorf("%s %q: lock %s: %w", what, dir, path, err)
	}
	// The PID is only informative (for the error above); the lock is the
	// flock, not the content.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

func readHolder(f *os.File) string {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	if pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n]))); err == nil && pid > 0 {
		return "process " + strconv.Itoa(pid)
	}
	// The holder may be between taking the lock and writing its PID.
	return "another process (PID not yet written)"
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// Release drops the lock; the file stays.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	// Closing the descriptor releases the flock; unlock first anyway so the
	// lock is gone even if something else still holds a dup of the fd.
	uerr := flock(l.f, syscall.LOCK_UN)
	cerr := l.f.Close()
	l.f = nil
	return errors.Join(uerr, cerr)
}
