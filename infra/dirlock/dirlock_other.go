//go:build !unix

package dirlock

import "fmt"

// Lock is not available without flock(2).
type Lock struct{}

// Acquire refuses to run: without flock(2) a second process on the same dir
// would corrupt it, and a lock that survives a crash would need manual
// cleanup.
func Acquire(dir, name, what string) (*Lock, error) {
	return nil, fmt.Errorf("%s %q: chime needs flock(2) to lock it, which this platform lacks", what, dir)
}

// Release does nothing.
func (l *Lock) Release() error { return nil }
