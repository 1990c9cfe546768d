package analytics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/internal/clickhousetest"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

func TestMain(m *testing.M) { clickhousetest.Main(m) }

type testBundle struct {
	ctx   context.Context
	dsn   string
	store *analytics.Store
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	db := clickhousetest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	store, err := analytics.Open(ctx, db.DSN, analytics.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	return &testBundle{ctx: ctx, dsn: db.DSN, store: store}
}

func count(t *testing.T, tb *testBundle, q string) uint64 {
	t.Helper()
	var n uint64
	require.NoError(t, tb.store.Conn().QueryRow(tb.ctx, q).Scan(&n))
	return n
}

func TestMigrateIsIdempotentAndAppliesRetention(t *testing.T) {
	t.Parallel()
	tb := setup(t)

	v, err := analytics.SchemaVersion(tb.ctx, tb.store.Conn())
	require.NoError(t, err)
	require.Equal(t, uint32(6), v)

	// Again, with another retention: no new version rows, TTL changed.
	again, err := analytics.Open(tb.ctx, tb.dsn, analytics.Options{Retention: 30 * 24 * time.Hour})
	require.NoError(t, err)
	defer again.Close()
	require.Equal(t, uint64(6), count(t, tb, "SELECT count() FROM schema_migrations FINAL"))
	var ddl string
	require.NoError(t, tb.store.Conn().QueryRow(tb.ctx,
		"SELECT create_table_query FROM system.tables WHERE database = currentDatabase() AND name = 'callback_attempts'").Scan(&ddl))
	require.Contains(t, ddl, "toIntervalDay(30)")
	require.NoError(t, tb.store.Conn().QueryRow(tb.ctx,
		"SELECT create_table_query FROM system.tables WHERE database = currentDatabase() AND name = 'sink_day_offsets'").Scan(&ddl))
	require.Contains(t, ddl, "toIntervalDay(30)")
	require.NoError(t, tb.store.Conn().QueryRow(tb.ctx,
		"SELECT create_table_query FROM system.tables WHERE database = currentDatabase() AND name = 'dead_letter_replays'").Scan(&ddl))
	require.Contains(t, ddl, "toIntervalDay(30)", "a replay is kept as long as its dead letter")

	_, err = analytics.Open(tb.ctx, tb.dsn, analytics.Options{Retention: 36 * time.Hour})
	require.ErrorContains(t, err, "whole number of days")
}

var base = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

func outcome(ns, job string, seq uint64, attempt uint32, class chimev1.OutcomeClass, at time.Time, latency time.Duration) *chimev1.CallbackOutcome {
	return &chimev1.CallbackOutcome{
		EventId:    fmt.Sprintf("%s/%s/%d/%d/%s", ns, job, seq, attempt, class),
		Namespace:  ns,
		JobId:      job,
		FireSeq:    seq,
		Attempt:    attempt,
		Class:      class,
		StatusCode: map[chimev1.OutcomeClass]int32{chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS: 200, chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE: 503, chimev1.OutcomeClass_OUTCOME_CLASS_PERMANENT: 400}[class],
		Latency:    durationpb.New(latency),
		StartedAt:  timestamppb.New(at.Add(-latency)),
		FinishedAt: timestamppb.New(at),
		Url:        "https://example.test/hook",
		Method:     "POST",
	}
}

// TestStatsMatchOutcomesExactly sends a known mix of outcomes over three
// minutes and reads the same counts back per minute and per two minutes.
func TestStatsMatchOutcomesExactly(t *testing.T) {
	t.Parallel()
	tb := setup(t)

	type want struct{ success, retryable, permanent, deferred, expired, refused int }
	minutes := []want{
		{success: 50, retryable: 7, permanent: 3, deferred: 2, expired: 1, refused: 4},
		{}, // nothing in minute 1
		{success: 9, retryable: 1, deferred: 20},
	}
	var b analytics.Batch
	off := int64(0)
	add := func(m int, class chimev1.OutcomeClass, k int, latency time.Duration) {
		for i := range k {
			at := base.Add(time.Duration(m)*time.Minute + time.Duration(i)*100*time.Millisecond)
			b.AddOutcome(outcome("acme", fmt.Sprintf("j%d-%d", m, i), 1, 1, class, at, latency), analytics.Pos{Partition: 0, Offset: off})
			off++
		}
	}
	for m, w := range minutes {
		add(m, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, w.success, 20*time.Millisecond)
		add(m, chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, w.retryable, 20*time.Millisecond)
		add(m, chimev1.OutcomeClass_OUTCOME_CLASS_PERMANENT, w.permanent, 20*time.Millisecond)
		add(m, chimev1.OutcomeClass_OUTCOME_CLASS_DEFERRED, w.deferred, 0)
		add(m, chimev1.OutcomeClass_OUTCOME_CLASS_EXPIRED, w.expired, 0)
		add(m, chimev1.OutcomeClass_OUTCOME_CLASS_REFUSED, w.refused, 0)
	}
	// Another namespace in the same minutes must not leak in.
	b.AddOutcome(outcome("other", "x", 1, 1, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, base, time.Second), analytics.Pos{Offset: off})
	require.NoError(t, tb.store.Insert(tb.ctx, &b, "t1"))

	points, err := tb.store.Stats(tb.ctx, "acme", base, base.Add(3*time.Minute), time.Minute)
	require.NoError(t, err)
	require.Len(t, points, 3)
	for m, w := range minutes {
		p := points[m]
		require.Equal(t, base.Add(time.Duration(m)*time.Minute), p.T, "minute %d", m)
		require.Equal(t, analytics.Point{
			T:         p.T,
			Requests:  uint64(w.success + w.retryable + w.permanent),
			Successes: uint64(w.success),
			Failures:  uint64(w.retryable + w.permanent),
			Retryable: uint64(w.retryable),
			Permanent: uint64(w.permanent),
			Deferred:  uint64(w.deferred),
			Expired:   uint64(w.expired),
			Refused:   uint64(w.refused),
			P50Ms:     p.P50Ms,
			P99Ms:     p.P99Ms,
		}, p, "minute %d", m)
		if w.success > 0 {
			require.InDelta(t, 20, p.P50Ms, 0.001, "minute %d", m)
			require.InDelta(t, 20, p.P99Ms, 0.001, "minute %d", m)
		} else {
			require.Zero(t, p.P50Ms)
		}
	}

	two, err := tb.store.Stats(tb.ctx, "acme", base, base.Add(4*time.Minute), 2*time.Minute)
	require.NoError(t, err)
	require.Len(t, two, 2)
	require.Equal(t, uint64(60), two[0].Requests)
	require.Equal(t, uint64(10), two[1].Requests)
	require.Equal(t, uint64(20), two[1].Deferred)

	_, err = tb.store.Stats(tb.ctx, "acme", base, base.Add(time.Hour), 30*time.Second)
	require.ErrorIs(t, err, analytics.ErrInvalid)
	_, err = tb.store.Stats(tb.ctx, "acme", base, base.Add(-time.Hour), time.Minute)
	require.ErrorIs(t, err, analytics.ErrInvalid)
}

func TestStatsLatencyQuantiles(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	var b analytics.Batch
	for i := range 100 {
		// 1..100 ms, spread over two inserts so the state is merged.
		b.AddOutcome(outcome("q", fmt.Sprint(i), 1, 1, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, base.Add(time.Second), time.Duration(i+1)*time.Millisecond),
			analytics.Pos{Offset: int64(i)})
		if i == 49 {
			require.NoError(t, tb.store.Insert(tb.ctx, &b, "a"))
			b.Reset()
		}
	}
	require.NoError(t, tb.store.Insert(tb.ctx, &b, "b"))
	points, err := tb.store.Stats(tb.ctx, "q", base, base.Add(time.Minute), time.Minute)
	require.NoError(t, err)
	require.Len(t, points, 1)
	require.Equal(t, uint64(100), points[0].Requests)
	require.InDelta(t, 50.5, points[0].P50Ms, 1)
	require.InDelta(t, 99, points[0].P99Ms, 1.5)
}

// TestBreakerHistoryInOrder stores a trip and a recovery out of order and
// reads them back in order, with reasons and windows, limited to the range.
func TestBreakerHistoryInOrder(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	const (
		closed   = chimev1.BreakerState_BREAKER_STATE_CLOSED
		open     = chimev1.BreakerState_BREAKER_STATE_OPEN
		halfOpen = chimev1.BreakerState_BREAKER_STATE_HALF_OPEN
	)
	steps := []struct {
		from, to chimev1.BreakerState
		reason   string
	}{
		{closed, open, "failure rate 0.62 >= 0.50 over 40 requests"},
		{open, halfOpen, "cool-off 30s over"},
		{halfOpen, open, "probe failed: 503"},
		{open, halfOpen, "cool-off 1m0s over"},
		{halfOpen, closed, "3 of 3 probes succeeded"},
	}
	var trs []*chimev1.BreakerTransition
	for i, s := range steps {
		trs = append(trs, &chimev1.BreakerTransition{
			EventId:   fmt.Sprintf("tr-%d", i),
			Namespace: "acme",
			From:      s.from,
			To:        s.to,
			Reason:    s.reason,
			At:        timestamppb.New(base.Add(time.Duration(i) * 30 * time.Second)),
			Window:    &chimev1.WindowStats{Requests: 40, Failures: uint64(25 - i), FailureRate: 0.62, P99Ms: 900},
			CoolOff:   durationpb.New(30 * time.Second),
		})
	}
	var b analytics.Batch
	for i, j := range []int{3, 0, 4, 1, 2} {
		b.AddTransition(trs[j], analytics.Pos{Offset: int64(i)})
	}
	b.AddTransition(&chimev1.BreakerTransition{EventId: "other", Namespace: "other", From: closed, To: open,
		At: timestamppb.New(base)}, analytics.Pos{Offset: 9})
	require.NoError(t, tb.store.Insert(tb.ctx, &b, "h"))

	got, err := tb.store.BreakerHistory(tb.ctx, "acme", base.Add(-time.Hour), base.Add(time.Hour))
	require.NoError(t, err)
	require.Len(t, got, len(steps))
	for i, s := range steps {
		require.Equal(t, schema.BreakerStateName(s.from), got[i].From)
		require.Equal(t, schema.BreakerStateName(s.to), got[i].To)
		require.Equal(t, s.reason, got[i].Reason)
		require.Equal(t, base.Add(time.Duration(i)*30*time.Second), got[i].At)
		require.Equal(t, uint64(25-i), got[i].Window.Failures)
		require.Equal(t, int64(30000), got[i].CoolOffMs)
	}
	require.Equal(t, "open", got[0].To)
	require.Equal(t, "half_open", got[1].To)

	part, err := tb.store.BreakerHistory(tb.ctx, "acme", base.Add(30*time.Second), base.Add(90*time.Second))
	require.NoError(t, err)
	require.Len(t, part, 2)
	require.Equal(t, "probe failed: 503", part[1].Reason)
}

func TestAttemptsOfAJob(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	var b analytics.Batch
	retry := outcome("acme", "job-1", 1, 1, chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, base, 5*time.Second)
	retry.WillRetry, retry.NextAttemptAt, retry.ErrorKind = true, timestamppb.New(base.Add(10*time.Second)), "timeout"
	b.AddOutcome(outcome("acme", "job-1", 2, 1, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, base.Add(time.Hour), time.Millisecond), analytics.Pos{Offset: 0})
	b.AddOutcome(outcome("acme", "job-1", 1, 2, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, base.Add(11*time.Second), time.Millisecond), analytics.Pos{Offset: 1})
	b.AddOutcome(retry, analytics.Pos{Offset: 2})
	b.AddOutcome(outcome("acme", "job-2", 1, 1, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, base, time.Millisecond), analytics.Pos{Offset: 3})
	require.NoError(t, tb.store.Insert(tb.ctx, &b, "x"))

	got, more, err := tb.store.Attempts(tb.ctx, "acme", "job-1", analytics.AttemptQuery{Limit: 10})
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, got, 3)
	require.Equal(t, []uint64{2, 1, 1}, []uint64{got[0].FireSeq, got[1].FireSeq, got[2].FireSeq}, "newest first")
	require.Equal(t, []uint32{1, 2, 1}, []uint32{got[0].Attempt, got[1].Attempt, got[2].Attempt})
	retried := got[2]
	require.Equal(t, "retryable", retried.Class)
	require.Equal(t, "timeout", retried.ErrorKind)
	require.InDelta(t, 5000, retried.LatencyMs, 0.001)
	require.NotNil(t, retried.NextAttemptAt)
	require.Equal(t, base.Add(10*time.Second), *retried.NextAttemptAt)
	require.Nil(t, got[1].NextAttemptAt)
	require.Equal(t, base, retried.At)

	_, _, err = tb.store.Attempts(tb.ctx, "acme", "job-1", analytics.AttemptQuery{})
	require.ErrorIs(t, err, analytics.ErrInvalid, "a page has a limit")
	_, _, err = tb.store.Attempts(tb.ctx, "acme", "job-1", analytics.AttemptQuery{Limit: analytics.MaxAttempts + 1})
	require.ErrorIs(t, err, analytics.ErrInvalid)
}

