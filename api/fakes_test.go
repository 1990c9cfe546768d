package api_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/namespaces"
	"github.com/chime-sched/chime/processors/scheduler/jobindex"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views/jobquery"
)

// fakeJobs records the job commands published, as Kafka would: each at
// the next offset of its key's partition (of fakePartitions).
type fakeJobs struct {
	mu      sync.Mutex
	cmds    []*chimev1.JobCommand
	offsets map[int32]int64
	// at is each command's offset, by command id.
	at  map[string]int64
	err error
	// apply, if set, is given each command and where it went before it
	// is acknowledged: the jobs table showing it by the time a read
	// carrying its offset is answered, as the schedulers do.
	apply func(cmd *chimev1.JobCommand, p int32, off int64)
}

func (f *fakeJobs) offsetOf(commandID string) int64 {
	off, _ := f.lookup(commandID)
	return off
}

// lookup says where command commandID went, if it was published here.
func (f *fakeJobs) lookup(commandID string) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	off, ok := f.at[commandID]
	return off, ok
}

// newest is the offset of the last command published to partition p (-1:
// none).
func (f *fakeJobs) newest(p int32) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.offsets[p] - 1
}

const fakePartitions = 4

func (f *fakeJobs) Publish(_ context.Context, cmd *chimev1.JobCommand) (producer.Receipt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return producer.Receipt{Partition: -1, Offset: -1}, f.err
	}
	f.cmds = append(f.cmds, proto.Clone(cmd).(*chimev1.JobCommand))
	if f.offsets == nil {
		f.offsets, f.at = map[int32]int64{}, map[string]int64{}
	}
	p := processors.PartitionOf(schema.JobKey(cmd.GetNamespace(), cmd.GetJobId()), fakePartitions)
	off := f.offsets[p]
	f.offsets[p]++
	f.at[cmd.GetCommandId()] = off
	if f.apply != nil {
		f.apply(cmd, p, off)
	}
	return producer.Receipt{CommandID: cmd.GetCommandId(), Partition: p, Offset: off}, nil
}

func (f *fakeJobs) PublishAsync(ctx context.Context, cmd *chimev1.JobCommand, done func(producer.Receipt, error)) {
	go done(f.Publish(ctx, cmd))
}

func (f *fakeJobs) commands() []*chimev1.JobCommand {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*chimev1.JobCommand(nil), f.cmds...)
}

// fakeNamespaces is the namespace table; fakeControl applies namespace
// commands to it with the processor's own decision function.
type fakeNamespaces struct {
	mu   sync.Mutex
	rows map[string]*chimev1.NamespaceConfig
}

func (f *fakeNamespaces) Names() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.rows)), nil
}

func (f *fakeNamespaces) Get(ns string) (*chimev1.NamespaceConfig, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.rows[ns]; ok {
		return proto.Clone(r).(*chimev1.NamespaceConfig), nil
	}
	return nil, nil
}

type fakeControl struct {
	ns *fakeNamespaces
	// hold keeps namespace commands from reaching the table (a slow view).
	hold     bool
	mu       sync.Mutex
	breakers []*chimev1.BreakerCommand
}

func (f *fakeControl) PublishNamespace(_ context.Context, cmd *chimev1.NamespaceCommand) error {
	if f.hold {
		return nil
	}
	raw, err := proto.Marshal(cmd)
	if err != nil {
		return err
	}
	f.ns.mu.Lock()
	defer f.ns.mu.Unlock()
	next, rej := namespaces.Apply(cmd.GetNamespace(), f.ns.rows[cmd.GetNamespace()], raw, time.Now())
	if rej != nil {
		return errors.New(rej.GetReason())
	}
	if next != nil {
		f.ns.rows[cmd.GetNamespace()] = next
	}
	return nil
}

func (f *fakeControl) PublishBreaker(_ context.Context, cmd *chimev1.BreakerCommand) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.breakers = append(f.breakers, cmd)
	return nil
}

type fakeBreakers map[string]*chimev1.BreakerStatus

func (f fakeBreakers) Get(ns string) *chimev1.BreakerStatus {
	if st, ok := f[ns]; ok {
		return st
	}
	return &chimev1.BreakerStatus{Namespace: ns, State: chimev1.BreakerState_BREAKER_STATE_CLOSED}
}

// fakeJobStates is the jobs table. Each partition has applied the job
// commands up to reached: a row put that names a command published
// through jobs has applied up to it, one that names a command published
// elsewhere has applied everything published so far.
type fakeJobStates struct {
	jobs    *fakeJobs
	mu      sync.Mutex
	rows    map[string]*chimev1.JobState
	reached jobquery.Offsets
	// after is the Offsets the last listing or count of each namespace
	// carried.
	after map[string]jobquery.Offsets
}

