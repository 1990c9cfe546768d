//go:build unix

package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFileName is the file in the data directory whose flock(2) marks the
// directory as owned by a running broker. kfake itself does not lock its
// directory, and two clusters writing the same segment files corrupt them.
const LockFileName = "chime-broker.lock"

// dirLock is an exclusive flock on LockFileName. flock is tied to the open
// file description, so the kernel drops it when the holder dies, even by
// kill -9: a stale file left behind never blocks a restart. The file itself
// is never removed: unlinking a lock file lets a racing opener lock an inode
// nobody else can see.
type dirLock struct {
	f *os.File
}

func lockDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("broker data dir %q: %w", dir, err)
	}
	path := filepath.Join(dir, LockFileName)
	// os.OpenFile sets O_CLOEXEC, so a child we exec does not inherit (and
	// keep alive) the lock.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("broker data dir %q: open lock file: %w", dir, err)
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readHolder(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("broker data dir %q is in use by %s (lock %s): stop that broker or use another data dir",
				dir, holder, path)
		}
		return nil, fmt.Errorf("broker data dir %q: lock %s: %w", dir, path, err)
	}
	// The PID is only informative (for the error above); the lock is the
	// flock, not the content.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{f: f}, nil
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

func (l *dirLock) release() error {
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
