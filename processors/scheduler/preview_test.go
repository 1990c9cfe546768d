package scheduler

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/schedule"
)

// TestPreviewEqualsTheFiresMade: over a simulated week, the fires the
// scheduler makes for a schedule with jitter are the ones
// schedule.Upcoming (POST /v1/schedules:preview, a job's next_fires)
// shows beforehand: the same numbers, scheduled times and jittered times,
// across a daylight-saving change in the schedule's zone.
func TestPreviewEqualsTheFiresMade(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 10, 22, 6, 0, 0, 0, time.UTC) // a week across Europe's change on 25 October
	for _, tc := range []struct {
		name string
		s    *chimev1.Schedule
	}{
		{"cron in a zone, weekdays", &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 9,17 * * 1-5", Timezone: "Europe/Berlin"}}, Jitter: durationpb.New(20 * time.Minute)}},
		{"cron every 30 minutes at night", &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "*/30 1-3 * * *", Timezone: "Europe/Berlin"}}, Jitter: durationpb.New(5 * time.Minute)}},
		{"every 7 hours", func() *chimev1.Schedule { s := every(7 * time.Hour); s.Jitter = durationpb.New(time.Hour); return s }()},
		{"one-shot", func() *chimev1.Schedule {
			s := at(start.Add(50 * time.Hour))
			s.Jitter = durationpb.New(time.Minute)
			return s
		}()},
		{"one-shot already past", at(start.Add(-time.Hour))},
		{"every 3 hours with jitter, not on the 24th nor at night in Berlin", &chimev1.Schedule{
			Kind:   &chimev1.Schedule_Every{Every: &chimev1.Every{Interval: durationpb.New(3 * time.Hour)}},
			Jitter: durationpb.New(20 * time.Minute),
			Exclude: []*chimev1.Exclusion{
				{Date: "2026-10-24", Timezone: "Europe/Berlin"},
				{Cron: "0 22 * * *", Duration: durationpb.New(8 * time.Hour), Timezone: "Europe/Berlin"},
			}}},
		{"every 2 hours, started a day before its creation", &chimev1.Schedule{
			Kind:   &chimev1.Schedule_Every{Every: &chimev1.Every{Interval: durationpb.New(2 * time.Hour), StartAt: timestamppb.New(start.Add(-24*time.Hour + time.Minute))}},
			Jitter: durationpb.New(30 * time.Minute)}},
		{"cron started a week before its creation", &chimev1.Schedule{
			Kind:   &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "15 */3 * * *", Timezone: "America/New_York", StartAt: timestamppb.New(start.Add(-7 * 24 * time.Hour))}},
			Jitter: durationpb.New(10 * time.Minute)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			r.command(upsert(httpSpec(tc.s), start), start)
			plan, err := schedule.Compile(tc.s)
			require.NoError(t, err)
			preview := plan.WithAnchor(start).Preview(r.key, start, 200)

			end := start.Add(7 * 24 * time.Hour)
			acked := 0
			for r.st != nil && r.st.GetTimerAt() != nil && !r.st.GetTimerAt().AsTime().After(end) {
				// The pump ticks a row at its timer, or at once if that
				// is already past when the job is created.
				r.tick(later(r.st.GetTimerAt().AsTime(), start))
				for ; acked < len(r.dues); acked++ {
					r.command(ack(r.dues[acked], chimev1.AckResult_ACK_RESULT_SUCCEEDED), r.dues[acked].GetFireAt().AsTime())
				}
			}
			require.NotEmpty(t, r.dues)
			if strings.Contains(tc.name, "not on the 24th") {
				berlin, err := time.LoadLocation("Europe/Berlin")
				require.NoError(t, err)
				for _, d := range r.dues {
					local := d.GetScheduledAt().AsTime().In(berlin)
					require.NotEqual(t, "2026-10-24", local.Format("2006-01-02"), "an excluded day")
					require.True(t, local.Hour() >= 6 && local.Hour() < 22, "an excluded night: %v", local)
				}
				require.Greater(t, len(r.dues), 20)
			}
			if strings.Contains(tc.name, "before its creation") {
				require.Greater(t, r.dues[0].GetFireSeq(), uint64(1), "the first fire catches up: the occurrences before it are skipped")
			}
			for i, d := range r.dues {
				require.Less(t, i, len(preview), "more fires than the preview shows")
				p := preview[i]
				require.Equal(t, p.Seq, d.GetFireSeq(), "fire %d", i)
				require.Equal(t, p.ScheduledAt, d.GetScheduledAt().AsTime(), "fire %d scheduled", i)
				require.Equal(t, p.FireAt, d.GetFireAt().AsTime(), "fire %d's jittered time", i)
			}
			made := len(r.dues)
			if made < len(preview) {
				require.True(t, preview[made].FireAt.After(end), "the preview's next fire, %v, was not made by %v", preview[made].FireAt, end)
			}
		})
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
