package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/jobstore"
	"github.com/chime-sched/chime/processors/scheduler/jobindex"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Job reads (views/jobquery) are answered for the partitions this instance
// serves: those of its current assignment that it has recovered, and,
// through a rebalance, those it held before and has not lost. goka closes
// every storage at every rebalance, but the store keeps every write Kafka
// stored (a storage applies its confirmed writes when it closes), and no
// one else can change a partition before the rebalance ends and it is
// assigned elsewhere: so a partition that stays with this instance is
// read from the store throughout, and one that moves stops being served
// the moment the new assignment says so. The exception is Kafka Streams'
// too: an instance frozen past its session timeout answers from its stale
// copy until it hears of the new assignment.
//
// Read-your-writes: each partition's reach is the offset of the last
// job-commands record applied here (or, when the partition was assigned,
// the group's committed offset, below which everything was applied and
// written to the changelog the store recovered). A reader that published
// a command waits for the partitions to reach its offset.
type serving struct {
	mu      sync.Mutex
	epoch   uint64
	parts   map[int32]bool
	reached map[int32]int64
	waiters map[*waiter]struct{}
}

type waiter struct {
	want map[int32]int64
	ch   chan struct{}
}

func newServing() *serving {
	return &serving{parts: map[int32]bool{}, reached: map[int32]int64{}, waiters: map[*waiter]struct{}{}}
}

// assigned is the new assignment: partitions that left stop being served
// at once; those that stay go on being served.
func (sv *serving) assigned(a map[int32]bool) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	for p := range sv.parts {
		if !a[p] {
			delete(sv.parts, p)
			delete(sv.reached, p)
			sv.epoch++
		}
	}
	for p := range sv.reached {
		if !a[p] {
			delete(sv.reached, p)
		}
	}
	sv.wakeLocked()
}

// recovered says partition p, assigned here, has recovered.
func (sv *serving) recovered(p int32) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if !sv.parts[p] {
		sv.parts[p] = true
		sv.epoch++
	}
	sv.wakeLocked()
}

// stopped: nothing is served.
func (sv *serving) stopped() { sv.assigned(nil) }

func (sv *serving) has(p int32) bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.parts[p]
}

// list returns the partitions served and the epoch.
func (sv *serving) list() ([]int32, uint64) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	ps := make([]int32, 0, len(sv.parts))
	for p := range sv.parts {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps, sv.epoch
}

// reach records that partition p applied its job-commands record at
// offset.
func (sv *serving) reach(p int32, offset int64) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if r, ok := sv.reached[p]; ok && r >= offset {
		return
	}
	sv.reached[p] = offset
	if len(sv.waiters) > 0 {
		sv.wakeLocked()
	}
}

// reachedOf is partition p's reach, if p is served and its reach known.
func (sv *serving) reachedOf(p int32) (int64, bool) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if !sv.parts[p] {
		return 0, false
	}
	r, ok := sv.reached[p]
	return r, ok
}

// wakeLocked releases the waiters whose wants are met.
func (sv *serving) wakeLocked() {
	for w := range sv.waiters {
		if sv.metLocked(w.want) {
			close(w.ch)
			delete(sv.waiters, w)
		}
	}
}

// metLocked: every partition in want that is served has reached it.
func (sv *serving) metLocked(want map[int32]int64) bool {
	for p, off := range want {
		if !sv.parts[p] {
			continue
		}
		if r, ok := sv.reached[p]; !ok || r < off {
			return false
		}
	}
	return true
}

func (sv *serving) wait(ctx context.Context, want map[int32]int64) error {
	sv.mu.Lock()
	if sv.metLocked(want) {
		sv.mu.Unlock()
		return nil
	}
	w := &waiter{want: want, ch: make(chan struct{})}
	sv.waiters[w] = struct{}{}
	sv.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		sv.mu.Lock()
		delete(sv.waiters, w)
		sv.mu.Unlock()
		return ctx.Err()
	}
}

// Serving lists the partitions this instance answers job reads for now,
// and an epoch that changes whenever that set changes: a read that sees
// the same epoch before and after ran over exactly those partitions.
func (s *Scheduler) Serving() ([]int32, uint64) { return s.serving.list() }

