package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/api"
	"github.com/chime-sched/chime/api/quota"
	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/scheduler/jobindex"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views/jobquery"
)

const adminToken = "admin-secret"

var testNow = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

type testBundle struct {
	app        *fiber.App
	jobs       *fakeJobs
	control    *fakeControl
	namespaces *fakeNamespaces
	breakers   fakeBreakers
	states     *fakeJobStates
}

func setup(t testing.TB, mutate ...func(*api.Config)) *testBundle {
	t.Helper()
	jobs := &fakeJobs{}
	b := &testBundle{
		jobs:       jobs,
		namespaces: &fakeNamespaces{rows: map[string]*chimev1.NamespaceConfig{}},
		breakers:   fakeBreakers{},
		states:     &fakeJobStates{jobs: jobs, rows: map[string]*chimev1.JobState{}},
	}
	b.control = &fakeControl{ns: b.namespaces}
	cfg := api.Config{
		Jobs:            b.jobs,
		Control:         b.control,
		Namespaces:      b.namespaces,
		Breakers:        b.breakers,
		JobStates:       b.states,
		AdminToken:      adminToken,
		Now:             func() time.Time { return testNow },
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		ConsistencyWait: 200 * time.Millisecond,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	app, err := api.New(cfg)
	require.NoError(t, err)
	b.app = app
	return b
}

type response struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// do sends a request; body may be a string (sent as is) or a value
// (marshalled).
func (b *testBundle) do(t *testing.T, method, path, token string, body any, headers ...string) response {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := b.app.Test(req, 10_000)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	r := response{status: res.StatusCode, header: res.Header, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// requireProblem checks r is a problem with the status and, if field is
// not empty, an error for that field; it returns the field's reason.
func requireProblem(t *testing.T, r response, status int, field string) string {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.raw)
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), "body: %s", r.raw)
	for _, k := range []string{"type", "title", "status", "detail", "instance"} {
		require.NotEmpty(t, r.body[k], "problem lacks %q: %s", k, r.raw)
	}
	require.EqualValues(t, status, r.body["status"])
	if field == "" {
		return ""
	}
	errs, _ := r.body["errors"].([]any)
	for _, e := range errs {
		m := e.(map[string]any)
		if m["field"] == field {
			return m["reason"].(string)
		}
	}
	t.Fatalf("problem has no error for field %q: %s", field, r.raw)
	return ""
}

// namespace creates ns with cfg and returns a key for it.
func (b *testBundle) namespace(t *testing.T, ns string, cfg map[string]any) string {
	t.Helper()
	if cfg == nil {
		cfg = map[string]any{}
	}
	r := b.do(t, "PUT", "/v1/namespaces/"+ns, adminToken, cfg)
	require.Contains(t, []int{200, 201}, r.status, "body: %s", r.raw)
	r = b.do(t, "POST", "/v1/namespaces/"+ns+"/keys", adminToken, nil)
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	return r.body["key"].(string)
}

// countReads is the number of the pending-jobs quota's count reads that
// answered (chime_api_live_count_reads_total{result="ok"}).
func (b *testBundle) countReads(t *testing.T) int {
	t.Helper()
	r := b.do(t, "GET", "/metrics", "", nil)
	m := regexp.MustCompile(`chime_api_live_count_reads_total\{result="ok"\} (\d+)`).FindSubmatch(r.raw)
	require.NotNil(t, m, "no count reads metric in %s", r.raw)
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return n
}

// counted waits until the pending-jobs quota has read its counts n times
// in all.
func (b *testBundle) counted(t *testing.T, n int) {
	t.Helper()
	kafkatest.WaitFor(t, 10*time.Second, fmt.Sprintf("%d count reads", n), func() bool { return b.countReads(t) >= n })
}

// primeCount has the pending-jobs quota read ns's count: an admin create
// (counted as one more live job, not limited) starts the read.
func (b *testBundle) primeCount(t *testing.T, ns string) {
	t.Helper()
	before := b.countReads(t)
	r := b.do(t, "POST", "/v1/namespaces/"+ns+"/jobs", adminToken, oneShot("2026-11-23T11:00:00Z"))
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	b.counted(t, before+1)
}

// clock is a test's clock, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func oneShot(at string) map[string]any {
	return map[string]any{
		"schedule": map[string]any{"at": at},
		"callback": map[string]any{"url": "https://example.com/hook"},
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	t.Parallel()
	ready := error(nil)
	b := setup(t, func(c *api.Config) { c.Ready = func() error { return ready } })

	r := b.do(t, "GET", "/healthz", "", nil)
	require.Equal(t, 200, r.status)
	r = b.do(t, "GET", "/readyz", "", nil)
	require.Equal(t, 200, r.status)

	r = b.do(t, "GET", "/metrics", "", nil)
	require.Equal(t, 200, r.status)
	require.Contains(t, string(r.raw), `chime_api_requests_total{code="200",method="GET",route="/readyz"} 1`)
	require.Contains(t, string(r.raw), "chime_api_request_duration_seconds_bucket")
	require.Contains(t, string(r.raw), "chime_api_ready 1")
	require.Contains(t, string(r.raw), "chime_api_idempotency_keys 0")

	r = b.do(t, "GET", "/nope", "", nil)
	requireProblem(t, r, 404, "")
}

func TestReadyzNotReady(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) { c.Ready = func() error { return io.ErrUnexpectedEOF } })
	requireProblem(t, b.do(t, "GET", "/readyz", "", nil), 503, "")
	require.Contains(t, string(b.do(t, "GET", "/metrics", "", nil).raw), "chime_api_ready 0")
}

// brokenJobs is a jobs table none of whose owners answers.
type brokenJobs struct{}

func (brokenJobs) Get(string, string) (*chimev1.JobState, jobquery.Offsets, error) {
	return nil, nil, jobquery.ErrUnavailable
}
func (brokenJobs) LiveJobs(string, jobquery.Offsets) (int64, error) {
	return 0, jobquery.ErrUnavailable
}
func (brokenJobs) ListJobs(string, jobindex.Query, jobquery.Offsets) ([]jobquery.Job, bool, error) {
	return nil, false, jobquery.ErrUnavailable
}

// TestViewFailureIs503: every route that reads the jobs table answers 503
// with Retry-After when it cannot be read, never a 404 or an empty list.
func TestViewFailureIs503(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) { c.JobStates = brokenJobs{} })
	key := b.namespace(t, "shop", nil)
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/namespaces/shop/jobs/x", ""},
		{"GET", "/v1/namespaces/shop/jobs", ""},
		{"DELETE", "/v1/namespaces/shop/jobs/x", ""},
		{"POST", "/v1/namespaces/shop/jobs/x/trigger", ""},
	} {
		r := b.do(t, tc.method, tc.path, key, []byte(tc.body))
		requireProblem(t, r, 503, "")
		require.Equal(t, "1", r.header.Get("Retry-After"), "%s %s", tc.method, tc.path)
	}
	// A create does not wait for the pending-jobs count: with none read,
	// it is admitted against this process's own creates.
	r := b.do(t, "POST", "/v1/namespaces/shop/jobs", key, []byte(`{"id":"a","schedule":{"in":"1h"},"callback":{"url":"https://example.com/"}}`))
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	kafkatest.WaitFor(t, 10*time.Second, "the failed count read", func() bool {
		return strings.Contains(string(b.do(t, "GET", "/metrics", "", nil).raw), `chime_api_live_count_reads_total{result="failed"} 1`)
	})
}

func TestAuth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	keyA := b.namespace(t, "team-a", nil)
	keyB := b.namespace(t, "team-b", nil)
	require.True(t, strings.HasPrefix(keyA, "ck_team-a."), keyA)

	r := b.do(t, "GET", "/v1/namespaces/team-a", "", nil)
	requireProblem(t, r, 401, "")
	require.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/team-a", "wrong", nil), 401, "")
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/team-a", keyA+"x", nil), 401, "")
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/team-a", "ck_team-c.abc", nil), 401, "")

	require.Equal(t, 200, b.do(t, "GET", "/v1/namespaces/team-a", keyA, nil).status)
	require.Equal(t, 200, b.do(t, "GET", "/v1/namespaces/team-a", adminToken, nil).status)

	// A valid key of another namespace: forbidden, not unauthenticated.
	r = b.do(t, "GET", "/v1/namespaces/team-a", keyB, nil)
	require.Contains(t, requireProblem(t, r, 403, "")+r.body["detail"].(string), `"team-b"`)
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/team-a/jobs", keyB, oneShot("2026-11-23T11:00:00Z")), 403, "")

	// Admin-only routes refuse namespace keys.
	requireProblem(t, b.do(t, "PUT", "/v1/namespaces/team-a", keyA, map[string]any{}), 403, "")
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/team-a/keys", keyA, nil), 403, "")
	requireProblem(t, b.do(t, "PUT", "/v1/namespaces/team-a/breaker", keyA, map[string]any{"mode": "auto"}), 403, "")

	// A bad namespace in the path is a validation problem.
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/Bad!", adminToken, nil), 422, "namespace")
}

