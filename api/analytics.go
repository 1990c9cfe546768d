package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/schedule"
)

// DefaultRange is the time range of the history and stats routes when the
// request gives neither from nor to: the last hour.
const DefaultRange = time.Hour

// DefaultStep is the stats step when the request gives none.
const DefaultStep = time.Minute

// analyticsCtx bounds a query by the request and AnalyticsTimeout.
func (s *server) analyticsCtx(c *fiber.Ctx) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.UserContext(), s.cfg.AnalyticsTimeout)
}

// analyticsStore is the store, or the 503 that says there is none.
func (s *server) analyticsStore() (AnalyticsStore, error) {
	if s.cfg.Analytics == nil {
		return nil, problem(fiber.StatusServiceUnavailable, "analytics-unavailable",
			"analytics is not configured on this API process: start it with CHIME_CLICKHOUSE_DSN (--clickhouse-dsn) naming the ClickHouse the sink writes to")
	}
	return s.cfg.Analytics, nil
}

// analyticsError turns a store error into its problem: ErrInvalid is a
// 400, ErrUnavailable a 503; anything else is a 500.
func analyticsError(err error) error {
	switch {
	case errors.Is(err, analytics.ErrInvalid):
		msg := strings.TrimPrefix(err.Error(), analytics.ErrInvalid.Error()+": ")
		p := problem(fiber.StatusBadRequest, "invalid-query", "%s", msg)
		p.Title = "Query parameter is invalid"
		return p
	case errors.Is(err, analytics.ErrUnavailable):
		return problem(fiber.StatusServiceUnavailable, "analytics-unavailable",
			"ClickHouse, which holds chime's analytics, cannot be reached right now (%v); scheduling and callbacks are not affected, and the sink catches up once it is back: retry later", err)
	case errors.Is(err, context.DeadlineExceeded):
		return problem(fiber.StatusServiceUnavailable, "analytics-unavailable",
			"the ClickHouse query did not finish in time (%v); narrow the range or retry later", err)
	}
	return err
}

// badQuery is a 400 naming the query parameter.
func badQuery(param, format string, args ...any) *Problem {
	p := problem(fiber.StatusBadRequest, "invalid-query", format, args...)
	p.Title = "Query parameter is invalid"
	p.Errors = []FieldError{{Field: param, Reason: p.Detail}}
	p.Detail = param + ": " + p.Detail
	return p
}

// timeRange reads from and to (RFC 3339). Both missing: the last hour;
// one missing: an hour from or up to the other (to no later than now).
// queryTime reads an optional RFC 3339 query parameter (ok false when
// absent).
func queryTime(c *fiber.Ctx, name string) (t time.Time, ok bool, err error) {
	v := c.Query(name)
	if v == "" {
		return time.Time{}, false, nil
	}
	t, err = time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, false, badQuery(name, "%q is not an RFC 3339 time; write it like 2026-11-23T10:00:00Z", v)
	}
	// ClickHouse's DateTime64 ends where chime's times do not; the
	// year 304 made a query fail with a 500 (found by schemathesis).
	if err := schedule.InRange(t); err != nil {
		return time.Time{}, false, badQuery(name, "%v", err)
	}
	return t.UTC(), true, nil
}

