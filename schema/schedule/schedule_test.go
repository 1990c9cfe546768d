package schedule

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// Builders keep the tables readable.

func ts(t time.Time) *timestamppb.Timestamp    { return timestamppb.New(t) }
func dur(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

func utc(y int, m time.Month, d, h, min, s int) time.Time {
	return time.Date(y, m, d, h, min, s, 0, time.UTC)
}

func atSched(t time.Time) *chimev1.Schedule {
	return &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: ts(t)}}
}

func everySched(e *chimev1.Every) *chimev1.Schedule {
	return &chimev1.Schedule{Kind: &chimev1.Schedule_Every{Every: e}}
}

func cronSched(expr, tz string) *chimev1.Schedule {
	return &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: expr, Timezone: tz}}}
}

func withJitter(s *chimev1.Schedule, d time.Duration) *chimev1.Schedule {
	s.Jitter = dur(d)
	return s
}

func mustCompile(t *testing.T, s *chimev1.Schedule) *Compiled {
	t.Helper()
	c, err := Compile(s)
	require.NoError(t, err)
	return c
}

func TestCompileRejects(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 1, 1, 0, 0, 0)
	tests := []struct {
		name   string
		in     *chimev1.Schedule
		field  string
		reason string // substring
	}{
		{"nil schedule", nil, "", "schedule is missing"},
		{"no kind", &chimev1.Schedule{}, "", "set exactly one of at, every, cron"},
		{"at wrapper without time", &chimev1.Schedule{Kind: &chimev1.Schedule_At{}}, "at", "is not set"},
		{"at zero", &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: &timestamppb.Timestamp{}}}, "at", "is not set"},
		{"at bad nanos", &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: &timestamppb.Timestamp{Seconds: 10, Nanos: -1}}}, "at", "invalid timestamp"},
		{"at after year 9999", &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: &timestamppb.Timestamp{Seconds: 253402300800}}}, "at", "invalid timestamp"},
		{"every wrapper empty", &chimev1.Schedule{Kind: &chimev1.Schedule_Every{}}, "every.interval", "is not set"},
		{"every no interval", everySched(&chimev1.Every{}), "every.interval", "is not set"},
		{"every below 1s", everySched(&chimev1.Every{Interval: dur(999 * time.Millisecond)}), "every.interval", "must be at least 1s"},
		{"every zero", everySched(&chimev1.Every{Interval: dur(0)}), "every.interval", "must be at least 1s"},
		{"every negative", everySched(&chimev1.Every{Interval: dur(-time.Hour)}), "every.interval", "must be at least 1s"},
		{"every mixed signs", everySched(&chimev1.Every{Interval: &durationpb.Duration{Seconds: 5, Nanos: -1}}), "every.interval", "invalid duration"},
		{"every overflows time.Duration", everySched(&chimev1.Every{Interval: &durationpb.Duration{Seconds: 315576000000}}), "every.interval", "too long"},
		{"every bad start", everySched(&chimev1.Every{Interval: dur(time.Minute), StartAt: &timestamppb.Timestamp{Nanos: 2e9}}), "every.start_at", "invalid timestamp"},
		{"every bad end", everySched(&chimev1.Every{Interval: dur(time.Minute), EndAt: &timestamppb.Timestamp{Seconds: -62135596801}}), "every.end_at", "invalid timestamp"},
		{"every end equals start", everySched(&chimev1.Every{Interval: dur(time.Minute), StartAt: ts(t0), EndAt: ts(t0)}), "every.end_at", "not after start_at"},
		{"every end before start", everySched(&chimev1.Every{Interval: dur(time.Minute), StartAt: ts(t0), EndAt: ts(t0.Add(-time.Second))}), "every.end_at", "not after start_at"},
		{"cron wrapper empty", &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{}}, "cron.expr", "is empty"},
		{"cron blank", cronSched("   ", ""), "cron.expr", "is empty"},
		{"cron step zero", cronSched("*/0 * * * *", ""), "cron.expr", `cron "*/0 * * * *": minute field "*/0": step of range should be a positive number`},
		{"cron too few fields", cronSched("* * * *", ""), "cron.expr", `cron "* * * *" has 4 fields; give 5 fields`},
		{"cron too many fields", cronSched("0 * * * * * *", ""), "cron.expr", "has 7 fields"},
		{"cron minute out of range", cronSched("60 * * * *", ""), "cron.expr", `minute field "60": end of range (60) above maximum (59)`},
		{"cron second out of range", cronSched("61 0 * * * *", ""), "cron.expr", `second field "61"`},
		{"cron hour out of range", cronSched("0 24 * * *", ""), "cron.expr", `hour field "24"`},
		{"cron dom zero", cronSched("0 0 0 * *", ""), "cron.expr", `day-of-month field "0"`},
		{"cron bad month name", cronSched("0 0 1 FOO *", ""), "cron.expr", `month field "FOO"`},
		{"cron dow 7", cronSched("0 0 * * 7", ""), "cron.expr", `day-of-week field "7"`},
		{"cron reversed range", cronSched("0 10-5 * * *", ""), "cron.expr", "beyond end of range"},
		{"cron garbage", cronSched("a b c d e", ""), "cron.expr", `minute field "a"`},
		{"cron TZ prefix", cronSched("TZ=Europe/Berlin 0 * * * *", ""), "cron.expr", "time zone prefixes are not accepted; drop the prefix and set cron.timezone"},
		{"cron CRON_TZ prefix", cronSched("CRON_TZ=UTC 0 * * * *", ""), "cron.expr", "time zone prefixes are not accepted"},
		{"cron TZ prefix alone (robfig panics on it)", cronSched("TZ=x", ""), "cron.expr", "time zone prefixes"},
		{"cron @every", cronSched("@every 5m", ""), "cron.expr", "use an every schedule"},
		{"cron unknown descriptor", cronSched("@fortnightly", ""), "cron.expr", "unknown descriptor"},
		{"cron never fires", cronSched("0 0 30 2 *", ""), "cron.expr", `cron "0 0 30 2 *" never fires`},
		{"cron never fires 31 April", cronSched("0 0 31 4 *", ""), "cron.expr", "never fires"},
		{"cron unknown zone", cronSched("0 * * * *", "Mars/Olympus_Mons"), "cron.timezone", `unknown time zone "Mars/Olympus_Mons"`},
		{"cron Local zone", cronSched("0 * * * *", "Local"), "cron.timezone", "depends on the machine"},
		{"cron zone path escape", cronSched("0 * * * *", "../../etc/passwd"), "cron.timezone", "unknown time zone"},
		{"cron end before start", &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 * * * *", StartAt: ts(t0), EndAt: ts(t0.Add(-time.Hour))}}}, "cron.end_at", "not after start_at"},
		{"cron bad start", &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 * * * *", StartAt: &timestamppb.Timestamp{Nanos: -5}}}}, "cron.start_at", "invalid timestamp"},
		{"cron no occurrence in window", &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 0 1 6 *", StartAt: ts(t0), EndAt: ts(t0.Add(24 * time.Hour))}}}, "cron.end_at", "has no occurrence between start_at"},
		{"jitter negative", withJitter(atSched(t0), -time.Second), "jitter", "must not be negative"},
		{"jitter over an hour", withJitter(cronSched("0 * * * *", ""), time.Hour+time.Nanosecond), "jitter", "at most 1h0m0s"},
		{"jitter equals interval", withJitter(everySched(&chimev1.Every{Interval: dur(time.Minute)}), time.Minute), "jitter", "shorter than every.interval"},
		{"jitter invalid", &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: ts(t0)}, Jitter: &durationpb.Duration{Seconds: -1, Nanos: 1}}, "jitter", "invalid duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Compile(tt.in)
			require.Nil(t, c)
			var se *Error
			require.ErrorAs(t, err, &se)
			require.Equal(t, tt.field, se.Field)
			require.Contains(t, se.Reason, tt.reason)
		})
	}
}