// TestAuthorizationSchemeIsNamed: a token sent without "Bearer", or with
// another scheme, is told how to send it, not that credentials are missing;
// the token is not repeated back.
func TestAuthorizationSchemeIsNamed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "team-a", nil)
	for header, says := range map[string]string{
		key:                  "the header has no scheme",
		"Basic dXNlcjpwYXNz": `not "Basic"`,
		"Token " + key:       `not "Token"`,
		"Bearer":             "no token after Bearer",
		"Bearer   ":          "no token after Bearer",
		key + " extra":       "not another scheme",
	} {
		r := b.do(t, "GET", "/v1/namespaces/team-a", "", nil, "Authorization", header)
		requireProblem(t, r, 401, "")
		detail := r.body["detail"].(string)
		require.Contains(t, detail, `Authorization must be "Bearer <token>"`, header)
		require.Contains(t, detail, says, header)
		require.NotContains(t, detail, "missing credentials", header)
		require.NotContains(t, detail, key, "the token is not repeated")
		require.Contains(t, r.header.Get("WWW-Authenticate"), `error="invalid_request"`, header)
	}
	r := b.do(t, "GET", "/v1/namespaces/team-a", "", nil)
	require.Contains(t, requireProblem(t, r, 401, "")+r.body["detail"].(string), "missing credentials")
	require.Equal(t, 200, b.do(t, "GET", "/v1/namespaces/team-a", "", nil, "Authorization", "bearer "+key).status, "the scheme is case-insensitive")
}

func TestNoAdminTokenMeansNoAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) { c.AdminToken = "" })
	requireProblem(t, b.do(t, "PUT", "/v1/namespaces/a", "", map[string]any{}), 401, "")
	requireProblem(t, b.do(t, "PUT", "/v1/namespaces/a", "x", map[string]any{}), 401, "")
}

func TestNamespacePutGet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	secret := "whsec_" + strings.Repeat("QUFB", 8) // 24 bytes
	r := b.do(t, "PUT", "/v1/namespaces/shop", adminToken, map[string]any{
		"retry":            map[string]any{"max_attempts": 7, "initial_interval": "2s"},
		"rate_limit":       map[string]any{"per_second": 50, "burst": 10},
		"relevancy_window": "1h",
		"signing_secret":   secret,
		"allowed_hosts":    []string{"example.com", "*.shop.test"},
		"breaker":          map[string]any{"window": "1m", "failure_rate_threshold": 25},
	})
	require.Equal(t, 201, r.status, "body: %s", r.raw)

	r = b.do(t, "GET", "/v1/namespaces/shop", adminToken, nil)
	require.Equal(t, 200, r.status)
	require.NotContains(t, string(r.raw), secret)
	require.Equal(t, "<redacted>", r.body["signing_secret"])
	retry := r.body["retry"].(map[string]any)
	require.EqualValues(t, 7, retry["max_attempts"])
	require.Equal(t, "2s", retry["initial_interval"])
	require.Equal(t, "5m0s", retry["max_interval"], "defaults are filled in")
	br := r.body["breaker"].(map[string]any)
	require.Equal(t, "1m0s", br["window"])
	require.EqualValues(t, 25, br["failure_rate_threshold"])
	require.EqualValues(t, 20, br["min_requests"])
	defaulted := r.body["defaulted"].([]any)
	require.Contains(t, defaulted, "retry.max_interval")
	require.Contains(t, defaulted, "breaker.min_requests")
	require.NotContains(t, defaulted, "retry.max_attempts")
	require.NotContains(t, defaulted, "relevancy_window")
	require.EqualValues(t, 1, r.body["version"])

	// Replacing it: 200, and what GET shows is the new config.
	r = b.do(t, "PUT", "/v1/namespaces/shop", adminToken, map[string]any{"max_concurrency": 3})
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.EqualValues(t, 3, r.body["max_concurrency"])
	require.Nil(t, r.body["signing_secret"])

	requireProblem(t, b.do(t, "GET", "/v1/namespaces/nope", adminToken, nil), 404, "")
}

func TestNamespaceValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		body   string
		status int
		field  string
	}{
		{`{"breaker": {"window": "soon"}}`, 422, "breaker.window"},
		{`{"breaker": {"failure_rate_threshold": 150}}`, 422, "breaker.failure_rate_threshold"},
		{`{"retry": {"initial_interval": "10s", "max_interval": "1s"}}`, 422, "retry.max_interval"},
		{`{"signing_secret": "nope"}`, 422, "signing_secret"},
		{`{"signing_secret": "<redacted>"}`, 422, "signing_secret"},
		{`{"relevancy_window": "-1s"}`, 422, "relevancy_window"},
		{`{"max_concurrency": -1}`, 400, "max_concurrency"},
		{`{"max_concurrency": "3"}`, 400, "max_concurrency"},
		{`{"retry": {"max_atempts": 3}}`, 400, "retry.max_atempts"},
		{`{"colour": "red"}`, 400, "colour"},
		{`{}{}`, 400, ""},
		{`[1,2]`, 400, ""},
		{``, 400, ""},
	} {
		t.Run(tc.body, func(t *testing.T) {
			r := b.do(t, "PUT", "/v1/namespaces/v", adminToken, tc.body)
			requireProblem(t, r, tc.status, tc.field)
		})
	}
}

func TestCreateAndGetJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)

	r := b.do(t, "POST", "/v1/namespaces/shop/jobs", key, map[string]any{
		"id":       "order-1",
		"schedule": map[string]any{"in": "90s"},
		"callback": map[string]any{"url": "https://example.com/hook", "method": "PUT", "headers": map[string]string{"X-Order": "1"}, "body": map[string]any{"order": 1}, "timeout": "5s"},
		"retry":    map[string]any{"max_attempts": 3},
		"labels":   map[string]string{"team": "a"},
	})
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	require.Equal(t, map[string]any{"id": "order-1", "namespace": "shop", "state": "scheduled", "next_fire_at": "2026-11-23T10:01:30Z"}, r.body)
	require.Equal(t, "/v1/namespaces/shop/jobs/order-1", r.header.Get("Location"))

	cmds := b.jobs.commands()
	require.Len(t, cmds, 1)
	spec := cmds[0].GetUpsert().GetSpec()
	require.Equal(t, "shop", spec.GetNamespace())
	require.Equal(t, testNow.Add(90*time.Second), spec.GetSchedule().GetAt().AsTime())
	require.Equal(t, `{"order":1}`, string(spec.GetTarget().GetHttp().GetBody()))
	require.EqualValues(t, 3, spec.GetRetry().GetMaxAttempts())

	// Read-your-writes: the view has no row yet, the API still answers.
	r = b.do(t, "GET", "/v1/namespaces/shop/jobs/order-1", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, "scheduled", r.body["state"])
	require.Equal(t, true, r.body["pending"])
	require.Equal(t, "2026-11-23T10:01:30Z", r.body["next_fire_at"])

	// Once the scheduler has written the row, the view answers.
	b.states.put("shop", "order-1", &chimev1.JobState{
		Spec: spec, Status: chimev1.JobStatus_JOB_STATUS_COMPLETED, LastCommandId: cmds[0].GetCommandId(),
		Fires: 1, LastResult: chimev1.AckResult_ACK_RESULT_SUCCEEDED,
	})
	r = b.do(t, "GET", "/v1/namespaces/shop/jobs/order-1", key, nil)
	require.Equal(t, 200, r.status)
	require.Equal(t, "completed", r.body["state"])
	require.Nil(t, r.body["pending"])
	require.Nil(t, r.body["next_fire_at"])
	require.Equal(t, map[string]any{"result": "succeeded"}, r.body["last_outcome"])
	require.Equal(t, "PUT", r.body["callback"].(map[string]any)["method"])

	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/jobs/missing", key, nil), 404, "")
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/jobs/a%2Fb", key, nil), 422, "id")
}

