package api_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/api"
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
		b := setup(t, withAnalytics(deadLetters(30)), func(c *api.Config) { c.Quotas = api.Quotas{PendingJobs: 5} })
		key := b.namespace(t, "shop", nil)
		liveJobs(b, "shop", 5)

		create := b.do(t, "POST", "/v1/namespaces/shop/jobs", key, oneShot("2026-11-23T11:00:00Z"))
		requireProblem(t, create, 429, "")
		r := b.do(t, "POST", replay, key, nil)
		requireProblem(t, r, 429, "")
		require.Equal(t, create.body["type"], r.body["type"])
		require.Equal(t, create.body["detail"], r.body["detail"])
		require.Equal(t, "60", r.header.Get("Retry-After"))
		require.Contains(t, r.body["detail"], "5 jobs that have not ended, and its quota is 5")
		require.Empty(t, b.jobs.commands(), "nothing published")

		require.Equal(t, 201, b.do(t, "POST", replay, adminToken, nil).status, "the admin token is not limited")
	})

	t.Run("single replay over the rate quota gets the create's 429", func(t *testing.T) {
		t.Parallel()
		b := setup(t, withAnalytics(deadLetters(1)), func(c *api.Config) { c.Quotas = api.Quotas{RequestsPerSecond: -1, JobsPerSecond: 5} })
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
		b := setup(t, withAnalytics(deadLetters(30)), func(c *api.Config) { c.Quotas = api.Quotas{PendingJobs: 5} })
		key := b.namespace(t, "shop", nil)
		liveJobs(b, "shop", 1)

		r := b.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", key, map[string]any{"limit": 30})
		require.Equal(t, 200, r.status, "body: %s", r.raw)
		require.EqualValues(t, 30, r.body["matched"])
		require.EqualValues(t, 4, r.body["replayed"], "1 live job and a quota of 5: room for 4")
		require.EqualValues(t, 26, r.body["quota_refused"])
		require.Contains(t, r.body["quota_reason"], "its quota is 5")
		require.Len(t, r.body["jobs"], 4)
		require.Len(t, b.jobs.commands(), 4)

		// The scheduler's table shows the 4: nothing fits any more, and a
		// bulk replay that replays nothing for the quota is its 429.
		for _, cmd := range b.jobs.commands() {
			b.states.put("shop", cmd.GetJobId(), &chimev1.JobState{Spec: cmd.GetUpsert().GetSpec(), Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED, LastCommandId: cmd.GetCommandId()})
		}
		r = b.do(t, "POST", "/v1/namespaces/shop/dead-letters:replay", key, map[string]any{"limit": 30})
		requireProblem(t, r, 429, "")
		require.Equal(t, "60", r.header.Get("Retry-After"))
		require.Contains(t, r.body["detail"], "26 dead letters")
		require.Len(t, b.jobs.commands(), 4)
	})
}

var _ = analytics.DeadLetter{}
