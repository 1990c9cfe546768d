package api

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/schema/chimev1"
)

// An accepted command answers reads until the jobs table shows it, or a
// later command, or its TTL (on the server's clock) has passed.
func TestRecentJobs(t *testing.T) {
	t.Parallel()

	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	row := func(last string) *chimev1.JobState { return &chimev1.JobState{LastCommandId: last} }
	tests := []struct {
		name  string
		row   *chimev1.JobState // the table's row at the read
		after time.Duration
		want  bool // the remembered row answers
	}{
		{"no row yet", nil, time.Second, true},
		{"the row from before", row("c0"), time.Second, true},
		{"the row shows the command", row("c1"), time.Second, false},
		{"a later command from elsewhere", row("x9"), time.Second, false},
		{"past the TTL", nil, time.Minute + time.Nanosecond, false},
		{"at the TTL", nil, time.Minute, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRecentJobs(time.Minute, 10)
			r.put("shop/a", "c1", "c0", &chimev1.JobState{LastCommandId: "c1", Fires: 3}, t0)
			got := r.get("shop/a", tt.row, t0.Add(tt.after))
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
	r.put("shop/a", "c1", "c0", &chimev1.JobState{LastCommandId: "c1"}, t0)
	r.put("shop/a", "c2", "c0", &chimev1.JobState{LastCommandId: "c2"}, t0.Add(time.Second))
	require.Equal(t, 1, r.len())
	got := r.get("shop/a", &chimev1.JobState{LastCommandId: "c1"}, t0.Add(2*time.Second))
	require.Equal(t, "c2", got.GetLastCommandId())
	require.Nil(t, r.get("shop/a", &chimev1.JobState{LastCommandId: "c2"}, t0.Add(2*time.Second)))
}

func TestRecentJobsForgetsTheOldest(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	r := newRecentJobs(time.Minute, 2)
	for _, k := range []string{"shop/a", "shop/b", "shop/a", "shop/c"} {
		r.put(k, "c-"+k, "", &chimev1.JobState{}, t0)
	}
	require.Equal(t, 2, r.len())
	require.Nil(t, r.get("shop/b", nil, t0), "b was the oldest once a was put again")
	require.NotNil(t, r.get("shop/a", nil, t0))
	require.NotNil(t, r.get("shop/c", nil, t0))
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
		r.put(fmt.Sprintf("shop/j%d", i), fmt.Sprintf("c%d", i), "", big, t0)
	}
	require.Equal(t, 100, r.len())
	require.Nil(t, r.get("shop/j899", nil, t0))
	require.Len(t, r.get("shop/j900", nil, t0).GetSpec().GetId(), 4000)
	require.LessOrEqual(t, len(r.chunks), 100*4100/recentChunk+2)

	for i := range 1000 {
		r.put("shop/again", fmt.Sprintf("a%d", i), "", &chimev1.JobState{LastCommandId: fmt.Sprintf("a%d", i)}, t0)
	}
	require.LessOrEqual(t, len(r.slots), 200)
	require.Equal(t, "a999", r.get("shop/again", nil, t0).GetLastCommandId())
	require.Equal(t, "a999", r.get("shop/again", &chimev1.JobState{LastCommandId: "a984"}, t0).GetLastCommandId(),
		"the 16 commands before the last are still in flight")

	r.put("shop/late", "l1", "", big, t0.Add(time.Minute+time.Second))
	require.Equal(t, 1, r.len(), "everything else is past the TTL")
	require.Len(t, r.slots, 1)
	require.Len(t, r.chunks, 1)
}
