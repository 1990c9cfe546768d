package analytics

import (
	"context"
	"fmt"
	"slices"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"google.golang.org/protobuf/proto"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Pos is where a record came from in Kafka, stored with its row so that a
// replay after a crash can skip what is already stored.
type Pos struct {
	Partition int32
	Offset    int64
	// Time is the record's timestamp, the row's time when the event has
	// none.
	Time time.Time
}

// Day is a calendar day in UTC, counted from 1970-01-01: the partition of
// a row. Every table the sink writes is PARTITION BY toDate(at) with at a
// DateTime64(3, 'UTC'), so ClickHouse cuts days in the column's time zone,
// UTC, whatever the server's or the session's (attempts_1m, fed from
// callback_attempts, is PARTITION BY toDate(minute), minute its
// DateTime('UTC') start: the same day).
type Day int32

// DayOf is the day of a row time as ClickHouse's toDate(at) computes it,
// for times RowTime returns (1970 to 2106; outside, toDate wraps around).
func DayOf(t time.Time) Day {
	ms := t.UnixMilli()
	d := ms / msPerDay
	if ms%msPerDay < 0 {
		d--
	}
	return Day(d)
}

const msPerDay = 24 * 60 * 60 * 1000

// String is the day as 2006-01-02.
func (d Day) String() string {
	return time.UnixMilli(int64(d) * msPerDay).UTC().Format(time.DateOnly)
}

// Row times are kept within the days ClickHouse's Date and DateTime both
// represent: toDate of a DateTime64 outside them wraps around modulo 2^16
// days (1969-12-31 23:59 becomes 2149-06-06), and attempts_1m's minute
// (DateTime, seconds in a UInt32) ends at 2106-02-07 06:28:15. Inside,
// toDate(at) is exactly the UTC day of at, which is what DayOf computes.
var (
	minRowTime = time.Unix(0, 0).UTC()
	maxRowTime = time.Date(2106, 2, 6, 23, 59, 59, 999_000_000, time.UTC)
)

type stamp interface {
	IsValid() bool
	AsTime() time.Time
}

// rowTime is the first set time of times (after 1970, before 2106-02-07),
// else the record's time, moved into that range, else now. It is cut to
// the millisecond, as the DateTime64(3) column stores it.
func rowTime(p Pos, times ...stamp) time.Time {
	for _, t := range times {
		if t.IsValid() {
			if at := t.AsTime(); at.Unix() > 0 && !at.After(maxRowTime) {
				return time.UnixMilli(at.UnixMilli()).UTC()
			}
		}
	}
	t := p.Time
	switch {
	case t.IsZero():
		t = time.Now()
	case t.Before(minRowTime):
		return minRowTime
	case t.After(maxRowTime):
		return maxRowTime
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

// RowTime is the time the row of m (a CallbackOutcome, BreakerTransition,
// JobEvent or DeadLetter) is stored under, its at column, which the table
// is partitioned by: an attempt's finished, else started, else scheduled
// time; a transition's, job event's or dead letter's at; else the Kafka
// record's time (Pos.Time). The same record at the same position always
// gets the same time (unless Pos.Time is zero: then it is now).
func RowTime(m proto.Message, p Pos) time.Time {
	switch m := m.(type) {
	case *chimev1.CallbackOutcome:
		return rowTime(p, m.GetFinishedAt(), m.GetStartedAt(), m.GetScheduledAt())
	case *chimev1.BreakerTransition:
		return rowTime(p, m.GetAt())
	case *chimev1.JobEvent:
		return rowTime(p, m.GetAt())
	case *chimev1.DeadLetter:
		return rowTime(p, m.GetAt())
	}
	return rowTime(p)
}

// rows are one table's rows in a batch, with their times.
type rows[M proto.Message] struct {
	msgs []M
	pos  []Pos
	at   []time.Time
}

func (r *rows[M]) add(m M, p Pos) {
	r.msgs, r.pos, r.at = append(r.msgs, m), append(r.pos, p), append(r.at, RowTime(m, p))
}

func (r *rows[M]) len() int { return len(r.msgs) }

func (r *rows[M]) reset() {
	clear(r.msgs)
	r.msgs, r.pos, r.at = r.msgs[:0], r.pos[:0], r.at[:0]
}

// ofDay returns the rows of day d, in batch order: r itself when all are.
func (r *rows[M]) ofDay(d Day) *rows[M] {
	n := 0
	for _, at := range r.at {
		if DayOf(at) == d {
			n++
		}
	}
	switch n {
	case len(r.at):
		return r
	case 0:
		return &rows[M]{}
	}
	out := &rows[M]{msgs: make([]M, 0, n), pos: make([]Pos, 0, n), at: make([]time.Time, 0, n)}
	for i, at := range r.at {
		if DayOf(at) == d {
			out.msgs, out.pos, out.at = append(out.msgs, r.msgs[i]), append(out.pos, r.pos[i]), append(out.at, at)
		}
	}
	return out
}

// Batch is the rows of one insert. The zero value is empty and ready.
type Batch struct {
	outcomes    rows[*chimev1.CallbackOutcome]
	transitions rows[*chimev1.BreakerTransition]
	events      rows[*chimev1.JobEvent]
	dead        rows[*chimev1.DeadLetter]
}

// AddOutcome adds a callback attempt.
func (b *Batch) AddOutcome(o *chimev1.CallbackOutcome, p Pos) { b.outcomes.add(o, p) }

// AddTransition adds a breaker transition.
func (b *Batch) AddTransition(t *chimev1.BreakerTransition, p Pos) { b.transitions.add(t, p) }

// AddJobEvent adds a job lifecycle event.
func (b *Batch) AddJobEvent(e *chimev1.JobEvent, p Pos) { b.events.add(e, p) }

// AddDeadLetter adds a dead letter.
func (b *Batch) AddDeadLetter(d *chimev1.DeadLetter, p Pos) { b.dead.add(d, p) }

// Add adds a CallbackOutcome, BreakerTransition, JobEvent or DeadLetter to
// its table's rows.
func (b *Batch) Add(m proto.Message, p Pos) error {
	switch m := m.(type) {
	case *chimev1.CallbackOutcome:
		b.AddOutcome(m, p)
	case *chimev1.BreakerTransition:
		b.AddTransition(m, p)
	case *chimev1.JobEvent:
		b.AddJobEvent(m, p)
	case *chimev1.DeadLetter:
		b.AddDeadLetter(m, p)
	default:
		return fmt.Errorf("analytics: no table for %T", m)
	}
	return nil
}

// Len is the number of rows.
func (b *Batch) Len() int {
	return b.outcomes.len() + b.transitions.len() + b.events.len() + b.dead.len()
}

// Reset empties the batch, keeping its memory.
func (b *Batch) Reset() {
	b.outcomes.reset()
	b.transitions.reset()
	b.events.reset()
	b.dead.reset()
}

// Days returns the days of the batch's rows, in ascending order: one for a
// typical batch, two for one across midnight.
func (b *Batch) Days() []Day {
	var days []Day
	for _, ats := range [][]time.Time{b.outcomes.at, b.transitions.at, b.events.at, b.dead.at} {
		last, seen := Day(0), false
		for _, at := range ats {
			d := DayOf(at)
			if seen && d == last {
				continue
			}
			last, seen = d, true
			if !slices.Contains(days, d) {
				days = append(days, d)
			}
		}
	}
	slices.Sort(days)
	return days
}

// Insert writes the batch: InsertDay for each of its Days, in order. It
// is not atomic when the batch spans days; the sink calls InsertDay
// itself.
func (s *Store) Insert(ctx context.Context, b *Batch, token string) error {
	for _, d := range b.Days() {
		if err := s.InsertDay(ctx, b, d, token); err != nil {
			return err
		}
	}
	return nil
}

// InsertDay writes the batch's rows of day d, one insert per table, in a
// fixed order (callback_attempts, breaker_transitions, job_events,
// dead_letters). Every table is partitioned by day, so each insert makes
// one part: it is stored whole or not at all.
//
// token identifies the batch: an insert retried with the same token after
// an unclear failure (a timeout after the server stored it) is dropped by
// ClickHouse, and so are its materialized-view rows. Each insert's own
// token is token/table/day. A batch must not be changed between retries.
func (s *Store) InsertDay(ctx context.Context, b *Batch, d Day, token string) error {
	if r := b.outcomes.ofDay(d); r.len() > 0 {
		if err := s.insert(ctx, TableAttempts, d, token, func(bt driver.Batch) error { return appendOutcomes(bt, r) }); err != nil {
			return err
		}
	}
	if r := b.transitions.ofDay(d); r.len() > 0 {
		if err := s.insert(ctx, TableTransitions, d, token, func(bt driver.Batch) error { return appendTransitions(bt, r) }); err != nil {
			return err
		}
	}
	if r := b.events.ofDay(d); r.len() > 0 {
		if err := s.insert(ctx, TableJobEvents, d, token, func(bt driver.Batch) error { return appendJobEvents(bt, r) }); err != nil {
			return err
		}
	}
	if r := b.dead.ofDay(d); r.len() > 0 {
		if err := s.insert(ctx, TableDeadLetters, d, token, func(bt driver.Batch) error { return appendDeadLetters(bt, r) }); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) insert(ctx context.Context, table string, d Day, token string, fill func(driver.Batch) error) error {
	settings := ch.Settings{"deduplicate_blocks_in_dependent_materialized_views": 1}
	if token != "" {
		settings["insert_deduplication_token"] = token + "/" + table + "/" + d.String()
	}
	bt, err := s.conn.PrepareBatch(ch.Context(ctx, ch.WithSettings(settings)), "INSERT INTO "+table)
	if err != nil {
		return classify("prepare insert into "+table, err)
	}
	if err := fill(bt); err != nil {
		_ = bt.Abort()
		return classify("fill insert into "+table, err)
	}
	if err := bt.Send(); err != nil {
		return classify("insert into "+table, err)
	}
	return nil
}

// cols appends whole columns, in table order: much faster than row by row.
type cols struct {
	bt  driver.Batch
	i   int
	err error
}

func (c *cols) add(v any) {
	if c.err == nil {
		c.err = c.bt.Column(c.i).Append(v)
	}
	c.i++
}

func col[T any](n int, f func(i int) T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// lowCard is a LowCardinality(String) column's values, each distinct one
// boxed once. clickhouse-go appends such a column value by value through
// reflect, boxing every string of a []string into an interface (an
// allocation a row, four a callback attempt); the boxes of a []any it
// takes as they are. The values repeat (a namespace, a class), so the
// last one is checked before the map.
func lowCard(n int, f func(i int) string) []any {
	out := make([]any, n)
	boxes := map[string]any{}
	var last string
	var lastBox any
	for i := range out {
		v := f(i)
		if lastBox == nil || v != last {
			b, ok := boxes[v]
			if !ok {
				b = v
				boxes[v] = b
			}
			last, lastBox = v, b
		}
		out[i] = lastBox
	}
	return out
}

func ts(t interface{ AsTime() time.Time }, valid bool) time.Time {
	if !valid {
		return time.Unix(0, 0).UTC()
	}
	return t.AsTime()
}

func appendOutcomes(bt driver.Batch, r *rows[*chimev1.CallbackOutcome]) error {
	o, p, n := r.msgs, r.pos, r.len()
	c := &cols{bt: bt}
	c.add(col(n, func(i int) string { return o[i].GetEventId() }))
	c.add(lowCard(n, func(i int) string { return o[i].GetNamespace() }))
	c.add(col(n, func(i int) string { return o[i].GetJobId() }))
	c.add(col(n, func(i int) uint64 { return o[i].GetFireSeq() }))
	c.add(col(n, func(i int) uint32 { return o[i].GetAttempt() }))
	c.add(lowCard(n, func(i int) string { return schema.OutcomeClassName(o[i].GetClass()) }))
	c.add(col(n, func(i int) int32 { return o[i].GetStatusCode() }))
	c.add(col(n, func(i int) float64 { return float64(o[i].GetLatency().AsDuration()) / float64(time.Millisecond) }))
	c.add(lowCard(n, func(i int) string { return o[i].GetErrorKind() }))
	c.add(col(n, func(i int) string { return o[i].GetError() }))
	c.add(col(n, func(i int) bool { return o[i].GetProbe() }))
	c.add(r.at)
	c.add(col(n, func(i int) time.Time { return ts(o[i].GetScheduledAt(), o[i].GetScheduledAt() != nil) }))
	c.add(col(n, func(i int) time.Time { return ts(o[i].GetStartedAt(), o[i].GetStartedAt() != nil) }))
	c.add(col(n, func(i int) time.Time { return ts(o[i].GetFinishedAt(), o[i].GetFinishedAt() != nil) }))
	c.add(col(n, func(i int) bool { return o[i].GetWillRetry() }))
	c.add(col(n, func(i int) time.Time { return ts(o[i].GetNextAttemptAt(), o[i].GetNextAttemptAt() != nil) }))
	c.add(lowCard(n, func(i int) string { return o[i].GetDispatcherId() }))
	c.add(col(n, func(i int) string { return o[i].GetUrl() }))
	c.add(lowCard(n, func(i int) string { return o[i].GetMethod() }))
	c.add(col(n, func(i int) int32 { return p[i].Partition }))
	c.add(col(n, func(i int) int64 { return p[i].Offset }))
	return c.err
}

func appendTransitions(bt driver.Batch, r *rows[*chimev1.BreakerTransition]) error {
	t, p, n := r.msgs, r.pos, r.len()
	c := &cols{bt: bt}
	c.add(col(n, func(i int) string { return t[i].GetEventId() }))
	c.add(lowCard(n, func(i int) string { return t[i].GetNamespace() }))
	c.add(r.at)
	c.add(lowCard(n, func(i int) string { return schema.BreakerStateName(t[i].GetFrom()) }))
	c.add(lowCard(n, func(i int) string { return schema.BreakerStateName(t[i].GetTo()) }))
	c.add(col(n, func(i int) string { return t[i].GetReason() }))
	c.add(col(n, func(i int) uint64 { return t[i].GetWindow().GetRequests() }))
	c.add(col(n, func(i int) uint64 { return t[i].GetWindow().GetFailures() }))
	c.add(col(n, func(i int) uint64 { return t[i].GetWindow().GetSlowCalls() }))
	c.add(col(n, func(i int) float64 { return t[i].GetWindow().GetFailureRate() }))
	c.add(col(n, func(i int) float64 { return t[i].GetWindow().GetSlowCallRate() }))
	c.add(col(n, func(i int) float64 { return t[i].GetWindow().GetP50Ms() }))
	c.add(col(n, func(i int) float64 { return t[i].GetWindow().GetP99Ms() }))
	c.add(col(n, func(i int) float64 { return t[i].GetWindow().GetAvgMs() }))
	c.add(col(n, func(i int) uint32 { return t[i].GetConsecutiveTrips() }))
	c.add(col(n, func(i int) int64 { return t[i].GetCoolOff().AsDuration().Milliseconds() }))
	c.add(col(n, func(i int) int32 { return p[i].Partition }))
	c.add(col(n, func(i int) int64 { return p[i].Offset }))
	return c.err
}

func appendJobEvents(bt driver.Batch, r *rows[*chimev1.JobEvent]) error {
	e, p, n := r.msgs, r.pos, r.len()
	c := &cols{bt: bt}
	c.add(col(n, func(i int) string { return e[i].GetEventId() }))
	c.add(lowCard(n, func(i int) string { return e[i].GetNamespace() }))
	c.add(col(n, func(i int) string { return e[i].GetJobId() }))
	c.add(lowCard(n, func(i int) string { return schema.JobEventTypeName(e[i].GetType()) }))
	c.add(r.at)
	c.add(col(n, func(i int) uint64 { return e[i].GetFireSeq() }))
	c.add(col(n, func(i int) uint32 { return e[i].GetAttempt() }))
	c.add(col(n, func(i int) uint64 { return e[i].GetCount() }))
	c.add(col(n, func(i int) time.Time { return ts(e[i].GetFirstScheduledAt(), e[i].GetFirstScheduledAt() != nil) }))
	c.add(col(n, func(i int) time.Time { return ts(e[i].GetLastScheduledAt(), e[i].GetLastScheduledAt() != nil) }))
	c.add(col(n, func(i int) string { return e[i].GetDetail() }))
	c.add(col(n, func(i int) string { return e[i].GetCommandId() }))
	c.add(col(n, func(i int) int32 { return p[i].Partition }))
	c.add(col(n, func(i int) int64 { return p[i].Offset }))
	return c.err
}

func appendDeadLetters(bt driver.Batch, r *rows[*chimev1.DeadLetter]) error {
	d, p, n := r.msgs, r.pos, r.len()
	dues := make([]string, n)
	for i := range d {
		due := d[i].GetDue()
		if a := d[i].GetAttempts(); len(a) > len(due.GetHistory()) {
			// The stored due carries every attempt, the last included, so
			// the API lists the whole history from this one column. A
			// dead letter without a due (not chime's, but the topic is
			// open to any writer) gets an empty one: the sink must not
			// stop on it (FuzzRecords found this panic).
			if due == nil {
				due = &chimev1.Due{}
			} else {
				due = proto.CloneOf(due)
			}
			due.History = a
		}
		raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(due)
		if err != nil {
			return fmt.Errorf("dead letter %s: marshal its due: %w", d[i].GetEventId(), err)
		}
		dues[i] = string(raw)
	}
	last := func(i int) *chimev1.CallbackOutcome {
		if a := d[i].GetAttempts(); len(a) > 0 {
			return a[len(a)-1]
		}
		return nil
	}
	c := &cols{bt: bt}
	c.add(col(n, func(i int) string { return d[i].GetEventId() }))
	c.add(lowCard(n, func(i int) string { return d[i].GetDue().GetNamespace() }))
	c.add(col(n, func(i int) string { return d[i].GetDue().GetJobId() }))
	c.add(col(n, func(i int) uint64 { return d[i].GetDue().GetFireSeq() }))
	c.add(col(n, func(i int) uint32 { return max(d[i].GetDue().GetAttempt(), last(i).GetAttempt()) }))
	c.add(col(n, func(i int) string { return d[i].GetReason() }))
	c.add(r.at)
	c.add(col(n, func(i int) string { return d[i].GetDue().GetCallback().GetUrl() }))
	c.add(lowCard(n, func(i int) string { return callbackMethod(d[i].GetDue().GetCallback()) }))
	c.add(col(n, func(i int) int32 { return last(i).GetStatusCode() }))
	c.add(col(n, func(i int) string { return last(i).GetError() }))
	c.add(dues)
	c.add(col(n, func(i int) int32 { return p[i].Partition }))
	c.add(col(n, func(i int) int64 { return p[i].Offset }))
	return c.err
}

func callbackMethod(h *chimev1.HttpCallback) string {
	if m := h.GetMethod(); m != "" {
		return m
	}
	return "POST"
}

// Stored is what a resuming sink skips: the highest Kafka offset stored
// per source table, Kafka partition and day (sink_day_offsets, filled by
// materialized views from the inserts themselves), and, from before
// migration 5, per source table and Kafka partition (sink_offsets, no
// longer written).
//
// A record is stored if its offset is at or below the highest stored for
// its table, partition and day. That holds because what is stored of each
// (table, partition, day) is a prefix of its records in offset order; see
// the sink's package documentation for why.
type Stored struct {
	days   map[dayKey]int64
	legacy map[partKey]int64
}

type partKey struct {
	table     string
	partition int32
}

type dayKey struct {
	partKey
	day Day
}

// Has says whether the record at offset of table's Kafka partition, whose
// row is of day d, is stored.
func (s *Stored) Has(table string, partition int32, d Day, offset int64) bool {
	if s == nil {
		return false
	}
	k := partKey{table, partition}
	if m, ok := s.legacy[k]; ok && offset <= m {
		return true
	}
	m, ok := s.days[dayKey{k, d}]
	return ok && offset <= m
}

// Max is the highest offset stored of table's Kafka partition, whatever
// the day; false if none is.
func (s *Stored) Max(table string, partition int32) (int64, bool) {
	if s == nil {
		return 0, false
	}
	k := partKey{table, partition}
	m, found := s.legacy[k]
	for dk, off := range s.days {
		if dk.partKey == k && (!found || off > m) {
			m, found = off, true
		}
	}
	return m, found
}

// StoredOffsets reads what is stored (Stored).
func (s *Store) StoredOffsets(ctx context.Context) (*Stored, error) {
	out := &Stored{days: map[dayKey]int64{}, legacy: map[partKey]int64{}}
	err := s.scan(ctx, "SELECT source, kafka_partition, toInt32(day), max(max_offset) FROM "+TableSinkDayOffsets+
		" GROUP BY source, kafka_partition, day", func(rows driver.Rows) error {
		var (
			k   dayKey
			d   int32
			off int64
		)
		if err := rows.Scan(&k.table, &k.partition, &d, &off); err != nil {
			return err
		}
		k.day = Day(d)
		out.days[k] = off
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = s.scan(ctx, "SELECT source, kafka_partition, max(max_offset) FROM "+TableSinkOffsets+
		" GROUP BY source, kafka_partition", func(rows driver.Rows) error {
		var (
			k   partKey
			off int64
		)
		if err := rows.Scan(&k.table, &k.partition, &off); err != nil {
			return err
		}
		out.legacy[k] = off
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Store) scan(ctx context.Context, q string, row func(driver.Rows) error) error {
	rows, err := s.conn.Query(ctx, q)
	if err != nil {
		return classify("read stored offsets", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			return classify("read stored offsets", err)
		}
	}
	if err := rows.Err(); err != nil {
		return classify("read stored offsets", err)
	}
	return nil
}
