package schedule

import (
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // fallback zone data, so validation works without /usr/share/zoneinfo

	"github.com/robfig/cron/v3"
)

// cronParser accepts 5 fields, 6 with leading seconds, and descriptors.
// robfig/cron is used as a parser only: its scheduler evaluates in a
// location with time.Date, whose behaviour in DST gaps is unspecified, so
// Compiled evaluates the parsed fields on a UTC wall clock instead.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cronFields names the fields of a 6-field expression, for error messages.
var cronFields = [6]struct{ name, allowed string }{
	{"second", "0-59"},
	{"minute", "0-59"},
	{"hour", "0-23"},
	{"day-of-month", "1-31"},
	{"month", "1-12 or JAN-DEC"},
	{"day-of-week", "0-6 or SUN-SAT, 0 is Sunday"},
}

const cronShape = "5 fields (minute hour day-of-month month day-of-week), 6 with a leading second field, or a descriptor such as @daily"

// ParseCron validates a cron expression and its time zone as Compile would,
// for callers that check input before building a Schedule. An empty
// timezone means UTC. The error is an *Error with Field "cron.expr" or
// "cron.timezone".
func ParseCron(expr, timezone string) error {
	_, _, err := parseCron(expr, timezone)
	return err
}

func parseCron(expr, timezone string) (*cron.SpecSchedule, *time.Location, error) {
	spec, err := parseCronExpr(expr)
	if err != nil {
		return nil, nil, err
	}
	loc, err := loadZone(timezone)
	if err != nil {
		return nil, nil, err
	}
	return spec, loc, nil
}

func parseCronExpr(expr string) (*cron.SpecSchedule, error) {
	const field = "cron.expr"
	s := strings.TrimSpace(expr)
	switch {
	case s == "":
		return nil, errorf(field, "is empty; give %s", cronShape)
	case strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ="):
		// robfig would honour (and, without a space after it, panic on) the
		// prefix; the zone has its own field so there is one source of truth.
		return nil, errorf(field, "cron %q: time zone prefixes are not accepted; drop the prefix and set cron.timezone", expr)
	case strings.HasPrefix(s, "@every"):
		return nil, errorf(field, "cron %q: @every is not supported; use an every schedule for fixed intervals", expr)
	}
	parsed, err := cronParser.Parse(s)
	if err != nil {
		return nil, explainCronError(expr, s, err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, errorf(field, "cron %q: unsupported expression; give %s", expr, cronShape)
	}
	spec.Location = time.UTC
	// Five years from 2000 cover both leap days and every weekday of every
	// date, so a schedule that matches nothing here matches nothing ever.
	if spec.Next(time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC)).IsZero() {
		return nil, errorf(field, "cron %q never fires: no month has the day of month it asks for (like 30 February); fix the day-of-month or month field", expr)
	}
	return spec, nil
}

// explainCronError turns robfig's error into one that names the field and
// its allowed values. robfig reports the first bad range but not which
// field it was in, so each field is parsed again on its own.
func explainCronError(expr, s string, err error) error {
	const field = "cron.expr"
	if strings.HasPrefix(s, "@") {
		return errorf(field, "cron %q: unknown descriptor; use @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly", expr)
	}
	fields := strings.Fields(s)
	if n := len(fields); n != 5 && n != 6 {
		return errorf(field, "cron %q has %d fields; give %s", expr, n, cronShape)
	}
	offset := 6 - len(fields)
	for i, f := range fields {
		probe := []string{"0", "*", "*", "*", "*", "*"}
		probe[i+offset] = f
		if _, perr := cronParser.Parse(strings.Join(probe, " ")); perr != nil {
			named := cronFields[i+offset]
			return errorf(field, "cron %q: %s field %q: %v; allowed: %s, with , - / and *", expr, named.name, f, perr, named.allowed)
		}
	}
	return errorf(field, "cron %q: %v; give %s", expr, err, cronShape)
}

// zones caches loaded locations: time.LoadLocation reads and parses a file
// on every call, and the scheduler compiles schedules on its hot path.
var zones sync.Map // name -> *time.Location

