package api_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/api"
	"github.com/chime-sched/chime/internal/clickhousetest"
	"github.com/chime-sched/chime/schema/chimev1"
)

func TestMain(m *testing.M) { clickhousetest.Main(m) }

// TestAnalyticsAgainstClickHouse stores rows through analytics' write API
// in the real local ClickHouse and reads them over HTTP: breaker history,
// stats, attempts, dead letters and a replay; then stops the server and
// gets 503s.
func TestAnalyticsAgainstClickHouse(t *testing.T) {
	t.Parallel()
	srv := clickhousetest.NewServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	store, err := analytics.Open(ctx, srv.DSN("chime"), analytics.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })

	// testNow is the API's clock: the default range is the hour before it.
	t0 := testNow.Add(-50 * time.Minute)
	var b analytics.Batch
	pos := func(i int) analytics.Pos { return analytics.Pos{Partition: 0, Offset: int64(i)} }
	b.AddTransition(&chimev1.BreakerTransition{EventId: "tr-2", Namespace: "shop", At: timestamppb.New(t0.Add(2 * time.Minute)),
		From: chimev1.BreakerState_BREAKER_STATE_OPEN, To: chimev1.BreakerState_BREAKER_STATE_HALF_OPEN, Reason: "cool-off 30s over"}, pos(1))
	b.AddTransition(&chimev1.BreakerTransition{EventId: "tr-1", Namespace: "shop", At: timestamppb.New(t0),
		From: chimev1.BreakerState_BREAKER_STATE_CLOSED, To: chimev1.BreakerState_BREAKER_STATE_OPEN, Reason: "failure rate 75% >= 50%",
		Window: &chimev1.WindowStats{Requests: 20, Failures: 15, FailureRate: 75}}, pos(2))
	b.AddTransition(&chimev1.BreakerTransition{EventId: "tr-old", Namespace: "shop", At: timestamppb.New(testNow.Add(-3 * time.Hour)),
		From: chimev1.BreakerState_BREAKER_STATE_CLOSED, To: chimev1.BreakerState_BREAKER_STATE_OPEN, Reason: "outside the range"}, pos(3))
	classes := []chimev1.OutcomeClass{chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, chimev1.OutcomeClass_OUTCOME_CLASS_PERMANENT, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS}
	for i, cl := range classes {
		at := t0.Add(time.Duration(i) * 10 * time.Second)
		b.AddOutcome(&chimev1.CallbackOutcome{
			EventId: fmt.Sprintf("out-%d", i), Namespace: "shop", JobId: "order-42", FireSeq: 1, Attempt: uint32(i + 1), Class: cl,
			StatusCode: map[chimev1.OutcomeClass]int32{chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS: 200, chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE: 503, chimev1.OutcomeClass_OUTCOME_CLASS_PERMANENT: 400}[cl],
			Latency:    durationpb.New(20 * time.Millisecond), StartedAt: timestamppb.New(at), FinishedAt: timestamppb.New(at),
			Url: "https://example.com/hook", Method: "POST",
		}, pos(10+i))
	}
	b.AddOutcome(&chimev1.CallbackOutcome{
		EventId: "out-held", Namespace: "shop", JobId: "order-42", FireSeq: 1, Attempt: 1, Class: chimev1.OutcomeClass_OUTCOME_CLASS_DEFERRED,
		ErrorKind: "breaker_open", Error: "namespace shop: breaker open; deferred", StartedAt: timestamppb.New(t0.Add(-time.Second)), FinishedAt: timestamppb.New(t0.Add(-time.Second)),
		WillRetry: true, NextAttemptAt: timestamppb.New(t0), Url: "https://example.com/hook", Method: "POST",
	}, pos(15))
	due := &chimev1.Due{
		Namespace: "shop", JobId: "order-42", FireSeq: 1, Attempt: 3,
		Callback: &chimev1.HttpCallback{Url: "https://example.com/hook", Headers: map[string]string{"X-Order": "42"}, Body: []byte("hi")},
		Retry:    &chimev1.RetryPolicy{MaxAttempts: 3, InitialInterval: durationpb.New(time.Second)},
		Labels:   map[string]string{"team": "billing"},
	}
	earlier := []*chimev1.CallbackOutcome{
		{Attempt: 1, StatusCode: 503, Class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, BodySnippet: []byte("busy")},
		{Attempt: 2, Class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, ErrorKind: "timeout", Error: "no answer in 10s"},
	}
	due.History = earlier
	b.AddDeadLetter(&chimev1.DeadLetter{EventId: "dl-shop/order-42/1#1", Due: due, Reason: "HTTP 400: permanent", At: timestamppb.New(t0.Add(30 * time.Second)),
		Attempts: append(slices.Clone(earlier), &chimev1.CallbackOutcome{Attempt: 3, StatusCode: 400, Class: chimev1.OutcomeClass_OUTCOME_CLASS_PERMANENT})}, pos(20))
	require.NoError(t, store.Insert(ctx, &b, "api-it"))

	tb := setup(t, func(c *api.Config) { c.Analytics = store; c.AnalyticsTimeout = 10 * time.Second })
	key := tb.namespace(t, "shop", nil)

	r := tb.do(t, "GET", "/v1/namespaces/shop/breaker/history", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	trs := r.body["transitions"].([]any)
	require.Len(t, trs, 2, "the default range is the last hour: %s", r.raw)
	first, second := trs[0].(map[string]any), trs[1].(map[string]any)
	require.Equal(t, []any{"closed", "open", "failure rate 75% >= 50%"}, []any{first["from"], first["to"], first["reason"]})
	require.Equal(t, t0.Format(time.RFC3339), first["at"])
	require.EqualValues(t, 20, first["window"].(map[string]any)["requests"])
	require.Equal(t, []any{"open", "half_open"}, []any{second["from"], second["to"]})

	r = tb.do(t, "GET", "/v1/namespaces/shop/breaker/history?from="+testNow.Add(-4*time.Hour).Format(time.RFC3339), key, nil)
	require.Len(t, r.body["transitions"], 3)

	r = tb.do(t, "GET", "/v1/namespaces/shop/stats?step=1h&from="+t0.Truncate(time.Hour).Format(time.RFC3339)+"&to="+t0.Truncate(time.Hour).Add(time.Hour).Format(time.RFC3339), key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	points := r.body["points"].([]any)
	require.Len(t, points, 1)
	p := points[0].(map[string]any)
	for k, v := range map[string]int{"requests": 4, "successes": 1, "failures": 3, "retryable": 2, "permanent": 1, "deferred": 1, "expired": 0, "refused": 0} {
		require.EqualValues(t, v, p[k], k)
	}
	require.InDelta(t, 20, p["p50_ms"], 0.5)
	requireProblem(t, tb.do(t, "GET", "/v1/namespaces/shop/stats?step=1m&from=2020-01-01T00:00:00Z", key, nil), 400, "")

	// Attempts newest first, a page at a time, the breaker's deferral apart.
	r = tb.do(t, "GET", "/v1/namespaces/shop/jobs/order-42/attempts", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	atts := r.body["attempts"].([]any)
	require.Len(t, atts, 5)
	require.Equal(t, "", r.body["next_cursor"])
	var seen []any
	cursor := ""
	for range 5 {
		r = tb.do(t, "GET", "/v1/namespaces/shop/jobs/order-42/attempts?class=success,retryable,permanent&limit=3&cursor="+cursor, key, nil)
		require.Equal(t, 200, r.status, "body: %s", r.raw)
		for _, a := range r.body["attempts"].([]any) {
			seen = append(seen, a.(map[string]any)["class"])
		}
		if cursor = r.body["next_cursor"].(string); cursor == "" {
			break
		}
	}
	require.Equal(t, []any{"success", "permanent", "retryable", "retryable"}, seen)
	r = tb.do(t, "GET", "/v1/namespaces/shop/jobs/order-42/attempts?class=deferred", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	atts = r.body["attempts"].([]any)
	require.Len(t, atts, 1)
	require.Equal(t, "breaker_open", atts[0].(map[string]any)["error_kind"])

	r = tb.do(t, "GET", "/v1/namespaces/shop/dead-letters", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	dls := r.body["dead_letters"].([]any)
	require.Len(t, dls, 1)
	require.Equal(t, "dl-shop/order-42/1#1", dls[0].(map[string]any)["id"])
	hist := dls[0].(map[string]any)["attempt_history"].([]any)
	require.Len(t, hist, 3, "every attempt, the last included: %s", r.raw)
	for i, want := range []string{"retryable", "retryable", "permanent"} {
		h := hist[i].(map[string]any)
		require.EqualValues(t, i+1, h["attempt"])
		require.Equal(t, want, h["class"])
	}
	require.Equal(t, "busy", hist[0].(map[string]any)["body_snippet"])
	require.Equal(t, "timeout", hist[1].(map[string]any)["error_kind"])
	require.EqualValues(t, 400, hist[2].(map[string]any)["status_code"])

	// Real ids hold '/' and '#': clients percent-encode them (replay_path).
	replay := dls[0].(map[string]any)["replay_path"].(string)
	require.Equal(t, "/v1/namespaces/shop/dead-letters/dl-shop%2Forder-42%2F1%231/replay", replay)
	r = tb.do(t, "POST", replay, key, nil)
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	cmds := tb.jobs.commands()
	require.Len(t, cmds, 1)
	spec := cmds[0].GetUpsert().GetSpec()
	require.Equal(t, r.body["id"], spec.GetId())
	require.True(t, proto.Equal(due.GetCallback(), spec.GetTarget().GetHttp()))
	require.True(t, proto.Equal(due.GetRetry(), spec.GetRetry()))
	require.Equal(t, map[string]string{"team": "billing", "chime.replay_of": "dl-shop/order-42/1#1"}, spec.GetLabels())
	requireProblem(t, tb.do(t, "POST", "/v1/namespaces/shop/dead-letters/dl-nope/replay", key, nil), 404, "")

	// ClickHouse down: 503 with a clear problem.
	require.NoError(t, srv.Stop())
	r = tb.do(t, "GET", "/v1/namespaces/shop/breaker/history", key, nil)
	requireProblem(t, r, 503, "")
	require.Equal(t, "https://chime.dev/problems/analytics-unavailable", r.body["type"])
	require.Contains(t, r.body["detail"], "ClickHouse")
}