func TestCreateJobUnknownNamespace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/ghost/jobs", adminToken, oneShot("2026-11-23T11:00:00Z")), 404, "")
}

func TestIdempotentCreate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	body := map[string]any{"schedule": map[string]any{"in": "1m"}, "callback": map[string]any{"url": "https://example.com/a"}}

	first := b.do(t, "POST", "/v1/namespaces/shop/jobs", key, body, "Idempotency-Key", "k-1")
	require.Equal(t, 201, first.status, "body: %s", first.raw)
	id := first.body["id"].(string)
	require.True(t, strings.HasPrefix(id, "idem-"), id)

	again := b.do(t, "POST", "/v1/namespaces/shop/jobs", key, body, "Idempotency-Key", "k-1")
	require.Equal(t, 201, again.status)
	require.Equal(t, first.body, again.body)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Len(t, b.jobs.commands(), 1, "a replay publishes nothing")

	other := map[string]any{"schedule": map[string]any{"in": "2m"}, "callback": map[string]any{"url": "https://example.com/a"}}
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs", key, other, "Idempotency-Key", "k-1"), 422, "Idempotency-Key")

	// Another key is another job; the same key in another namespace too.
	r := b.do(t, "POST", "/v1/namespaces/shop/jobs", key, body, "Idempotency-Key", "k-2")
	require.Equal(t, 201, r.status)
	require.NotEqual(t, id, r.body["id"])

	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs", key, body, "Idempotency-Key", "has space"), 422, "Idempotency-Key")
}

func TestIdempotentCreateAcrossInstances(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	body := map[string]any{"schedule": map[string]any{"in": "1m"}, "callback": map[string]any{"url": "https://example.com/a"}}
	first := b.do(t, "POST", "/v1/namespaces/shop/jobs", key, body, "Idempotency-Key", "k-1")
	require.Equal(t, 201, first.status)
	id := first.body["id"].(string)
	cmd := b.jobs.commands()[0]
	b.states.put("shop", id, &chimev1.JobState{Spec: cmd.GetUpsert().GetSpec(), Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED,
		NextScheduledAt: cmd.GetUpsert().GetSpec().GetSchedule().GetAt(), LastCommandId: cmd.GetCommandId()})

	// A second API instance (no idempotency memory) finds the job by the
	// id the key derives.
	other := &testBundle{jobs: &fakeJobs{}, namespaces: b.namespaces, states: b.states, breakers: b.breakers}
	app, err := api.New(api.Config{Jobs: other.jobs, Control: b.control, Namespaces: b.namespaces, Breakers: b.breakers, JobStates: b.states,
		AdminToken: adminToken, Now: func() time.Time { return testNow.Add(time.Second) }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	other.app = app
	r := other.do(t, "POST", "/v1/namespaces/shop/jobs", key, body, "Idempotency-Key", "k-1")
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	require.Equal(t, first.body, r.body)
	require.Empty(t, other.jobs.commands())
}

func TestPublishFailureIsRetryable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	b.jobs.err = io.ErrClosedPipe
	body := oneShot("2026-11-23T11:00:00Z")
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs", key, body, "Idempotency-Key", "k"), 503, "")
	b.jobs.err = nil
	require.Equal(t, 201, b.do(t, "POST", "/v1/namespaces/shop/jobs", key, body, "Idempotency-Key", "k").status)
}

func TestJobValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", map[string]any{"allowed_hosts": []string{"example.com", "*.hooks.test"}})
	url := `"callback": {"url": "https://example.com/h"}`
	for _, tc := range []struct {
		name   string
		body   string
		status int
		field  string
		reason string
	}{
		{"bad cron", `{"schedule": {"cron": "*/0 * * * *"}, ` + url + `}`, 422, "schedule.cron", ""},
		{"bad timezone", `{"schedule": {"cron": "* * * * *", "timezone": "Mars/Olympus"}, ` + url + `}`, 422, "schedule.timezone", ""},
		{"unknown field", `{"schedule": {"in": "1s"}, ` + url + `, "priority": 1}`, 400, "priority", "unknown field"},
		{"unknown nested field", `{"schedule": {"in": "1s", "when": 1}, ` + url + `}`, 400, "schedule.when", `unknown field "schedule.when"`},
		{"unknown callback field", `{"schedule": {"in": "1s"}, "callback": {"url": "https://example.com/h", "bdy": "x"}}`, 400, "callback.bdy", `unknown field "callback.bdy"`},
		{"unknown field after an escaped key", `{"schedule": {"in": "1s"}, "callback": {"url": "https://example.com/h", "he\u0061ders": {}, "b\u0064y": "x"}}`, 400, "callback.bdy", ""},
		{"two kinds", `{"schedule": {"in": "1s", "every": "1s"}, ` + url + `}`, 422, "schedule", "exactly one"},
		{"no kind", `{"schedule": {}, ` + url + `}`, 422, "schedule", ""},
		{"no schedule", `{` + url + `}`, 422, "schedule", ""},
		{"no callback", `{"schedule": {"in": "1s"}}`, 422, "callback", ""},
		{"bad duration", `{"schedule": {"in": "soon"}, ` + url + `}`, 422, "schedule.in", "Go duration"},
		{"bad time", `{"schedule": {"at": "tomorrow"}, ` + url + `}`, 422, "schedule.at", "RFC 3339"},
		{"interval too short", `{"schedule": {"every": "1ns"}, ` + url + `}`, 422, "schedule.every", ""},
		{"bad url", `{"schedule": {"in": "1s"}, "callback": {"url": "ftp://example.com"}}`, 422, "callback.url", "scheme"},
		{"url not allowed", `{"schedule": {"in": "1s"}, "callback": {"url": "https://evil.test/h"}}`, 422, "callback.url", "allowed_hosts"},
		{"url with a space", `{"schedule": {"in": "1s"}, "callback": {"url": "https://example.com/a b"}}`, 422, "callback.url", "has a space at byte 21; percent-encode it as %20"},
		{"url with quotes", `{"schedule": {"in": "1s"}, "callback": {"url": "https://example.com/h?q=\"x\""}}`, 422, "callback.url", `has '"' at byte 24`},
		{"url with angle brackets", `{"schedule": {"in": "1s"}, "callback": {"url": "https://example.com/<h>"}}`, 422, "callback.url", "has '<' at byte 20"},
		{"bad method", `{"schedule": {"in": "1s"}, "callback": {"url": "https://example.com/h", "method": "post"}}`, 422, "callback.method", "POST"},
		{"reserved header", `{"schedule": {"in": "1s"}, "callback": {"url": "https://example.com/h", "headers": {"Host": "x"}}}`, 422, `callback.headers["Host"]`, ""},
		{"past window", `{"schedule": {"at": "2026-11-23T08:00:00Z"}, "relevancy_window": "1h", ` + url + `}`, 422, "schedule.at", "past its relevancy window"},
		{"bad id", `{"id": "a/b", "schedule": {"in": "1s"}, ` + url + `}`, 422, "id", ""},
		{"retry", `{"schedule": {"in": "1s"}, "retry": {"multiplier": 50}, ` + url + `}`, 422, "retry.multiplier", ""},
		{"wrong type", `{"schedule": {"in": 5}, ` + url + `}`, 400, "schedule.in", "string"},
		{"timezone without cron", `{"schedule": {"in": "1s", "timezone": "UTC"}, ` + url + `}`, 422, "schedule.timezone", ""},
		{"not json", `schedule=1`, 400, "", ""},
		{"key in another case", `{"Schedule": {"in": "1s"}, ` + url + `}`, 400, "Schedule", "case-sensitive"},
		{"nested key in another case", `{"schedule": {"in": "1s"}, "callback": {"URL": "https://example.com/h"}}`, 400, "callback.URL", "case-sensitive"},
		{"key given twice", `{"schedule": {"in": "1s"}, ` + url + `, "callback": {"url": "https://evil.test/h"}}`, 400, "callback", "twice"},
		{"label given twice", `{"schedule": {"in": "1s"}, ` + url + `, "labels": {"a": "1", "a": "2"}}`, 400, "labels.a", "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(t, "POST", "/v1/namespaces/shop/jobs", key, tc.body)
			reason := requireProblem(t, r, tc.status, tc.field)
			require.Contains(t, reason, tc.reason)
		})
	}
	require.Empty(t, b.jobs.commands())
}

func TestPastNamespaceWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "late", map[string]any{"relevancy_window": "30m"})
	r := b.do(t, "POST", "/v1/namespaces/late/jobs", key, oneShot("2026-11-23T09:00:00Z"))
	reason := requireProblem(t, r, 422, "schedule.at")
	require.Contains(t, reason, `namespace "late"'s relevancy window`)
	require.Equal(t, 201, b.do(t, "POST", "/v1/namespaces/late/jobs", key, oneShot("2026-11-23T09:45:00Z")).status)
}

func TestOversizedBody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	// The body is streamed and refused by the server itself, which
	// app.Test does not show as a client would: this runs a real listener.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = b.app.Listener(ln) }()
	t.Cleanup(func() { _ = b.app.Shutdown() })

	for _, size := range []int{api.MaxBodyBytes, 8 << 20} {
		// Go's net/http client writes the whole body before it reads the
		// answer: it got "connection reset by peer" for 8 MiB before the
		// server drained what it refused.
		big := `{"schedule": {"in": "1s"}, "callback": {"url": "https://example.com", "body": "` + strings.Repeat("x", size) + `"}}`
		req, err := http.NewRequest("POST", "http://"+ln.Addr().String()+"/v1/namespaces/shop/jobs", strings.NewReader(big))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err, "%d bytes", size)
		raw, err := io.ReadAll(res.Body)
		res.Body.Close()
		require.NoError(t, err)
		r := response{status: res.StatusCode, header: res.Header, raw: raw}
		require.NoError(t, json.Unmarshal(raw, &r.body))
		requireProblem(t, r, 413, "")
		require.Equal(t, "https://chime.dev/problems/body-too-large", r.body["type"])
	}
	require.Empty(t, b.jobs.commands())
}

func TestBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	jobs := []any{oneShot("2026-11-23T11:00:00Z"), oneShot("2026-11-23T12:00:00Z"), map[string]any{
		"id": "cron-1", "schedule": map[string]any{"cron": "*/2 * * * * *"}, "callback": map[string]any{"url": "https://example.com/c"}}}
	r := b.do(t, "POST", "/v1/namespaces/shop/jobs:batch", key, map[string]any{"jobs": jobs}, "Idempotency-Key", "batch-1")
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	out := r.body["jobs"].([]any)
	require.Len(t, out, 3)
	require.Equal(t, "cron-1", out[2].(map[string]any)["id"])
	require.Equal(t, "2026-11-23T10:00:02Z", out[2].(map[string]any)["next_fire_at"])
	require.Len(t, b.jobs.commands(), 3)

	again := b.do(t, "POST", "/v1/namespaces/shop/jobs:batch", key, map[string]any{"jobs": jobs}, "Idempotency-Key", "batch-1")
	require.Equal(t, r.body, again.body)
	require.Len(t, b.jobs.commands(), 3)

	// Every job is checked, and nothing is published if one is wrong.
	bad := []any{oneShot("2026-11-23T11:00:00Z"), map[string]any{"schedule": map[string]any{"cron": "nope"}, "callback": map[string]any{"url": "https://example.com"}}, map[string]any{"schedule": map[string]any{"in": "1s"}}}
	r = b.do(t, "POST", "/v1/namespaces/shop/jobs:batch", key, map[string]any{"jobs": bad})
	requireProblem(t, r, 422, "jobs[1].schedule.cron")
	requireProblem(t, r, 422, "jobs[2].callback")
	require.Len(t, b.jobs.commands(), 3)

	dup := []any{map[string]any{"id": "x", "schedule": map[string]any{"in": "1s"}, "callback": map[string]any{"url": "https://example.com"}}, map[string]any{"id": "x", "schedule": map[string]any{"in": "1s"}, "callback": map[string]any{"url": "https://example.com"}}}
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs:batch", key, map[string]any{"jobs": dup}), 422, "jobs[1].id")

	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs:batch", key, map[string]any{"jobs": []any{}}), 422, "jobs")
	many := make([]any, api.MaxBatch+1)
	for i := range many {
		many[i] = map[string]any{"schedule": map[string]any{"in": "1s"}, "callback": map[string]any{"url": "https://e.com"}}
	}
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs:batch", key, map[string]any{"jobs": many}), 422, "jobs")
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs:batch", key, map[string]any{"jobs": []any{nil}}), 422, "jobs[0].")
	// An unknown field is named with its whole path, the job's index
	// included.
	reason := requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs:batch", key,
		`{"jobs": [{"schedule": {"in": "1s"}, "callback": {"url": "https://example.com/h"}}, {"schedule": {"in": "1s"}, "callback": {"url": "https://example.com/h", "bdy": 1}}]}`), 400, "jobs[1].callback.bdy")
	require.Contains(t, reason, `unknown field "jobs[1].callback.bdy"`)
}

func TestBatchOfMaxSize(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	many := make([]any, api.MaxBatch)
	for i := range many {
		many[i] = map[string]any{"schedule": map[string]any{"every": "1m"}, "callback": map[string]any{"url": "https://example.com/h"}}
	}
	r := b.do(t, "POST", "/v1/namespaces/shop/jobs:batch", key, map[string]any{"jobs": many})
	require.Equal(t, 201, r.status, "body: %.300s", r.raw)
	require.Len(t, b.jobs.commands(), api.MaxBatch)
}

func TestCancelPauseResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	body := map[string]any{"id": "j", "schedule": map[string]any{"every": "1m"}, "callback": map[string]any{"url": "https://example.com/h"}}
	require.Equal(t, 201, b.do(t, "POST", "/v1/namespaces/shop/jobs", key, body).status)

	r := b.do(t, "POST", "/v1/namespaces/shop/jobs/j/pause", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, "paused", r.body["state"])
	require.Equal(t, "paused", b.do(t, "GET", "/v1/namespaces/shop/jobs/j", key, nil).body["state"])

	r = b.do(t, "POST", "/v1/namespaces/shop/jobs/j/resume", key, nil)
	require.Equal(t, "scheduled", r.body["state"])

	r = b.do(t, "DELETE", "/v1/namespaces/shop/jobs/j", key, nil)
	require.Equal(t, 200, r.status)
	require.Equal(t, "cancelled", r.body["state"])
	require.Nil(t, r.body["next_fire_at"])
	require.Equal(t, "cancelled", b.do(t, "GET", "/v1/namespaces/shop/jobs/j", key, nil).body["state"])

	// Cancelling again is harmless; pausing a cancelled job is a conflict.
	require.Equal(t, 200, b.do(t, "DELETE", "/v1/namespaces/shop/jobs/j", key, nil).status)
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs/j/pause", key, nil), 409, "")
	requireProblem(t, b.do(t, "DELETE", "/v1/namespaces/shop/jobs/none", key, nil), 404, "")

	var kinds []string
	for _, c := range b.jobs.commands() {
		switch c.GetCommand().(type) {
		case *chimev1.JobCommand_Upsert:
			kinds = append(kinds, "upsert")
		case *chimev1.JobCommand_Pause:
			kinds = append(kinds, "pause")
		case *chimev1.JobCommand_Resume:
			kinds = append(kinds, "resume")
		case *chimev1.JobCommand_Cancel:
			kinds = append(kinds, "cancel")
		}
	}
	require.Equal(t, []string{"upsert", "pause", "resume", "cancel"}, kinds)
}

func TestBreaker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	since := testNow.Add(-time.Minute)
	b.breakers["shop"] = &chimev1.BreakerStatus{Namespace: "shop", State: chimev1.BreakerState_BREAKER_STATE_OPEN,
		Since: timestampOf(since), ConsecutiveTrips: 2, Window: &chimev1.WindowStats{Requests: 40, Failures: 30, FailureRate: 75, P99Ms: 900}}

	r := b.do(t, "GET", "/v1/namespaces/shop/breaker", key, nil)
	require.Equal(t, 200, r.status)
	require.Equal(t, "open", r.body["state"])
	require.Equal(t, "2026-11-23T09:59:00Z", r.body["since"])
	require.EqualValues(t, 2, r.body["consecutive_trips"])
	w := r.body["window"].(map[string]any)
	require.EqualValues(t, 75, w["failure_rate"])
	require.EqualValues(t, 900, w["p99_ms"])
	require.Contains(t, r.body, "next_check_at")

	r = b.do(t, "GET", "/v1/namespaces/other/breaker", adminToken, nil)
	require.Equal(t, "closed", r.body["state"])

	r = b.do(t, "PUT", "/v1/namespaces/shop/breaker", adminToken, map[string]any{"mode": "force_open", "note": "OPS-1"})
	require.Equal(t, 202, r.status, "body: %s", r.raw)
	requireProblem(t, b.do(t, "PUT", "/v1/namespaces/shop/breaker", adminToken, map[string]any{"mode": "sideways"}), 422, "mode")
	require.Equal(t, 202, b.do(t, "POST", "/v1/namespaces/shop/breaker/reset", adminToken, nil).status)
	require.Len(t, b.control.breakers, 2)
	require.NotNil(t, b.control.breakers[0].GetForceOpen())
	require.Equal(t, "OPS-1", b.control.breakers[0].GetNote())
	require.Equal(t, "shop", b.control.breakers[1].GetNamespace())
	require.NotNil(t, b.control.breakers[1].GetResetBreaker())
	require.NotEmpty(t, b.control.breakers[1].GetCommandId())
}

