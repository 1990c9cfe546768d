package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

func rfc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func firstN(t *testing.T, c *Compiled, from time.Time, n int) []string {
	t.Helper()
	var out []string
	for cur, ok := c.First(from); ok && len(out) < n; cur, ok = c.Next(cur) {
		out = append(out, cur.UTC().Format(time.RFC3339))
	}
	return out
}

// TestExclusionsAtDayBoundariesInAZone: an excluded date is midnight to
// midnight in its zone, not in UTC; a cron window is [opening, opening +
// duration) in its zone, across a DST change.
func TestExclusionsAtDayBoundariesInAZone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		s    *chimev1.Schedule
		from string
		want []string
	}{
		{
			"midnight in Kolkata on a holiday",
			&chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 0 * * *", Timezone: "Asia/Kolkata"}},
				Exclude: []*chimev1.Exclusion{{Date: "2026-12-25"}}},
			"2026-12-23T12:00:00Z",
			// 00:00 IST is 18:30 UTC the day before; the 25th's is not made.
			[]string{"2026-12-23T18:30:00Z", "2026-12-25T18:30:00Z", "2026-12-26T18:30:00Z"},
		},
		{
			"every 30 minutes around Berlin's midnight, the date in Berlin",
			&chimev1.Schedule{Kind: &chimev1.Schedule_Every{Every: &chimev1.Every{Interval: durationpb.New(30 * time.Minute), StartAt: timestamppb.New(rfc("2026-12-24T22:00:00Z"))}},
				Exclude: []*chimev1.Exclusion{{Date: "2026-12-25", Timezone: "Europe/Berlin"}}},
			"2026-12-24T00:00:00Z",
			// 22:30Z is 23:30 on the 24th in Berlin; 23:00Z is the 25th there,
			// and so is everything up to 23:00Z on the 25th.
			[]string{"2026-12-24T22:00:00Z", "2026-12-24T22:30:00Z", "2026-12-25T23:00:00Z", "2026-12-25T23:30:00Z"},
		},
		{
			"hourly, not for 62 hours from Friday 18:00 in Berlin, across the end of summer time",
			&chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 * * * *", Timezone: "Europe/Berlin"}},
				Exclude: []*chimev1.Exclusion{{Cron: "0 18 * * 5", Duration: durationpb.New(62 * time.Hour)}}},
			"2026-10-23T15:30:00Z", // Friday 17:30 in Berlin (UTC+2)
			// 16:00Z is 18:00: the window opens. A window's duration is
			// elapsed time: 62 h later it is Monday 06:00Z, 07:00 in
			// Berlin since the clocks went back on Sunday, not 08:00.
			[]string{"2026-10-26T06:00:00Z", "2026-10-26T07:00:00Z"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Compile(tc.s)
			require.NoError(t, err)
			require.Equal(t, tc.want, firstN(t, c.WithAnchor(rfc(tc.from)), rfc(tc.from), len(tc.want)))
		})
	}
}

// TestLatestSkipsExclusions: after downtime the latest occurrence due is
// the latest one not excluded, and excluded times are not counted.
func TestLatestSkipsExclusions(t *testing.T) {
	t.Parallel()
	c, err := Compile(&chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 12 * * *"}},
		Exclude: []*chimev1.Exclusion{{Date: "2026-12-25"}, {Date: "2026-12-26"}}})
	require.NoError(t, err)
	last, count, exact := c.Latest(rfc("2026-12-23T12:00:00Z"), rfc("2026-12-26T20:00:00Z"), 100)
	require.Equal(t, rfc("2026-12-24T12:00:00Z"), last)
	require.EqualValues(t, 2, count)
	require.True(t, exact)
}

func TestExclusionErrors(t *testing.T) {
	t.Parallel()
	every := func(ex ...*chimev1.Exclusion) *chimev1.Schedule {
		return &chimev1.Schedule{Kind: &chimev1.Schedule_Every{Every: &chimev1.Every{Interval: durationpb.New(time.Hour)}}, Exclude: ex}
	}
	for _, tc := range []struct {
		s     *chimev1.Schedule
		field string
	}{
		{&chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(rfc("2026-12-25T10:00:00Z"))}, Exclude: []*chimev1.Exclusion{{Date: "2026-12-25"}}}, "exclude"},
		{every(&chimev1.Exclusion{Date: "25.12.2026"}), "exclude[0].date"},
		{every(&chimev1.Exclusion{}, &chimev1.Exclusion{Date: "2026-12-25"}), "exclude[0]"},
		{every(&chimev1.Exclusion{Date: "2026-12-25"}, &chimev1.Exclusion{Date: "2026-12-25", Cron: "* * * * *"}), "exclude[1]"},
		{every(&chimev1.Exclusion{Cron: "0 0 * * 6"}), "exclude[0].duration"},
		{every(&chimev1.Exclusion{Cron: "0 0 * * 6", Duration: durationpb.New(400 * 24 * time.Hour)}), "exclude[0].duration"},
		{every(&chimev1.Exclusion{Cron: "61 0 * * 6", Duration: durationpb.New(time.Hour)}), "exclude[0].cron"},
		{every(&chimev1.Exclusion{Date: "2026-12-25", Timezone: "Mars/Olympus"}), "exclude[0].timezone"},
	} {
		_, err := Compile(tc.s)
		var se *Error
		require.ErrorAs(t, err, &se, "%v", tc.s)
		require.Equal(t, tc.field, se.Field, "%v: %v", tc.s, err)
	}
}

// TestEverythingExcludedEnds: a schedule with no occurrence left outside
// its exclusions has none, rather than looping.
func TestEverythingExcludedEnds(t *testing.T) {
	t.Parallel()
	c, err := Compile(&chimev1.Schedule{Kind: &chimev1.Schedule_Every{Every: &chimev1.Every{Interval: durationpb.New(time.Minute), StartAt: timestamppb.New(rfc("2026-01-01T00:00:00Z"))}},
		Exclude: []*chimev1.Exclusion{{Cron: "0 0 * * *", Duration: durationpb.New(24 * time.Hour)}}})
	require.NoError(t, err)
	_, ok := c.First(rfc("2026-01-01T00:00:00Z"))
	require.False(t, ok)
}

// TestBetween: a backfill's occurrences: an every grid extended before
// the job's first occurrence, a cron expression over any range, with
// exclusions and end_at applied, at most max.
func TestBetween(t *testing.T) {
	t.Parallel()
	every, err := Compile(&chimev1.Schedule{Kind: &chimev1.Schedule_Every{Every: &chimev1.Every{Interval: durationpb.New(time.Hour)}},
		Exclude: []*chimev1.Exclusion{{Date: "2026-12-24"}}})
	require.NoError(t, err)
	got := every.WithAnchor(rfc("2026-12-25T10:30:00Z")).Between(rfc("2026-12-24T22:00:00Z"), rfc("2026-12-25T13:00:00Z"), 100)
	require.Len(t, got, 13, "00:30 to 12:30 on the 25th; the 24th excluded")
	require.Equal(t, rfc("2026-12-25T00:30:00Z"), got[0])
	require.Equal(t, rfc("2026-12-25T12:30:00Z"), got[12])

	cron, err := Compile(&chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 9 * * *", Timezone: "Asia/Kolkata"}}})
	require.NoError(t, err)
	got = cron.Between(rfc("2026-12-01T00:00:00Z"), rfc("2026-12-04T00:00:00Z"), 2)
	require.Equal(t, []time.Time{rfc("2026-12-01T03:30:00Z"), rfc("2026-12-02T03:30:00Z")}, got, "at most max")
}
