// Package schedule owns the meaning of a job's chimev1.Schedule: which
// schedules are valid, and at which instants a valid one fires.
//
// A schedule is compiled once (Compile) and then asked for occurrences:
// First when a job is created, Next after each fire, Latest when the
// scheduler wakes up late and must decide how many occurrences it missed.
// The package never reads the clock: every time is an argument, so the
// scheduler gets the same answer when it replays its input. Returned times
// are in UTC.
//
// # Kinds
//
//   - at: one occurrence, at that instant, even if it is already past.
//   - every: start + k*interval for k >= 0, where start is start_at or, when
//     unset, one interval after the job's anchor (its creation time). The
//     occurrences are computed from start, never from the time of the last
//     fire, so they do not drift.
//   - cron: a robfig/cron expression (5 fields, 6 with leading seconds, or a
//     descriptor such as @daily) evaluated on the wall clock of a time zone.
//
// end_at is an inclusive bound for every and cron; start_at is inclusive too.
//
// # Cron, time zones and daylight saving
//
// The expression matches wall-clock times of the zone; each matching wall
// time is mapped to one instant:
//
//   - A wall time that exists once maps to that instant.
//   - A wall time that does not exist (skipped by a spring-forward jump) is
//     read with the UTC offset in force before the jump. In Europe/Berlin,
//     02:30 on the spring-forward day fires at 03:30 CEST, once.
//   - A wall time that happens twice (fall-back) maps to its first instance,
//     the one before the clocks go back (summer time); the repeat is skipped.
//
// The occurrences are the set of those instants, and Next returns the least
// one strictly after its argument, so they are strictly increasing and never
// repeat, even when a skipped wall time lands on the same instant as a real
// one (an every-15-minutes cron fires at 03:00, 03:15 CEST after the jump,
// once each). Offsets come from the zone's transitions (time.Time.ZoneBounds),
// not from time.Date's unspecified behaviour in gaps.
//
// Zone data comes from the system, with the copy embedded in the binary
// (time/tzdata) as the fallback, so a minimal container still validates
// schedules.
package schedule

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/robfig/cron/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// Limits enforced by Compile.
const (
	// MinInterval is the shortest every-interval: the scheduler's timers and
	// the cron parser both work to the second.
	MinInterval = time.Second
	// MaxJitter bounds jitter: it spreads load, it is not a second schedule.
	MaxJitter = time.Hour
)

// Kind says which of at, every and cron a schedule is.
type Kind int

// Kinds of schedule.
const (
	KindAt Kind = iota + 1
	KindEvery
	KindCron
)

func (k Kind) String() string {
	switch k {
	case KindAt:
		return "at"
	case KindEvery:
		return "every"
	case KindCron:
		return "cron"
	default:
		return fmt.Sprintf("Kind(%d)", int(k))
	}
}