func (s *server) timeRange(c *fiber.Ctx) (from, to time.Time, err error) {
	parse := func(name string) (time.Time, bool, error) { return queryTime(c, name) }
	from, hasFrom, err := parse("from")
	if err != nil {
		return from, to, err
	}
	to, hasTo, err := parse("to")
	if err != nil {
		return from, to, err
	}
	now := s.now().UTC()
	switch {
	case !hasFrom && !hasTo:
		to = now
		from = to.Add(-DefaultRange)
	case !hasFrom:
		from = to.Add(-DefaultRange)
	case !hasTo:
		to = now
		if !from.Before(to) {
			to = from.Add(DefaultRange)
		}
	}
	if !from.Before(to) {
		return from, to, badQuery("from", "%s is not before to (%s); the range is [from, to)", from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	}
	return from, to, nil
}

type historyResponse struct {
	Namespace   string                 `json:"namespace"`
	From        time.Time              `json:"from"`
	To          time.Time              `json:"to"`
	Transitions []analytics.Transition `json:"transitions"`
}

func (s *server) getBreakerHistory(c *fiber.Ctx) error {
	store, err := s.analyticsStore()
	if err != nil {
		return err
	}
	from, to, err := s.timeRange(c)
	if err != nil {
		return err
	}
	ns := c.Params("ns")
	ctx, cancel := s.analyticsCtx(c)
	defer cancel()
	trs, err := store.BreakerHistory(ctx, ns, from, to)
	if err != nil {
		return analyticsError(err)
	}
	if trs == nil {
		trs = []analytics.Transition{}
	}
	return c.JSON(historyResponse{Namespace: ns, From: from, To: to, Transitions: trs})
}

type statsResponse struct {
	Namespace string            `json:"namespace"`
	From      time.Time         `json:"from"`
	To        time.Time         `json:"to"`
	Step      string            `json:"step"`
	Points    []analytics.Point `json:"points"`
}

func (s *server) getStats(c *fiber.Ctx) error {
	store, err := s.analyticsStore()
	if err != nil {
		return err
	}
	from, to, err := s.timeRange(c)
	if err != nil {
		return err
	}
	step := DefaultStep
	if v := c.Query("step"); v != "" {
		if step, err = time.ParseDuration(v); err != nil {
			return badQuery("step", "%q is not a Go duration; write it like 1m, 5m or 1h", v)
		}
		if step <= 0 || step%time.Minute != 0 {
			return badQuery("step", "%s must be a positive whole number of minutes (the aggregates are per minute)", step)
		}
	}
	ns := c.Params("ns")
	ctx, cancel := s.analyticsCtx(c)
	defer cancel()
	points, err := store.Stats(ctx, ns, from, to, step)
	if err != nil {
		return analyticsError(err)
	}
	if points == nil {
		points = []analytics.Point{}
	}
	return c.JSON(statsResponse{Namespace: ns, From: from, To: to, Step: step.String(), Points: points})
}

// DefaultAttemptPage is the page size of GET .../attempts without limit.
const DefaultAttemptPage = 100

// outcomeClasses are the classes ?class= may name.
var outcomeClasses = func() []string {
	var out []string
	for v := range chimev1.OutcomeClass_name {
		if c := chimev1.OutcomeClass(v); c != chimev1.OutcomeClass_OUTCOME_CLASS_UNSPECIFIED {
			out = append(out, schema.OutcomeClassName(c))
		}
	}
	slices.Sort(out)
	return out
}()

type attemptsResponse struct {
	Namespace string              `json:"namespace"`
	JobID     string              `json:"job_id"`
	Attempts  []analytics.Attempt `json:"attempts"`
	// NextCursor is the cursor of the next page; empty on the last one.
	NextCursor string `json:"next_cursor"`
}

// getAttempts answers GET .../jobs/{id}/attempts: a page of the job's
// stored outcomes, newest first, optionally only some classes (the
// console lists the breaker's deferrals apart from the calls).
func (s *server) getAttempts(c *fiber.Ctx) error {
	store, err := s.analyticsStore()
	if err != nil {
		return err
	}
	ns, id := c.Params("ns"), c.Params("id")
	if err := schema.ValidateJobID(id); err != nil {
		return invalidFields(FieldError{Field: "id", Reason: validationReason(err)})
	}
	q := analytics.AttemptQuery{Limit: DefaultAttemptPage}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > analytics.MaxAttempts {
			return badQuery("limit", "%q is not a whole number from 1 to %d", v, analytics.MaxAttempts)
		}
		q.Limit = n
	}
	if v := c.Query("cursor"); v != "" {
		var ok bool
		if q.After, ok = decodeAttemptCursor(v); !ok {
			return badQuery("cursor", "%q is not a next_cursor this API returned; start again without it", v)
		}
	}
	if v := c.Query("class"); v != "" {
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			if !slices.Contains(outcomeClasses, name) {
				return badQuery("class", "has %q; the classes are %s", name, strings.Join(outcomeClasses, ", "))
			}
			q.Classes = append(q.Classes, name)
		}
	}
	ctx, cancel := s.analyticsCtx(c)
	defer cancel()
	atts, more, err := store.Attempts(ctx, ns, id, q)
	if err != nil {
		return analyticsError(err)
	}
	out := attemptsResponse{Namespace: ns, JobID: id, Attempts: atts}
	if out.Attempts == nil {
		out.Attempts = []analytics.Attempt{}
	}
	if more && len(atts) > 0 {
		out.NextCursor = encodeAttemptCursor(atts[len(atts)-1].Cursor())
	}
	return c.JSON(out)
}

// encodeAttemptCursor and decodeAttemptCursor make the opaque cursor of a
// page of attempts: fire, attempt, time (Unix ms) and event id.
func encodeAttemptCursor(c analytics.AttemptCursor) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d:%d:%d:%s", c.FireSeq, c.Attempt, c.At.UnixMilli(), c.EventID))
}

func decodeAttemptCursor(v string) (analytics.AttemptCursor, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return analytics.AttemptCursor{}, false
	}
	parts := strings.SplitN(string(raw), ":", 4)
	if len(parts) != 4 || parts[3] == "" {
		return analytics.AttemptCursor{}, false
	}
	fire, err1 := strconv.ParseUint(parts[0], 10, 64)
	attempt, err2 := strconv.ParseUint(parts[1], 10, 32)
	ms, err3 := strconv.ParseInt(parts[2], 10, 64)
	// Stored times lie between 1970 and 2106 (analytics.RowTime).
	if err1 != nil || err2 != nil || err3 != nil || ms < 0 || ms >= 1<<32*1000 {
		return analytics.AttemptCursor{}, false
	}
	return analytics.AttemptCursor{FireSeq: fire, Attempt: uint32(attempt), At: time.UnixMilli(ms).UTC(), EventID: parts[3]}, true
}
