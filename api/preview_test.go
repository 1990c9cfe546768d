package api_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/schedule"
)

// TestPreviewSchedule: POST /v1/schedules:preview answers the fires
// schedule.Upcoming computes (the scheduler's own steps), for the admin
// token and any namespace's key, and names the field at fault otherwise.
func TestPreviewSchedule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	from := "2026-10-23T08:00:00Z"
	body := map[string]any{"schedule": map[string]any{"cron": "0 9 * * 1-5", "timezone": "Europe/Berlin", "jitter": "10m"},
		"namespace": "shop", "id": "daily", "count": 5, "from": from}

	plan, err := schedule.Compile(&chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 9 * * 1-5", Timezone: "Europe/Berlin"}}, Jitter: durationpb.New(10 * time.Minute)})
	require.NoError(t, err)
	start, _ := time.Parse(time.RFC3339, from)
	first, ok := plan.First(start)
	require.True(t, ok)
	want := plan.Upcoming("shop/daily", first, 0, 5)

	for _, token := range []string{adminToken, key} {
		r := b.do(t, "POST", "/v1/schedules:preview", token, body)
		require.Equal(t, 200, r.status, string(r.raw))
		fires := r.body["fires"].([]any)
		require.Len(t, fires, 5)
		for i, f := range fires {
			m := f.(map[string]any)
			require.EqualValues(t, want[i].Seq, m["fire_seq"])
			require.Equal(t, want[i].ScheduledAt.Format(time.RFC3339Nano), m["scheduled_at"])
			require.Equal(t, want[i].FireAt.Format(time.RFC3339Nano), m["fire_at"])
		}
	}
	// From Friday 10:00 in Berlin, the first fire is Monday 26 October at
	// 09:00 in Berlin: 08:00 UTC, after the change from summer time.
	require.Equal(t, "2026-10-26T08:00:00Z", want[0].ScheduledAt.Format(time.RFC3339))

	for _, tc := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"jitter without the job", map[string]any{"schedule": map[string]any{"every": "1h", "jitter": "1m"}}, "id"},
		{"bad cron", map[string]any{"schedule": map[string]any{"cron": "61 * * * *"}}, "schedule.cron"},
		{"two kinds", map[string]any{"schedule": map[string]any{"every": "1h", "cron": "* * * * *"}}, "schedule"},
		{"count too large", map[string]any{"schedule": map[string]any{"every": "1h"}, "count": 101}, "count"},
		{"bad namespace", map[string]any{"schedule": map[string]any{"every": "1h"}, "namespace": "Shop"}, "namespace"},
		{"no schedule", map[string]any{"count": 3}, "schedule"},
	} {
		requireProblem(t, b.do(t, "POST", "/v1/schedules:preview", key, tc.body), 422, tc.field)
	}
	requireProblem(t, b.do(t, "POST", "/v1/schedules:preview", "ck_shop.wrong", body), 401, "")

	// A schedule whose occurrences are past when the job is created fires
	// the latest of them at once, numbered after the ones it skips, and
	// then nothing more past its end.
	r := b.do(t, "POST", "/v1/schedules:preview", key, map[string]any{"schedule": map[string]any{"every": "10m", "start_at": "2026-01-01T00:00:00Z", "end_at": "2026-01-01T00:30:00Z"}, "from": from})
	require.Equal(t, 200, r.status, string(r.raw))
	fires := r.body["fires"].([]any)
	require.Len(t, fires, 1)
	require.EqualValues(t, 4, fires[0].(map[string]any)["fire_seq"], "00:00, 00:10 and 00:20 skipped")
	require.Equal(t, "2026-01-01T00:30:00Z", fires[0].(map[string]any)["scheduled_at"])
}

