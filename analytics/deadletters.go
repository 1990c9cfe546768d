package analytics

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// MaxDeadLetters is the most dead letters one ListDeadLetters call returns.
const MaxDeadLetters = 1000

// DeadLetter is one stored dead letter: a fire the dispatcher gave up on.
type DeadLetter struct {
	ID        string
	Namespace string
	JobID     string
	FireSeq   uint64
	// Attempt is the last attempt made.
	Attempt uint32
	Reason  string
	At      time.Time
	URL     string
	Method  string
	// StatusCode and Error are the last attempt's (0 and "" when unknown).
	StatusCode int32
	Error      string
	// Due is what was due: the callback, retry policy and labels a replay
	// reuses.
	Due *chimev1.Due
	// Replay is the dead letter's first recorded replay; nil if it has
	// none.
	Replay *Replay
}

// Replay is a dead letter's replay, as the API records it
// (TableDeadLetterReplays): when, and the job it created.
type Replay struct {
	JobID string
	At    time.Time
}

// DeadLetterCursor marks where a page of ListDeadLetters ended: the next
// page holds the dead letters before it (older, or as old with a smaller
// id). The zero cursor starts at the newest.
type DeadLetterCursor struct {
	At time.Time
	ID string
}

// IsZero says whether c is the start.
func (c DeadLetterCursor) IsZero() bool { return c.At.IsZero() && c.ID == "" }

// deadLetterSelect reads dead letters (d) with their first replay (r; a
// dead letter without one gets r's defaults: an empty dead_letter_id).
// The replays are grouped before the join, so a replay recorded twice
// reads as one whether ClickHouse has merged the rows yet or not. Its one
// placeholder is the namespace, for the replays; {replays} takes more
// conditions on them.
const deadLetterSelect = `SELECT d.event_id, d.namespace, d.job_id, d.fire_seq, d.attempt, d.reason, d.at, d.url, d.method,
		d.status_code, d.error, d.due, r.dead_letter_id, r.replay_job_id, r.first_replayed_at
	FROM dead_letters AS d FINAL
	LEFT JOIN (
		SELECT dead_letter_id, any(job_id) AS replay_job_id, min(replayed_at) AS first_replayed_at
		FROM dead_letter_replays WHERE namespace = ?{replays} GROUP BY dead_letter_id
	) AS r ON r.dead_letter_id = d.event_id`

// DeadLetterQuery selects dead letters.
type DeadLetterQuery struct {
	// Limit is how many at most, 1 to MaxDeadLetters.
	Limit int
	// Before is where the previous page ended (zero: the newest).
	Before DeadLetterCursor
	// From and To, if set, keep those dead-lettered in [From, To).
	From, To time.Time
	// JobIDPrefix, if set, keeps those of jobs whose id starts with it.
	JobIDPrefix string
	// Replayed, if set, keeps those replayed (true) or not (false).
	Replayed *bool
}

// ListDeadLetters returns the namespace's dead letters q selects, newest
// first.
func (s *Store) ListDeadLetters(ctx context.Context, namespace string, dq DeadLetterQuery) ([]DeadLetter, error) {
	if namespace == "" {
		return nil, fmt.Errorf("%w: namespace is required", ErrInvalid)
	}
	if dq.Limit < 1 || dq.Limit > MaxDeadLetters {
		return nil, fmt.Errorf("%w: limit %d must be between 1 and %d", ErrInvalid, dq.Limit, MaxDeadLetters)
	}
	q, args := deadLetterWhere(namespace, dq)
	if !dq.Before.IsZero() {
		q += ` AND (d.at, d.event_id) < (fromUnixTimestamp64Milli(toInt64(?), 'UTC'), ?)`
		args = append(args, dq.Before.At.UnixMilli(), dq.Before.ID)
	}
	q += ` ORDER BY d.at DESC, d.event_id DESC LIMIT ?`
	args = append(args, dq.Limit)
	return s.queryDeadLetters(ctx, "list dead letters", q, args...)
}

// CountDeadLetters counts the namespace's dead letters q selects, its
// Limit and Before aside.
func (s *Store) CountDeadLetters(ctx context.Context, namespace string, dq DeadLetterQuery) (int, error) {
	if namespace == "" {
		return 0, fmt.Errorf("%w: namespace is required", ErrInvalid)
	}
	q, args := deadLetterWhere(namespace, dq)
	q = `SELECT count() FROM (` + q + `)`
	var n uint64
	if err := s.conn.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		return 0, classify("count dead letters", err)
	}
	return int(n), nil
}