// WaitReached waits until every partition in want that this instance
// serves has applied its job-commands record at that offset, so that Get,
// ListJobs and LiveJobs show it; ctx bounds the wait.
func (s *Scheduler) WaitReached(ctx context.Context, want map[int32]int64) error {
	return s.serving.wait(ctx, want)
}

// Reached returns the offset of partition p's last job-commands record
// whose effect shows in Get; false if p is not served here or that is not
// known yet.
func (s *Scheduler) Reached(p int32) (int64, bool) { return s.serving.reachedOf(p) }

// committedTimeout bounds the read of the group's committed offsets.
const committedTimeout = 10 * time.Second

// reachCommitted sets the reach of newly assigned partitions from the
// group's committed offsets of job-commands: every record below one was
// applied by some instance and its row written to the changelog this
// instance recovers.
func (s *Scheduler) reachCommitted(a goka.Assignment) {
	if s.kcl == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), committedTimeout)
	defer cancel()
	resp, err := kadm.NewClient(s.kcl).FetchOffsets(ctx, s.cfg.Topics.SchedulerGroup())
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		s.cfg.Logger.Debug("scheduler: reading the committed offsets failed; reads wait for the commands to be applied again", "err", err)
		return
	}
	for p := range a {
		if o, ok := resp.Lookup(s.cfg.Topics.JobCommands(), p); ok && o.At > 0 {
			s.serving.reach(p, o.At-1)
		}
	}
}

var errNotServed = errors.New("not served by this scheduler instance")

// partitionOf is the table partition of a job's key.
func (s *Scheduler) partitionOf(key string) int32 {
	return processors.PartitionOf(key, s.tablePartitions.Load())
}

// Get reads a job's row as last written (nil if there is none); an error
// if its partition is not served here.
func (s *Scheduler) Get(key string) (*chimev1.JobState, error) {
	p := s.partitionOf(key)
	if !s.serving.has(p) {
		return nil, fmt.Errorf("scheduler: reading %q: partition %d is %w", key, p, errNotServed)
	}
	raw, err := s.db.View(p).Get(key)
	if err != nil || raw == nil {
		return nil, err
	}
	v, err := schema.JobStateCodec{}.Decode(raw)
	if err != nil {
		return nil, err
	}
	return v.(*chimev1.JobState), nil
}

// views are the served partitions' listings.
func (s *Scheduler) views() []viewSource {
	ps, _ := s.serving.list()
	out := make([]viewSource, len(ps))
	for i, p := range ps {
		out[i] = viewSource{v: s.db.View(p)}
	}
	return out
}

// LiveJobs returns the namespace's live (not ended) jobs in the partitions
// served here: the API's pending-jobs quota reads it.
func (s *Scheduler) LiveJobs(ns string) int64 { return jobindex.LiveIn(s.views(), ns) }

// ListJobs returns a page of the namespace's jobs in the partitions served
// here, newest first, and whether more follow.
func (s *Scheduler) ListJobs(ns string, q jobindex.Query) ([]jobindex.Entry, bool) {
	return jobindex.List(s.views(), ns, q)
}

// Partitions lists the partitions served here.
func (s *Scheduler) Partitions() []int32 {
	ps, _ := s.serving.list()
	return ps
}

// viewSource is a partition's listing as jobindex reads it.
type viewSource struct{ v jobstore.View }

// Page implements jobindex.Source.
func (vs viewSource) Page(ns string, q jobindex.Query, n int, out []jobindex.Entry) []jobindex.Entry {
	_ = vs.v.List(ns, q.Labels, q.After.Created, q.After.ID, func(l jobstore.Listed) bool {
		if q.Wants(l.Status) && (q.Internal || !jobstore.Internal(l.ID)) {
			out = append(out, jobindex.Entry{ID: l.ID, Created: l.Created, Status: l.Status})
			n--
		}
		return n > 0
	})
	return out
}

// Live implements jobindex.Source.
func (vs viewSource) Live(ns string) int64 {
	n, _ := vs.v.Live(ns)
	return n
}
