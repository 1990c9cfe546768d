package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/api"
	"github.com/chime-sched/chime/api/quota"
	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/breaker"
	"github.com/chime-sched/chime/processors/namespaces"
	"github.com/chime-sched/chime/processors/scheduler"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views"
	"github.com/chime-sched/chime/views/jobquery"
)

// liveAPI is the API served on a real listener, over a real broker, with
// the scheduler and the namespace processor running.
type liveAPI struct {
	base   string
	client *http.Client
	kafka  *kafkatest.Cluster
}

// liveKafka is a real broker with the processors running, for one or
// more API processes.
type liveKafka struct {
	cluster *kafkatest.Cluster
	topics  schema.Topics
	log     *slog.Logger
}

// querySecret signs the API's job reads to the scheduler's query server.
const querySecret = "api-test-query-secret"

func startLive(t *testing.T, mutate ...func(*api.Config)) *liveAPI {
	t.Helper()
	return startKafka(t).api(t, mutate...)
}

func startKafka(t *testing.T) *liveKafka {
	t.Helper()
	c := kafkatest.New(t)
	topics := c.Topics()
	c.Provision(t, topics, 4)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("CHIME_TEST_VERBOSE") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	// The scheduler serves its rows to the API processes (views/jobquery)
	// and advertises where in the group.
	qln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	nsView, err := views.NewNamespaces(processors.Client{Brokers: c.Brokers(), ClientID: "scheduler-namespaces", Logger: log}, topics)
	require.NoError(t, err)
	sched, err := scheduler.New(scheduler.Config{
		Config: processors.Config{
			Client:     processors.Client{Brokers: c.Brokers(), Logger: log},
			Topics:     topics,
			Membership: groups.Membership{Advertise: qln.Addr().String()},
		},
		Namespaces: nsView,
	})
	require.NoError(t, err)
	qs, err := jobquery.NewServer(jobquery.ServerConfig{Source: sched, Partitions: 4, Secret: querySecret, Logger: log})
	require.NoError(t, err)
	brk, err := breaker.New(breaker.Config{Config: processors.Config{Client: processors.Client{Brokers: c.Brokers(), Logger: log}, Topics: topics}, Namespaces: schema.StaticNamespaces{}})
	require.NoError(t, err)
	nsp, err := namespaces.New(namespaces.Config{Config: processors.Config{Client: processors.Client{Brokers: c.Brokers(), Logger: log}, Topics: topics}})
	require.NoError(t, err)
	lifecycletest.Start(t, nsView, jobquery.Listen(qs, qln), sched, nsp, brk)
	return &liveKafka{cluster: c, topics: topics, log: log}
}

// api starts one API process, with views of its own.
func (k *liveKafka) api(t *testing.T, mutate ...func(*api.Config)) *liveAPI {
	t.Helper()
	nsView, err := views.NewNamespaces(processors.Client{Brokers: k.cluster.Brokers(), ClientID: "api-namespaces", Logger: k.log}, k.topics)
	require.NoError(t, err)
	brkView, err := views.NewBreakers(processors.Client{Brokers: k.cluster.Brokers(), ClientID: "api-breakers", Logger: k.log}, k.topics)
	require.NoError(t, err)
	be, err := api.NewBackend(api.BackendConfig{Brokers: k.cluster.Brokers(), Topics: k.topics, Logger: k.log, Partitions: 4, QuerySecret: querySecret,
		Namespaces: nsView, Breakers: brkView})
	require.NoError(t, err)
	t.Cleanup(be.Close) // after the parts stopped (cleanups run last first)
	cfg := be.Config()
	cfg.AdminToken = adminToken
	cfg.Logger = k.log
	cfg.ConsistencyWait = 60 * time.Second
	for _, m := range mutate {
		m(&cfg)
	}
	app, err := api.New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	lifecycletest.Start(t, nsView, brkView, api.Listen(app, ln))
	return &liveAPI{base: "http://" + ln.Addr().String(), client: &http.Client{Timeout: 90 * time.Second}, kafka: k.cluster}
}

