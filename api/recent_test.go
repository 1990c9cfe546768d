package api

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views/jobquery"
)

// An accepted command answers reads until the jobs table shows it (its
// partition has applied the job commands up to its offset, or the row
// names it), or its TTL (on the server's clock) has passed.
func TestRecentJobs(t *testing.T) {
	t.Parallel()

	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	row := func(last string) *chimev1.JobState { return &chimev1.JobState{LastCommandId: last} }
	held := &chimev1.JobState{HeldCommand: []byte{1}}
	// The command is c1, acknowledged at offset 5 of partition 2.
	tests := []struct {
		name    string
		row     *chimev1.JobState // the table's row at the read
		reached jobquery.Offsets  // how far the partitions had applied before the read
		after   time.Duration
		want    bool // the remembered row answers
	}{
		{"no row yet, reach not known", nil, nil, time.Second, true},
		{"no row yet, partition behind", nil, jobquery.Offsets{2: 4}, time.Second, true},
		{"another partition caught up", nil, jobquery.Offsets{1: 9}, time.Second, true},
		{"the row from before, partition behind", row("c0"), jobquery.Offsets{2: 4}, time.Second, true},
		{"applied, and the row shows it", row("c1"), jobquery.Offsets{2: 5}, time.Second, false},
		{"the row shows it, reach not known", row("c1"), nil, time.Second, false},
		{"applied, no row: the scheduler rejected it", nil, jobquery.Offsets{2: 5}, time.Second, false},
		{"applied, and a later command from elsewhere", row("x9"), jobquery.Offsets{2: 8}, time.Second, false},
		{"applied, repeating the spec: the row did not change", row("c0"), jobquery.Offsets{2: 5}, time.Second, false},
		{"applied, but held for its namespace", held, jobquery.Offsets{2: 6}, time.Second, true},
		{"past the TTL", nil, nil, time.Minute + time.Nanosecond, false},
		{"at the TTL", nil, nil, time.Minute, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRecentJobs(time.Minute, 10)
			r.put(testCommand("shop/a", "c1", nil), producer.Receipt{Partition: 2, Offset: 5}, &chimev1.JobState{LastCommandId: "c1", Fires: 3}, t0)
			got := r.get("shop/a", tt.row, tt.reached, t0.Add(tt.after))
			require.Equal(t, tt.want, got != nil)
			if tt.want {
				require.Equal(t, uint64(3), got.GetFires())
				return
			}
			require.Zero(t, r.len(), "an entry the table has caught up with is retired")
		})
	}
}

// Commands of one job in flight together: the table showing the first
// does not retire the second.
func TestRecentJobsRemembersCommandsInFlight(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	r := newRecentJobs(time.Minute, 10)
	r.put(testCommand("shop/a", "c1", nil), producer.Receipt{Partition: 0, Offset: 5}, &chimev1.JobState{LastCommandId: "c1"}, t0)
	r.put(testCommand("shop/a", "c2", nil), producer.Receipt{Partition: 0, Offset: 7}, &chimev1.JobState{LastCommandId: "c2"}, t0.Add(time.Second))
	require.Equal(t, 1, r.len())
	got := r.get("shop/a", &chimev1.JobState{LastCommandId: "c1"}, jobquery.Offsets{0: 6}, t0.Add(2*time.Second))
	require.Equal(t, "c2", got.GetLastCommandId())
	require.Nil(t, r.get("shop/a", &chimev1.JobState{LastCommandId: "c2"}, jobquery.Offsets{0: 7}, t0.Add(2*time.Second)))
}

// testCommand is a command for key ("ns/id"): an upsert of spec, or a
// pause if spec is nil.
func testCommand(key, id string, spec *chimev1.JobSpec) *chimev1.JobCommand {
	ns, job, _ := schema.SplitJobKey(key)
	if spec != nil {
		return &chimev1.JobCommand{CommandId: id, Namespace: ns, JobId: job, Command: &chimev1.JobCommand_Upsert{Upsert: &chimev1.Upsert{Spec: spec}}}
	}
	return &chimev1.JobCommand{CommandId: id, Namespace: ns, JobId: job, Command: &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}}}
}

