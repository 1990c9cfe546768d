package analytics

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

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

const deadLetterColumns = `event_id, namespace, job_id, fire_seq, attempt, reason, at, url, method, status_code, error, due`

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
	q := `SELECT ` + deadLetterColumns + ` FROM dead_letters FINAL WHERE namespace = ?`
	args := []any{namespace}
	if !dq.Before.IsZero() {
		q += ` AND (at, event_id) < (fromUnixTimestamp64Milli(toInt64(?), 'UTC'), ?)`
		args = append(args, dq.Before.At.UnixMilli(), dq.Before.ID)
	}
	if !dq.From.IsZero() {
		q += ` AND at >= fromUnixTimestamp64Milli(toInt64(?), 'UTC')`
		args = append(args, dq.From.UnixMilli())
	}
	if !dq.To.IsZero() {
		q += ` AND at < fromUnixTimestamp64Milli(toInt64(?), 'UTC')`
		args = append(args, dq.To.UnixMilli())
	}
	if dq.JobIDPrefix != "" {
		q += ` AND startsWith(job_id, ?)`
		args = append(args, dq.JobIDPrefix)
	}
	q += ` ORDER BY at DESC, event_id DESC LIMIT ?`
	args = append(args, dq.Limit)
	return s.queryDeadLetters(ctx, "list dead letters", q, args...)
}

// GetDeadLetter returns the namespace's dead letter id, nil if there is
// none.
func (s *Store) GetDeadLetter(ctx context.Context, namespace, id string) (*DeadLetter, error) {
	if namespace == "" || id == "" {
		return nil, fmt.Errorf("%w: namespace and dead letter id are required", ErrInvalid)
	}
	out, err := s.queryDeadLetters(ctx, "get dead letter",
		`SELECT `+deadLetterColumns+` FROM dead_letters FINAL WHERE namespace = ? AND event_id = ? LIMIT 1`, namespace, id)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	return &out[0], nil
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
			d   DeadLetter
			due string
		)
		if err := rows.Scan(&d.ID, &d.Namespace, &d.JobID, &d.FireSeq, &d.Attempt, &d.Reason, &d.At,
			&d.URL, &d.Method, &d.StatusCode, &d.Error, &due); err != nil {
			return nil, classify(what, err)
		}
		d.At = d.At.UTC()
		d.Due = new(chimev1.Due)
		if err := proto.Unmarshal([]byte(due), d.Due); err != nil {
			return nil, fmt.Errorf("analytics: %s: dead letter %s: its due does not decode: %w", what, d.ID, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(what, err)
	}
	return out, nil
}
