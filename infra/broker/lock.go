package broker

import "github.com/chime-sched/chime/infra/dirlock"

// LockFileName is the file in the data directory whose flock(2) marks the
// directory as owned by a running broker. kfake itself does not lock its
// directory, and two clusters writing the same segment files corrupt them.
const LockFileName = "chime-broker.lock"

func lockDir(dir string) (*dirlock.Lock, error) {
	return dirlock.Acquire(dir, LockFileName, "broker data dir")
}