// TestJobShowsItsNextFires: GET .../jobs/{id} shows the next five fires
// as the row stands, numbered after its last fire; none once it ended.
func TestJobShowsItsNextFires(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	created := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	spec := &chimev1.JobSpec{Namespace: "shop", Id: "j", Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_Every{Every: &chimev1.Every{Interval: durationpb.New(time.Hour)}}},
		Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: "https://example.com/h"}}}}
	b.states.put("shop", "j", &chimev1.JobState{Spec: spec, Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED, CreatedAt: timestamppb.New(created),
		FireSeq: 3, NextScheduledAt: timestamppb.New(created.Add(4 * time.Hour))})
	r := b.do(t, "GET", "/v1/namespaces/shop/jobs/j", key, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	fires := r.body["next_fires"].([]any)
	require.Len(t, fires, 5)
	require.EqualValues(t, 4, fires[0].(map[string]any)["fire_seq"])
	require.Equal(t, "2026-11-24T14:00:00Z", fires[0].(map[string]any)["scheduled_at"])
	require.Equal(t, "2026-11-24T18:00:00Z", fires[4].(map[string]any)["scheduled_at"])

	b.states.put("shop", "done", &chimev1.JobState{Spec: spec, Status: chimev1.JobStatus_JOB_STATUS_CANCELLED, CreatedAt: timestamppb.New(created)})
	r = b.do(t, "GET", "/v1/namespaces/shop/jobs/done", key, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.Nil(t, r.body["next_fires"])
}

// TestMaxFires: a job's max_fires reaches the scheduler's command, shows
// on the job, and ends its preview and its next_fires.
func TestMaxFires(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	r := b.do(t, "POST", "/v1/namespaces/shop/jobs", key, map[string]any{"id": "instalments", "schedule": map[string]any{"every": "720h"},
		"callback": map[string]any{"url": "https://example.com/charge"}, "max_fires": 12})
	require.Equal(t, 201, r.status, string(r.raw))
	cmds := b.jobs.commands()
	require.EqualValues(t, 12, cmds[len(cmds)-1].GetUpsert().GetSpec().GetMaxFires())

	r = b.do(t, "POST", "/v1/schedules:preview", key, map[string]any{"schedule": map[string]any{"every": "1h"}, "count": 10, "max_fires": 3})
	require.Equal(t, 200, r.status, string(r.raw))
	require.Len(t, r.body["fires"], 3)

	created := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	spec := &chimev1.JobSpec{Namespace: "shop", Id: "j", MaxFires: 12, Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_Every{Every: &chimev1.Every{Interval: durationpb.New(time.Hour)}}},
		Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: "https://example.com/h"}}}}
	b.states.put("shop", "j", &chimev1.JobState{Spec: spec, Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED, CreatedAt: timestamppb.New(created),
		FireSeq: 10, ScheduledFires: 10, NextScheduledAt: timestamppb.New(created.Add(11 * time.Hour))})
	r = b.do(t, "GET", "/v1/namespaces/shop/jobs/j", key, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.EqualValues(t, 12, r.body["max_fires"])
	require.Len(t, r.body["next_fires"], 2, "two fires left of twelve")
}

// TestPauseOnFailureField: pause_on_failure reaches the command and shows
// on the job.
func TestPauseOnFailureField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	r := b.do(t, "POST", "/v1/namespaces/shop/jobs", key, map[string]any{"id": "export", "schedule": map[string]any{"cron": "0 2 * * *"},
		"callback": map[string]any{"url": "https://example.com/export"}, "pause_on_failure": true})
	require.Equal(t, 201, r.status, string(r.raw))
	cmds := b.jobs.commands()
	spec := cmds[len(cmds)-1].GetUpsert().GetSpec()
	require.True(t, spec.GetPauseOnFailure())
	// A row the scheduler paused (another job: the one just created
	// answers from this API's own memory until the scheduler writes it).
	b.states.put("shop", "export2", &chimev1.JobState{Spec: spec, Status: chimev1.JobStatus_JOB_STATUS_PAUSED, LastResult: chimev1.AckResult_ACK_RESULT_DEAD,
		LastDetail: "paused on failure (pause_on_failure): fire 3 ended dead: HTTP 500"})
	r = b.do(t, "GET", "/v1/namespaces/shop/jobs/export2", key, nil)
	require.Equal(t, 200, r.status, string(r.raw))
	require.Equal(t, true, r.body["pause_on_failure"])
	require.Equal(t, "paused", r.body["state"])
	require.Contains(t, r.body["last_outcome"].(map[string]any)["detail"], "paused on failure")
}

// TestOverlapField: the overlap policy reaches the command and shows on
// the job; an unknown one is refused naming the field.
func TestOverlapField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	job := func(overlap string) map[string]any {
		return map[string]any{"id": "sync", "schedule": map[string]any{"every": "1m"}, "callback": map[string]any{"url": "https://example.com/sync"}, "overlap": overlap}
	}
	r := b.do(t, "POST", "/v1/namespaces/shop/jobs", key, job("buffer_one"))
	require.Equal(t, 201, r.status, string(r.raw))
	cmds := b.jobs.commands()
	spec := cmds[len(cmds)-1].GetUpsert().GetSpec()
	require.Equal(t, chimev1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE, spec.GetOverlap())
	b.states.put("shop", "sync2", &chimev1.JobState{Spec: spec, Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED})
	r = b.do(t, "GET", "/v1/namespaces/shop/jobs/sync2", key, nil)
	require.Equal(t, "buffer_one", r.body["overlap"])
	for _, bad := range []string{"serial", "SKIP", "unspecified", ""} {
		requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs", key, job(bad)), 422, "overlap")
	}
}