func TestKeyWaitsForView(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.namespace(t, "shop", nil)
	b.control.hold = true // the view never catches up
	start := time.Now()
	r := b.do(t, "POST", "/v1/namespaces/shop/keys", adminToken, nil)
	require.Equal(t, 201, r.status)
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "waited for the view")
	r = b.do(t, "PUT", "/v1/namespaces/shop", adminToken, map[string]any{"max_concurrency": 9})
	require.Equal(t, 202, r.status, "body: %s", r.raw)
	require.EqualValues(t, 9, r.body["max_concurrency"])
}

// TestGarbageNeverPanics sends malformed input to every route: every answer
// is a problem below 500.
func TestGarbageNeverPanics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	bodies := []string{"", "null", "0", `"x"`, "[]", "{", "}", `{"a":`, "\x00\xff\xfe", `{"schedule":null,"callback":null}`,
		`{"schedule":{"at":null}}`, `{"jobs":null}`, `{"jobs":[1,2]}`, `{"jobs":{}}`, `{"mode":5}`, `{"retry":[]}`,
		`{"schedule":{"cron":"` + strings.Repeat("*", 5000) + `"},"callback":{"url":"http://` + strings.Repeat("a", 3000) + `"}}`,
		`{"schedule":{"in":"9999999999h"},"callback":{"url":"https://e.com"}}`,
		`{"schedule":{"at":"9999-12-31T23:59:59Z"},"callback":{"url":"https://e.com"}}`,
		`{"schedule":{"every":"-1s"},"callback":{"url":"https://e.com"}}`,
		`{"breaker":{"window":"9223372036s"}}`, `{"rate_limit":{"per_second":1e308}}`}
	routes := []struct{ method, path string }{
		{"PUT", "/v1/namespaces/shop"}, {"POST", "/v1/namespaces/shop/jobs"}, {"POST", "/v1/namespaces/shop/jobs:batch"},
		{"PUT", "/v1/namespaces/shop/breaker"}, {"POST", "/v1/namespaces/shop/breaker/reset"}, {"POST", "/v1/namespaces/shop/jobs/x/pause"},
	}
	for _, rt := range routes {
		for _, body := range bodies {
			for _, tok := range []string{adminToken, key} {
				r := b.do(t, rt.method, rt.path, tok, body)
				require.Less(t, r.status, 500, "%s %s %q: %s", rt.method, rt.path, body, r.raw)
				if r.status >= 400 {
					require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), "%s %s %q", rt.method, rt.path, body)
				}
			}
		}
	}
}

// FuzzCreateJob: no body makes the handler panic or answer 5xx.
func FuzzCreateJob(f *testing.F) {
	f.Add(`{"schedule":{"in":"1s"},"callback":{"url":"https://e.com"}}`)
	f.Add(`{"schedule":{"cron":"*/2 * * * * *","timezone":"Europe/Berlin","start_at":"2026-01-01T00:00:00Z"},"callback":{"url":"https://e.com","headers":{"a":"b"}}}`)
	f.Add(`{"jobs":[{"schedule":{"every":"1s"},"callback":{"url":"https://e.com"}}]}`)
	b := setup(f)
	b.namespaces.rows["shop"] = &chimev1.NamespaceConfig{Namespace: "shop"}
	f.Fuzz(func(t *testing.T, body string) {
		for _, path := range []string{"/v1/namespaces/shop/jobs", "/v1/namespaces/shop/jobs:batch"} {
			req := httptest.NewRequest("POST", path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+adminToken)
			res, err := b.app.Test(req, 10_000)
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			if res.StatusCode >= 500 {
				t.Fatalf("%s %q: %d", path, body, res.StatusCode)
			}
		}
	})
}

// FuzzBodies: no body on any route that reads one makes a handler panic
// or answer 5xx, and every 4xx is a problem.
func FuzzBodies(f *testing.F) {
	f.Add(`{"retry":{"max_attempts":3},"rate_limit":{"per_second":10},"spread":2,"breaker":{"cool_off":"1s"}}`)
	f.Add(`{"mode":"force_open","reason":"maintenance"}`)
	f.Add(`{"Retry":{},"retry":{}}`)
	f.Add(`{"allowed_hosts":["10.0.0.0/8","*.x.io"],"signing_secret":"whsec_AAAA"}`)
	b := setup(f)
	b.namespaces.rows["shop"] = &chimev1.NamespaceConfig{Namespace: "shop"}
	f.Fuzz(func(t *testing.T, body string) {
		for _, r := range []struct{ method, path string }{
			{"PUT", "/v1/namespaces/shop"},
			{"PUT", "/v1/namespaces/shop/breaker"},
			{"POST", "/v1/namespaces/shop/breaker/reset"},
			{"POST", "/v1/namespaces/shop/keys"},
			{"POST", "/v1/namespaces/shop/jobs/j/pause"},
			{"POST", "/v1/namespaces/shop/dead-letters/x/replay"},
		} {
			req := httptest.NewRequest(r.method, r.path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+adminToken)
			res, err := b.app.Test(req, 10_000)
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			if res.StatusCode >= 500 && res.StatusCode != 503 {
				t.Fatalf("%s %s %q: %d", r.method, r.path, body, res.StatusCode)
			}
			if res.StatusCode >= 400 && res.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%s %s %q: %d is not a problem (%s)", r.method, r.path, body, res.StatusCode, res.Header.Get("Content-Type"))
			}
		}
	})
}

func TestMetricsUseRoutePatterns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	b.do(t, "GET", "/v1/namespaces/shop/jobs/a", key, nil)
	b.do(t, "GET", "/v1/namespaces/shop/jobs/b", key, nil)
	b.do(t, "GET", "/no/such/route", "", nil)
	r := b.do(t, "GET", "/metrics", "", nil)
	require.Contains(t, string(r.raw), `chime_api_requests_total{code="404",method="GET",route="/v1/namespaces/:ns/jobs/:id"} 2`)
	require.NotContains(t, string(r.raw), "/no/such/route")
}

// TestRepeatedSpecIsNotPending: the scheduler ignores an upsert that
// repeats a live job's spec, so GET must answer from the view at once.
func TestRepeatedSpecIsNotPending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	body := map[string]any{"id": "j", "schedule": map[string]any{"at": "2026-11-23T11:00:00Z"}, "callback": map[string]any{"url": "https://example.com/h"}}
	require.Equal(t, 201, b.do(t, "POST", "/v1/namespaces/shop/jobs", key, body).status)
	cmd := b.jobs.commands()[0]
	// Another instance paused the job after the scheduler applied the
	// create: the view is newer than this instance's memory.
	b.states.put("shop", "j", &chimev1.JobState{Spec: cmd.GetUpsert().GetSpec(), Status: chimev1.JobStatus_JOB_STATUS_PAUSED, LastCommandId: "pause-elsewhere"})
	r := b.do(t, "GET", "/v1/namespaces/shop/jobs/j", key, nil)
	require.Equal(t, "paused", r.body["state"])
	require.Nil(t, r.body["pending"])

	require.Equal(t, 201, b.do(t, "POST", "/v1/namespaces/shop/jobs", key, body).status)
	r = b.do(t, "GET", "/v1/namespaces/shop/jobs/j", key, nil)
	require.Equal(t, "paused", r.body["state"], "the view, not the repeated command")
	require.Nil(t, r.body["pending"])
}

