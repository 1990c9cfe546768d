// Package jobquery owns reading jobs where they live. Every scheduler
// instance answers for the table partitions it owns (Server), and an API
// process sends each read to the instance that owns the job's partition
// (Router), found in the scheduler group's description, where each member
// advertises its query server in its join metadata (groups.Membership
// Advertise). It is Kafka Streams' interactive queries for chime's goka
// scheduler: no API process holds job rows, so API processes can be added
// without each one replicating the jobs table.
//
// Consistency. An owner answers only under one recovered assignment
// (Source.Assignments the same before and after the read, Ready both
// times) and says which partitions it covered. The router takes a listing
// or a count only when its owners covered every partition exactly once,
// and a row only from the owner of its partition. A moved partition, an
// owner recovering, gone or not answering is ErrUnavailable: retry after
// a moment, never a wrong answer. The one way to a stale answer is the one
// Kafka Streams has: an instance that lost its partitions without knowing
// it (frozen past its session timeout) and is asked before the router has
// read the group's new assignment.
//
//	API process                                scheduler instance (goka member, advertises host:port)
//	Router ── owners from kadm.DescribeGroups ──►  Server ──► Source (*scheduler.Scheduler)
//	       ── POST /query/v1/rows, GET /query/v1/jobs, GET /query/v1/live (HMAC-signed) ──►
package jobquery

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/scheduler/jobindex"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Source is what one scheduler instance reads its own rows with;
// *scheduler.Scheduler is one. Get, LiveJobs and ListJobs read the
// partitions the instance actively owns; the consistency rules above need
// the other three.
type Source interface {
	// Get returns a job's row ("namespace/id"), nil if there is none.
	Get(key string) (*chimev1.JobState, error)
	// LiveJobs counts the namespace's jobs that have not ended.
	LiveJobs(ns string) int64
	// ListJobs returns a page of the namespace's jobs, newest first.
	ListJobs(ns string, q jobindex.Query) ([]jobindex.Entry, bool)
	// Partitions lists the partitions the instance actively owns.
	Partitions() []int32
	// Ready is nil while the instance has recovered every partition it
	// owns (lifecycle.Part's Ready).
	Ready() error
	// Assignments counts the assignments the instance has taken.
	Assignments() uint64
}

// Job is one job of a listing page: what the listing index says of it,
// and its row, read right after (nil if the job was removed in between).
type Job struct {
	jobindex.Entry
	Row *chimev1.JobState
}

// ErrUnavailable is what every read that cannot be answered right now
// wraps: an owner recovering, moving, gone or unreachable. Retrying after
// a moment helps.
var ErrUnavailable = errors.New("job reads are unavailable for now")

// errRecovering: the instance is not running one recovered assignment
// (starting, rebalancing, restarting its processor).
var errRecovering = errors.New("the scheduler instance is recovering its partitions (starting or rebalancing)")

// notOwnerError: a key's partition is not one the instance owns.
type notOwnerError struct {
	partition int32
	owned     []int32
}

func (e *notOwnerError) Error() string {
	return fmt.Sprintf("partition %d is not owned by this scheduler instance (it owns %s)", e.partition, partitionList(e.owned))
}

// partitionOf is the table partition of a job's key: goka's, which the
// producer and the scheduler agree on.
func partitionOf(key string, n int32) int32 { return processors.PartitionOf(key, n) }

func jobKey(ns, id string) string { return schema.JobKey(ns, id) }

// partitionList says partitions as "[0 1 2]", or "none".
func partitionList(ps []int32) string {
	if len(ps) == 0 {
		return "none"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(int(p))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// local reads one instance's own rows, each read under one recovered
// assignment: the server answers with it, and the router reads the
// in-process scheduler of chime dev with it, without HTTP.
type local struct {
	src        Source
	partitions int32
}

// consistent runs read under one recovered assignment of the source and
// returns the partitions it covered, sorted. The count is read first: an
// assignment that starts during the read changes it, and a partition is
// only set up after its assignment was counted.
func (l local) consistent(read func(owned []int32) error) ([]int32, error) {
	before := l.src.Assignments()
	if l.src.Ready() != nil {
		return nil, errRecovering
	}
	owned := slices.Sorted(slices.Values(l.src.Partitions()))
	if err := read(owned); err != nil {
		return nil, err
	}
	if l.src.Ready() != nil || l.src.Assignments() != before {
		return nil, errRecovering
	}
	return owned, nil
}

// rows reads the rows of keys, all of which must be in owned partitions.
func (l local) rows(keys []string) ([]*chimev1.JobState, []int32, error) {
	out := make([]*chimev1.JobState, len(keys))
	owned, err := l.consistent(func(owned []int32) error {
		for i, k := range keys {
			p := partitionOf(k, l.partitions)
			if _, ok := slices.BinarySearch(owned, p); !ok {
				return &notOwnerError{partition: p, owned: owned}
			}
			row, err := l.src.Get(k)
			if err != nil {
				return fmt.Errorf("%w: reading %s: %v", errRecovering, k, err)
			}
			out[i] = row
		}
		return nil
	})
	return out, owned, err
}

// list reads a listing page over the owned partitions, with the rows.
func (l local) list(ns string, q jobindex.Query) ([]Job, bool, []int32, error) {
	var jobs []Job
	var more bool
	owned, err := l.consistent(func([]int32) error {
		entries, m := l.src.ListJobs(ns, q)
		jobs, more = make([]Job, 0, len(entries)), m
		for _, e := range entries {
			row, err := l.src.Get(jobKey(ns, e.ID))
			if err != nil {
				return fmt.Errorf("%w: reading %s: %v", errRecovering, jobKey(ns, e.ID), err)
			}
			jobs = append(jobs, Job{Entry: e, Row: row})
		}
		return nil
	})
	return jobs, more, owned, err
}

// live counts the namespace's live jobs over the owned partitions.
func (l local) live(ns string) (int64, []int32, error) {
	var n int64
	owned, err := l.consistent(func([]int32) error {
		n = l.src.LiveJobs(ns)
		return nil
	})
	return n, owned, err
}