func (l *liveAPI) do(t *testing.T, method, path, token, body string, headers ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, l.base+path, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := l.client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	r := response{status: res.StatusCode, header: res.Header, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func TestIntegration(t *testing.T) {
	t.Parallel()
	l := startLive(t)

	r := l.do(t, "GET", "/readyz", "", "")
	require.Equal(t, 200, r.status, "body: %s", r.raw)

	r = l.do(t, "PUT", "/v1/namespaces/shop", adminToken, `{"relevancy_window": "10m", "retry": {"max_attempts": 3}}`)
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	r = l.do(t, "GET", "/v1/namespaces/shop", adminToken, "")
	require.Equal(t, 200, r.status)
	require.Equal(t, "10m0s", r.body["relevancy_window"])

	r = l.do(t, "POST", "/v1/namespaces/shop/keys", adminToken, "")
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	key := r.body["key"].(string)
	require.Equal(t, 201, l.do(t, "PUT", "/v1/namespaces/other", adminToken, `{}`).status)
	otherKey := l.do(t, "POST", "/v1/namespaces/other/keys", adminToken, "").body["key"].(string)

	// Create, and read it back at once.
	job := `{"schedule": {"in": "1h"}, "callback": {"url": "https://example.com/hook"}, "labels": {"k": "v"}}`
	r = l.do(t, "POST", "/v1/namespaces/shop/jobs", key, job, "Idempotency-Key", "order-42")
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	id := r.body["id"].(string)
	require.Equal(t, "scheduled", r.body["state"])
	r = l.do(t, "GET", "/v1/namespaces/shop/jobs/"+id, key, "")
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, "scheduled", r.body["state"])

	// The same key: the same job.
	again := l.do(t, "POST", "/v1/namespaces/shop/jobs", key, job, "Idempotency-Key", "order-42")
	require.Equal(t, 201, again.status)
	require.Equal(t, id, again.body["id"])
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))

	// The scheduler's row shows up in the view.
	kafkatest.WaitFor(t, 60*time.Second, "the job view shows the job", func() bool {
		r = l.do(t, "GET", "/v1/namespaces/shop/jobs/"+id, key, "")
		return r.status == 200 && r.body["pending"] == nil
	})
	require.Equal(t, "scheduled", r.body["state"])
	require.NotNil(t, r.body["next_fire_at"])
	require.NotNil(t, r.body["created_at"])

	// Auth.
	requireProblem(t, l.do(t, "GET", "/v1/namespaces/shop/jobs/"+id, "", ""), 401, "")
	requireProblem(t, l.do(t, "GET", "/v1/namespaces/shop/jobs/"+id, "ck_shop.forged", ""), 401, "")
	requireProblem(t, l.do(t, "GET", "/v1/namespaces/shop/jobs/"+id, otherKey, ""), 403, "")

	// Precise problems.
	reason := requireProblem(t, l.do(t, "POST", "/v1/namespaces/shop/jobs", key, `{"schedule": {"cron": "*/0 * * * *"}, "callback": {"url": "https://example.com"}}`), 422, "schedule.cron")
	require.NotEmpty(t, reason)
	requireProblem(t, l.do(t, "POST", "/v1/namespaces/shop/jobs", key, `{"schedule": {"in": "1s"}, "callback": {"url": "https://example.com"}, "colour": 1}`), 400, "colour")
	requireProblem(t, l.do(t, "POST", "/v1/namespaces/shop/jobs", key, `{"schedule": {"in": "1s"}, "callback": {"url": "https://example.com", "body": "`+strings.Repeat("x", api.MaxBodyBytes)+`"}}`), 413, "")
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	reason = requireProblem(t, l.do(t, "POST", "/v1/namespaces/shop/jobs", key, `{"schedule": {"at": "`+past+`"}, "callback": {"url": "https://example.com"}}`), 422, "schedule.at")
	require.Contains(t, reason, "relevancy window")

	// Batch, then cancel one: the view shows it cancelled.
	r = l.do(t, "POST", "/v1/namespaces/shop/jobs:batch", key, `{"jobs": [{"id": "b1", "schedule": {"every": "1h"}, "callback": {"url": "https://example.com"}}, {"id": "b2", "schedule": {"cron": "0 0 * * *", "timezone": "Europe/Berlin"}, "callback": {"url": "https://example.com"}}]}`)
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	r = l.do(t, "DELETE", "/v1/namespaces/shop/jobs/b1", key, "")
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, "cancelled", r.body["state"])
	kafkatest.WaitFor(t, 60*time.Second, "the job view shows b1 cancelled", func() bool {
		r = l.do(t, "GET", "/v1/namespaces/shop/jobs/b1", key, "")
		return r.body["state"] == "cancelled" && r.body["pending"] == nil
	})

	r = l.do(t, "GET", "/v1/namespaces/shop/breaker", key, "")
	require.Equal(t, 200, r.status)
	require.Equal(t, "closed", r.body["state"])
	// A breaker command answers with the state it led to.
	r = l.do(t, "PUT", "/v1/namespaces/shop/breaker", adminToken, `{"mode": "force_open"}`)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, true, r.body["applied"])
	require.Equal(t, "forced_open", r.body["breaker"].(map[string]any)["state"])
	r = l.do(t, "PUT", "/v1/namespaces/shop/breaker", adminToken, `{"mode": "force_open"}`)
	require.Equal(t, 200, r.status, "a command that changes nothing is answered too: %s", r.raw)
	r = l.do(t, "PUT", "/v1/namespaces/shop/breaker", adminToken, `{"mode": "auto"}`)
	require.Equal(t, 200, r.status, "body: %s", r.raw)

	// Listings from the jobs table's index.
	kafkatest.WaitFor(t, 60*time.Second, "the listing shows the three jobs", func() bool {
		r = l.do(t, "GET", "/v1/namespaces/shop/jobs?limit=2", key, "")
		return r.status == 200 && len(r.body["jobs"].([]any)) == 2 && r.body["next_cursor"] != ""
	})
	r = l.do(t, "GET", "/v1/namespaces/shop/jobs?limit=2&cursor="+r.body["next_cursor"].(string), key, "")
	require.Len(t, r.body["jobs"], 1)
	r = l.do(t, "GET", "/v1/namespaces/shop/jobs?state=cancelled", key, "")
	require.Len(t, r.body["jobs"], 1)
	require.Equal(t, "b1", r.body["jobs"].([]any)[0].(map[string]any)["id"])
	r = l.do(t, "GET", "/v1/namespaces", adminToken, "")
	require.Len(t, r.body["namespaces"], 2)

	// Run now: the scheduler fires the job at once; its schedule stays.
	r = l.do(t, "POST", "/v1/namespaces/shop/jobs/b2/trigger", key, "")
	require.Equal(t, 202, r.status, "body: %s", r.raw)
	kafkatest.WaitFor(t, 60*time.Second, "the triggered fire is in flight", func() bool {
		r = l.do(t, "GET", "/v1/namespaces/shop/jobs/b2", key, "")
		fires, _ := r.body["current_fires"].([]any)
		return r.body["fires"] == 1.0 && len(fires) == 1 && fires[0].(map[string]any)["state"] == "in_flight"
	})
	require.Equal(t, "scheduled", r.body["state"])

	// Keys: listed by id, revoked by id; the revoked key is refused.
	r = l.do(t, "GET", "/v1/namespaces/other/keys", adminToken, "")
	keyID := r.body["keys"].([]any)[0].(map[string]any)["id"].(string)
	require.Equal(t, 204, l.do(t, "DELETE", "/v1/namespaces/other/keys/"+keyID, adminToken, "").status)
	requireProblem(t, l.do(t, "GET", "/v1/namespaces/other", otherKey, ""), 401, "")

	r = l.do(t, "GET", "/metrics", "", "")
	require.Contains(t, string(r.raw), `chime_api_jobs_accepted_total 3`)
}

