package schedule

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func loadLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

// occurrences steps Next from `from` and returns the occurrences up to `to`.
func occurrences(t *testing.T, c *Compiled, from, to time.Time) []time.Time {
	t.Helper()
	var out []time.Time
	for cur := from; ; {
		n, ok := c.Next(cur)
		if !ok || n.After(to) {
			return out
		}
		require.True(t, n.After(cur), "Next(%s) = %s is not later", cur, n)
		out = append(out, n)
		cur = n
	}
}

func onLocalDate(ts []time.Time, loc *time.Location, y int, m time.Month, d int) []time.Time {
	var out []time.Time
	for _, t := range ts {
		if ly, lm, ld := t.In(loc).Date(); ly == y && lm == m && ld == d {
			out = append(out, t)
		}
	}
	return out
}

func TestDSTDaily(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, zone, expr string
		y                int
		m                time.Month
		d                int
		want             time.Time
		wantLocal        string
	}{
		// 02:30 does not exist: read with CET (+1), it is 01:30Z, 03:30 CEST.
		{"berlin spring forward", "Europe/Berlin", "30 2 * * *", 2026, time.March, 29, utc(2026, 3, 29, 1, 30, 0), "03:30 CEST"},
		// 02:30 happens twice: the CEST one fires, the CET repeat does not.
		{"berlin fall back", "Europe/Berlin", "30 2 * * *", 2026, time.October, 25, utc(2026, 10, 25, 0, 30, 0), "02:30 CEST"},
		{"new york spring forward", "America/New_York", "30 2 * * *", 2026, time.March, 8, utc(2026, 3, 8, 7, 30, 0), "03:30 EDT"},
		{"new york fall back", "America/New_York", "30 1 * * *", 2026, time.November, 1, utc(2026, 11, 1, 5, 30, 0), "01:30 EDT"},
		{"new york fall back after the repeat", "America/New_York", "30 2 * * *", 2026, time.November, 1, utc(2026, 11, 1, 7, 30, 0), "02:30 EST"},
		// Midnight itself was skipped in Brazil.
		{"sao paulo midnight gap", "America/Sao_Paulo", "0 0 * * *", 2018, time.November, 4, utc(2018, 11, 4, 3, 0, 0), "01:00 -02"},
		// A 30-minute DST shift.
		{"lord howe spring forward", "Australia/Lord_Howe", "15 2 * * *", 2026, time.October, 4, utc(2026, 10, 3, 15, 45, 0), "02:45 +11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			loc := loadLoc(t, tt.zone)
			c := mustCompile(t, cronSched(tt.expr, tt.zone))
			day := time.Date(tt.y, tt.m, tt.d, 12, 0, 0, 0, time.UTC)
			all := occurrences(t, c, day.Add(-72*time.Hour), day.Add(72*time.Hour))
			got := onLocalDate(all, loc, tt.y, tt.m, tt.d)
			require.Len(t, got, 1, "occurrences on %s: %v", day.Format(time.DateOnly), got)
			require.Equal(t, tt.want, got[0])
			require.Equal(t, tt.wantLocal, got[0].In(loc).Format("15:04 MST"))
			require.Len(t, all, 6, "one a day, nothing lost or doubled around the transition: %v", all)
		})
	}
}

