// Package jobquery owns reading jobs where they live. Every scheduler
// instance answers for the table partitions it serves (Server), and an API
// process sends each read to the instance that owns the job's partition
// (Router), found in the scheduler group's description, where each member
// advertises its query server in its join metadata (groups.Membership
// Advertise). It is Kafka Streams' interactive queries for chime's goka
// scheduler: no API process holds job rows, so API processes can be added
// without each one replicating the jobs table.
//
// Consistency. An owner answers over the partitions it serves
// (Source.Serving), only when the set was the same before and after the
// read (its epoch unchanged), and says which partitions it covered. The
// router takes a listing or a count only when its owners covered every
// partition exactly once, and a row only from the owner of its partition.
// A partition that moves, an owner gone or not answering is
// ErrUnavailable: retry after a moment, never a wrong answer. Partitions
// that stay with their owner through a rebalance are answered throughout
// it: the router keeps asking the owners it last knew while the group
// rebalances. The one way to a stale answer is the one Kafka Streams has:
// an instance that lost its partitions without knowing it (frozen past its
// session timeout) and is asked before the router has read the group's
// new assignment.
//
// Read-your-writes. A listing or a count carries Offsets, the
// job-commands offsets of the commands the API process published for the
// namespace; the owner answers once it has applied them
// (Source.WaitReached), waiting at most ReadWait, else ErrUnavailable. So
// a job the process created, cancelled or paused shows so in its next
// listing and count.
//
//	API process                                scheduler instance (goka member, advertises host:port)
//	Router ── owners from kadm.DescribeGroups ──►  Server ──► Source (*scheduler.Scheduler)
//	       ── POST /query/v1/rows, GET /query/v1/jobs, GET /query/v1/live (HMAC-signed) ──►
package jobquery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/scheduler/jobindex"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Source is what one scheduler instance reads its own rows with;
// *scheduler.Scheduler is one. Get, LiveJobs and ListJobs read the
// partitions the instance serves now; Serving and WaitReached make those
// reads consistent (see the package comment).
type Source interface {
	// Get returns a job's row ("namespace/id"), nil if there is none; an
	// error if the key's partition is not served now.
	Get(key string) (*chimev1.JobState, error)
	// LiveJobs counts the namespace's jobs that have not ended, over the
	// partitions served now.
	LiveJobs(ns string) int64
	// ListJobs returns a page of the namespace's jobs, newest first, over
	// the partitions served now.
	ListJobs(ns string, q jobindex.Query) ([]jobindex.Entry, bool)
	// Serving lists the partitions the instance can answer for now, and
	// an epoch that changes whenever that set changes (or a partition in
	// it is recovered again). A read that sees the same epoch before and
	// after ran over exactly those partitions. Partitions the instance
	// keeps through a rebalance stay served throughout it; those it loses
	// leave at once.
	Serving() (partitions []int32, epoch uint64)
	// WaitReached waits until, for every partition in want that the
	// instance serves, it has applied the job-commands record at that
	// offset and its effect shows in Get, ListJobs and LiveJobs; ctx
	// bounds the wait (ctx.Err() when it ends first). Partitions it does
	// not serve are ignored.
	WaitReached(ctx context.Context, want map[int32]int64) error
	// Reached returns the offset of partition p's last job-commands
	// record whose effect shows in Get; false if p is not served or that
	// is not known yet.
	Reached(p int32) (int64, bool)
}

// ReadWait bounds how long an owner waits to have applied the commands a
// read carries (Offsets) before it refuses the read; the router's
// CallTimeout must exceed it. An owner that is caught up answers at once;
// one that is behind by more (overloaded, or in the pause of a goka
// rebalance, when no partition applies commands) is ErrUnavailable.
const ReadWait = 2 * time.Second

// Offsets is a consistency token: by partition of the job-commands topic,
// the offset of a record whose effect a read must show. The API records
// those of the commands it publishes and sends them with its listings and
// counts.
type Offsets map[int32]int64

// Add raises partition p's offset to off (an offset only grows).
func (o Offsets) Add(p int32, off int64) {
	if cur, ok := o[p]; !ok || off > cur {
		o[p] = off
	}
}

// String is the token as a query parameter says it: "p:offset,..." by
// partition.
func (o Offsets) String() string {
	ps := slices.Sorted(maps.Keys(o))
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(int(p)) + ":" + strconv.FormatInt(o[p], 10)
	}
	return strings.Join(s, ",")
}