// An upsert that repeats the spec of the live job is not pending: the
// scheduler ignores it, so the table is the truth at once.
func TestRecentJobsRepeatedSpec(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	spec := &chimev1.JobSpec{Namespace: "shop", Id: "a", Labels: map[string]string{"v": "1"}}
	other := &chimev1.JobSpec{Namespace: "shop", Id: "a", Labels: map[string]string{"v": "2"}}
	tests := []struct {
		name string
		cmd  *chimev1.JobCommand
		row  *chimev1.JobState
		want bool // the remembered row answers
	}{
		{"the same spec, live", testCommand("shop/a", "c1", spec), &chimev1.JobState{Spec: spec, Status: chimev1.JobStatus_JOB_STATUS_PAUSED}, false},
		{"another spec", testCommand("shop/a", "c1", other), &chimev1.JobState{Spec: spec, Status: chimev1.JobStatus_JOB_STATUS_PAUSED}, true},
		{"the same spec, ended: created again", testCommand("shop/a", "c1", spec), &chimev1.JobState{Spec: spec, Status: chimev1.JobStatus_JOB_STATUS_COMPLETED}, true},
		{"a pause is not an upsert", testCommand("shop/a", "c1", nil), &chimev1.JobState{Spec: spec, Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRecentJobs(time.Minute, 10)
			st := &chimev1.JobState{Spec: spec, LastCommandId: "c1"} // a pause keeps the spec
			if u := tt.cmd.GetUpsert(); u != nil {
				st.Spec = u.GetSpec()
			}
			r.put(tt.cmd, producer.Receipt{Partition: 0, Offset: 5}, st, t0)
			require.Equal(t, tt.want, r.get("shop/a", tt.row, jobquery.Offsets{0: 4}, t0) != nil)
		})
	}
}

func TestRecentJobsForgetsTheOldest(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	r := newRecentJobs(time.Minute, 2)
	for _, k := range []string{"shop/a", "shop/b", "shop/a", "shop/c"} {
		r.put(testCommand(k, "c-"+k, nil), producer.Receipt{Partition: 0, Offset: 1}, &chimev1.JobState{}, t0)
	}
	require.Equal(t, 2, r.len())
	require.Nil(t, r.get("shop/b", nil, nil, t0), "b was the oldest once a was put again")
	require.NotNil(t, r.get("shop/a", nil, nil, t0))
	require.NotNil(t, r.get("shop/c", nil, nil, t0))
}

// The memory stays bounded: by max for distinct jobs, by twice max for one
// job put again and again, and entries past the TTL give their chunks back
// at the next put.
func TestRecentJobsMemoryIsBounded(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	big := &chimev1.JobState{Spec: &chimev1.JobSpec{Id: strings.Repeat("x", 4000)}}

	r := newRecentJobs(time.Minute, 100)
	for i := range 1000 {
		r.put(testCommand(fmt.Sprintf("shop/j%d", i), fmt.Sprintf("c%d", i), nil), producer.Receipt{Offset: int64(i)}, big, t0)
	}
	require.Equal(t, 100, r.len())
	require.Nil(t, r.get("shop/j899", nil, nil, t0))
	require.Len(t, r.get("shop/j900", nil, nil, t0).GetSpec().GetId(), 4000)
	require.LessOrEqual(t, len(r.chunks), 100*4100/recentChunk+2)

	for i := range 1000 {
		r.put(testCommand("shop/again", fmt.Sprintf("a%d", i), nil), producer.Receipt{Partition: 1, Offset: int64(i)}, &chimev1.JobState{LastCommandId: fmt.Sprintf("a%d", i)}, t0)
	}
	require.LessOrEqual(t, len(r.slots), 200)
	require.Equal(t, "a999", r.get("shop/again", nil, nil, t0).GetLastCommandId())
	require.Equal(t, "a999", r.get("shop/again", &chimev1.JobState{LastCommandId: "a998"}, jobquery.Offsets{1: 998}, t0).GetLastCommandId(),
		"the last command is still in flight")

	r.put(testCommand("shop/late", "l1", nil), producer.Receipt{Partition: 0, Offset: 1}, big, t0.Add(time.Minute+time.Second))
	require.Equal(t, 1, r.len(), "everything else is past the TTL")
	require.Len(t, r.slots, 1)
	require.Len(t, r.chunks, 1)
}
