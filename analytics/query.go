package analytics

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Limits that keep one query cheap.
const (
	// MaxStatsPoints is the most points Stats returns: narrow the range or
	// widen the step.
	MaxStatsPoints = 10_000
	// MaxHistory is the most transitions BreakerHistory returns (the
	// earliest ones in the range).
	MaxHistory = 10_000
	// MaxAttempts is the most attempts one Attempts call returns: a page.
	MaxAttempts = 1000
)

// Window is the breaker's observability window when it changed state.
type Window struct {
	Requests     uint64  `json:"requests"`
	Failures     uint64  `json:"failures"`
	SlowCalls    uint64  `json:"slow_calls"`
	FailureRate  float64 `json:"failure_rate"`
	SlowCallRate float64 `json:"slow_call_rate"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	AvgMs        float64 `json:"avg_ms"`
}

// Transition is one breaker state change.
type Transition struct {
	EventID string    `json:"event_id"`
	At      time.Time `json:"at"`
	// From and To are StateName values ("closed", "open", "half_open", ...).
	From             string `json:"from"`
	To               string `json:"to"`
	Reason           string `json:"reason"`
	Window           Window `json:"window"`
	ConsecutiveTrips uint32 `json:"consecutive_trips"`
	CoolOffMs        int64  `json:"cool_off_ms"`
}

// BreakerHistory returns the namespace's breaker transitions with at in
// [from, to), oldest first.
func (s *Store) BreakerHistory(ctx context.Context, namespace string, from, to time.Time) ([]Transition, error) {
	if err := checkRange(namespace, from, to); err != nil {
		return nil, err
	}
	rows, err := s.conn.Query(ctx, `
		SELECT event_id, at, from_state, to_state, reason,
			window_requests, window_failures, window_slow_calls, window_failure_rate,
			window_slow_call_rate, window_p50_ms, window_p99_ms, window_avg_ms,
			consecutive_trips, cool_off_ms
		FROM breaker_transitions FINAL
		WHERE namespace = ?
			AND at >= fromUnixTimestamp64Milli(toInt64(?), 'UTC')
			AND at < fromUnixTimestamp64Milli(toInt64(?), 'UTC')
		ORDER BY at, event_id
		LIMIT ?`, namespace, from.UnixMilli(), to.UnixMilli(), MaxHistory)
	if err != nil {
		return nil, classify("breaker history", err)
	}
	defer rows.Close()
	var out []Transition
	for rows.Next() {
		var t Transition
		w := &t.Window
		if err := rows.Scan(&t.EventID, &t.At, &t.From, &t.To, &t.Reason,
			&w.Requests, &w.Failures, &w.SlowCalls, &w.FailureRate,
			&w.SlowCallRate, &w.P50Ms, &w.P99Ms, &w.AvgMs,
			&t.ConsecutiveTrips, &t.CoolOffMs); err != nil {
			return nil, classify("breaker history", err)
		}
		t.At = t.At.UTC()
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, classify("breaker history", err)
	}
	return out, nil
}

// Point is one step of a namespace's statistics. Requests are the calls
// that went out over HTTP: Successes + Failures, where Failures are
// Retryable + Permanent answers (and timeouts, connection errors).
// Deferred (held back by the breaker or the namespace's limits), Expired
// and Refused callbacks never reached the client. Latency quantiles are
// over requests; 0 when there were none.
type Point struct {
	T         time.Time `json:"t"`
	Requests  uint64    `json:"requests"`
	Successes uint64    `json:"successes"`
	Failures  uint64    `json:"failures"`
	Retryable uint64    `json:"retryable"`
	Permanent uint64    `json:"permanent"`
	Deferred  uint64    `json:"deferred"`
	Expired   uint64    `json:"expired"`
	Refused   uint64    `json:"refused"`
	P50Ms     float64   `json:"p50_ms"`
	P99Ms     float64   `json:"p99_ms"`
}

// Stats returns the namespace's statistics from the per-minute aggregates,
// one point per step (a whole number of minutes) from from (rounded down
// to a multiple of step since the Unix epoch) to to (exclusive), with
// empty steps as zero points.
func (s *Store) Stats(ctx context.Context, namespace string, from, to time.Time, step time.Duration) ([]Point, error) {
	if err := checkRange(namespace, from, to); err != nil {
		return nil, err
	}
	if step <= 0 || step%time.Minute != 0 {
		return nil, fmt.Errorf("%w: step %s must be a positive whole number of minutes (the aggregates are per minute)", ErrInvalid, step)
	}
	start := from.UTC().Truncate(step)
	n := (to.Sub(start) + step - 1) / step
	if n > MaxStatsPoints {
		return nil, fmt.Errorf("%w: %s to %s by %s is %d points, at most %d: widen the step or narrow the range",
			ErrInvalid, from.Format(time.RFC3339), to.Format(time.RFC3339), step, n, MaxStatsPoints)
	}
	rows, err := s.conn.Query(ctx, `
		SELECT toStartOfInterval(minute, toIntervalSecond(toInt64(?)), 'UTC') AS t,
			sum(requests), sum(successes), sum(failures), sum(retryable), sum(permanent),
			sum(deferred), sum(expired), sum(refused), quantilesMerge(0.5, 0.99)(latency_ms)
		FROM attempts_1m
		WHERE namespace = ?
			AND minute >= toDateTime(toInt64(?), 'UTC')
			AND minute < toDateTime(toInt64(?), 'UTC')
		GROUP BY t
		ORDER BY t`, int64(step/time.Second), namespace, start.Unix(), ceilSeconds(to))
	if err != nil {
		return nil, classify("stats", err)
	}
	defer rows.Close()
	points := make([]Point, n)
	for i := range points {
		points[i].T = start.Add(time.Duration(i) * step)
	}
	for rows.Next() {
		var (
			p Point
			q []float64
		)
		if err := rows.Scan(&p.T, &p.Requests, &p.Successes, &p.Failures, &p.Retryable, &p.Permanent,
			&p.Deferred, &p.Expired, &p.Refused, &q); err != nil {
			return nil, classify("stats", err)
		}
		if len(q) == 2 {
			p.P50Ms, p.P99Ms = finite(q[0]), finite(q[1])
		}
		i := int(p.T.Sub(start) / step)
		if i < 0 || i >= len(points) {
			continue
		}
		p.T = points[i].T
		points[i] = p
	}
	if err := rows.Err(); err != nil {
		return nil, classify("stats", err)
	}
	return points, nil
}

func ceilSeconds(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// Attempt is one stored callback outcome.
type Attempt struct {
	EventID    string    `json:"event_id"`
	FireSeq    uint64    `json:"fire_seq"`
	Attempt    uint32    `json:"attempt"`
	Class      string    `json:"class"`
	StatusCode int32     `json:"status_code"`
	LatencyMs  float64   `json:"latency_ms"`
	ErrorKind  string    `json:"error_kind,omitempty"`
	Error      string    `json:"error,omitempty"`
	Probe      bool      `json:"probe"`
	At         time.Time `json:"at"`
	// ScheduledAt and StartedAt are the Unix epoch when unknown.
	ScheduledAt time.Time `json:"scheduled_at"`
	StartedAt   time.Time `json:"started_at"`
	WillRetry   bool      `json:"will_retry"`
	// NextAttemptAt is set when WillRetry.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	URL           string     `json:"url"`
	Method        string     `json:"method"`
}

// AttemptCursor marks where a page of Attempts ended: the next page holds
// the outcomes after it in the order of the listing (older fires, earlier
// attempts). The zero cursor starts at the newest.
type AttemptCursor struct {
	FireSeq uint64
	Attempt uint32
	At      time.Time
	EventID string
}

// IsZero says whether c is the start.
func (c AttemptCursor) IsZero() bool { return c == AttemptCursor{} }

// Cursor is the cursor of the page that continues after a.
func (a Attempt) Cursor() AttemptCursor {
	return AttemptCursor{FireSeq: a.FireSeq, Attempt: a.Attempt, At: a.At, EventID: a.EventID}
}

// AttemptQuery selects a page of a job's outcomes.
type AttemptQuery struct {
	// Limit is how many at most, 1 to MaxAttempts.
	Limit int
	// After is where the previous page ended (zero: the newest).
	After AttemptCursor
	// Classes, if set, keeps the outcomes of these classes ("success",
	// "deferred", ...): deferrals are not attempts, and a caller lists
	// them apart.
	Classes []string
}

// Attempts returns a page of the job's stored outcomes, newest first: by
// fire, then attempt, then time (a deferral precedes the call it held
// back), then event id; and whether more follow. It reads the job's rows
// only (the table is ordered by namespace and job), and returns at most
// q.Limit of them.
func (s *Store) Attempts(ctx context.Context, namespace, jobID string, aq AttemptQuery) ([]Attempt, bool, error) {
	if namespace == "" || jobID == "" {
		return nil, false, fmt.Errorf("%w: namespace and job id are required", ErrInvalid)
	}
	if aq.Limit < 1 || aq.Limit > MaxAttempts {
		return nil, false, fmt.Errorf("%w: limit %d must be between 1 and %d", ErrInvalid, aq.Limit, MaxAttempts)
	}
	q := `SELECT event_id, fire_seq, attempt, class, status_code, latency_ms, error_kind, error,
			probe, at, scheduled_at, started_at, will_retry, next_attempt_at, url, method
		FROM callback_attempts FINAL
		WHERE namespace = ? AND job_id = ?`
	args := []any{namespace, jobID}
	if !aq.After.IsZero() {
		q += ` AND (fire_seq, attempt, at, event_id) < (toUInt64(?), toUInt32(?), fromUnixTimestamp64Milli(toInt64(?), 'UTC'), ?)`
		args = append(args, aq.After.FireSeq, aq.After.Attempt, aq.After.At.UnixMilli(), aq.After.EventID)
	}
	if len(aq.Classes) > 0 {
		q += ` AND has(?, class)`
		args = append(args, aq.Classes)
	}
	q += ` ORDER BY fire_seq DESC, attempt DESC, at DESC, event_id DESC LIMIT ?`
	args = append(args, aq.Limit+1)
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, false, classify("attempts", err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var (
			a    Attempt
			next time.Time
		)
		if err := rows.Scan(&a.EventID, &a.FireSeq, &a.Attempt, &a.Class, &a.StatusCode, &a.LatencyMs,
			&a.ErrorKind, &a.Error, &a.Probe, &a.At, &a.ScheduledAt, &a.StartedAt, &a.WillRetry, &next,
			&a.URL, &a.Method); err != nil {
			return nil, false, classify("attempts", err)
		}
		a.At, a.ScheduledAt, a.StartedAt = a.At.UTC(), a.ScheduledAt.UTC(), a.StartedAt.UTC()
		if a.WillRetry && next.Unix() > 0 {
			next = next.UTC()
			a.NextAttemptAt = &next
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, false, classify("attempts", err)
	}
	if len(out) > aq.Limit {
		return out[:aq.Limit], true, nil
	}
	return out, false, nil
}

func checkRange(namespace string, from, to time.Time) error {
	if namespace == "" {
		return fmt.Errorf("%w: namespace is required", ErrInvalid)
	}
	if from.IsZero() || to.IsZero() || !from.Before(to) {
		return fmt.Errorf("%w: from (%s) must be before to (%s)", ErrInvalid, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	return nil
}
