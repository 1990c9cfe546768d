package api_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/api"
	"github.com/chime-sched/chime/api/quota"
	"github.com/chime-sched/chime/schema/chimev1"
)

// deadLetters returns a store holding n dead letters of namespace shop,
// dl-01 the oldest, one a minute up to testNow.
func deadLetters(n int) *fakeAnalytics {
	fa := &fakeAnalytics{}
	for i := range n {
		seq := n - i
		fa.dead = append(fa.dead, sampleDeadLetter("shop", fmt.Sprintf("dl-%02d", seq), fmt.Sprintf("order-%02d", seq), testNow.Add(-time.Duration(i)*time.Minute)))
	}
	return fa
}

// liveJobs puts n jobs that have not ended in namespace ns's table.
func liveJobs(b *testBundle, ns string, n int) {
	for i := range n {
		b.states.put(ns, fmt.Sprintf("live-%d", i), &chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED})
	}
}

// TestReplayCountsAgainstJobQuotas: a replay creates a job, so it takes
// from the quotas a create takes from, the pending jobs and the jobs
// created per second, and is refused as a create is. Issue 19 found a bulk
// replay of 30 answering replayed: 30 under a pending-jobs quota of 5.
func TestReplayCountsAgainstJobQuotas(t *testing.T) {
	t.Parallel()
	const replay = "/v1/namespaces/shop/dead-letters/dl-30/replay"

	t.Run("single replay at the pending quota gets the create's 429", func(t *testing.T) {
		t.Parallel()
		b := setup(t, withAnalytics(deadLetters(30)), func(c *api.Config) { c.Quotas = quota.Limits{PendingJobs: 5} })
		b.jobs.apply = b.states.apply
		key := b.namespace(t, "shop", nil)
		liveJobs(b, "shop", 4)
		b.primeCount(t, "shop") // 4 and the admin's

		create := b.do(t, "POST", "/v1/namespaces/shop/jobs", key, oneShot("2026-11-23T11:00:00Z"))
		requireProblem(t, create, 429, "")
		r := b.do(t, "POST", replay, key, nil)
		requireProblem(t, r, 429, "")
		require.Equal(t, create.body["type"], r.body["type"])
		require.Equal(t, create.body["detail"], r.body["detail"])
		require.Equal(t, "60", r.header.Get("Retry-After"))
		require.Contains(t, r.body["detail"], "5 jobs that have not ended, and its quota is 5")
		require.Len(t, b.jobs.commands(), 1, "nothing published but the admin's job")

		require.Equal(t, 201, b.do(t, "POST", replay, adminToken, nil).status, "the admin token is not limited")
	})

	t.Run("single replay over the rate quota gets the create's 429", func(t *testing.T) {
		t.Parallel()
		b := setup(t, withAnalytics(deadLetters(1)), func(c *api.Config) { c.Quotas = quota.Limits{RequestsPerSecond: -1, JobsPerSecond: 5} })
		key := b.namespace(t, "shop", nil)
		// The burst is one full batch; the clock stands still.
		jobs := make([]map[string]any, api.MaxBatch)
		for i := range jobs {
			jobs[i] = map[string]any{"id": fmt.Sprintf("j%d", i), "schedule": map[string]any{"in": "1s"}, "callback": map[string]any{"url": "https://example.com/h"}}
		}
		require.Equal(t, 201, b.do(t, "POST", "/v1/namespaces/shop/jobs:batch", key, map[string]any{"jobs": jobs}).status)
		r := b.do(t, "POST", "/v1/namespaces/shop/dead-letters/dl-01/replay", key, nil)
		requireProblem(t, r, 429, "")
		require.Equal(t, "1", r.header.Get("Retry-After"))
		require.Contains(t, r.body["detail"], "jobs created/s")
		require.Len(t, b.jobs.commands(), api.MaxBatch, "the replay published nothing")
	})

	t.Run("bulk replay replays what fits and says what the quota refused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, withAnalytics(deadLetters(30)), func(c *api.Config) { c.Quotas = quota.Limits{PendingJobs: 5} })
		b.jobs.apply = b.states.apply
		key := b.namespace(t, "shop", nil)
		b.primeCount(t, "shop") // the admin's job

		r := b.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", key, map[string]any{"limit": 30})
		require.Equal(t, 200, r.status, "body: %s", r.raw)
		require.EqualValues(t, 30, r.body["matched"])
		require.EqualValues(t, 4, r.body["replayed"], "1 live job and a quota of 5: room for 4")
		require.EqualValues(t, 26, r.body["quota_refused"])
		require.Contains(t, r.body["quota_reason"], "its quota is 5")
		require.Len(t, r.body["jobs"], 4)
		require.Len(t, b.jobs.commands(), 1+4)

		// The 4 count at once: nothing fits any more, and a bulk replay
		// that replays nothing for the quota is its 429.
		r = b.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", key, map[string]any{"limit": 30})
		requireProblem(t, r, 429, "")
		require.Equal(t, "60", r.header.Get("Retry-After"))
		require.Contains(t, r.body["detail"], "26 dead letters")
		require.Len(t, b.jobs.commands(), 1+4)
	})
}