// TestInternalJobsIntegration: the breaker's cool-off timer, armed in a
// namespace as the breaker arms it (its command on job-commands, the
// scheduler's row, the API's view of the table), is not one of the
// namespace's jobs: not listed to its key, not counted against its
// pending-jobs quota; the admin token lists it with ?internal=true.
func TestInternalJobsIntegration(t *testing.T) {
	t.Parallel()
	l := startLive(t, func(c *api.Config) {
		c.Quotas = quota.Limits{RequestsPerSecond: -1, JobsPerSecond: -1, PendingJobs: 2}
	})
	require.Equal(t, 201, l.do(t, "PUT", "/v1/namespaces/shop", adminToken, `{}`).status)
	r := l.do(t, "POST", "/v1/namespaces/shop/keys", adminToken, "")
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	key := r.body["key"].(string)

	topics := l.kafka.Topics()
	raw, err := breaker.CoolOffCommand(topics, &chimev1.BreakerTimer{Namespace: "shop", Version: 1, FireAt: timestamppb.New(time.Now().Add(time.Hour))}, time.Now())
	require.NoError(t, err)
	cl := l.kafka.Client(t, kgo.RecordPartitioner(producer.GokaPartitioner()))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topics.JobCommands(), Key: []byte(schema.JobKey("shop", breaker.CoolOffJobID)), Value: raw}).FirstErr())
	job := `{"id": "a", "schedule": {"in": "1h"}, "callback": {"url": "https://example.com/hook"}}`
	require.Equal(t, 201, l.do(t, "POST", "/v1/namespaces/shop/jobs", key, job).status)

	ids := func(r response) []any {
		var ids []any
		for _, j := range r.body["jobs"].([]any) {
			ids = append(ids, j.(map[string]any)["id"])
		}
		return ids
	}
	kafkatest.WaitFor(t, 60*time.Second, "the admin's listing shows the cool-off timer and a", func() bool {
		r = l.do(t, "GET", "/v1/namespaces/shop/jobs?internal=true", adminToken, "")
		return r.status == 200 && len(ids(r)) == 2
	})
	require.ElementsMatch(t, []any{breaker.CoolOffJobID, "a"}, ids(r))
	for _, token := range []string{key, adminToken} {
		r = l.do(t, "GET", "/v1/namespaces/shop/jobs", token, "")
		require.Equal(t, 200, r.status, "body: %s", r.raw)
		require.Equal(t, []any{"a"}, ids(r))
	}
	requireProblem(t, l.do(t, "GET", "/v1/namespaces/shop/jobs?internal=true", key, ""), 403, "")

	// Two pending jobs allowed: a and b are the namespace's, the timer is
	// chime's.
	require.Equal(t, 201, l.do(t, "POST", "/v1/namespaces/shop/jobs", key, strings.Replace(job, `"a"`, `"b"`, 1)).status)
	kafkatest.WaitFor(t, 60*time.Second, "the listing shows b", func() bool {
		r = l.do(t, "GET", "/v1/namespaces/shop/jobs", key, "")
		return r.status == 200 && len(ids(r)) == 2
	})
	r = l.do(t, "POST", "/v1/namespaces/shop/jobs", key, strings.Replace(job, `"a"`, `"c"`, 1))
	requireProblem(t, r, 429, "")
	require.Contains(t, r.body["detail"], "has 2 jobs that have not ended")
}

// countReads is the number of the pending-jobs quota's count reads that
// answered (chime_api_live_count_reads_total{result="ok"}).
func (l *liveAPI) countReads(t *testing.T) int {
	t.Helper()
	r := l.do(t, "GET", "/metrics", "", "")
	m := regexp.MustCompile(`chime_api_live_count_reads_total\{result="ok"\} (\d+)`).FindSubmatch(r.raw)
	require.NotNil(t, m, "no count reads metric in %s", r.raw)
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return n
}
