package api_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/api"
	"github.com/chime-sched/chime/schema/chimev1"
)

func withAnalytics(store api.AnalyticsStore) func(*api.Config) {
	return func(c *api.Config) { c.Analytics = store }
}

func TestBreakerHistory(t *testing.T) {
	t.Parallel()
	fa := &fakeAnalytics{transitions: []analytics.Transition{
		{EventID: "e1", At: testNow.Add(-30 * time.Minute), From: "closed", To: "open", Reason: "failure rate 62% >= 50%",
			Window: analytics.Window{Requests: 40, Failures: 25, FailureRate: 62.5}},
		{EventID: "e2", At: testNow.Add(-29 * time.Minute), From: "open", To: "half_open", Reason: "cool-off over"},
	}}
	b := setup(t, withAnalytics(fa))
	key := b.namespace(t, "shop", nil)
	otherKey := b.namespace(t, "other", nil)

	// Defaults: the last hour.
	r := b.do(t, "GET", "/v1/namespaces/shop/breaker/history", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	q := fa.last()
	require.Equal(t, analyticsQuery{kind: "history", ns: "shop", from: testNow.Add(-time.Hour), to: testNow}, q)
	trs := r.body["transitions"].([]any)
	require.Len(t, trs, 2)
	first := trs[0].(map[string]any)
	require.Equal(t, "closed", first["from"])
	require.Equal(t, "open", first["to"])
	require.Equal(t, "failure rate 62% >= 50%", first["reason"])
	require.Equal(t, testNow.Add(-30*time.Minute).Format(time.RFC3339), first["at"])
	require.EqualValues(t, 40, first["window"].(map[string]any)["requests"])

	// An explicit range.
	r = b.do(t, "GET", "/v1/namespaces/shop/breaker/history?from=2026-11-22T00:00:00Z&to=2026-11-23T00:00:00%2B01:00", adminToken, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	q = fa.last()
	require.Equal(t, time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC), q.from)
	require.Equal(t, time.Date(2026, 11, 22, 23, 0, 0, 0, time.UTC), q.to)

	// Only from: up to now.
	b.do(t, "GET", "/v1/namespaces/shop/breaker/history?from=2026-11-23T08:00:00Z", key, nil)
	require.Equal(t, testNow, fa.last().to)

	// Empty history is an empty list, not null.
	fa.transitions = nil
	r = b.do(t, "GET", "/v1/namespaces/shop/breaker/history", key, nil)
	require.Equal(t, `[]`, string(mustJSON(t, r.body["transitions"])))

	// Bad parameters.
	reason := requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/breaker/history?from=yesterday", key, nil), 400, "from")
	require.Contains(t, reason, "RFC 3339")
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/breaker/history?to=2026-13-01T00:00:00Z", key, nil), 400, "to")
	reason = requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/breaker/history?from=2026-11-23T10:00:00Z&to=2026-11-23T09:00:00Z", key, nil), 400, "from")
	require.Contains(t, reason, "not before")

	// Auth like the other namespace routes.
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/breaker/history", "", nil), 401, "")
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/breaker/history", otherKey, nil), 403, "")
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return raw
}

func TestStats(t *testing.T) {
	t.Parallel()
	fa := &fakeAnalytics{points: []analytics.Point{{T: testNow.Add(-time.Hour), Requests: 10, Successes: 9, Failures: 1, Retryable: 1, P50Ms: 12.5, P99Ms: 80}}}
	b := setup(t, withAnalytics(fa))
	key := b.namespace(t, "shop", nil)

	r := b.do(t, "GET", "/v1/namespaces/shop/stats", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, analyticsQuery{kind: "stats", ns: "shop", from: testNow.Add(-time.Hour), to: testNow, step: time.Minute}, fa.last())
	require.Equal(t, "1m0s", r.body["step"])
	p := r.body["points"].([]any)[0].(map[string]any)
	for k, v := range map[string]any{"requests": 10, "successes": 9, "failures": 1, "retryable": 1, "permanent": 0, "deferred": 0, "expired": 0, "p50_ms": 12.5, "p99_ms": 80} {
		require.EqualValues(t, v, p[k], k)
	}
	require.Equal(t, testNow.Add(-time.Hour).Format(time.RFC3339), p["t"])

	r = b.do(t, "GET", "/v1/namespaces/shop/stats?step=5m&from=2026-11-23T00:00:00Z&to=2026-11-23T06:00:00Z", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, 5*time.Minute, fa.last().step)

	reason := requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/stats?step=often", key, nil), 400, "step")
	require.Contains(t, reason, "Go duration")
	reason = requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/stats?step=30s", key, nil), 400, "step")
	require.Contains(t, reason, "whole number of minutes")

	// The store's own checks (too many points) are 400s with its detail.
	fa.err = fmt.Errorf("%w: 2026-01-01T00:00:00Z to 2026-11-23T00:00:00Z by 1m0s is 465120 points, at most 10000: widen the step or narrow the range", analytics.ErrInvalid)
	r = b.do(t, "GET", "/v1/namespaces/shop/stats?from=2026-01-01T00:00:00Z", key, nil)
	requireProblem(t, r, 400, "")
	require.Contains(t, r.body["detail"], "widen the step")
	require.NotContains(t, r.body["detail"], "analytics:")
}

func TestAttempts(t *testing.T) {
	t.Parallel()
	last := analytics.Attempt{EventID: "a:1", FireSeq: 7, Attempt: 2, Class: "retryable", StatusCode: 503, At: testNow}
	fa := &fakeAnalytics{attempts: []analytics.Attempt{last}, moreAttempts: true}
	b := setup(t, withAnalytics(fa))
	key := b.namespace(t, "shop", nil)

	r := b.do(t, "GET", "/v1/namespaces/shop/jobs/order-1/attempts", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, analyticsQuery{kind: "attempts", ns: "shop", id: "order-1", limit: api.DefaultAttemptPage}, fa.last())
	a := r.body["attempts"].([]any)[0].(map[string]any)
	require.Equal(t, "retryable", a["class"])
	require.EqualValues(t, 503, a["status_code"])

	// The next page starts after the last attempt of this one, however
	// its event id reads.
	next, _ := r.body["next_cursor"].(string)
	require.NotEmpty(t, next, "more pages: a next_cursor: %s", r.raw)
	r = b.do(t, "GET", "/v1/namespaces/shop/jobs/order-1/attempts?limit=20&class=deferred&cursor="+next, key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, analyticsQuery{kind: "attempts", ns: "shop", id: "order-1", limit: 20, after: last.Cursor(), classes: []string{"deferred"}}, fa.last())

	fa.moreAttempts = false
	r = b.do(t, "GET", "/v1/namespaces/shop/jobs/order-1/attempts?class=success,retryable,permanent", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, "", r.body["next_cursor"], "the last page")
	require.Equal(t, []string{"success", "retryable", "permanent"}, fa.last().classes)

	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/jobs/bad%20id/attempts", key, nil), 422, "id")
	for q, param := range map[string]string{
		"limit=0": "limit", "limit=1001": "limit", "limit=x": "limit",
		"cursor=nope": "cursor", "cursor=MTox": "cursor", "cursor=MToxOi0xOmU": "cursor",
		"class=deferred,late": "class",
	} {
		requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/jobs/order-1/attempts?"+q, key, nil), 400, param)
	}
	reason := requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/jobs/order-1/attempts?class=late", key, nil), 400, "class")
	require.Contains(t, reason, "deferred, expired, permanent, refused, retryable, success")
}

// TestAnalyticsUnavailable: ClickHouse down, or not configured, is a 503
// that says so, on every analytics route.
func TestAnalyticsUnavailable(t *testing.T) {
	t.Parallel()
	down := &fakeAnalytics{err: fmt.Errorf("%w: ping [127.0.0.1:9000]: connection refused", analytics.ErrUnavailable)}
	routes := []struct{ method, path string }{
		{"GET", "/v1/namespaces/shop/breaker/history"},
		{"GET", "/v1/namespaces/shop/stats"},
		{"GET", "/v1/namespaces/shop/jobs/j/attempts"},
		{"GET", "/v1/namespaces/shop/dead-letters"},
		{"POST", "/v1/namespaces/shop/dead-letters/dl-1/replay"},
	}
	for name, store := range map[string]api.AnalyticsStore{"down": down, "not configured": nil} {
		b := setup(t, withAnalytics(store))
		key := b.namespace(t, "shop", nil)
		for _, rt := range routes {
			r := b.do(t, rt.method, rt.path, key, nil)
			requireProblem(t, r, 503, "")
			require.Equal(t, "https://chime.dev/problems/analytics-unavailable", r.body["type"], "%s %s %s", name, rt.method, rt.path)
			if name == "down" {
				require.Contains(t, r.body["detail"], "ClickHouse")
				require.Contains(t, r.body["detail"], "connection refused")
			} else {
				require.Contains(t, r.body["detail"], "CHIME_CLICKHOUSE_DSN")
			}
		}
	}
}

func sampleDeadLetter(ns, id, job string, at time.Time) analytics.DeadLetter {
	return analytics.DeadLetter{
		ID: id, Namespace: ns, JobID: job, FireSeq: 3, Attempt: 5, Reason: "HTTP 500 after 5 attempts", At: at,
		URL: "https://example.com/hook", Method: "PUT", StatusCode: 500, Error: "",
		Due: &chimev1.Due{
			Namespace: ns, JobId: job, FireSeq: 3, Attempt: 5,
			ScheduledAt: timestamppb.New(at.Add(-time.Minute)),
			Callback: &chimev1.HttpCallback{Url: "https://example.com/hook", Method: "PUT",
				Headers: map[string]string{"X-Order": "42"}, Body: []byte(`{"order":42}`), Timeout: durationpb.New(3 * time.Second)},
			Retry:           &chimev1.RetryPolicy{MaxAttempts: 5, InitialInterval: durationpb.New(time.Second), Multiplier: 2},
			Labels:          map[string]string{"team": "billing"},
			RelevancyWindow: durationpb.New(time.Hour),
		},
	}
}

func TestListDeadLetters(t *testing.T) {
	t.Parallel()
	fa := &fakeAnalytics{}
	for i := range 5 {
		fa.dead = append(fa.dead, sampleDeadLetter("shop", fmt.Sprintf("dl-%d", 5-i), "order-42", testNow.Add(-time.Duration(i)*time.Minute)))
	}
	fa.dead = append(fa.dead, sampleDeadLetter("other", "dl-x", "j", testNow))
	b := setup(t, withAnalytics(fa))
	key := b.namespace(t, "shop", nil)

	r := b.do(t, "GET", "/v1/namespaces/shop/dead-letters?limit=3", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	list := r.body["dead_letters"].([]any)
	require.Len(t, list, 3)
	d := list[0].(map[string]any)
	require.Equal(t, "dl-5", d["id"])
	require.Equal(t, "order-42", d["job_id"])
	require.EqualValues(t, 5, d["attempts"])
	require.EqualValues(t, 500, d["last_status_code"])
	require.Equal(t, "HTTP 500 after 5 attempts", d["reason"])
	require.Equal(t, "PUT", d["callback"].(map[string]any)["method"])
	require.Equal(t, false, d["replayed"])
	require.NotContains(t, d, "replay_job_id", "only a replayed dead letter has a replay job")
	require.Equal(t, "/v1/namespaces/shop/dead-letters/dl-5/replay", d["replay_path"])
	next, ok := r.body["next_before"].(string)
	require.True(t, ok, "a full page has a next_before: %s", r.raw)

	r = b.do(t, "GET", "/v1/namespaces/shop/dead-letters?limit=3&before="+next, key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	list = r.body["dead_letters"].([]any)
	require.Len(t, list, 2)
	require.Equal(t, "dl-2", list[0].(map[string]any)["id"])
	require.Nil(t, r.body["next_before"])
	require.Equal(t, "dl-3", fa.last().before.ID)

	r = b.do(t, "GET", "/v1/namespaces/shop/dead-letters", key, nil)
	require.Equal(t, 200, r.status)
	require.Equal(t, 100, fa.last().limit, "the default page")

	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/dead-letters?limit=0", key, nil), 400, "limit")
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/dead-letters?limit=5000", key, nil), 400, "limit")
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/dead-letters?before=%21%21", key, nil), 400, "before")
}

func TestReplayDeadLetter(t *testing.T) {
	t.Parallel()
	dl := sampleDeadLetter("shop", "dl-abc", "order-42", testNow.Add(-time.Hour))
	fa := &fakeAnalytics{dead: []analytics.DeadLetter{dl}}
	b := setup(t, withAnalytics(fa))
	key := b.namespace(t, "shop", nil)
	otherKey := b.namespace(t, "other", nil)

	r := b.do(t, "POST", "/v1/namespaces/shop/dead-letters/dl-abc/replay", key, nil)
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	id := r.body["id"].(string)
	require.Regexp(t, `^order-42\.replay-[0-9a-f]{12}$`, id)
	require.Equal(t, "scheduled", r.body["state"])
	require.Equal(t, "/v1/namespaces/shop/jobs/"+id, r.header.Get("Location"))
	require.Equal(t, "dl-abc", r.body["labels"].(map[string]any)["chime.replay_of"])

	// The upsert: a one-shot now, the original callback, retry policy,
	// window and labels, plus chime.replay_of.
	cmds := b.jobs.commands()
	require.Len(t, cmds, 1)
	cmd := cmds[0]
	require.Equal(t, "shop", cmd.GetNamespace())
	require.Equal(t, id, cmd.GetJobId())
	require.NotEmpty(t, cmd.GetCommandId())
	want := &chimev1.JobSpec{
		Namespace:       "shop",
		Id:              id,
		Schedule:        &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(testNow)}},
		Target:          &chimev1.Target{Kind: &chimev1.Target_Http{Http: dl.Due.GetCallback()}},
		Retry:           dl.Due.GetRetry(),
		RelevancyWindow: dl.Due.GetRelevancyWindow(),
		Labels:          map[string]string{"team": "billing", "chime.replay_of": "dl-abc"},
	}
	require.True(t, proto.Equal(want, cmd.GetUpsert().GetSpec()), "spec: %v", cmd.GetUpsert().GetSpec())
	require.Equal(t, map[string]string{"team": "billing"}, dl.Due.GetLabels(), "the dead letter's labels are not changed")

	// Read-your-writes: the job is there at once.
	r = b.do(t, "GET", "/v1/namespaces/shop/jobs/"+id, key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, true, r.body["pending"])

	// Again: the same job, 200, nothing published.
	r = b.do(t, "POST", "/v1/namespaces/shop/dead-letters/dl-abc/replay", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, id, r.body["id"])
	require.Len(t, b.jobs.commands(), 1)

	// Also once the scheduler's row is there (another API instance, or
	// after the read-your-writes memory).
	b.states.put("shop", id, &chimev1.JobState{Spec: cmd.GetUpsert().GetSpec(), Status: chimev1.JobStatus_JOB_STATUS_COMPLETED, LastCommandId: cmd.GetCommandId()})
	r = b.do(t, "POST", "/v1/namespaces/shop/dead-letters/dl-abc/replay", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, "completed", r.body["state"])
	require.Len(t, b.jobs.commands(), 1)

	// A second API process (fresh memory, an empty job table) reads the
	// replay from the store: the same job, nothing published.
	b2 := setup(t, withAnalytics(fa))
	key2 := b2.namespace(t, "shop", nil)
	r = b2.do(t, "POST", "/v1/namespaces/shop/dead-letters/dl-abc/replay", key2, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, id, r.body["id"])
	require.Empty(t, b2.jobs.commands())

	// Unknown id, another namespace's dead letter, no auth.
	r = b.do(t, "POST", "/v1/namespaces/shop/dead-letters/nope/replay", key, nil)
	requireProblem(t, r, 404, "")
	require.Equal(t, "https://chime.dev/problems/dead-letter-not-found", r.body["type"])
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/other/dead-letters/dl-abc/replay", otherKey, nil), 404, "")
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/dead-letters/dl-abc/replay", otherKey, nil), 403, "")
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/dead-letters/dl-abc/replay", "", nil), 401, "")
}

func TestReplayRespectsAllowedHosts(t *testing.T) {
	t.Parallel()
	fa := &fakeAnalytics{dead: []analytics.DeadLetter{sampleDeadLetter("shop", "dl-1", "j", testNow)}}
	b := setup(t, withAnalytics(fa))
	key := b.namespace(t, "shop", map[string]any{"allowed_hosts": []string{"api.example.org"}})
	r := b.do(t, "POST", "/v1/namespaces/shop/dead-letters/dl-1/replay", key, nil)
	requireProblem(t, r, 422, "")
	require.Contains(t, r.body["detail"], "allowed_hosts")
	require.Empty(t, b.jobs.commands())
}

func TestReplayIDFitsLongJobIDs(t *testing.T) {
	t.Parallel()
	long := ""
	for len(long) < 128 {
		long += "x"
	}
	fa := &fakeAnalytics{dead: []analytics.DeadLetter{sampleDeadLetter("shop", "dl-1", long, testNow)}}
	b := setup(t, withAnalytics(fa))
	key := b.namespace(t, "shop", nil)
	r := b.do(t, "POST", "/v1/namespaces/shop/dead-letters/dl-1/replay", key, nil)
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	require.Len(t, r.body["id"], 128)
}

// TestBulkReplay replays what a filter selects, each dead letter once
// however often the request is repeated, and walks on with more.
func TestBulkReplay(t *testing.T) {
	t.Parallel()
	fa := &fakeAnalytics{}
	for i := range 4 {
		fa.dead = append(fa.dead, sampleDeadLetter("shop", fmt.Sprintf("dl-%d", 4-i), fmt.Sprintf("order-%d", 4-i), testNow.Add(-time.Duration(i)*time.Minute)))
	}
	fa.dead = append(fa.dead, sampleDeadLetter("shop", "dl-x", "refund-1", testNow.Add(-time.Hour)))
	b := setup(t, withAnalytics(fa))
	key := b.namespace(t, "shop", nil)

	r := b.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", key, map[string]any{"job_id_prefix": "order-", "limit": 3})
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.EqualValues(t, 3, r.body["matched"])
	require.EqualValues(t, 3, r.body["replayed"])
	require.Equal(t, true, r.body["more"])
	require.Len(t, b.jobs.commands(), 3)

	r = b.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", key, map[string]any{"job_id_prefix": "order-", "limit": 4})
	require.EqualValues(t, 1, r.body["replayed"], "only the one not replayed yet")
	require.EqualValues(t, 3, r.body["already_replayed"])
	require.Equal(t, false, r.body["more"])
	require.Len(t, b.jobs.commands(), 4)

	r = b.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", key, map[string]any{"from": testNow.Add(-2 * time.Hour).Format(time.RFC3339), "to": testNow.Add(-30 * time.Minute).Format(time.RFC3339)})
	require.EqualValues(t, 1, r.body["matched"])
	require.Len(t, r.body["jobs"], 1)
	require.Regexp(t, `^refund-1\.replay-[0-9a-f]{12}$`, r.body["jobs"].([]any)[0])
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", key, map[string]any{"limit": 501}), 422, "limit")
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", key, map[string]any{"from": "yesterday"}), 422, "from")
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/dead-letters?from=0304-01-01T00:00:00Z", key, nil), 400, "from")
	r = b.do(t, "GET", "/v1/namespaces/shop/dead-letters?job_id_prefix=refund", key, nil)
	require.Len(t, r.body["dead_letters"], 1)
}