// parseOffsets reads String's form; partitions must be below n.
func parseOffsets(s string, n int32) (Offsets, error) {
	if s == "" {
		return nil, nil
	}
	o := Offsets{}
	for _, f := range strings.Split(s, ",") {
		ps, offs, ok := strings.Cut(f, ":")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		off, err2 := strconv.ParseInt(offs, 10, 64)
		if !ok || err1 != nil || err2 != nil || p < 0 || int32(p) >= n || off < 0 {
			return nil, fmt.Errorf("%q is not partition:offset with a partition from 0 to %d", f, n-1)
		}
		o.Add(int32(p), off)
	}
	return o, nil
}

// Job is one job of a listing page: what the listing index says of it,
// and its row, read right after (nil if the job was removed in between).
type Job struct {
	jobindex.Entry
	Row *chimev1.JobState
}

// ErrUnavailable is what every read that cannot be answered right now
// wraps: an owner recovering, moving, behind, gone or unreachable.
// Retrying after a moment helps.
var ErrUnavailable = errors.New("job reads are unavailable for now")

// errRecovering: the instance's partitions kept changing during the read
// (it is starting, rebalancing or restarting its processor).
var errRecovering = errors.New("the scheduler instance's partitions changed during the read (it is starting or rebalancing)")

// behindError: the instance had not applied the commands a read carries
// within ReadWait.
type behindError struct {
	want Offsets
	err  error
}

func (e *behindError) Error() string {
	return fmt.Sprintf("the scheduler instance has not applied the commands this API published (job-commands offsets %s) within %s: it is catching up, or its group is rebalancing", e.want, ReadWait)
}

// notOwnerError: a key's partition is not one the instance serves.
type notOwnerError struct {
	partition int32
	served    []int32
}

func (e *notOwnerError) Error() string {
	return fmt.Sprintf("partition %d is not served by this scheduler instance (it serves %s)", e.partition, partitionList(e.served))
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

// local reads one instance's own rows, each read over one set of served
// partitions: the server answers with it, and the router reads the
// in-process scheduler of chime dev with it, without HTTP.
type local struct {
	src        Source
	partitions int32
}

// epochTries bounds the reads of one answer whose served partitions
// changed under it: the set changes a few times per rebalance, each time
// for good.
const epochTries = 3

// consistent runs read over the partitions the source serves, once it has
// applied after (at most ReadWait, within ctx), and returns them, sorted.
// The epoch read before and after proves the set did not change in
// between: WaitReached then covered every partition read.
func (l local) consistent(ctx context.Context, after Offsets, read func(served []int32) error) ([]int32, error) {
	if len(after) > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ReadWait)
		defer cancel()
	}
	for range epochTries {
		served, epoch := l.src.Serving()
		if len(after) > 0 {
			if err := l.src.WaitReached(ctx, after); err != nil {
				return nil, &behindError{want: after, err: err}
			}
		}
		served = append([]int32{}, served...) // "partitions": [] when none
		slices.Sort(served)
		err := read(served)
		if _, now := l.src.Serving(); now != epoch {
			continue // a partition came or went: read again
		}
		if err != nil {
			return nil, err
		}
		return served, nil
	}
	return nil, errRecovering
}

// rows reads the rows of keys, all of which must be in served partitions,
// and says how far each of their partitions had applied the job commands
// before they were read (a partition not in reached: not known): every
// command at or below that offset shows in the rows.
func (l local) rows(keys []string) (rows []*chimev1.JobState, reached Offsets, served []int32, err error) {
	out := make([]*chimev1.JobState, len(keys))
	served, err = l.consistent(context.Background(), nil, func(served []int32) error {
		reached = Offsets{}
		for _, k := range keys {
			p := partitionOf(k, l.partitions)
			if _, ok := slices.BinarySearch(served, p); !ok {
				return &notOwnerError{partition: p, served: served}
			}
			if _, ok := reached[p]; !ok {
				if off, ok := l.src.Reached(p); ok {
					reached[p] = off
				}
			}
		}
		for i, k := range keys {
			row, err := l.src.Get(k)
			if err != nil {
				return fmt.Errorf("%w: reading %s: %v", errRecovering, k, err)
			}
			out[i] = row
		}
		return nil
	})
	return out, reached, served, err
}

// list reads a listing page over the served partitions, with the rows.
func (l local) list(ctx context.Context, ns string, q jobindex.Query, after Offsets) ([]Job, bool, []int32, error) {
	var jobs []Job
	var more bool
	served, err := l.consistent(ctx, after, func([]int32) error {
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
	return jobs, more, served, err
}

// live counts the namespace's live jobs over the served partitions.
func (l local) live(ctx context.Context, ns string, after Offsets) (int64, []int32, error) {
	var n int64
	served, err := l.consistent(ctx, after, func([]int32) error {
		n = l.src.LiveJobs(ns)
		return nil
	})
	return n, served, err
}