// TestQuickSuccessiveCommands: a create then a pause; the view shows the
// create first. GET must keep answering "paused" until the view has the
// pause too.
func TestQuickSuccessiveCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	body := map[string]any{"id": "j", "schedule": map[string]any{"every": "1m"}, "callback": map[string]any{"url": "https://example.com/h"}}
	require.Equal(t, 201, b.do(t, "POST", "/v1/namespaces/shop/jobs", key, body).status)
	require.Equal(t, 200, b.do(t, "POST", "/v1/namespaces/shop/jobs/j/pause", key, nil).status)
	cmds := b.jobs.commands()
	require.Len(t, cmds, 2)

	b.states.put("shop", "j", &chimev1.JobState{Spec: cmds[0].GetUpsert().GetSpec(), Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED, LastCommandId: cmds[0].GetCommandId()})
	r := b.do(t, "GET", "/v1/namespaces/shop/jobs/j", key, nil)
	require.Equal(t, "paused", r.body["state"])
	require.Equal(t, true, r.body["pending"])

	b.states.put("shop", "j", &chimev1.JobState{Spec: cmds[0].GetUpsert().GetSpec(), Status: chimev1.JobStatus_JOB_STATUS_PAUSED, LastCommandId: cmds[1].GetCommandId(), Fires: 1})
	r = b.do(t, "GET", "/v1/namespaces/shop/jobs/j", key, nil)
	require.Equal(t, "paused", r.body["state"])
	require.Nil(t, r.body["pending"])
	require.EqualValues(t, 1, r.body["fires"])
}

// A method fiber does not know gets a problem (405, as a known method a
// path does not take), not fiber's text/plain 400.
func TestUnknownMethodIsAProblem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, m := range []string{"BREW", "PROPFIND", "QUERY"} {
		r := b.do(t, m, "/v1/namespaces/shop/jobs", adminToken, nil)
		requireProblem(t, r, 405, "")
		require.Equal(t, "GET, HEAD, POST", r.header.Get("Allow"))
	}
	require.Equal(t, "DELETE, GET, HEAD", b.do(t, "QUERY", "/v1/namespaces/shop/jobs/j1", adminToken, nil).header.Get("Allow"))
	require.Equal(t, "POST", b.do(t, "QUERY", "/v1/namespaces/shop/jobs:batch", adminToken, nil).header.Get("Allow"))
	requireProblem(t, b.do(t, "PATCH", "/v1/namespaces/shop/jobs", adminToken, nil), 405, "")
}

// Credentials are checked before the path: a bad token gets 401 even on
// a malformed namespace; a valid one gets the 422 that names the field.
func TestAuthenticationBeforePathValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	bad := "/v1/namespaces/NOT%20A%20NAMESPACE/jobs/x"
	requireProblem(t, b.do(t, "GET", bad, "not-a-key", nil), 401, "")
	requireProblem(t, b.do(t, "GET", bad, "", nil), 401, "")
	requireProblem(t, b.do(t, "GET", bad, adminToken, nil), 422, "namespace")
	requireProblem(t, b.do(t, "GET", bad, key, nil), 422, "namespace")
}

// A namespace key over its quota gets 429 with Retry-After; the admin
// token is not limited, nor is another namespace.
func TestNamespaceQuotas(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) { c.Quotas = quota.Limits{RequestsPerSecond: 2, JobsPerSecond: 5} })
	shop := b.namespace(t, "shop", nil)
	other := b.namespace(t, "other", nil)

	// Requests: a burst of 4 (twice the rate), then 429 until time moves
	// (the clock is the test's, and stands still).
	for i := range 4 {
		require.NotEqual(t, 429, b.do(t, "GET", "/v1/namespaces/shop/jobs/x", shop, nil).status, "request %d", i+1)
	}
	r := b.do(t, "GET", "/v1/namespaces/shop/jobs/x", shop, nil)
	requireProblem(t, r, 429, "")
	require.Equal(t, "1", r.header.Get("Retry-After"))
	require.NotEqual(t, 429, b.do(t, "GET", "/v1/namespaces/other/jobs/x", other, nil).status, "another namespace has its own quota")
	require.NotEqual(t, 429, b.do(t, "GET", "/v1/namespaces/shop/jobs/x", adminToken, nil).status, "the admin token is not limited")

	// Jobs: the burst is one full batch (1,000 jobs, more than ten
	// seconds' worth at 5/s); the next job must wait 200 ms.
	jobs := make([]map[string]any, api.MaxBatch)
	for i := range jobs {
		jobs[i] = map[string]any{"id": fmt.Sprintf("j%d", i), "schedule": map[string]any{"in": "1s"}, "callback": map[string]any{"url": "https://example.com/h"}}
	}
	b2 := setup(t, func(c *api.Config) { c.Quotas = quota.Limits{RequestsPerSecond: -1, JobsPerSecond: 5} })
	key := b2.namespace(t, "shop", nil)
	require.Equal(t, 201, b2.do(t, "POST", "/v1/namespaces/shop/jobs:batch", key, map[string]any{"jobs": jobs}, "Idempotency-Key", "a").status)
	r = b2.do(t, "POST", "/v1/namespaces/shop/jobs", key, oneShot("2026-11-23T11:00:00Z"), "Idempotency-Key", "b")
	requireProblem(t, r, 429, "")
	require.Equal(t, "1", r.header.Get("Retry-After"))
	require.Contains(t, r.body["detail"], "jobs created/s")
}

// TestPendingJobsQuota: a namespace at its quota of jobs that have not
// ended gets 429 for more, whatever their rate; ended jobs do not count.
// The count is the table's, read in the background, plus what this
// process admitted and cancelled since: a create never waits for it, and
// a create or a cancel counts at once.
func TestPendingJobsQuota(t *testing.T) {
	t.Parallel()
	clk := &clock{t: testNow}
	b := setup(t, func(c *api.Config) {
		c.Quotas = quota.Limits{RequestsPerSecond: -1, JobsPerSecond: -1, PendingJobs: 3}
		c.Now = clk.now
	})
	b.jobs.apply = b.states.apply
	shop := b.namespace(t, "shop", nil)
	other := b.namespace(t, "other", nil)
	for i, st := range []chimev1.JobStatus{chimev1.JobStatus_JOB_STATUS_SCHEDULED, chimev1.JobStatus_JOB_STATUS_PAUSED, chimev1.JobStatus_JOB_STATUS_COMPLETED, chimev1.JobStatus_JOB_STATUS_DEAD} {
		b.states.put("shop", fmt.Sprintf("old%d", i), &chimev1.JobState{Status: st})
	}
	create := func(token, id string) response {
		job := oneShot("2026-11-23T11:00:00Z")
		job["id"] = id
		return b.do(t, "POST", "/v1/namespaces/shop/jobs", token, job)
	}
	// The namespace's first create is not held for its count: it is
	// admitted, and the count read in the background once Kafka has it.
	require.Equal(t, 201, create(shop, "a").status, "no count yet")
	b.counted(t, 1)
	r := create(shop, "b")
	requireProblem(t, r, 429, "")
	require.Equal(t, "60", r.header.Get("Retry-After"))
	require.Contains(t, r.body["detail"], "3 jobs that have not ended", "2 in the table and a, created here")
	batch := map[string]any{"jobs": []map[string]any{{"id": "x", "schedule": map[string]any{"in": "1s"}, "callback": map[string]any{"url": "https://example.com/h"}}}}
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs:batch", shop, batch), 429, "")
	require.Equal(t, 201, b.do(t, "POST", "/v1/namespaces/other/jobs", other, oneShot("2026-11-23T11:00:00Z")).status, "another namespace has its own count")
	require.Equal(t, 201, create(adminToken, "e").status, "the admin token is not limited")

	// A cancel made here makes room at once: 2 + a + e - 2.
	require.Equal(t, 200, b.do(t, "DELETE", "/v1/namespaces/shop/jobs/a", shop, nil).status)
	requireProblem(t, create(shop, "f"), 429, "")
	require.Equal(t, 200, b.do(t, "DELETE", "/v1/namespaces/shop/jobs/e", shop, nil).status)
	require.Equal(t, 201, create(shop, "f").status, "two jobs cancelled here: room again")

	// A job that ends elsewhere (fired, cancelled through another API
	// process) shows at the next read: a create refused on an old count
	// has it read.
	b.states.put("shop", "old0", &chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_COMPLETED})
	requireProblem(t, create(shop, "g"), 429, "")
	clk.add(3 * time.Second)
	reads := b.countReads(t)
	requireProblem(t, create(shop, "g"), 429, "") // the count is read after it
	b.counted(t, reads+1)
	require.Equal(t, 201, create(shop, "g").status, "a job ended: room again")
}