func TestCompileAccepts(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 1, 1, 0, 0, 0)
	tests := []struct {
		name      string
		in        *chimev1.Schedule
		kind      Kind
		recurring bool
		jitter    time.Duration
	}{
		{"at in the past", atSched(utc(2001, 1, 1, 0, 0, 0)), KindAt, false, 0},
		{"at with jitter of an hour", withJitter(atSched(t0), time.Hour), KindAt, false, time.Hour},
		{"every 1s", everySched(&chimev1.Every{Interval: dur(time.Second)}), KindEvery, true, 0},
		{"every with window", everySched(&chimev1.Every{Interval: dur(time.Hour), StartAt: ts(t0), EndAt: ts(t0.Add(time.Second))}), KindEvery, true, 0},
		{"every jitter just under interval", withJitter(everySched(&chimev1.Every{Interval: dur(time.Minute)}), time.Minute-time.Nanosecond), KindEvery, true, time.Minute - time.Nanosecond},
		{"cron 5 fields", cronSched("*/5 * * * *", ""), KindCron, true, 0},
		{"cron 6 fields", cronSched("30 */5 * * * *", "UTC"), KindCron, true, 0},
		{"cron descriptor", cronSched("@daily", "America/New_York"), KindCron, true, 0},
		{"cron padded", cronSched("  0 9 * * MON-FRI  ", "Asia/Kolkata"), KindCron, true, 0},
		{"cron names", cronSched("0 0 1 JAN,jul ?", ""), KindCron, true, 0},
		{"cron leap day", cronSched("0 0 29 2 *", "Europe/Berlin"), KindCron, true, 0},
		{"cron dom or dow", cronSched("0 0 31 2 MON", ""), KindCron, true, 0},
		{"cron with window", &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 * * * *", StartAt: ts(t0), EndAt: ts(t0.Add(time.Hour))}}}, KindCron, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := mustCompile(t, tt.in)
			require.Equal(t, tt.kind, c.Kind())
			require.Equal(t, tt.recurring, c.Recurring())
			require.Equal(t, tt.jitter, c.MaxJitter())
			require.NotEmpty(t, c.String())
		})
	}
}