// deadLetterWhere completes deadLetterSelect with dq's filters (From, To,
// JobIDPrefix, Replayed) and returns it with its arguments. A time range
// bounds the replays read too: a replay lives in its dead letter's day.
func deadLetterWhere(namespace string, dq DeadLetterQuery) (string, []any) {
	var replays, where string
	var replayArgs, args []any
	if !dq.From.IsZero() {
		replays += ` AND dead_lettered_at >= fromUnixTimestamp64Milli(toInt64(?), 'UTC')`
		where += ` AND d.at >= fromUnixTimestamp64Milli(toInt64(?), 'UTC')`
		replayArgs, args = append(replayArgs, dq.From.UnixMilli()), append(args, dq.From.UnixMilli())
	}
	if !dq.To.IsZero() {
		replays += ` AND dead_lettered_at < fromUnixTimestamp64Milli(toInt64(?), 'UTC')`
		where += ` AND d.at < fromUnixTimestamp64Milli(toInt64(?), 'UTC')`
		replayArgs, args = append(replayArgs, dq.To.UnixMilli()), append(args, dq.To.UnixMilli())
	}
	if dq.JobIDPrefix != "" {
		where += ` AND startsWith(d.job_id, ?)`
		args = append(args, dq.JobIDPrefix)
	}
	switch {
	case dq.Replayed == nil:
	case *dq.Replayed:
		where += ` AND r.dead_letter_id != ''`
	default:
		where += ` AND r.dead_letter_id = ''`
	}
	q := strings.Replace(deadLetterSelect, "{replays}", replays, 1) + ` WHERE d.namespace = ?` + where
	return q, append(append(append([]any{namespace}, replayArgs...), namespace), args...)
}

// GetDeadLetter returns the namespace's dead letter id, nil if there is
// none.
func (s *Store) GetDeadLetter(ctx context.Context, namespace, id string) (*DeadLetter, error) {
	if namespace == "" || id == "" {
		return nil, fmt.Errorf("%w: namespace and dead letter id are required", ErrInvalid)
	}
	q := strings.Replace(deadLetterSelect, "{replays}", ` AND dead_letter_id = ?`, 1) + ` WHERE d.namespace = ? AND d.event_id = ? LIMIT 1`
	out, err := s.queryDeadLetters(ctx, "get dead letter", q, namespace, id, namespace, id)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	return &out[0], nil
}

// RecordReplays records the Replay of each dead letter of ds, in one
// insert. The API calls it once Kafka confirmed the replays' jobs, never
// before: a replay recorded but not published would leave its dead letter
// marked replayed and the callback never sent. Recording a replay again is
// harmless; the first one stays.
func (s *Store) RecordReplays(ctx context.Context, ds []*DeadLetter) error {
	if len(ds) == 0 {
		return nil
	}
	for _, d := range ds {
		if d.Namespace == "" || d.ID == "" || d.Replay == nil || d.Replay.JobID == "" {
			return fmt.Errorf("%w: a replay needs the namespace, the dead letter id and the job id (dead letter %q)", ErrInvalid, d.ID)
		}
	}
	bt, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+TableDeadLetterReplays+" (namespace, dead_letter_id, dead_lettered_at, job_id, replayed_at)")
	if err != nil {
		return classify("prepare the replay records", err)
	}
	for _, d := range ds {
		if err := bt.Append(d.Namespace, d.ID, d.At, d.Replay.JobID, d.Replay.At.UTC()); err != nil {
			_ = bt.Abort()
			return classify("record the replays", err)
		}
	}
	if err := bt.Send(); err != nil {
		return classify("record the replays", err)
	}
	return nil
}

func (s *Store) queryDeadLetters(ctx context.Context, what, q string, args ...any) ([]DeadLetter, error) {
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, classify(what, err)
	}
	defer rows.Close()
	var out []DeadLetter
	for rows.Next() {
		var (
			d                       DeadLetter
			due, replayOf, replayAs string
			replayedAt              time.Time
		)
		if err := rows.Scan(&d.ID, &d.Namespace, &d.JobID, &d.FireSeq, &d.Attempt, &d.Reason, &d.At,
			&d.URL, &d.Method, &d.StatusCode, &d.Error, &due, &replayOf, &replayAs, &replayedAt); err != nil {
			return nil, classify(what, err)
		}
		d.At = d.At.UTC()
		if replayOf != "" {
			d.Replay = &Replay{JobID: replayAs, At: replayedAt.UTC()}
		}
		d.Due = new(chimev1.Due)
		if err := schema.UnmarshalInternal([]byte(due), d.Due); err != nil {
			return nil, fmt.Errorf("analytics: %s: dead letter %s: its due does not decode: %w", what, d.ID, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(what, err)
	}
	return out, nil
}