// TestDeadLettersShowTheirReplay: a dead letter says whether it was
// replayed, when and as which job, and the listing filters on it; a
// repeated replay says it is one, on this API process or another, also
// once the job is gone from the table; a bulk replay acts only on those
// not replayed yet and counts those it skipped.
func TestDeadLettersShowTheirReplay(t *testing.T) {
	t.Parallel()
	fa := deadLetters(5)
	b := setup(t, withAnalytics(fa))
	key := b.namespace(t, "shop", nil)
	list := func(b *testBundle, query string) map[string]map[string]any {
		t.Helper()
		r := b.do(t, "GET", "/v1/namespaces/shop/dead-letters"+query, key, nil)
		require.Equal(t, 200, r.status, "body: %s", r.raw)
		out := map[string]map[string]any{}
		for _, d := range r.body["dead_letters"].([]any) {
			out[d.(map[string]any)["id"].(string)] = d.(map[string]any)
		}
		return out
	}

	dl := list(b, "")["dl-05"]
	require.Equal(t, false, dl["replayed"])
	require.NotContains(t, dl, "replayed_at")
	require.NotContains(t, dl, "replay_job_id")

	r := b.do(t, "POST", "/v1/namespaces/shop/dead-letters/dl-05/replay", key, nil)
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	job := r.body["id"].(string)
	require.Equal(t, false, r.body["already_replayed"])
	require.Equal(t, "dl-05", r.body["dead_letter_id"])
	require.Equal(t, testNow.Format(time.RFC3339), r.body["replayed_at"])
	require.Equal(t, "scheduled", r.body["state"])

	dl = list(b, "")["dl-05"]
	require.Equal(t, true, dl["replayed"])
	require.Equal(t, testNow.Format(time.RFC3339), dl["replayed_at"])
	require.Equal(t, job, dl["replay_job_id"])
	require.Equal(t, []string{"dl-05"}, slices.Sorted(maps.Keys(list(b, "?replayed=true"))))
	require.Equal(t, []string{"dl-01", "dl-02", "dl-03", "dl-04"}, slices.Sorted(maps.Keys(list(b, "?replayed=false"))))
	requireProblem(t, b.do(t, "GET", "/v1/namespaces/shop/dead-letters?replayed=yes", key, nil), 400, "replayed")

	// Again, here: a repeat, with when and which job; nothing published.
	r = b.do(t, "POST", "/v1/namespaces/shop/dead-letters/dl-05/replay", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, true, r.body["already_replayed"])
	require.Equal(t, job, r.body["id"])
	require.Equal(t, testNow.Format(time.RFC3339), r.body["replayed_at"])
	require.Equal(t, "scheduled", r.body["state"], "the job as this process accepted it")
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	require.Len(t, b.jobs.commands(), 1)

	// Again, on another API process an hour later, after the table
	// removed the ended job: still a repeat, the first replay's time.
	later := setup(t, withAnalytics(fa), func(c *api.Config) { c.Now = func() time.Time { return testNow.Add(time.Hour) } })
	later.namespace(t, "shop", nil)
	r = later.do(t, "POST", "/v1/namespaces/shop/dead-letters/dl-05/replay", adminToken, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, true, r.body["already_replayed"])
	require.Equal(t, job, r.body["id"])
	require.Equal(t, testNow.Format(time.RFC3339), r.body["replayed_at"])
	require.NotContains(t, r.body, "state", "the job is gone: no state to show")
	require.Empty(t, later.jobs.commands())

	// Bulk: the 4 not replayed yet; the one replayed is skipped and counted.
	r = b.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", key, map[string]any{"limit": 10})
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.EqualValues(t, 4, r.body["matched"])
	require.EqualValues(t, 4, r.body["replayed"])
	require.EqualValues(t, 1, r.body["already_replayed"])
	require.Len(t, r.body["jobs"], 4)
	require.Equal(t, false, r.body["more"])
	require.Len(t, b.jobs.commands(), 5)
	require.Empty(t, list(b, "?replayed=false"))
	r = b.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", key, map[string]any{"limit": 10})
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, []any{0.0, 0.0, 5.0}, []any{r.body["matched"], r.body["replayed"], r.body["already_replayed"]})
	require.Len(t, b.jobs.commands(), 5)
}