func (f *fakeJobStates) carried(ns string, after jobquery.Offsets) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.after == nil {
		f.after = map[string]jobquery.Offsets{}
	}
	f.after[ns] = after
}

// lastAfter is the Offsets the last listing or count of ns carried.
func (f *fakeJobStates) lastAfter(ns string) jobquery.Offsets {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.after[ns]
}

func (f *fakeJobStates) Get(ns, id string) (*chimev1.JobState, jobquery.Offsets, error) {
	key := schema.JobKey(ns, id)
	p := processors.PartitionOf(key, fakePartitions)
	f.mu.Lock()
	defer f.mu.Unlock()
	reached := jobquery.Offsets{}
	if off, ok := f.reached[p]; ok {
		reached[p] = off
	}
	return f.rows[key], reached, nil
}

// LiveJobs and ListJobs answer from a listing index of the rows, as the
// scheduler does.
func (f *fakeJobStates) LiveJobs(ns string, after jobquery.Offsets) (int64, error) {
	f.carried(ns, after)
	return jobindex.LiveIn([]*jobindex.Memory{f.index(ns)}, ns), nil
}

func (f *fakeJobStates) ListJobs(ns string, q jobindex.Query, after jobquery.Offsets) ([]jobquery.Job, bool, error) {
	f.carried(ns, after)
	entries, more := jobindex.List([]*jobindex.Memory{f.index(ns)}, ns, q)
	jobs := make([]jobquery.Job, len(entries))
	for i, e := range entries {
		jobs[i].Entry = e
		jobs[i].Row, _, _ = f.Get(ns, e.ID)
	}
	return jobs, more, nil
}

func (f *fakeJobStates) index(ns string) *jobindex.Memory {
	f.mu.Lock()
	defer f.mu.Unlock()
	x := jobindex.NewMemory()
	for k, st := range f.rows {
		if rns, id, _ := schema.SplitJobKey(k); rns == ns {
			var labels []schema.Label
			for k, v := range st.GetSpec().GetLabels() {
				labels = append(labels, schema.Label{Key: k, Value: v})
			}
			x.Change(ns, id, nil, &schema.JobSummary{Status: st.GetStatus(), Created: st.GetCreatedAt().AsTime().UnixNano()}, labels...)
		}
	}
	return x
}

// apply makes the table show an upsert (a scheduled row) or a cancel,
// published at offset off of partition p.
func (f *fakeJobStates) apply(cmd *chimev1.JobCommand, p int32, off int64) {
	ns, id := cmd.GetNamespace(), cmd.GetJobId()
	switch {
	case cmd.GetUpsert() != nil:
		f.set(ns, id, &chimev1.JobState{Spec: cmd.GetUpsert().GetSpec(), Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED, LastCommandId: cmd.GetCommandId()}, p, off)
	case cmd.GetCancel() != nil:
		f.set(ns, id, &chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_CANCELLED, LastCommandId: cmd.GetCommandId()}, p, off)
	default:
		f.set(ns, id, nil, p, off)
	}
}

// put makes the table show st: applied up to the command it names.
func (f *fakeJobStates) put(ns, id string, st *chimev1.JobState) {
	p, off := processors.PartitionOf(schema.JobKey(ns, id), fakePartitions), int64(-1)
	if c := st.GetLastCommandId(); c != "" && f.jobs != nil {
		var ok bool
		if off, ok = f.jobs.lookup(c); !ok {
			off = f.jobs.newest(p)
		}
	}
	f.set(ns, id, st, p, off)
}

// set puts st (unless nil), and partition p has applied up to off (-1:
// nothing more).
func (f *fakeJobStates) set(ns, id string, st *chimev1.JobState, p int32, off int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st != nil {
		f.rows[schema.JobKey(ns, id)] = st
	}
	if off >= 0 {
		if f.reached == nil {
			f.reached = jobquery.Offsets{}
		}
		f.reached.Add(p, off)
	}
}

// fakeAnalytics is the ClickHouse store: it records the queries it is
// asked and answers from its maps, or with err.
type fakeAnalytics struct {
	mu          sync.Mutex
	err         error
	transitions []analytics.Transition
	points      []analytics.Point
	attempts    []analytics.Attempt
	dead        []analytics.DeadLetter // newest first
	// replays are the first replay recorded of each dead letter, by
	// namespace and id; recordErr fails RecordReplays.
	replays   map[string]analytics.Replay
	recordErr error
	queries   []analyticsQuery

	// moreAttempts is what Attempts says of the pages after its page.
	moreAttempts bool
}