func TestDSTSubDaily(t *testing.T) {
	t.Parallel()
	// Berlin 2026: CET->CEST at 01:00Z on 29 March, CEST->CET at 01:00Z on 25 October.
	tests := []struct {
		name, zone, expr string
		from, to         time.Time
		want             []time.Time
	}{
		{"hourly spring forward", "Europe/Berlin", "0 * * * *", utc(2026, 3, 28, 22, 30, 0), utc(2026, 3, 29, 3, 0, 0), []time.Time{
			utc(2026, 3, 28, 23, 0, 0), // 00:00 CET
			utc(2026, 3, 29, 0, 0, 0),  // 01:00 CET
			utc(2026, 3, 29, 1, 0, 0),  // 02:00 (missing) = 03:00 CEST = the real 03:00
			utc(2026, 3, 29, 2, 0, 0),  // 04:00 CEST
			utc(2026, 3, 29, 3, 0, 0),
		}},
		{"hourly fall back", "Europe/Berlin", "0 * * * *", utc(2026, 10, 24, 22, 30, 0), utc(2026, 10, 25, 3, 0, 0), []time.Time{
			utc(2026, 10, 24, 23, 0, 0), // 01:00 CEST
			utc(2026, 10, 25, 0, 0, 0),  // 02:00 CEST; 02:00 CET (01:00Z) is the repeat
			utc(2026, 10, 25, 2, 0, 0),  // 03:00 CET
			utc(2026, 10, 25, 3, 0, 0),
		}},
		{"quarter-hourly spring forward", "Europe/Berlin", "*/15 * * * *", utc(2026, 3, 29, 0, 30, 0), utc(2026, 3, 29, 1, 30, 0), []time.Time{
			utc(2026, 3, 29, 0, 45, 0), // 01:45 CET
			utc(2026, 3, 29, 1, 0, 0),  // 03:00 CEST
			utc(2026, 3, 29, 1, 15, 0),
			utc(2026, 3, 29, 1, 30, 0),
		}},
		{"quarter-hourly fall back", "Europe/Berlin", "*/15 * * * *", utc(2026, 10, 25, 0, 30, 0), utc(2026, 10, 25, 2, 15, 0), []time.Time{
			utc(2026, 10, 25, 0, 45, 0), // 02:45 CEST
			utc(2026, 10, 25, 2, 0, 0),  // 03:00 CET: the repeated hour is skipped
			utc(2026, 10, 25, 2, 15, 0),
		}},
		// Wall times in the gap land on instants that later wall times also
		// reach; each instant fires once, none is lost.
		{"gap and real times share instants", "Europe/Berlin", "0,30 2,3 * * *", utc(2026, 3, 28, 12, 0, 0), utc(2026, 3, 29, 23, 0, 0), []time.Time{
			utc(2026, 3, 29, 1, 0, 0), // 02:00 missing and 03:00 CEST
			utc(2026, 3, 29, 1, 30, 0),
		}},
		{"new york hourly spring forward", "America/New_York", "30 * * * *", utc(2026, 3, 8, 5, 0, 0), utc(2026, 3, 8, 9, 0, 0), []time.Time{
			utc(2026, 3, 8, 5, 30, 0), // 00:30 EST
			utc(2026, 3, 8, 6, 30, 0), // 01:30 EST
			utc(2026, 3, 8, 7, 30, 0), // 02:30 missing = 03:30 EDT
			utc(2026, 3, 8, 8, 30, 0), // 04:30 EDT
		}},
		{"new york hourly fall back", "America/New_York", "30 * * * *", utc(2026, 11, 1, 4, 0, 0), utc(2026, 11, 1, 8, 0, 0), []time.Time{
			utc(2026, 11, 1, 4, 30, 0), // 00:30 EDT
			utc(2026, 11, 1, 5, 30, 0), // 01:30 EDT; 01:30 EST (06:30Z) is the repeat
			utc(2026, 11, 1, 7, 30, 0), // 02:30 EST
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := mustCompile(t, cronSched(tt.expr, tt.zone))
			require.Equal(t, tt.want, occurrences(t, c, tt.from, tt.to))
		})
	}
}

// TestNextFromInsideTheRepeat starts in the second instance of a repeated
// hour: nothing in it fires, the next occurrence follows it.
func TestNextFromInsideTheRepeat(t *testing.T) {
	t.Parallel()
	c := mustCompile(t, cronSched("* * * * * *", "Europe/Berlin"))
	got, ok := c.Next(utc(2026, 10, 25, 1, 20, 0)) // 02:20 CET, a repeat
	require.True(t, ok)
	require.Equal(t, utc(2026, 10, 25, 2, 0, 0), got) // 03:00 CET

	got, ok = c.Next(utc(2026, 10, 25, 0, 59, 59)) // 02:59:59 CEST
	require.True(t, ok)
	require.Equal(t, utc(2026, 10, 25, 2, 0, 0), got)
}