// TestBulkReplayWalksOn: with a limit smaller than the dead letters, the
// same request repeated replays the next ones until more is false.
func TestBulkReplayWalksOn(t *testing.T) {
	t.Parallel()
	b := setup(t, withAnalytics(deadLetters(5)))
	key := b.namespace(t, "shop", nil)
	var replayed []any
	for i, want := range []struct {
		matched, skipped int
		more             bool
	}{{2, 0, true}, {2, 2, true}, {1, 4, false}} {
		r := b.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", key, map[string]any{"limit": 2})
		require.Equal(t, 200, r.status, "body: %s", r.raw)
		require.Equal(t, []any{float64(want.matched), float64(want.matched), float64(want.skipped), want.more},
			[]any{r.body["matched"], r.body["replayed"], r.body["already_replayed"], r.body["more"]}, "request %d: %s", i+1, r.raw)
		replayed = append(replayed, r.body["jobs"].([]any)...)
	}
	require.Len(t, replayed, 5)
	require.Len(t, b.jobs.commands(), 5, "each once")
}

// TestReplayRecordFails: when ClickHouse does not record a replay whose
// job Kafka confirmed, the answer says so (503) and the dead letter lists
// as not replayed; replaying it again records it without a second job,
// here from this process's memory, and on another process (which does
// not see the job yet) with the same command, which the scheduler applies
// once.
func TestReplayRecordFails(t *testing.T) {
	t.Parallel()
	fa := deadLetters(2)
	fa.recordErr = fmt.Errorf("%w: insert: connection refused", analytics.ErrUnavailable)
	b := setup(t, withAnalytics(fa))
	key := b.namespace(t, "shop", nil)

	r := b.do(t, "POST", "/v1/namespaces/shop/dead-letters/dl-02/replay", key, nil)
	requireProblem(t, r, 503, "")
	require.Equal(t, "https://chime.dev/problems/analytics-unavailable", r.body["type"])
	require.Contains(t, r.body["detail"], `dead letter "dl-02" was replayed as job "order-02.replay-`)
	require.Contains(t, r.body["detail"], "repeat the request")
	require.Len(t, b.jobs.commands(), 1)
	r = b.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", key, nil)
	requireProblem(t, r, 503, "")
	require.Contains(t, r.body["detail"], "2 dead letters were replayed")
	require.Len(t, b.jobs.commands(), 2, "dl-02's job is known: only dl-01's is published")

	fa.mu.Lock()
	fa.recordErr = nil
	fa.mu.Unlock()
	other := setup(t, withAnalytics(fa))
	other.namespace(t, "shop", nil)
	r = other.do(t, "POST", "/v1/namespaces/shop/dead-letters/dl-01/replay", adminToken, nil)
	require.Equal(t, 201, r.status, "body: %s", r.raw)
	require.Equal(t, b.jobs.commands()[1].GetCommandId(), other.jobs.commands()[0].GetCommandId(), "the same command")
	r = b.do(t, "POST", "/v1/namespaces/shop/dead-letters/dl-02/replay", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, true, r.body["already_replayed"])
	require.Len(t, b.jobs.commands(), 2)
	r = b.do(t, "GET", "/v1/namespaces/shop/dead-letters?replayed=false", key, nil)
	require.Empty(t, r.body["dead_letters"], "both recorded now")
}

// TestReplayBeforeRecordsExisted: a dead letter replayed by a chime that
// did not record replays has its job in the table; a replay finds it,
// answers it as a repeat and records it as of the job's creation.
func TestReplayBeforeRecordsExisted(t *testing.T) {
	t.Parallel()
	fa := deadLetters(1)
	b := setup(t, withAnalytics(fa))
	key := b.namespace(t, "shop", nil)
	created := testNow.Add(-24 * time.Hour)
	id := "order-01.replay-14cc9f1d5cf7"
	b.states.put("shop", id, &chimev1.JobState{Status: chimev1.JobStatus_JOB_STATUS_COMPLETED, CreatedAt: timestampOf(created)})

	r := b.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", key, nil)
	require.Equal(t, 200, r.status, "body: %s", r.raw)
	require.Equal(t, []any{1.0, 0.0, 1.0}, []any{r.body["matched"], r.body["replayed"], r.body["already_replayed"]})
	require.Empty(t, b.jobs.commands())
	r = b.do(t, "GET", "/v1/namespaces/shop/dead-letters", key, nil)
	dl := r.body["dead_letters"].([]any)[0].(map[string]any)
	require.Equal(t, []any{true, created.Format(time.RFC3339), id}, []any{dl["replayed"], dl["replayed_at"], dl["replay_job_id"]})
}
