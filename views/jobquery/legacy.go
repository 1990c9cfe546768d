package jobquery

// TEMPORARY, until the scheduler implements Serving and WaitReached:
// adapts the scheduler's old Partitions/Ready/Assignments.

import (
	"context"

	"github.com/chime-sched/chime/processors/scheduler/jobindex"
	"github.com/chime-sched/chime/schema/chimev1"
)

type legacySource interface {
	Get(key string) (*chimev1.JobState, error)
	LiveJobs(ns string) int64
	ListJobs(ns string, q jobindex.Query) ([]jobindex.Entry, bool)
	Partitions() []int32
	Ready() error
	Assignments() uint64
}

// Legacy adapts s.
func Legacy(s legacySource) Source { return legacy{s} }

type legacy struct{ legacySource }

func (l legacy) Serving() ([]int32, uint64) {
	if l.Ready() != nil {
		return nil, l.Assignments()*2 + 1
	}
	return l.Partitions(), l.Assignments() * 2
}

func (l legacy) WaitReached(ctx context.Context, want map[int32]int64) error {
	return nil
}