// TestDSTMatchesReference compares Next with a brute-force model of the rule
// in the package comment, around every transition of a year in zones with
// odd transitions.
func TestDSTMatchesReference(t *testing.T) {
	t.Parallel()
	crons := []struct {
		expr  string
		match func(h, m int) bool
	}{
		{"*/15 * * * *", func(h, m int) bool { return m%15 == 0 }},
		{"30 * * * *", func(h, m int) bool { return m == 30 }},
		{"30 2 * * *", func(h, m int) bool { return h == 2 && m == 30 }},
		{"0 0 * * *", func(h, m int) bool { return h == 0 && m == 0 }},
		{"0,30 2,3 * * *", func(h, m int) bool { return (h == 2 || h == 3) && (m == 0 || m == 30) }},
		{"*/20 0-3 * * *", func(h, m int) bool { return h <= 3 && m%20 == 0 }},
		{"45 1 * * *", func(h, m int) bool { return h == 1 && m == 45 }},
	}
	zones := []struct {
		name string
		year int
	}{
		{"Europe/Berlin", 2026},
		{"America/New_York", 2026},
		{"Australia/Lord_Howe", 2026}, // 30-minute shift
		{"Australia/Sydney", 2026},    // southern hemisphere
		{"America/Sao_Paulo", 2018},   // midnight skipped
		{"America/Havana", 2026},      // transitions at midnight and 01:00
		{"Antarctica/Troll", 2026},    // 2-hour shift
		{"Europe/Dublin", 2026},       // "negative" DST in tzdata
		{"Asia/Kathmandu", 2026},      // +05:45, no DST
	}
	for _, z := range zones {
		loc := loadLoc(t, z.name)
		for _, win := range transitionWindows(loc, z.year) {
			model := referenceModel(loc, win[0], win[1])
			for _, cr := range crons {
				t.Run(fmt.Sprintf("%s/%s/%s", z.name, win[0].Format(time.DateOnly), cr.expr), func(t *testing.T) {
					t.Parallel()
					var want []time.Time
					for wall, inst := range model {
						if cr.match(wall.Hour(), wall.Minute()) && inst.After(win[0]) && !inst.After(win[1]) {
							want = append(want, inst)
						}
					}
					slices.SortFunc(want, time.Time.Compare)
					want = slices.CompactFunc(want, time.Time.Equal)

					c := mustCompile(t, cronSched(cr.expr, z.name))
					got := occurrences(t, c, win[0], win[1])
					require.Equal(t, want, got)
					for _, g := range got {
						again, ok := c.Next(g.Add(-time.Nanosecond))
						require.True(t, ok)
						require.Equal(t, g, again)
					}
				})
			}
		}
	}
}

// transitionWindows returns a window of four days around each zone
// transition in year, or one window in January if there is none.
func transitionWindows(loc *time.Location, year int) [][2]time.Time {
	var out [][2]time.Time
	end := time.Date(year+1, 1, 1, 0, 0, 0, 0, time.UTC)
	for cur := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC); cur.Before(end); {
		_, next := cur.In(loc).ZoneBounds()
		if next.IsZero() || !next.Before(end) {
			break
		}
		out = append(out, [2]time.Time{next.Add(-48 * time.Hour).UTC(), next.Add(48 * time.Hour).UTC()})
		cur = next
	}
	if len(out) == 0 {
		out = append(out, [2]time.Time{time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(year, 1, 5, 0, 0, 0, 0, time.UTC)})
	}
	return out
}

// referenceModel maps every whole-minute wall time around [from, to] to its
// instant by scanning instants minute by minute: the first instant to show
// a wall time owns it, and wall times the clock jumps over are read with
// the offset in force before the jump.
func referenceModel(loc *time.Location, from, to time.Time) map[time.Time]time.Time {
	wallOf := func(t time.Time) (time.Time, time.Duration) {
		_, off := t.In(loc).Zone()
		d := time.Duration(off) * time.Second
		return t.Add(d), d
	}
	model := map[time.Time]time.Time{}
	for t := from.Add(-24 * time.Hour); t.Before(to.Add(24 * time.Hour)); t = t.Add(time.Minute) {
		w, off := wallOf(t)
		if _, seen := model[w]; !seen {
			model[w] = t
		}
		nextWall, _ := wallOf(t.Add(time.Minute))
		for skipped := w.Add(time.Minute); skipped.Before(nextWall); skipped = skipped.Add(time.Minute) {
			if _, seen := model[skipped]; !seen {
				model[skipped] = skipped.Add(-off)
			}
		}
	}
	return model
}