// TestExclusionsThroughTheAPI: exclusions reach the command, show on the
// job, and a preview leaves their times out; a bad one names its field.
func TestExclusionsThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	sched := map[string]any{"cron": "0 9 * * *", "timezone": "Asia/Kolkata", "exclude": []any{
		map[string]any{"date": "2026-12-25"}, map[string]any{"cron": "0 0 * * 0", "duration": "24h"}}}
	r := b.do(t, "POST", "/v1/namespaces/shop/jobs", key, map[string]any{"id": "emi", "schedule": sched, "callback": map[string]any{"url": "https://example.com/emi"}})
	require.Equal(t, 201, r.status, string(r.raw))
	cmds := b.jobs.commands()
	spec := cmds[len(cmds)-1].GetUpsert().GetSpec()
	require.Len(t, spec.GetSchedule().GetExclude(), 2)
	b.states.put("shop", "emi2", &chimev1.JobState{Spec: spec, Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED})
	r = b.do(t, "GET", "/v1/namespaces/shop/jobs/emi2", key, nil)
	require.Len(t, r.body["schedule"].(map[string]any)["exclude"], 2)

	r = b.do(t, "POST", "/v1/schedules:preview", key, map[string]any{"schedule": sched, "from": "2026-12-23T00:00:00Z", "count": 4})
	require.Equal(t, 200, r.status, string(r.raw))
	var got []string
	for _, f := range r.body["fires"].([]any) {
		got = append(got, f.(map[string]any)["scheduled_at"].(string))
	}
	// 09:00 in Kolkata is 03:30 UTC; the 25th (a holiday) and Sunday the 27th are left out.
	require.Equal(t, []string{"2026-12-23T03:30:00Z", "2026-12-24T03:30:00Z", "2026-12-26T03:30:00Z", "2026-12-28T03:30:00Z"}, got)

	bad := map[string]any{"id": "x", "schedule": map[string]any{"every": "1h", "exclude": []any{map[string]any{"date": "25/12/2026"}}},
		"callback": map[string]any{"url": "https://example.com/x"}}
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs", key, bad), 422, "schedule.exclude[0].date")
}

// TestCatchupFields: catchup and catchup_window reach the command and
// show on the job; unknown values name their field.
func TestCatchupFields(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	job := func(catchup, window string) map[string]any {
		return map[string]any{"id": "report", "schedule": map[string]any{"cron": "0 * * * *"}, "callback": map[string]any{"url": "https://example.com/r"},
			"catchup": catchup, "catchup_window": window}
	}
	r := b.do(t, "POST", "/v1/namespaces/shop/jobs", key, job("all", "6h"))
	require.Equal(t, 201, r.status, string(r.raw))
	cmds := b.jobs.commands()
	spec := cmds[len(cmds)-1].GetUpsert().GetSpec()
	require.Equal(t, chimev1.CatchupPolicy_CATCHUP_POLICY_ALL, spec.GetCatchup())
	require.Equal(t, 6*time.Hour, spec.GetCatchupWindow().AsDuration())
	b.states.put("shop", "report2", &chimev1.JobState{Spec: spec, Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED})
	r = b.do(t, "GET", "/v1/namespaces/shop/jobs/report2", key, nil)
	require.Equal(t, "all", r.body["catchup"])
	require.Equal(t, "6h0m0s", r.body["catchup_window"])
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs", key, job("every", "6h")), 422, "catchup")
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs", key, job("none", "-1h")), 422, "catchup_window")
}

// TestBackfillJob: POST .../jobs/{id}/backfill publishes the command with
// the count of occurrences it fires; ranges reaching into the future or
// holding too many, one-shots and ended jobs are refused at once.
func TestBackfillJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.namespace(t, "shop", nil)
	hourly := &chimev1.JobSpec{Namespace: "shop", Id: "h", Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "0 * * * *"}}},
		Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: "https://example.com/h"}}}}
	b.states.put("shop", "h", &chimev1.JobState{Spec: hourly, Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED, CreatedAt: timestamppb.New(testNow)})
	from, to := testNow.Add(-5*time.Hour).Truncate(time.Hour), testNow.Add(-2*time.Hour).Truncate(time.Hour)
	r := b.do(t, "POST", "/v1/namespaces/shop/jobs/h/backfill", key, map[string]any{"from": from.Format(time.RFC3339), "to": to.Format(time.RFC3339)})
	require.Equal(t, 202, r.status, string(r.raw))
	require.EqualValues(t, 3, r.body["count"])
	cmds := b.jobs.commands()
	bf := cmds[len(cmds)-1].GetBackfill()
	require.NotNil(t, bf)
	require.Equal(t, from, bf.GetFrom().AsTime())

	past := func(f, t time.Duration) map[string]any {
		return map[string]any{"from": testNow.Add(f).Format(time.RFC3339), "to": testNow.Add(t).Format(time.RFC3339)}
	}
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs/h/backfill", key, past(-time.Hour, time.Hour)), 422, "to")
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs/h/backfill", key, past(-200*time.Hour, -time.Hour)), 422, "to")
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs/h/backfill", key, past(-time.Hour, -2*time.Hour)), 422, "to")
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs/h/backfill", key, map[string]any{"from": "yesterday"}), 422, "from")
	once := proto.Clone(hourly).(*chimev1.JobSpec)
	once.Schedule = &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(testNow)}}
	b.states.put("shop", "once", &chimev1.JobState{Spec: once, Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED})
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs/once/backfill", key, past(-5*time.Hour, -time.Hour)), 409, "")
	requireProblem(t, b.do(t, "POST", "/v1/namespaces/shop/jobs/none/backfill", key, past(-5*time.Hour, -time.Hour)), 404, "")
}