type analyticsQuery struct {
	kind     string
	ns, id   string
	from, to time.Time
	step     time.Duration
	limit    int
	before   analytics.DeadLetterCursor
	after    analytics.AttemptCursor
	classes  []string
}

func (f *fakeAnalytics) record(q analyticsQuery) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
	return f.err
}

func (f *fakeAnalytics) last() analyticsQuery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queries[len(f.queries)-1]
}

func (f *fakeAnalytics) BreakerHistory(_ context.Context, ns string, from, to time.Time) ([]analytics.Transition, error) {
	if err := f.record(analyticsQuery{kind: "history", ns: ns, from: from, to: to}); err != nil {
		return nil, err
	}
	return f.transitions, nil
}

func (f *fakeAnalytics) Stats(_ context.Context, ns string, from, to time.Time, step time.Duration) ([]analytics.Point, error) {
	if err := f.record(analyticsQuery{kind: "stats", ns: ns, from: from, to: to, step: step}); err != nil {
		return nil, err
	}
	return f.points, nil
}

func (f *fakeAnalytics) Attempts(_ context.Context, ns, id string, q analytics.AttemptQuery) ([]analytics.Attempt, bool, error) {
	if err := f.record(analyticsQuery{kind: "attempts", ns: ns, id: id, limit: q.Limit, after: q.After, classes: q.Classes}); err != nil {
		return nil, false, err
	}
	return f.attempts, f.moreAttempts, nil
}

func (f *fakeAnalytics) ListDeadLetters(_ context.Context, ns string, q analytics.DeadLetterQuery) ([]analytics.DeadLetter, error) {
	limit, before := q.Limit, q.Before
	if err := f.record(analyticsQuery{kind: "dead-letters", ns: ns, limit: limit, before: before}); err != nil {
		return nil, err
	}
	var out []analytics.DeadLetter
	for _, d := range f.selected(ns, q) {
		if !before.IsZero() && !(d.At.Before(before.At) || d.At.Equal(before.At) && d.ID < before.ID) {
			continue
		}
		if len(out) < limit {
			out = append(out, d)
		}
	}
	return out, nil
}

func (f *fakeAnalytics) CountDeadLetters(_ context.Context, ns string, q analytics.DeadLetterQuery) (int, error) {
	if err := f.record(analyticsQuery{kind: "count-dead-letters", ns: ns}); err != nil {
		return 0, err
	}
	return len(f.selected(ns, q)), nil
}

// selected are the namespace's dead letters q's filters keep, newest
// first, with their replays.
func (f *fakeAnalytics) selected(ns string, q analytics.DeadLetterQuery) []analytics.DeadLetter {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []analytics.DeadLetter
	for _, d := range f.dead {
		if d.Namespace != ns {
			continue
		}
		if (!q.From.IsZero() && d.At.Before(q.From)) || (!q.To.IsZero() && !d.At.Before(q.To)) || !strings.HasPrefix(d.JobID, q.JobIDPrefix) {
			continue
		}
		if r, ok := f.replays[ns+"\x00"+d.ID]; ok {
			d.Replay = &r
		}
		if q.Replayed != nil && *q.Replayed != (d.Replay != nil) {
			continue
		}
		out = append(out, d)
	}
	return out
}

func (f *fakeAnalytics) GetDeadLetter(_ context.Context, ns, id string) (*analytics.DeadLetter, error) {
	if err := f.record(analyticsQuery{kind: "dead-letter", ns: ns, id: id}); err != nil {
		return nil, err
	}
	for _, d := range f.selected(ns, analytics.DeadLetterQuery{}) {
		if d.ID == id {
			return &d, nil
		}
	}
	return nil, nil
}

// RecordReplays keeps the first replay of each dead letter, as the
// table's min does.
func (f *fakeAnalytics) RecordReplays(_ context.Context, ds []*analytics.DeadLetter) error {
	if err := f.record(analyticsQuery{kind: "record-replays"}); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.recordErr != nil {
		return f.recordErr
	}
	if f.replays == nil {
		f.replays = map[string]analytics.Replay{}
	}
	for _, d := range ds {
		k := d.Namespace + "\x00" + d.ID
		if r, ok := f.replays[k]; !ok || d.Replay.At.Before(r.At) {
			f.replays[k] = *d.Replay
		}
	}
	return nil
}
