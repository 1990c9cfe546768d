package schedule

import (
	"errors"
	"fmt"
	"time"

	"github.com/chime-sched/chime/schema/chimev1"
)

// Limits of a schedule's exclusions.
const (
	MaxExclusions         = 100
	MaxExclusionWindow    = 366 * 24 * time.Hour
	maxExcludedInARow     = 100_000
	exclusionDateLayout   = "2006-01-02"
	exclusionWindowFields = "exclude[%d]"
)

// exclusion is a compiled chimev1.Exclusion: a day in a zone, or windows
// opening at each occurrence of a cron expression.
type exclusion struct {
	loc    *time.Location
	date   string    // set for a day
	window *Compiled // a cron schedule: the windows' openings
	dur    time.Duration
}

// covers says whether instant t falls in the exclusion.
func (e *exclusion) covers(t time.Time) bool {
	if e.date != "" {
		return t.In(e.loc).Format(exclusionDateLayout) == e.date
	}
	// A window holding t opened in (t-dur, t]: the first opening after
	// t-dur, if it is not after t.
	open, ok := e.window.cronNext(t.Add(-e.dur))
	return ok && !open.After(t)
}

func (c *Compiled) compileExclusions(ex []*chimev1.Exclusion) error {
	if len(ex) == 0 {
		return nil
	}
	if c.kind == KindAt {
		return errorf("exclude", "applies to every and cron schedules; a one-shot has one time: choose another")
	}
	if len(ex) > MaxExclusions {
		return errorf("exclude", "has %d entries; the limit is %d", len(ex), MaxExclusions)
	}
	for i, x := range ex {
		field := fmt.Sprintf(exclusionWindowFields, i)
		zone := x.GetTimezone()
		if zone == "" && c.loc != nil {
			zone = c.loc.String()
		}
		loc, err := loadZone(zone)
		if err != nil {
			return errorf(field+".timezone", "unknown time zone %q; give an IANA name such as \"Asia/Kolkata\", or leave it empty for the schedule's", x.GetTimezone())
		}
		e := exclusion{loc: loc}
		switch {
		case x.GetDate() != "" && x.GetCron() != "":
			return errorf(field, "sets both date and cron; set one")
		case x.GetDate() != "":
			if _, err := time.ParseInLocation(exclusionDateLayout, x.GetDate(), loc); err != nil {
				return errorf(field+".date", "%q is not a date; write YYYY-MM-DD, e.g. \"2026-12-25\"", x.GetDate())
			}
			e.date = x.GetDate()
			if x.GetDuration() != nil {
				return errorf(field+".duration", "applies to a cron window; a date excludes its whole day")
			}
		case x.GetCron() != "":
			spec, err := parseCronExpr(x.GetCron())
			if err != nil {
				var se *Error
				reason := err.Error()
				if errors.As(err, &se) {
					reason = se.Reason
				}
				return errorf(field+".cron", "%s", reason)
			}
			d, err := duration(field+".duration", x.GetDuration())
			if err != nil {
				return err
			}
			if x.GetDuration() == nil || d <= 0 || d > MaxExclusionWindow {
				return errorf(field+".duration", "is %s; a window lasts more than 0 and at most %s", d, MaxExclusionWindow)
			}
			e.window = &Compiled{kind: KindCron, spec: spec, loc: loc, expr: x.GetCron()}
			e.dur = d
		default:
			return errorf(field, "sets neither date nor cron; set one")
		}
		c.excl = append(c.excl, e)
	}
	return nil
}

// excluded says whether an occurrence at t is not made.
func (c *Compiled) excluded(t time.Time) bool {
	for i := range c.excl {
		if c.excl[i].covers(t) {
			return true
		}
	}
	return false
}

// skipExcluded moves t, ok past excluded occurrences with next. A schedule
// whose next maxExcludedInARow occurrences are all excluded has none left.
func (c *Compiled) skipExcluded(t time.Time, ok bool, next func(time.Time) (time.Time, bool)) (time.Time, bool) {
	for i := 0; ok && c.excluded(t); i++ {
		if i == maxExcludedInARow {
			return time.Time{}, false
		}
		t, ok = next(t)
	}
	return t, ok
}

// Between lists the schedule's occurrences in [from, to), at most max,
// for a backfill: an every-schedule's grid extends before its first
// occurrence (start_at, or the anchor plus one interval), a cron
// expression covers any range; end_at and the exclusions apply. c must
// know the job's anchor where NeedsAnchor says so.
func (c *Compiled) Between(from, to time.Time, max int) []time.Time {
	from, to = from.UTC(), to.UTC()
	var out []time.Time
	add := func(t time.Time) bool {
		if !t.Before(to) || len(out) >= max || (c.hasEnd && t.After(c.end)) {
			return false
		}
		if !c.excluded(t) {
			out = append(out, t)
		}
		return true
	}
	switch c.kind {
	case KindEvery:
		origin := c.everyOrigin()
		t := origin
		if from.Before(origin) {
			k := steps(from, origin, c.interval) // grid points back to the first not before from
			t = origin.Add(-time.Duration(k) * c.interval)
		} else if n, ok := c.nextRaw(from.Add(-time.Nanosecond)); ok {
			t = n
		} else {
			return nil
		}
		for i := 0; i < max+maxExcludedInARow && add(t); i++ {
			t = t.Add(c.interval)
		}
	case KindCron:
		for t, ok := c.cronNext(from.Add(-time.Nanosecond)); ok && add(t); t, ok = c.cronNext(t) {
		}
	}
	return out
}
