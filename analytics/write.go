package analytics

import (
	"context"
	"fmt"
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

// Batch is the rows of one insert. The zero value is empty and ready.
type Batch struct {
	outcomes    []*chimev1.CallbackOutcome
	outcomePos  []Pos
	transitions []*chimev1.BreakerTransition
	transPos    []Pos
	events      []*chimev1.JobEvent
	eventPos    []Pos
	dead        []*chimev1.DeadLetter
	deadPos     []Pos
}

// AddOutcome adds a callback attempt.
func (b *Batch) AddOutcome(o *chimev1.CallbackOutcome, p Pos) {
	b.outcomes, b.outcomePos = append(b.outcomes, o), append(b.outcomePos, p)
}

// AddTransition adds a breaker transition.
func (b *Batch) AddTransition(t *chimev1.BreakerTransition, p Pos) {
	b.transitions, b.transPos = append(b.transitions, t), append(b.transPos, p)
}

// AddJobEvent adds a job lifecycle event.
func (b *Batch) AddJobEvent(e *chimev1.JobEvent, p Pos) {
	b.events, b.eventPos = append(b.events, e), append(b.eventPos, p)
}

// AddDeadLetter adds a dead letter.
func (b *Batch) AddDeadLetter(d *chimev1.DeadLetter, p Pos) {
	b.dead, b.deadPos = append(b.dead, d), append(b.deadPos, p)
}

// Len is the number of rows.
func (b *Batch) Len() int {
	return len(b.outcomes) + len(b.transitions) + len(b.events) + len(b.dead)
}

// Reset empties the batch, keeping its memory.
func (b *Batch) Reset() {
	clear(b.outcomes)
	clear(b.transitions)
	clear(b.events)
	clear(b.dead)
	b.dead, b.deadPos = b.dead[:0], b.deadPos[:0]
	b.outcomes, b.outcomePos = b.outcomes[:0], b.outcomePos[:0]
	b.transitions, b.transPos = b.transitions[:0], b.transPos[:0]
	b.events, b.eventPos = b.events[:0], b.eventPos[:0]
}

// Insert writes the batch, one insert per table. token identifies the
// batch: an insert retried with the same token after an unclear failure
// (a timeout after the server stored it) is dropped by ClickHouse, and so
// are its materialized-view rows. A batch must not be changed between
// retries.
func (s *Store) Insert(ctx context.Context, b *Batch, token string) error {
	if len(b.outcomes) > 0 {
		if err := s.insert(ctx, TableAttempts, token, func(bt driver.Batch) error { return appendOutcomes(bt, b) }); err != nil {
			return err
		}
	}
	if len(b.transitions) > 0 {
		if err := s.insert(ctx, TableTransitions, token, func(bt driver.Batch) error { return appendTransitions(bt, b) }); err != nil {
			return err
		}
	}
	if len(b.events) > 0 {
		if err := s.insert(ctx, TableJobEvents, token, func(bt driver.Batch) error { return appendJobEvents(bt, b) }); err != nil {
			return err
		}
	}
	if len(b.dead) > 0 {
		if err := s.insert(ctx, TableDeadLetters, token, func(bt driver.Batch) error { return appendDeadLetters(bt, b) }); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) insert(ctx context.Context, table, token string, fill func(driver.Batch) error) error {
	settings := ch.Settings{"deduplicate_blocks_in_dependent_materialized_views": 1}
	if token != "" {
		settings["insert_deduplication_token"] = token + "/" + table
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

func ts(t interface{ AsTime() time.Time }, valid bool) time.Time {
	if !valid {
		return time.Unix(0, 0).UTC()
	}
	return t.AsTime()
}

// rowTime is the first set time of ts, else the record's.
func rowTime(p Pos, times ...interface {
	IsValid() bool
	AsTime() time.Time
}) time.Time {
	for _, t := range times {
		if t.IsValid() && !t.AsTime().IsZero() && t.AsTime().Unix() > 0 {
			return t.AsTime()
		}
	}
	if p.Time.IsZero() {
		return time.Now()
	}
	return p.Time
}

func appendOutcomes(bt driver.Batch, b *Batch) error {
	o, p, n := b.outcomes, b.outcomePos, len(b.outcomes)
	c := &cols{bt: bt}
	c.add(col(n, func(i int) string { return o[i].GetEventId() }))
	c.add(col(n, func(i int) string { return o[i].GetNamespace() }))
	c.add(col(n, func(i int) string { return o[i].GetJobId() }))
	c.add(col(n, func(i int) uint64 { return o[i].GetFireSeq() }))
	c.add(col(n, func(i int) uint32 { return o[i].GetAttempt() }))
	c.add(col(n, func(i int) string { return schema.OutcomeClassName(o[i].GetClass()) }))
	c.add(col(n, func(i int) int32 { return o[i].GetStatusCode() }))
	c.add(col(n, func(i int) float64 { return float64(o[i].GetLatency().AsDuration()) / float64(time.Millisecond) }))
	c.add(col(n, func(i int) string { return o[i].GetErrorKind() }))
	c.add(col(n, func(i int) string { return o[i].GetError() }))
	c.add(col(n, func(i int) bool { return o[i].GetProbe() }))
	c.add(col(n, func(i int) time.Time {
		return rowTime(p[i], o[i].GetFinishedAt(), o[i].GetStartedAt(), o[i].GetScheduledAt())
	}))
	c.add(col(n, func(i int) time.Time { return ts(o[i].GetScheduledAt(), o[i].GetScheduledAt() != nil) }))
	c.add(col(n, func(i int) time.Time { return ts(o[i].GetStartedAt(), o[i].GetStartedAt() != nil) }))
	c.add(col(n, func(i int) time.Time { return ts(o[i].GetFinishedAt(), o[i].GetFinishedAt() != nil) }))
	c.add(col(n, func(i int) bool { return o[i].GetWillRetry() }))
	c.add(col(n, func(i int) time.Time { return ts(o[i].GetNextAttemptAt(), o[i].GetNextAttemptAt() != nil) }))
	c.add(col(n, func(i int) string { return o[i].GetDispatcherId() }))
	c.add(col(n, func(i int) string { return o[i].GetUrl() }))
	c.add(col(n, func(i int) string { return o[i].GetMethod() }))
	c.add(col(n, func(i int) int32 { return p[i].Partition }))
	c.add(col(n, func(i int) int64 { return p[i].Offset }))
	return c.err
}

func appendTransitions(bt driver.Batch, b *Batch) error {
	t, p, n := b.transitions, b.transPos, len(b.transitions)
	c := &cols{bt: bt}
	c.add(col(n, func(i int) string { return t[i].GetEventId() }))
	c.add(col(n, func(i int) string { return t[i].GetNamespace() }))
	c.add(col(n, func(i int) time.Time { return rowTime(p[i], t[i].GetAt()) }))
	c.add(col(n, func(i int) string { return schema.BreakerStateName(t[i].GetFrom()) }))
	c.add(col(n, func(i int) string { return schema.BreakerStateName(t[i].GetTo()) }))
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

func appendJobEvents(bt driver.Batch, b *Batch) error {
	e, p, n := b.events, b.eventPos, len(b.events)
	c := &cols{bt: bt}
	c.add(col(n, func(i int) string { return e[i].GetEventId() }))
	c.add(col(n, func(i int) string { return e[i].GetNamespace() }))
	c.add(col(n, func(i int) string { return e[i].GetJobId() }))
	c.add(col(n, func(i int) string { return schema.JobEventTypeName(e[i].GetType()) }))
	c.add(col(n, func(i int) time.Time { return rowTime(p[i], e[i].GetAt()) }))
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

func appendDeadLetters(bt driver.Batch, b *Batch) error {
	d, p, n := b.dead, b.deadPos, len(b.dead)
	dues := make([]string, n)
	for i := range d {
		raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(d[i].GetDue())
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
	c.add(col(n, func(i int) string { return d[i].GetDue().GetNamespace() }))
	c.add(col(n, func(i int) string { return d[i].GetDue().GetJobId() }))
	c.add(col(n, func(i int) uint64 { return d[i].GetDue().GetFireSeq() }))
	c.add(col(n, func(i int) uint32 { return max(d[i].GetDue().GetAttempt(), last(i).GetAttempt()) }))
	c.add(col(n, func(i int) string { return d[i].GetReason() }))
	c.add(col(n, func(i int) time.Time { return rowTime(p[i], d[i].GetAt()) }))
	c.add(col(n, func(i int) string { return d[i].GetDue().GetCallback().GetUrl() }))
	c.add(col(n, func(i int) string { return callbackMethod(d[i].GetDue().GetCallback()) }))
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

// StoredOffsets returns, per source table and Kafka partition, the highest
// offset stored: a sink resuming a partition skips records at or below it.
func (s *Store) StoredOffsets(ctx context.Context) (map[string]map[int32]int64, error) {
	rows, err := s.conn.Query(ctx, "SELECT source, kafka_partition, max(max_offset) FROM sink_offsets GROUP BY source, kafka_partition")
	if err != nil {
		return nil, classify("read stored offsets", err)
	}
	defer rows.Close()
	out := map[string]map[int32]int64{}
	for rows.Next() {
		var (
			src string
			p   int32
			off int64
		)
		if err := rows.Scan(&src, &p, &off); err != nil {
			return nil, classify("read stored offsets", err)
		}
		if out[src] == nil {
			out[src] = map[int32]int64{}
		}
		out[src][p] = off
	}
	if err := rows.Err(); err != nil {
		return nil, classify("read stored offsets", err)
	}
	return out, nil
}
