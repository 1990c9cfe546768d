package api

import (
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// recentJobs gives read-your-writes: the job commands this process
// published recently, by job key. GET .../jobs/{id} answers from here while
// the jobs table does not yet show the command, for at most ttl; after
// that the table is the truth (the scheduler may have rejected the command).
//
// The table shows the command once the row's last_command_id is the
// command's, or is none of the ids the row could show before it (the row's
// when the command was accepted, and this process's earlier commands still
// in flight for the job): then a later command, from another client or
// instance, has been applied after it, and the table is newer than this
// memory.
type recentJobs struct {
	ttl time.Duration

	// mu makes put's read of the previous entry and its replacement one
	// step.
	mu sync.Mutex
	// entries forgets the oldest beyond its size, and drops entries past
	// ttl by the wall clock to free their memory; whether one has expired
	// is decided on the server's clock (recentJob.at).
	entries *expirable.LRU[string, *recentJob]
}

type recentJob struct {
	commandID string
	// before are the last_command_ids the row may show while the command
	// is still on its way.
	before []string
	at     time.Time
	// state is the row as the scheduler is expected to write it, encoded:
	// a batch of 100,000 creates keeps 100,000 of them for the TTL, and
	// decoded rows (spec and all) cost four times the memory.
	state []byte
}

func newRecentJobs(ttl time.Duration, max int) *recentJobs {
	return &recentJobs{ttl: ttl, entries: expirable.NewLRU[string, *recentJob](max, nil, ttl)}
}

// maxBefore bounds the commands of one job remembered as in flight.
const maxBefore = 16

// put remembers a command; viewID is the table's last_command_id for the
// job now ("" if it has no row).
func (r *recentJobs) put(key, commandID, viewID string, state *chimev1.JobState, now time.Time) {
	raw, err := schema.Marshal(state)
	if err != nil {
		return // cannot happen for a row built here; read-your-writes is best effort
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	before := []string{viewID}
	if old, ok := r.entries.Peek(key); ok && now.Sub(old.at) <= r.ttl {
		before = append(old.before, old.commandID)
		if !slices.Contains(before, viewID) {
			before = append(before, viewID)
		}
		if len(before) > maxBefore {
			before = before[len(before)-maxBefore:]
		}
	}
	// Replacing an entry makes it the newest, as a new one.
	r.entries.Remove(key)
	r.entries.Add(key, &recentJob{commandID: commandID, before: before, at: now, state: raw})
}

// get returns the expected row if the table's row (nil if none) does not
// show the recent command yet. A row that shows it retires the entry.
func (r *recentJobs) get(key string, row *chimev1.JobState, now time.Time) *chimev1.JobState {
	e, ok := r.entries.Peek(key)
	if !ok {
		return nil
	}
	if now.Sub(e.at) > r.ttl || (row != nil && (row.GetLastCommandId() == e.commandID || !slices.Contains(e.before, row.GetLastCommandId()))) {
		r.remove(key, e)
		return nil
	}
	st := new(chimev1.JobState)
	if schema.UnmarshalInternal(e.state, st) != nil {
		return nil
	}
	return st
}

// remove retires e, unless put has replaced it meanwhile.
func (r *recentJobs) remove(key string, e *recentJob) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.entries.Peek(key); ok && cur == e {
		r.entries.Remove(key)
	}
}

func (r *recentJobs) len() int { return r.entries.Len() }

// accepted remembers upserts of one namespace for read-your-writes,
// reading their rows in one call.
func (s *server) accepted(convs []*converted, now time.Time) {
	if len(convs) == 0 {
		return
	}
	ids := make([]string, len(convs))
	for i, conv := range convs {
		ids[i] = conv.cmd.GetJobId()
	}
	// Unread rows only cost memory: each upsert is then remembered.
	rows, err := s.cfg.JobStates.Rows(convs[0].cmd.GetNamespace(), ids)
	if err != nil {
		rows = make([]*chimev1.JobState, len(convs))
	}
	for i, conv := range convs {
		s.remember(conv, rows[i], now)
	}
}

// remember keeps an upsert for read-your-writes, given the job's row as
// the table has it. An upsert that repeats the spec of a live job is not
// remembered: the scheduler ignores it, so the table will never show its
// command and already is the truth.
func (s *server) remember(conv *converted, row *chimev1.JobState, now time.Time) {
	cmd := conv.cmd
	if row != nil && !schema.JobEnded(row.GetStatus()) && proto.Equal(row.GetSpec(), cmd.GetUpsert().GetSpec()) {
		return
	}
	st := &chimev1.JobState{
		Spec:          cmd.GetUpsert().GetSpec(),
		Status:        chimev1.JobStatus_JOB_STATUS_SCHEDULED,
		CreatedAt:     timestamppb.New(now),
		UpdatedAt:     timestamppb.New(now),
		LastCommandId: cmd.GetCommandId(),
	}
	if conv.next != nil {
		t, _ := time.Parse(time.RFC3339Nano, *conv.next)
		st.NextScheduledAt = timestamppb.New(t)
	}
	s.recent.put(schema.JobKey(cmd.GetNamespace(), cmd.GetJobId()), cmd.GetCommandId(), row.GetLastCommandId(), st, now)
}