// TestReadsCarryThisProcessesCommands: a namespace's listings and counts
// carry the offsets of the job commands this process published for it
// (the newest of each partition), so that the schedulers answer only once
// they show them; another namespace's commands are not waited for.
func TestReadsCarryThisProcessesCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shop := b.namespace(t, "shop", nil)
	other := b.namespace(t, "other", nil)
	list := func(ns, token string) jobquery.Offsets {
		t.Helper()
		r := b.do(t, "GET", "/v1/namespaces/"+ns+"/jobs?state=paused", token, nil)
		require.Equal(t, 200, r.status, "body: %s", r.raw)
		return b.states.lastAfter(ns)
	}
	require.Nil(t, list("shop", shop), "nothing published: nothing to wait for")

	for i := range 6 {
		job := oneShot("2026-11-23T11:00:00Z")
		job["id"] = fmt.Sprintf("j%d", i)
		require.Equal(t, 201, b.do(t, "POST", "/v1/namespaces/shop/jobs", shop, job).status)
	}
	require.Equal(t, 201, b.do(t, "POST", "/v1/namespaces/other/jobs", other, oneShot("2026-11-23T11:00:00Z")).status)
	require.Equal(t, 200, b.do(t, "POST", "/v1/namespaces/shop/jobs/j2/pause", shop, nil).status)
	want := jobquery.Offsets{}
	for _, cmd := range b.jobs.commands() {
		if cmd.GetNamespace() == "shop" {
			want.Add(processors.PartitionOf(schema.JobKey("shop", cmd.GetJobId()), fakePartitions), b.jobs.offsetOf(cmd.GetCommandId()))
		}
	}
	require.Equal(t, want, list("shop", shop), "the newest offset of each partition shop's commands went to")
	require.Len(t, list("other", other), 1, "other's one create")
}

// TestNamespaceCap: past CHIME_MAX_NAMESPACES a new namespace is refused;
// existing ones can still be updated.
func TestNamespaceCap(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) { c.Quotas = quota.Limits{Namespaces: 2} })
	b.namespace(t, "a", nil)
	b.namespace(t, "b", nil)
	requireProblem(t, b.do(t, "PUT", "/v1/namespaces/c", adminToken, map[string]any{}), 403, "")
	require.Equal(t, 200, b.do(t, "PUT", "/v1/namespaces/a", adminToken, map[string]any{"max_concurrency": 5}).status)
}

// TestListings pages through a namespace's jobs (newest first, by state)
// and through the namespaces (admin only, with their breaker state).
func TestListings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shop := b.namespace(t, "shop", nil)
	b.namespace(t, "other", nil)
	b.namespace(t, "zoo", nil)
	base := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	for i := range 5 {
		st := chimev1.JobStatus_JOB_STATUS_SCHEDULED
		if i == 1 {
			st = chimev1.JobStatus_JOB_STATUS_CANCELLED
		}
		labels := map[string]string{"team": []string{"billing", "ops"}[i%2], "tier": fmt.Sprint(i % 3)}
		b.states.put("shop", fmt.Sprintf("j%d", i), &chimev1.JobState{Status: st, CreatedAt: timestamppb.New(base.Add(time.Duration(i) * time.Minute)), Spec: &chimev1.JobSpec{Labels: labels}})
	}
	b.states.put("other", "x", &chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED})

	var ids []any
	cursor := ""
	for range 5 {
		r := b.do(t, "GET", "/v1/namespaces/shop/jobs?limit=2&cursor="+cursor, shop, nil)
		require.Equal(t, 200, r.status)
		for _, j := range r.body["jobs"].([]any) {
			ids = append(ids, j.(map[string]any)["id"])
		}
		cursor = r.body["next_cursor"].(string)
		if cursor == "" {
			break
		}
	}
	require.Equal(t, []any{"j4", "j3", "j2", "j1", "j0"}, ids, "newest first, each once")
	r := b.do(t, "GET", "/v1/namespaces/shop/jobs?state=cancelled,paused", shop, nil)
	require.Len(t, r.body["jobs"], 1)
	require.Equal(t, "cancelled", r.body["jobs"].([]any)[0].(map[string]any)["state"])
	require.Equal(t, "", r.body["next_cursor"])
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/jobs?state=running", shop, nil), 422, "state")
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/jobs?cursor=nope", shop, nil), 422, "cursor")
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/jobs?limit=501", shop, nil), 422, "limit")

	// By label: every one given must match.
	byLabel := func(query string) (ids []any) {
		r := b.do(t, "GET", "/v1/namespaces/shop/jobs?"+query, shop, nil)
		require.Equal(t, 200, r.status, query)
		for _, j := range r.body["jobs"].([]any) {
			ids = append(ids, j.(map[string]any)["id"])
		}
		return ids
	}
	require.Equal(t, []any{"j4", "j2", "j0"}, byLabel("label=team:billing"))
	require.Equal(t, []any{"j3", "j0"}, byLabel("label=tier:0"))
	require.Equal(t, []any{"j0"}, byLabel("label=team:billing&label=tier:0"))
	require.Equal(t, []any{"j1"}, byLabel("label=team%3Aops&state=cancelled"))
	require.Empty(t, byLabel("label=team:billing&label=team:ops"))
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/jobs?label=team", shop, nil), 422, "label")
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/jobs?label=t%20m:x", shop, nil), 422, "label")

	requireProblem(t, b.do(t, "GET", "/v1/namespaces", shop, nil), 403, "")
	requireProblem(t, b.do(t, "GET", "/v1/namespaces", "", nil), 401, "")
	r = b.do(t, "GET", "/v1/namespaces?limit=2", adminToken, nil)
	require.Equal(t, 200, r.status)
	page := r.body["namespaces"].([]any)
	require.Len(t, page, 2)
	require.Equal(t, "other", page[0].(map[string]any)["namespace"])
	require.Equal(t, "closed", page[0].(map[string]any)["breaker_state"])
	r = b.do(t, "GET", "/v1/namespaces?limit=2&cursor="+r.body["next_cursor"].(string), adminToken, nil)
	require.Equal(t, "zoo", r.body["namespaces"].([]any)[0].(map[string]any)["namespace"])
	require.Equal(t, "", r.body["next_cursor"])
}

// TestInternalJobsAreNotTheNamespaces: chime's own job in a namespace
// (the breaker's cool-off timer) is not listed to the namespace, nor
// counted against its pending-jobs quota; the admin token lists it on
// request, a namespace key asking for it gets a 403.
func TestInternalJobsAreNotTheNamespaces(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *api.Config) { c.Quotas = quota.Limits{RequestsPerSecond: -1, JobsPerSecond: -1, PendingJobs: 2} })
	shop := b.namespace(t, "shop", nil)
	base := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	coolOff := schema.ReservedJobIDPrefix + "breaker-cooloff"
	b.states.put("shop", "a", &chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED, CreatedAt: timestamppb.New(base)})
	b.states.put("shop", coolOff, &chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED, CreatedAt: timestamppb.New(base.Add(time.Minute))})

	tests := []struct {
		name    string
		token   string
		query   string
		want    []any
		status  int
		problem string // the field a 422 names
	}{
		{name: "namespace key", token: shop, want: []any{"a"}},
		{name: "namespace key, internal=false", token: shop, query: "?internal=false", want: []any{"a"}},
		{name: "namespace key asking for internal jobs", token: shop, query: "?internal=true", status: 403},
		{name: "admin", token: adminToken, want: []any{"a"}},
		{name: "admin, internal=true", token: adminToken, query: "?internal=true", want: []any{coolOff, "a"}},
		{name: "admin, internal jobs by state", token: adminToken, query: "?internal=true&state=scheduled&limit=1", want: []any{coolOff}},
		{name: "not a boolean", token: adminToken, query: "?internal=yes", status: 422, problem: "internal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := b.do(t, "GET", "/v1/namespaces/shop/jobs"+tt.query, tt.token, nil)
			if tt.status != 0 {
				requireProblem(t, r, tt.status, tt.problem)
				return
			}
			require.Equal(t, 200, r.status, "body: %s", r.raw)
			var ids []any
			for _, j := range r.body["jobs"].([]any) {
				ids = append(ids, j.(map[string]any)["id"])
			}
			require.Equal(t, tt.want, ids)
		})
	}

	t.Run("pending-jobs quota", func(t *testing.T) {
		t.Parallel()
		// a and the cool-off timer have not ended; only a is the
		// namespace's, so one more job fits its quota of 2.
		require.Equal(t, 201, b.do(t, "POST", "/v1/namespaces/shop/jobs", shop, oneShot("2026-11-23T11:00:00Z"), "Idempotency-Key", "q").status)
	})
}