func TestParseCron(t *testing.T) {
	t.Parallel()
	require.NoError(t, ParseCron("0 9 * * 1-5", "Europe/Berlin"))
	require.NoError(t, ParseCron("@hourly", ""))
	err := ParseCron("*/0 * * * *", "")
	require.EqualError(t, err, `cron.expr: cron "*/0 * * * *": minute field "*/0": step of range should be a positive number: */0; allowed: 0-59, with , - / and *`)
	err = ParseCron("0 * * * *", "Europe/Berlln")
	require.EqualError(t, err, `cron.timezone: unknown time zone "Europe/Berlln"; give an IANA name such as "Europe/Berlin", or leave it empty for UTC`)
}

func TestFirst(t *testing.T) {
	t.Parallel()
	anchor := utc(2026, 5, 10, 12, 0, 0)
	start := utc(2026, 6, 1, 0, 0, 0)
	tests := []struct {
		name string
		in   *chimev1.Schedule
		want time.Time // zero: none
	}{
		{"at in the past", atSched(utc(2020, 1, 1, 0, 0, 0)), utc(2020, 1, 1, 0, 0, 0)},
		{"at in the future", atSched(utc(2030, 1, 1, 0, 0, 0)), utc(2030, 1, 1, 0, 0, 0)},
		{"every from anchor", everySched(&chimev1.Every{Interval: dur(90 * time.Second)}), anchor.Add(90 * time.Second)},
		{"every from start", everySched(&chimev1.Every{Interval: dur(time.Hour), StartAt: ts(start)}), start},
		{"every start in the past", everySched(&chimev1.Every{Interval: dur(time.Hour), StartAt: ts(utc(2026, 1, 1, 0, 0, 0))}), utc(2026, 1, 1, 0, 0, 0)},
		{"every ends before first", everySched(&chimev1.Every{Interval: dur(time.Hour), EndAt: ts(anchor.Add(time.Minute))}), time.Time{}},
		{"every ends on first", everySched(&chimev1.Every{Interval: dur(time.Hour), EndAt: ts(anchor.Add(time.Hour))}), anchor.Add(time.Hour)},
		{"cron strictly after anchor", cronSched("0 12 * * *", ""), utc(2026, 5, 11, 12, 0, 0)},
		{"cron from start inclusive", &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 0 * * *", StartAt: ts(start)}}}, start},
		{"cron start in the past", &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 0 * * *", StartAt: ts(utc(2026, 1, 1, 0, 0, 0))}}}, utc(2026, 1, 1, 0, 0, 0)},
		{"cron ends before first", &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 0 1 1 *", EndAt: ts(utc(2026, 12, 31, 0, 0, 0))}}}, time.Time{}},
		{"cron in zone", cronSched("0 9 * * *", "Asia/Tokyo"), utc(2026, 5, 11, 0, 0, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := mustCompile(t, tt.in).First(anchor)
			require.Equal(t, !tt.want.IsZero(), ok)
			require.True(t, tt.want.Equal(got), "got %s, want %s", got, tt.want)
		})
	}
}

func TestNext(t *testing.T) {
	t.Parallel()
	start := utc(2026, 1, 1, 0, 0, 0)
	end := start.Add(10 * time.Minute)
	tests := []struct {
		name  string
		in    *chimev1.Schedule
		after time.Time
		want  time.Time // zero: none
	}{
		{"at before", atSched(start), start.Add(-time.Nanosecond), start},
		{"at exactly", atSched(start), start, time.Time{}},
		{"at after", atSched(start), start.Add(time.Hour), time.Time{}},
		{"every before start", everySched(&chimev1.Every{Interval: dur(time.Minute), StartAt: ts(start)}), start.Add(-time.Hour), start},
		{"every on an occurrence", everySched(&chimev1.Every{Interval: dur(time.Minute), StartAt: ts(start)}), start.Add(3 * time.Minute), start.Add(4 * time.Minute)},
		{"every between occurrences", everySched(&chimev1.Every{Interval: dur(time.Minute), StartAt: ts(start)}), start.Add(3*time.Minute + time.Second), start.Add(4 * time.Minute)},
		{"every keeps its phase years later", everySched(&chimev1.Every{Interval: dur(7 * time.Second), StartAt: ts(start)}), start.Add(45051428*7*time.Second + 3*time.Second), start.Add(45051429 * 7 * time.Second)},
		{"every end inclusive", everySched(&chimev1.Every{Interval: dur(time.Minute), StartAt: ts(start), EndAt: ts(end)}), end.Add(-time.Nanosecond), end},
		{"every past end", everySched(&chimev1.Every{Interval: dur(time.Minute), StartAt: ts(start), EndAt: ts(end)}), end, time.Time{}},
		{"every across two centuries", everySched(&chimev1.Every{Interval: dur(time.Hour), StartAt: ts(MinTime)}), utc(2199, 6, 1, 10, 30, 0), utc(2199, 6, 1, 11, 0, 0)},
		{"cron utc", cronSched("*/15 * * * *", ""), utc(2026, 3, 3, 10, 7, 0), utc(2026, 3, 3, 10, 15, 0)},
		{"cron strictly after", cronSched("*/15 * * * *", ""), utc(2026, 3, 3, 10, 15, 0), utc(2026, 3, 3, 10, 30, 0)},
		{"cron seconds", cronSched("*/10 * * * * *", ""), utc(2026, 3, 3, 10, 15, 0).Add(500 * time.Millisecond), utc(2026, 3, 3, 10, 15, 10)},
		{"cron honours start", &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 * * * *", StartAt: ts(start)}}}, start.Add(-48 * time.Hour), start},
		{"cron end inclusive", &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 * * * *", EndAt: ts(start)}}}, start.Add(-time.Minute), start},
		{"cron past end", &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 * * * *", EndAt: ts(start)}}}, start, time.Time{}},
		{"cron leap day across 2100", cronSched("0 0 29 2 *", ""), utc(2097, 3, 1, 0, 0, 0), utc(2104, 2, 29, 0, 0, 0)},
		{"cron dom or dow", cronSched("0 0 13 * FRI", ""), utc(2026, 2, 1, 0, 0, 0), utc(2026, 2, 6, 0, 0, 0)},
		{"cron kathmandu +05:45", cronSched("0 0 * * *", "Asia/Kathmandu"), utc(2026, 1, 1, 0, 0, 0), utc(2026, 1, 1, 18, 15, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := mustCompile(t, tt.in).Next(tt.after)
			require.Equal(t, !tt.want.IsZero(), ok, "got %s", got)
			require.True(t, tt.want.Equal(got), "got %s, want %s", got, tt.want)
			if ok {
				require.Equal(t, time.UTC, got.Location())
			}
		})
	}
}

func TestEveryAnchor(t *testing.T) {
	t.Parallel()
	anchor := utc(2026, 4, 1, 8, 0, 0).Add(123 * time.Millisecond)
	c := mustCompile(t, everySched(&chimev1.Every{Interval: dur(10 * time.Second)}))

	require.True(t, c.NeedsAnchor())
	require.PanicsWithValue(t, "schedule: Next on an every-schedule without start_at needs the job's anchor; call WithAnchor first", func() {
		c.Next(anchor)
	})

	a := c.WithAnchor(anchor)
	require.False(t, a.NeedsAnchor())
	require.True(t, c.NeedsAnchor(), "WithAnchor must not change the original")

	first, ok := a.First(anchor)
	require.True(t, ok)
	require.Equal(t, anchor.Add(10*time.Second), first)

	// The phase comes from the anchor, not from the time Next is called:
	// a late fire does not push later occurrences back.
	next, ok := a.Next(first.Add(7 * time.Second))
	require.True(t, ok)
	require.Equal(t, anchor.Add(20*time.Second), next)

	before, ok := a.Next(anchor.Add(-time.Hour))
	require.True(t, ok)
	require.Equal(t, first, before, "the anchor itself is not an occurrence")

	withStart := mustCompile(t, everySched(&chimev1.Every{Interval: dur(time.Second), StartAt: ts(anchor)}))
	require.False(t, withStart.NeedsAnchor())
}

func TestLatest(t *testing.T) {
	t.Parallel()
	t0 := utc(2026, 1, 1, 0, 0, 0)
	tests := []struct {
		name       string
		in         *chimev1.Schedule
		from, now  time.Time
		maxCount   int
		wantLatest time.Time
		wantCount  uint64
		wantExact  bool
	}{
		{"at due", atSched(t0), t0, t0.Add(time.Hour), 10, t0, 1, true},
		{"now before from", atSched(t0), t0, t0.Add(-time.Second), 10, time.Time{}, 0, true},
		{"every on time", everySched(&chimev1.Every{Interval: dur(time.Minute), StartAt: ts(t0)}), t0, t0.Add(59 * time.Second), 10, t0, 1, true},
		{"every 1s for 30 days", everySched(&chimev1.Every{Interval: dur(time.Second), StartAt: ts(t0)}), t0, t0.Add(30 * 24 * time.Hour).Add(500 * time.Millisecond), 10, t0.Add(30 * 24 * time.Hour), 30*24*3600 + 1, true},
		{"every capped by end", everySched(&chimev1.Every{Interval: dur(time.Minute), StartAt: ts(t0), EndAt: ts(t0.Add(90 * time.Second))}), t0, t0.Add(time.Hour), 10, t0.Add(time.Minute), 2, true},
		{"every needs no anchor", everySched(&chimev1.Every{Interval: dur(time.Hour)}), t0.Add(time.Second), t0.Add(5 * time.Hour), 10, t0.Add(4*time.Hour + time.Second), 5, true},
		{"cron counted", cronSched("*/15 * * * *", ""), t0, t0.Add(time.Hour + time.Minute), 10, t0.Add(time.Hour), 5, true},
		{"cron exactly maxCount", cronSched("*/15 * * * *", ""), t0, t0.Add(time.Hour), 4, t0.Add(time.Hour), 5, true},
		{"cron past end", &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 * * * *", EndAt: ts(t0.Add(2 * time.Hour))}}}, t0, t0.Add(30 * time.Hour), 100, t0.Add(2 * time.Hour), 3, true},
		{"cron every second for 30 days", cronSched("* * * * * *", ""), t0, t0.Add(30 * 24 * time.Hour).Add(300 * time.Millisecond), 1000, t0.Add(30 * 24 * time.Hour), 1002, false},
		{"cron maxCount zero", cronSched("0 * * * *", ""), t0, t0.Add(5*time.Hour + time.Minute), 0, t0.Add(5 * time.Hour), 2, false},
		{"cron sparse after outage", cronSched("0 0 1 * *", "Europe/Berlin"), utc(2025, 12, 31, 23, 0, 0), utc(2029, 7, 15, 0, 0, 0), 3, utc(2029, 6, 30, 22, 0, 0), 5, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			latest, count, exact := mustCompile(t, tt.in).Latest(tt.from, tt.now, tt.maxCount)
			require.True(t, tt.wantLatest.Equal(latest), "latest %s, want %s", latest, tt.wantLatest)
			require.Equal(t, tt.wantCount, count)
			require.Equal(t, tt.wantExact, exact)
		})
	}
}

// TestLatestMatchesStepping checks the search against plain stepping.
func TestLatestMatchesStepping(t *testing.T) {
	t.Parallel()
	exprs := []struct{ expr, tz string }{
		{"*/7 * * * *", "Europe/Berlin"},
		{"30 2 * * *", "America/New_York"},
		{"0 0 29 2 *", ""},
		{"15 */3 * * 1-5", "Australia/Lord_Howe"},
		{"* 0 1 * *", "UTC"},
	}
	from := utc(2026, 1, 1, 0, 0, 0)
	for _, e := range exprs {
		c := mustCompile(t, cronSched(e.expr, e.tz))
		first, ok := c.Next(from)
		require.True(t, ok)
		for _, span := range []time.Duration{time.Hour, 50 * time.Hour, 120 * 24 * time.Hour} {
			t.Run(fmt.Sprintf("%s/%s", e.expr, span), func(t *testing.T) {
				t.Parallel()
				now := first.Add(span)
				want, wantCount, _ := c.Latest(first, now, 1<<30)
				got, count, exact := c.Latest(first, now, 2)
				require.True(t, want.Equal(got), "got %s, want %s", got, want)
				if exact {
					require.Equal(t, wantCount, count)
				} else {
					require.LessOrEqual(t, count, wantCount)
					require.GreaterOrEqual(t, count, uint64(3))
				}
			})
		}
	}
}

func TestJitter(t *testing.T) {
	t.Parallel()
	require.Zero(t, Jitter(0, "ns/job", 1))
	require.Zero(t, Jitter(-time.Second, "ns/job", 1))

	// Pinned: a changed formula would move every jittered timer on upgrade.
	require.Equal(t, Jitter(time.Minute, "ns/job", 7), Jitter(time.Minute, "ns/job", 7))
	require.Equal(t, time.Duration(49565960792), Jitter(time.Minute, "ns/job", 7))

	const max = 10 * time.Second
	var buckets [10]int
	for seq := uint64(1); seq <= 10000; seq++ {
		j := Jitter(max, "billing/invoice-42", seq)
		require.GreaterOrEqual(t, j, time.Duration(0))
		require.Less(t, j, max)
		buckets[j/time.Second]++
	}
	for i, n := range buckets {
		require.InDelta(t, 1000, n, 150, "bucket %d: consecutive fire_seqs must spread over the range", i)
	}
	require.NotEqual(t, Jitter(max, "a/x", 1), Jitter(max, "a/y", 1))
	require.Less(t, Jitter(1, "a/x", 1), time.Duration(1))
}

// Instants outside [MinTime, MaxTime) are refused where they enter: in
// Unix nanoseconds they would wrap around (a job in 2300 looked overdue
// forever; one in 0001 never fired).
func TestTimesOutOfRangeAreRefused(t *testing.T) {
	t.Parallel()
	at := func(tm time.Time) *chimev1.Schedule { return &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: ts(tm)}} }
	cases := []struct {
		name  string
		s     *chimev1.Schedule
		field string // "" accepted
	}{
		{"at the first instant", at(MinTime), ""},
		{"at the last instant", at(MaxTime.Add(-time.Nanosecond)), ""},
		{"at MaxTime", at(MaxTime), "at"},
		{"at after 2262", at(utc(2300, 1, 1, 0, 0, 0)), "at"},
		{"at year 1", at(utc(1, 1, 1, 0, 0, 0)), "at"},
		{"at before 1678", at(utc(1677, 1, 1, 0, 0, 0)), "at"},
		{"every start before MinTime", everySched(&chimev1.Every{Interval: dur(time.Hour), StartAt: ts(utc(1969, 1, 1, 0, 0, 0))}), "every.start_at"},
		{"cron end in 9999", &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 * * * *", EndAt: ts(utc(9999, 1, 1, 0, 0, 0))}}}, "cron.end_at"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Compile(c.s)
			if c.field == "" {
				require.NoError(t, err)
				return
			}
			var se *Error
			require.ErrorAs(t, err, &se)
			require.Equal(t, c.field, se.Field)
			require.Contains(t, se.Reason, "out of range")
		})
	}
}
