//go:build !unix

package broker

import (
	"fmt"
	"os"
)

// LockFileName is the file in the data directory whose lock marks the
// directory as owned by a running broker.
const LockFileName = "chime-broker.lock"

type dirLock struct{ f *os.File }

// lockDir refuses to run: without flock(2) a second broker on the same data
// dir would corrupt it, and a lock that survives a crash would need manual
// cleanup.
func lockDir(dir string) (*dirLock, error) {
	return nil, fmt.Errorf("broker data dir %q: the embedded broker needs flock(2), which this platform lacks; use an external Kafka cluster", dir)
}

func (l *dirLock) release() error { return nil }