// TestAttemptsPagedWithDeferralsApart stores an every-5s job's outcomes,
// where the breaker held some fires back before they went out, and walks
// them page by page: every outcome once, newest first, and the deferrals
// listed apart from the attempts by class.
func TestAttemptsPagedWithDeferralsApart(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	const fires = 60
	var (
		b             analytics.Batch
		off           int64
		attempts, all []string
		deferrals     []string
	)
	add := func(o *chimev1.CallbackOutcome) {
		b.AddOutcome(o, analytics.Pos{Offset: off})
		off++
	}
	// Newest first: fire, then attempt, then time.
	for seq := uint64(fires); seq >= 1; seq-- {
		at := base.Add(time.Duration(seq) * 5 * time.Second)
		ok := outcome("acme", "tick", seq, 1, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, at.Add(2*time.Second), time.Millisecond)
		add(ok)
		attempts = append(attempts, ok.GetEventId())
		all = append(all, ok.GetEventId())
		if seq%3 == 0 {
			// Held back twice by the breaker, then called: the same attempt
			// number (a deferral charges none), earlier times.
			for k := 1; k >= 0; k-- {
				d := outcome("acme", "tick", seq, 1, chimev1.OutcomeClass_OUTCOME_CLASS_DEFERRED, at.Add(time.Duration(k)*time.Second), 0)
				d.EventId += fmt.Sprintf("/%d", k)
				d.ErrorKind, d.WillRetry, d.NextAttemptAt = "breaker_open", true, timestamppb.New(at.Add(time.Duration(k+1)*time.Second))
				add(d)
				deferrals = append(deferrals, d.GetEventId())
				all = append(all, d.GetEventId())
			}
		}
	}
	// Another job's rows, interleaved in time, must not leak in.
	add(outcome("acme", "tock", 1, 1, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, base.Add(time.Minute), time.Millisecond))
	require.NoError(t, tb.store.Insert(tb.ctx, &b, "paged"))

	walk := func(classes []string, limit int) (ids []string, pages int) {
		q := analytics.AttemptQuery{Limit: limit, Classes: classes}
		for {
			page, more, err := tb.store.Attempts(tb.ctx, "acme", "tick", q)
			require.NoError(t, err)
			require.LessOrEqual(t, len(page), limit)
			pages++
			for _, a := range page {
				ids = append(ids, a.EventID)
			}
			if !more {
				return ids, pages
			}
			require.Len(t, page, limit, "a page before the last is full")
			q.After = page[len(page)-1].Cursor()
			require.Less(t, pages, 100, "paging ends")
		}
	}
	notDeferred := []string{"success", "retryable", "permanent", "expired", "refused"}
	got, pages := walk(notDeferred, 7)
	require.Equal(t, attempts, got)
	require.Equal(t, (fires+6)/7, pages)
	got, _ = walk([]string{"deferred"}, 7)
	require.Equal(t, deferrals, got, "the deferrals apart, newest first")
	got, _ = walk(nil, 13)
	require.Equal(t, all, got, "every outcome, deferrals before the call they held back")
	got, pages = walk(nil, len(all))
	require.Equal(t, all, got)
	require.Equal(t, 1, pages, "a page exactly as long as the rest is the last")

	page, _, err := tb.store.Attempts(tb.ctx, "acme", "tick", analytics.AttemptQuery{Limit: 2, Classes: []string{"deferred"}})
	require.NoError(t, err)
	require.Equal(t, "breaker_open", page[0].ErrorKind)
	require.NotNil(t, page[0].NextAttemptAt)
}