func loadZone(name string) (*time.Location, error) {
	const field = "cron.timezone"
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, errorf(field, "%q depends on the machine that runs the job; give an IANA name such as \"Europe/Berlin\"", name)
	}
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, errorf(field, "unknown time zone %q; give an IANA name such as \"Europe/Berlin\", or leave it empty for UTC", name)
	}
	zones.Store(name, loc)
	return loc, nil
}

// wallNext returns the first wall time matching the cron fields strictly
// after w. Wall times are time.Times in UTC whose fields are the local
// clock's reading.
func (c *Compiled) wallNext(w time.Time) time.Time {
	// robfig gives up after five years. Only 29 February across a skipped
	// leap year (2100) is that far away, so a few restarts suffice.
	for range 4 {
		n := c.spec.Next(w)
		if !n.IsZero() {
			return n
		}
		w = time.Date(w.Year()+5, time.January, 1, 0, 0, 0, 0, time.UTC).Add(-time.Nanosecond)
	}
	return time.Time{}
}

// maxSegments bounds the walk over zone periods in cronNext; real schedules
// need a handful (a Feb 29 cron in a DST zone: about 16).
const maxSegments = 1000

// cronNext returns the least occurrence strictly after `after` (see the
// package comment for how wall times map to instants).
func (c *Compiled) cronNext(after time.Time) (time.Time, bool) {
	after = after.UTC()
	if c.hasStart && after.Before(c.start) {
		after = c.start.Add(-time.Nanosecond)
	}
	seg := segmentAt(c.loc, after)
	// Wall times skipped by a spring-forward jump map past the jump, so the
	// segments before after's may still hold occurrences later than after.
	for range 4 {
		if seg.start.IsZero() {
			break
		}
		prev := segmentAt(c.loc, seg.start.Add(-time.Nanosecond))
		if !prev.wallHi.Add(-prev.off).After(after) {
			break
		}
		seg = prev
	}

	var best, w time.Time
	found := false
	for range maxSegments {
		if found && !seg.wallLo.IsZero() && !seg.wallLo.Add(-seg.off).Before(best) {
			break // this and later segments only hold later instants
		}
		lower := after.Add(seg.off)
		if !seg.wallLo.IsZero() && lower.Before(seg.wallLo) {
			lower = seg.wallLo.Add(-time.Nanosecond)
		}
		// lower never decreases from one segment to the next, so the match
		// found for an earlier segment is still the first one after lower.
		if w.IsZero() || !w.After(lower) {
			if w = c.wallNext(lower); w.IsZero() {
				break
			}
		}
		if seg.wallHi.IsZero() || w.Before(seg.wallHi) {
			if t := w.Add(-seg.off); !found || t.Before(best) {
				best, found = t, true
			}
		}
		if seg.end.IsZero() {
			break
		}
		seg = segmentAt(c.loc, seg.end)
	}
	if !found {
		return time.Time{}, false
	}
	return c.bounded(best)
}

// segment is one period of a zone (a stretch of instants with one UTC
// offset) together with the wall times that map into it.
//
// Wall times are assigned so that each maps to exactly one instant: a
// spring-forward gap [T+before, T+after) belongs to the period before the
// jump and is read with its offset; a fall-back repeat [T+after, T+before)
// also belongs to the period before, which makes its first instance win.
// So a period starting at T takes the wall times from T + max(before,
// after) on.
type segment struct {
	off            time.Duration
	start, end     time.Time // instants [start, end); zero: unbounded
	wallLo, wallHi time.Time // wall times [wallLo, wallHi); zero: unbounded
}

func segmentAt(loc *time.Location, t time.Time) segment {
	lt := t.In(loc)
	_, off := lt.Zone()
	start, end := lt.ZoneBounds()
	s := segment{off: time.Duration(off) * time.Second}
	if !start.IsZero() {
		_, before := start.Add(-time.Nanosecond).In(loc).Zone()
		s.start = start.UTC()
		s.wallLo = s.start.Add(max(time.Duration(before)*time.Second, s.off))
	}
	if !end.IsZero() {
		_, after := end.In(loc).Zone()
		s.end = end.UTC()
		s.wallHi = s.end.Add(max(time.Duration(after)*time.Second, s.off))
	}
	return s
}