// Error says which part of a schedule is wrong and what to do about it.
type Error struct {
	// Field is a path relative to the Schedule message, e.g. "cron.expr".
	Field  string
	Reason string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

func errorf(field, format string, args ...any) *Error {
	return &Error{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Compiled is a validated schedule. It is immutable and safe for concurrent
// use.
type Compiled struct {
	kind   Kind
	jitter time.Duration

	at time.Time

	interval time.Duration
	// anchor is the job's creation time, for every-schedules without
	// start_at; set by WithAnchor.
	anchor   time.Time
	anchored bool

	spec *cron.SpecSchedule // evaluated on wall clocks expressed in UTC
	expr string
	loc  *time.Location

	// The zero time.Time is a valid protobuf timestamp (0001-01-01), so
	// presence is tracked apart from the value.
	start, end       time.Time
	hasStart, hasEnd bool

	// excl are the times with no occurrence (exclude.go).
	excl []exclusion
}

// Compile validates s and prepares it for computing occurrences. The error
// is an *Error naming the offending field.
func Compile(s *chimev1.Schedule) (*Compiled, error) {
	if s == nil {
		return nil, &Error{Reason: "schedule is missing; set exactly one of at, every, cron"}
	}
	c := &Compiled{}
	var err error
	switch k := s.GetKind().(type) {
	case *chimev1.Schedule_At:
		err = c.compileAt(k.At)
	case *chimev1.Schedule_Every:
		err = c.compileEvery(k.Every)
	case *chimev1.Schedule_Cron:
		err = c.compileCron(k.Cron)
	default:
		err = &Error{Reason: "no kind is set; set exactly one of at, every, cron"}
	}
	if err != nil {
		return nil, err
	}
	if err := c.compileJitter(s.GetJitter()); err != nil {
		return nil, err
	}
	if err := c.compileExclusions(s.GetExclude()); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Compiled) compileAt(at *timestamppb.Timestamp) error {
	c.kind = KindAt
	if at == nil || (at.GetSeconds() == 0 && at.GetNanos() == 0) {
		return errorf("at", "is not set; give the instant the job fires")
	}
	t, err := timestamp("at", at)
	if err != nil {
		return err
	}
	c.at = t
	return nil
}

func (c *Compiled) compileEvery(e *chimev1.Every) error {
	c.kind = KindEvery
	if e.GetInterval() == nil {
		return errorf("every.interval", "is not set; give the time between occurrences, at least %s", MinInterval)
	}
	d, err := duration("every.interval", e.GetInterval())
	if err != nil {
		return err
	}
	if d < MinInterval {
		return errorf("every.interval", "is %s; it must be at least %s, the scheduler's resolution", d, MinInterval)
	}
	c.interval = d
	return c.compileBounds("every", e.GetStartAt(), e.GetEndAt())
}

func (c *Compiled) compileCron(cr *chimev1.Cron) error {
	c.kind = KindCron
	spec, loc, err := parseCron(cr.GetExpr(), cr.GetTimezone())
	if err != nil {
		return err
	}
	c.spec, c.loc, c.expr = spec, loc, cr.GetExpr()
	if err := c.compileBounds("cron", cr.GetStartAt(), cr.GetEndAt()); err != nil {
		return err
	}
	if c.hasStart && c.hasEnd {
		if _, ok := c.First(c.start); !ok {
			return errorf("cron.end_at", "cron %q has no occurrence between start_at %s and end_at %s; move end_at later",
				c.expr, c.start.Format(time.RFC3339), c.end.Format(time.RFC3339))
		}
	}
	return nil
}

func (c *Compiled) compileBounds(kind string, start, end *timestamppb.Timestamp) error {
	var err error
	if start != nil {
		if c.start, err = timestamp(kind+".start_at", start); err != nil {
			return err
		}
		c.hasStart = true
	}
	if end != nil {
		if c.end, err = timestamp(kind+".end_at", end); err != nil {
			return err
		}
		c.hasEnd = true
	}
	if c.hasStart && c.hasEnd && !c.start.Before(c.end) {
		return errorf(kind+".end_at", "%s is not after start_at %s; end_at must be later than start_at",
			c.end.Format(time.RFC3339Nano), c.start.Format(time.RFC3339Nano))
	}
	return nil
}

func (c *Compiled) compileJitter(j *durationpb.Duration) error {
	if j == nil {
		return nil
	}
	d, err := duration("jitter", j)
	if err != nil {
		return err
	}
	switch {
	case d < 0:
		return errorf("jitter", "is %s; it must not be negative", d)
	case d > MaxJitter:
		return errorf("jitter", "is %s; it must be at most %s", d, MaxJitter)
	case c.kind == KindEvery && d >= c.interval:
		return errorf("jitter", "is %s; it must be shorter than every.interval (%s), or occurrences could overtake each other", d, c.interval)
	}
	c.jitter = d
	return nil
}

// The instants chime schedules: from MinTime up to, not including,
// MaxTime. The timer index, the due events' lag and Kafka timestamps keep
// times as Unix nanoseconds, which end in April 2262 and begin in 1677; an
// instant outside them would wrap around (a job in 2300 looked overdue and
// was ticked every 10 s forever). A time before MinTime is in the past
// anyway and would fire at once, so it is more likely a mistake than a
// wish; the range is checked wherever a time enters (schedules, Retry and
// Defer commands) and written in docs/api.md.
var (
	MinTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// InRange checks that t is one chime schedules; the error says the range.
func InRange(t time.Time) error {
	if t.Before(MinTime) || !t.Before(MaxTime) {
		return fmt.Errorf("%s is out of range; chime schedules instants from %s up to (not including) %s",
			t.UTC().Format(time.RFC3339Nano), MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	}
	return nil
}

func timestamp(field string, ts *timestamppb.Timestamp) (time.Time, error) {
	if err := ts.CheckValid(); err != nil {
		return time.Time{}, errorf(field, "invalid timestamp (%v); it must lie between 0001-01-01 and 9999-12-31 with nanos in [0, 1e9)", err)
	}
	t := ts.AsTime()
	if err := InRange(t); err != nil {
		return time.Time{}, errorf(field, "%v", err)
	}
	return t, nil
}

func duration(field string, d *durationpb.Duration) (time.Duration, error) {
	if err := d.CheckValid(); err != nil {
		return 0, errorf(field, "invalid duration (%v); seconds and nanos must share a sign", err)
	}
	// AsDuration saturates instead of failing; a silently shortened
	// interval would fire at the wrong times.
	if s := d.GetSeconds(); s > math.MaxInt64/int64(time.Second)-1 || s < math.MinInt64/int64(time.Second)+1 {
		return 0, errorf(field, "%ds is too long; durations are limited to about 292 years", s)
	}
	return d.AsDuration(), nil
}

// String describes the schedule for logs and errors.
func (c *Compiled) String() string {
	switch c.kind {
	case KindAt:
		return "at " + c.at.Format(time.RFC3339Nano)
	case KindEvery:
		return "every " + c.interval.String()
	case KindCron:
		return fmt.Sprintf("cron %q in %s", c.expr, c.loc)
	}
	return "invalid schedule"
}

// Kind reports whether the schedule is at, every or cron.
func (c *Compiled) Kind() Kind { return c.kind }

// Recurring reports whether the schedule can fire more than once.
func (c *Compiled) Recurring() bool { return c.kind != KindAt }

// MaxJitter is the schedule's jitter bound: each occurrence is delayed by
// Jitter(c.MaxJitter(), key, fireSeq).
func (c *Compiled) MaxJitter() time.Duration { return c.jitter }

// WithAnchor returns a copy of c that knows the job's anchor, the time it was
// created. Only every-schedules without start_at need it, to place their
// occurrences (anchor + k*interval, k >= 1); for every other schedule it
// changes nothing. The scheduler keeps the anchor in JobState.anchor.
func (c *Compiled) WithAnchor(anchor time.Time) *Compiled {
	cc := *c
	cc.anchor, cc.anchored = anchor.UTC(), true
	return &cc
}

// NeedsAnchor reports whether Next needs WithAnchor: true for an
// every-schedule without start_at that has no anchor yet.
func (c *Compiled) NeedsAnchor() bool {
	return c.kind == KindEvery && !c.hasStart && !c.anchored
}

// First returns the first occurrence of a job created at anchor:
//   - at: the at time, even if it is before anchor;
//   - every: start_at if set, else anchor + interval;
//   - cron: the first occurrence at or after start_at if set, else the first
//     one strictly after anchor.
//
// ok is false if there is none, e.g. end_at comes before it.
func (c *Compiled) First(anchor time.Time) (t time.Time, ok bool) {
	t, ok = c.firstRaw(anchor)
	return c.skipExcluded(t, ok, c.nextRaw)
}

func (c *Compiled) firstRaw(anchor time.Time) (t time.Time, ok bool) {
	switch c.kind {
	case KindAt:
		return c.at, true
	case KindEvery:
		t = c.start
		if !c.hasStart {
			t = anchor.UTC().Add(c.interval)
		}
		return c.bounded(t)
	case KindCron:
		if c.hasStart {
			return c.cronNext(c.start.Add(-time.Nanosecond))
		}
		return c.cronNext(anchor)
	}
	return time.Time{}, false
}

// Next returns the first occurrence strictly after `after`, honouring
// start_at and end_at; ok is false if there is none.
//
// For an every-schedule without start_at, the occurrences hang off the
// job's anchor: call WithAnchor first. Next panics otherwise, because any
// guess would move the job's occurrences.
func (c *Compiled) Next(after time.Time) (time.Time, bool) {
	t, ok := c.nextRaw(after)
	return c.skipExcluded(t, ok, c.nextRaw)
}

func (c *Compiled) nextRaw(after time.Time) (time.Time, bool) {
	after = after.UTC()
	switch c.kind {
	case KindAt:
		if c.at.After(after) {
			return c.at, true
		}
		return time.Time{}, false
	case KindEvery:
		origin := c.everyOrigin()
		if after.Before(origin) {
			return c.bounded(origin)
		}
		return c.bounded(addSteps(origin, steps(origin, after, c.interval)+1, c.interval))
	case KindCron:
		return c.cronNext(after)
	}
	return time.Time{}, false
}

func (c *Compiled) everyOrigin() time.Time {
	switch {
	case c.hasStart:
		return c.start
	case c.anchored:
		return c.anchor.Add(c.interval)
	default:
		panic("schedule: Next on an every-schedule without start_at needs the job's anchor; call WithAnchor first")
	}
}

func (c *Compiled) bounded(t time.Time) (time.Time, bool) {
	if c.hasEnd && t.After(c.end) {
		return time.Time{}, false
	}
	return t, true
}

// Latest is for a scheduler that wakes up late. `from` is an occurrence not
// after now; Latest returns the latest occurrence L with from <= L <= now
// and the number of occurrences in [from, L], from and L included.
//
// It stays cheap after a long outage: every-schedules are solved
// arithmetically (exact), cron schedules are stepped through at most
// maxCount times, after which L is found by a search and exact is false:
// count is then a lower bound. If now is before from, Latest returns the
// zero time and count 0. Latest needs no anchor: `from` fixes the phase.
func (c *Compiled) Latest(from, now time.Time, maxCount int) (latest time.Time, count uint64, exact bool) {
	from, now = from.UTC(), now.UTC()
	if now.Before(from) {
		return time.Time{}, 0, true
	}
	if len(c.excl) > 0 {
		// Excluded times break the arithmetic: step, as for cron.
		return c.steppedLatest(from, now, maxCount, c.Next)
	}
	switch c.kind {
	case KindEvery:
		bound := now
		if c.hasEnd && c.end.Before(bound) {
			bound = c.end
		}
		if bound.Before(from) {
			return from, 1, true
		}
		k := steps(from, bound, c.interval)
		return addSteps(from, k, c.interval), k + 1, true
	case KindCron:
		return c.steppedLatest(from, now, maxCount, c.cronNext)
	}
	return from, 1, true
}

// steppedLatest is Latest by stepping with next, then by searching.
func (c *Compiled) steppedLatest(from, now time.Time, maxCount int, next func(time.Time) (time.Time, bool)) (time.Time, uint64, bool) {
	cur, count := from, uint64(1)
	dueBy := func(after time.Time) bool {
		n, ok := next(after)
		return ok && !n.After(now)
	}
	for i := 0; i < maxCount; i++ {
		n, ok := next(cur)
		if !ok || n.After(now) {
			return cur, count, true
		}
		cur, count = n, count+1
	}
	if !dueBy(cur) {
		return cur, count, true
	}
	// Too many to count: find the last occurrence by searching backwards
	// from now. Exponential steps find a window (lo, now] holding one, then
	// bisection narrows it to under a second, which holds at most one
	// occurrence because cron instants are whole seconds.
	lo := cur
	for step := time.Second; step > 0; step *= 2 { // step overflows negative after ~292 years
		p := now.Add(-step)
		if !p.After(cur) {
			break
		}
		if dueBy(p) {
			lo = p
			break
		}
	}
	hi := now
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2)
		if dueBy(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	latest, _ := next(lo)
	return latest, count + 1, false
}

// steps returns floor((to-from)/d) for to >= from and d >= 1s. It is exact
// for any span, even past the 292 years where time.Duration saturates.
func steps(from, to time.Time, d time.Duration) uint64 {
	if span := to.Sub(from); span < math.MaxInt64 {
		return uint64(span / d)
	}
	sec := uint64(to.Unix() - from.Unix())
	nsec := int64(to.Nanosecond()) - int64(from.Nanosecond())
	if nsec < 0 {
		sec--
		nsec += int64(time.Second)
	}
	hi, lo := bits.Mul64(sec, uint64(time.Second))
	lo, carry := bits.Add64(lo, uint64(nsec), 0)
	hi += carry
	if hi >= uint64(d) {
		return math.MaxUint64 // beyond any representable time
	}
	q, _ := bits.Div64(hi, lo, uint64(d))
	return q
}

// addSteps returns t + k*d without overflowing time.Duration.
func addSteps(t time.Time, k uint64, d time.Duration) time.Time {
	hi, lo := bits.Mul64(k, uint64(d))
	if hi == 0 && lo <= math.MaxInt64 {
		return t.Add(time.Duration(lo))
	}
	if hi >= uint64(time.Second) {
		return time.Unix(math.MaxInt64/2, 0).UTC() // beyond any representable time
	}
	sec, nsec := bits.Div64(hi, lo, uint64(time.Second))
	return time.Unix(t.Unix()+int64(sec), int64(t.Nanosecond())+int64(nsec)).UTC()
}

// ForRow compiles a scheduler row's schedule with the job's anchor (the
// row's anchor, else its creation time): the plan its occurrences follow.
func ForRow(st *chimev1.JobState) (*Compiled, error) {
	c, err := Compile(st.GetSpec().GetSchedule())
	if err != nil {
		return nil, err
	}
	anchor := st.GetCreatedAt()
	if st.GetAnchor() != nil {
		anchor = st.GetAnchor()
	}
	// c is this call's own: anchored in place rather than copied by
	// WithAnchor (the scheduler compiles a row's schedule at every tick
	// and answer).
	c.anchor, c.anchored = anchor.AsTime().UTC(), true
	return c, nil
}
