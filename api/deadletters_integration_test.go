package api_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/api"
	"github.com/chime-sched/chime/api/quota"
	"github.com/chime-sched/chime/internal/clickhousetest"
	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/schema/chimev1"
)

// TestDeadLetterReplayAcrossAPIProcesses runs two API processes over one
// real broker (the scheduler keeping the jobs table) and one real
// ClickHouse, each with its own connection, views and memory: a replay on
// one shows on the other, which answers a repeat without a second job; a
// bulk replay skips what was replayed and takes its jobs from the
// pending-jobs quota; in the end every dead letter has exactly one job.
func TestDeadLetterReplayAcrossAPIProcesses(t *testing.T) {
	t.Parallel()
	db := clickhousetest.New(t)
	ctx := t.Context()
	open := func() *analytics.Store {
		store, err := analytics.Open(ctx, db.DSN, analytics.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { store.Close() })
		return store
	}
	// Six dead letters as the sink stores them, dl 6 the newest.
	now := time.Now().UTC().Truncate(time.Millisecond)
	var b analytics.Batch
	for i := 1; i <= 6; i++ {
		b.AddDeadLetter(&chimev1.DeadLetter{
			EventId: fmt.Sprintf("dl-shop/order-%d/1#1", i), Reason: "HTTP 500 after 1 attempt", At: timestamppb.New(now.Add(time.Duration(i-7) * time.Minute)),
			Due: &chimev1.Due{Namespace: "shop", JobId: fmt.Sprintf("order-%d", i), FireSeq: 1, Attempt: 1,
				Callback: &chimev1.HttpCallback{Url: "https://example.com/hook", Body: []byte("hi")}},
		}, analytics.Pos{Offset: int64(i)})
	}
	require.NoError(t, open().Insert(ctx, &b, "replay-it"))

	k := startKafka(t)
	process := func() *liveAPI {
		store := open()
		return k.api(t, func(c *api.Config) {
			c.Analytics = store
			c.Quotas = quota.Limits{RequestsPerSecond: -1, PendingJobs: 3}
		})
	}
	a, other := process(), process()
	require.Equal(t, 201, a.do(t, "PUT", "/v1/namespaces/shop", adminToken, `{}`).status)
	key := a.do(t, "POST", "/v1/namespaces/shop/keys", adminToken, "").body["key"].(string)
	kafkatest.WaitFor(t, 60*time.Second, "the other process knows the key", func() bool {
		return other.do(t, "GET", "/v1/namespaces/shop", key, "").status == 200
	})
	deadLetters := func(l *liveAPI, query string) []map[string]any {
		t.Helper()
		r := l.do(t, "GET", "/v1/namespaces/shop/dead-letters"+query, key, "")
		require.Equal(t, 200, r.status, "body: %s", r.raw)
		var out []map[string]any
		for _, d := range r.body["dead_letters"].([]any) {
			out = append(out, d.(map[string]any))
		}
		return out
	}

	// A replays the newest; the other process lists it replayed at once.
	newest := deadLetters(a, "")[0]
	require.Equal(t, false, newest["replayed"])
	r := a.do(t, "POST", newest["replay_path"].(string), key, "")
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	job, at := r.body["id"].(string), r.body["replayed_at"]
	shown := deadLetters(other, "?replayed=true")
	require.Len(t, shown, 1)
	require.Equal(t, []any{newest["id"], true, at, job}, []any{shown[0]["id"], shown[0]["replayed"], shown[0]["replayed_at"], shown[0]["replay_job_id"]})

	// The other process answers a repeat: the same job, the first time.
	r = other.do(t, "POST", newest["replay_path"].(string), key, "")
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, []any{true, job, at}, []any{r.body["already_replayed"], r.body["id"], r.body["replayed_at"]})

	// A process's quota count is read in the background (creates never
	// wait for it): have it read, after a command of the namespace, and
	// wait for the read. Until a process's first read answers, it admits
	// against what it admitted itself (api/livecount.go).
	countRead := func(l *liveAPI, what string) {
		t.Helper()
		reads := l.countReads(t)
		kafkatest.WaitFor(t, 60*time.Second, what, func() bool {
			for _, verb := range []string{"pause", "resume"} {
				require.Contains(t, []int{200, 202}, l.do(t, "POST", "/v1/namespaces/shop/jobs/"+url.PathEscape(job)+"/"+verb, key, "").status)
			}
			return l.countReads(t) > reads
		})
	}

	// Bulk on the other process once its table shows the one live job
	// and its quota has counted it: a quota of 3 leaves room for 2 of the
	// 5 not replayed.
	kafkatest.WaitFor(t, 60*time.Second, "the other process's job table shows the replay's job", func() bool {
		r = other.do(t, "GET", "/v1/namespaces/shop/jobs/"+url.PathEscape(job), key, "")
		return r.status == 200 && r.body["pending"] == nil
	})
	countRead(other, "the other process's quota to read the namespace's count")
	r = other.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", key, `{"limit": 10}`)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, []any{5.0, 2.0, 1.0, 3.0}, []any{r.body["matched"], r.body["replayed"], r.body["already_replayed"], r.body["quota_refused"]}, "body: %s", r.raw)
	require.Contains(t, r.body["quota_reason"], "its quota is 3")
	require.Len(t, deadLetters(a, "?replayed=false"), 3)

	// A, at the quota once its table shows the three jobs: the 429.
	kafkatest.WaitFor(t, 60*time.Second, "A's job table shows three jobs", func() bool {
		r = a.do(t, "GET", "/v1/namespaces/shop/jobs", key, "")
		jobs, _ := r.body["jobs"].([]any)
		return len(jobs) == 3
	})
	countRead(a, "A's quota to read the namespace's count again")
	r = a.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", key, "")
	requireProblem(t, r, 429, "")
	require.Equal(t, "60", r.header.Get("Retry-After"))
	r = a.do(t, "POST", "/v1/namespaces/shop/dead-letters/"+url.PathEscape("dl-shop/order-1/1#1")+"/replay", key, "")
	requireProblem(t, r, 429, "")

	// The admin token is not limited: the rest, each once.
	r = a.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", adminToken, "")
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, []any{3.0, 3.0, 3.0}, []any{r.body["matched"], r.body["replayed"], r.body["already_replayed"]}, "body: %s", r.raw)
	require.Empty(t, deadLetters(other, "?replayed=false"))
	jobs := map[string]bool{}
	for _, d := range deadLetters(other, "") {
		require.Equal(t, true, d["replayed"], "%v", d)
		require.True(t, strings.HasPrefix(d["replay_job_id"].(string), d["job_id"].(string)+".replay-"), "%v", d)
		jobs[d["replay_job_id"].(string)] = true
	}
	require.Len(t, jobs, 6)
	kafkatest.WaitFor(t, 60*time.Second, "the job table holds the six replay jobs, and no other", func() bool {
		r = other.do(t, "GET", "/v1/namespaces/shop/jobs", adminToken, "")
		if r.status != 200 {
			return false
		}
		listed := map[string]bool{}
		for _, j := range r.body["jobs"].([]any) {
			listed[j.(map[string]any)["id"].(string)] = true
		}
		return fmt.Sprint(listed) == fmt.Sprint(jobs)
	})
}