// TestInsertRetriedWithSameTokenIsDropped: an insert whose answer was lost
// is retried with the same token; neither the rows nor the aggregates
// double.
func TestInsertRetriedWithSameTokenIsDropped(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	var b analytics.Batch
	for i := range 10 {
		b.AddOutcome(outcome("acme", fmt.Sprint(i), 1, 1, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, base, time.Millisecond), analytics.Pos{Offset: int64(i)})
	}
	b.AddJobEvent(&chimev1.JobEvent{EventId: "e1", Namespace: "acme", JobId: "0", Type: chimev1.JobEventType_JOB_EVENT_TYPE_FIRED, At: timestamppb.New(base)}, analytics.Pos{Offset: 0})
	for range 3 {
		require.NoError(t, tb.store.Insert(tb.ctx, &b, "same"))
	}
	require.Equal(t, uint64(10), count(t, tb, "SELECT count() FROM callback_attempts"))
	require.Equal(t, uint64(1), count(t, tb, "SELECT count() FROM job_events"))
	points, err := tb.store.Stats(tb.ctx, "acme", base, base.Add(time.Minute), time.Minute)
	require.NoError(t, err)
	require.Equal(t, uint64(10), points[0].Requests)

	offs, err := tb.store.StoredOffsets(tb.ctx)
	require.NoError(t, err)
	maxOff, ok := offs.Max(analytics.TableAttempts, 0)
	require.True(t, ok)
	require.Equal(t, int64(9), maxOff)
	maxOff, ok = offs.Max(analytics.TableJobEvents, 0)
	require.True(t, ok)
	require.Equal(t, int64(0), maxOff)
	require.True(t, offs.Has(analytics.TableAttempts, 0, analytics.DayOf(base), 9))
	require.False(t, offs.Has(analytics.TableAttempts, 0, analytics.DayOf(base), 10))
	require.False(t, offs.Has(analytics.TableAttempts, 0, analytics.DayOf(base)+1, 0), "another day")
	require.False(t, offs.Has(analytics.TableAttempts, 1, analytics.DayOf(base), 0), "another partition")
}