// TestKeysAndSecretRotation: keys are listed by id and revoked by id (the
// key then gets 401); a rotation answers the new secret once and keeps the
// old one signing for the overlap.
func TestKeysAndSecretRotation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.namespace(t, "shop", nil)
	r := b.do(t, "POST", "/v1/namespaces/shop/keys", adminToken, nil)
	require.Equal(t, 201, r.status)
	second, id := r.body["key"].(string), r.body["id"].(string)
	require.Regexp(t, `^key_[0-9a-f]{16}$`, id)

	r = b.do(t, "GET", "/v1/namespaces/shop/keys", adminToken, nil)
	require.Equal(t, 200, r.status)
	keys := r.body["keys"].([]any)
	require.Len(t, keys, 2)
	require.NotContains(t, fmt.Sprint(r.body), second, "a listing never shows a key")
	require.Equal(t, id, keys[1].(map[string]any)["id"])
	require.NotNil(t, keys[1].(map[string]any)["created_at"])
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/keys", first, nil), 403, "")

	require.Equal(t, 200, b.do(t, "GET", "/v1/namespaces/shop", second, nil).status)
	require.Equal(t, 204, b.do(t, "DELETE", "/v1/namespaces/shop/keys/"+id, adminToken, nil).status)
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop", second, nil), 401, "")
	require.Equal(t, 200, b.do(t, "GET", "/v1/namespaces/shop", first, nil).status, "the other key still works")
	requireProblem(t, b.do(t, "DELETE", "/v1/namespaces/shop/keys/"+id, adminToken, nil), 404, "")

	r = b.do(t, "POST", "/v1/namespaces/shop/signing-secret:rotate", adminToken, map[string]any{"overlap": "2h"})
	require.Equal(t, 200, r.status)
	secret := r.body["signing_secret"].(string)
	require.True(t, strings.HasPrefix(secret, "whsec_"))
	require.Nil(t, r.body["previous_valid_until"], "there was no secret before")
	r = b.do(t, "POST", "/v1/namespaces/shop/signing-secret:rotate", adminToken, nil)
	require.Equal(t, 200, r.status)
	require.NotEqual(t, secret, r.body["signing_secret"])
	until, err := time.Parse(time.RFC3339Nano, r.body["previous_valid_until"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(24*time.Hour), until, time.Minute, "the default overlap is a day")
	b.namespaces.mu.Lock()
	stored := b.namespaces.rows["shop"]
	b.namespaces.mu.Unlock()
	require.Equal(t, []string{r.body["signing_secret"].(string), secret}, schema.SigningSecretsAt(stored, time.Now()))
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/signing-secret:rotate", adminToken, map[string]any{"overlap": "1000h"}), 422, "overlap")
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/signing-secret:rotate", first, nil), 403, "")
}

// TestJSONCallbackBodies: a body given as JSON is sent with
// Content-Type: application/json (unless the job sets one) and shown back as
// JSON; answers do not HTML-escape.
func TestJSONCallbackBodies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	create := func(id string, body any, headers map[string]string) map[string]any {
		t.Helper()
		cb := map[string]any{"url": "https://example.com/h?a=1&b=2", "body": body}
		if headers != nil {
			cb["headers"] = headers
		}
		r := b.do(t, "POST", "/v1/namespaces/shop/jobs", key, map[string]any{"id": id, "schedule": map[string]any{"in": "1h"}, "callback": cb})
		require.Equal(t, 201, r.status, string(r.raw))
		r = b.do(t, "GET", "/v1/namespaces/shop/jobs/"+id, key, nil)
		require.Equal(t, 200, r.status)
		require.Contains(t, string(r.raw), "a=1&b=2", "not HTML-escaped (&)")
		return r.body["callback"].(map[string]any)
	}
	cb := create("obj", map[string]any{"order": "<42>&"}, nil)
	require.Equal(t, map[string]any{"order": "<42>&"}, cb["body"])
	require.Equal(t, map[string]any{"Content-Type": "application/json"}, cb["headers"])
	cb = create("text", "plain <text>", nil)
	require.Equal(t, "plain <text>", cb["body"])
	require.Nil(t, cb["headers"])
	cb = create("own", []any{1, 2}, map[string]string{"content-type": "text/csv"})
	require.Equal(t, "[1,2]", cb["body"], "the job's own content type: shown as text")
	require.Equal(t, map[string]any{"content-type": "text/csv"}, cb["headers"])
}

func TestTriggerJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	b.states.put("shop", "live", &chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_PAUSED})
	b.states.put("shop", "done", &chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_COMPLETED})
	r := b.do(t, "POST", "/v1/namespaces/shop/jobs/live/trigger", key, nil)
	require.Equal(t, 202, r.status, string(r.raw))
	require.Equal(t, "paused", r.body["state"])
	cmds := b.jobs.commands()
	require.NotNil(t, cmds[len(cmds)-1].GetTrigger())
	require.Equal(t, r.body["command_id"], cmds[len(cmds)-1].GetCommandId())
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs/done/trigger", key, nil), 409, "")
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs/none/trigger", key, nil), 404, "")
}

// TestJobViewShowsFiresInProgress: the attempt, next attempt time and last
// error of each fire in progress.
func TestJobViewShowsFiresInProgress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	failed := &chimev1.CallbackOutcome{Attempt: 2, Class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, StatusCode: 503, Error: "HTTP 503"}
	b.states.put("shop", "j", &chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED,
		Open: []*chimev1.Emission{
			{FireSeq: 7, Attempt: 1, ScheduledAt: timestamppb.New(at)},
			{FireSeq: 6, Attempt: 2, ScheduledAt: timestamppb.New(at.Add(-time.Minute))},
		},
		Pending: []*chimev1.Pending{{FireSeq: 6, Attempt: 3, NotBefore: timestamppb.New(at.Add(time.Minute)), History: []*chimev1.CallbackOutcome{failed}}},
	})
	r := b.do(t, "GET", "/v1/namespaces/shop/jobs/j", key, nil)
	require.Equal(t, 200, r.status)
	fires := r.body["current_fires"].([]any)
	require.Len(t, fires, 2)
	require.Equal(t, map[string]any{"fire_seq": 7.0, "scheduled_at": "2026-11-24T10:00:00Z", "attempt": 1.0, "state": "in_flight"}, fires[0])
	retry := fires[1].(map[string]any)
	require.Equal(t, "retry_scheduled", retry["state"])
	require.EqualValues(t, 3, retry["attempt"])
	require.Equal(t, "2026-11-24T10:01:00Z", retry["next_attempt_at"])
	require.Equal(t, "HTTP 503", retry["last_error"].(map[string]any)["error"])
}

// TestMetricsHideNamespacesWithoutTheAdminToken: namespace names are for
// the admin token (GET /v1/namespaces is admin-only), so /metrics without
// it leaves out every series labelled with a namespace (the breakers'
// states, in chime dev); the admin token gets them all. A token that is not
// the admin token is refused rather than quietly given less.
func TestMetricsHideNamespacesWithoutTheAdminToken(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	state := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "chime_breaker_state", Help: "test"}, []string{"namespace", "state"})
	reg.MustRegister(state)
	state.WithLabelValues("acme-secret-customer", "open").Set(1)
	b := setup(t, func(c *api.Config) { c.Registerer, c.Gatherer = reg, reg })
	key := b.namespace(t, "shop", nil)

	r := b.do(t, "GET", "/metrics", "", nil)
	require.Equal(t, 200, r.status)
	require.NotContains(t, string(r.raw), "acme-secret-customer")
	require.NotContains(t, string(r.raw), "chime_breaker_state")
	require.Contains(t, string(r.raw), "chime_api_ready 1", "the other series are served")

	r = b.do(t, "GET", "/metrics", adminToken, nil)
	require.Equal(t, 200, r.status)
	require.Contains(t, string(r.raw), `chime_breaker_state{namespace="acme-secret-customer",state="open"} 1`)

	requireProblem(t, b.do(t, "GET", "/metrics", key, nil), 403, "")
	requireProblem(t, b.do(t, "GET", "/metrics", "not-the-token", nil), 401, "")
}
