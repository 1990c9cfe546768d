package analytics_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/schema/chimev1"
)

func deadLetter(ns, job string, seq uint64, at time.Time) *chimev1.DeadLetter {
	return &chimev1.DeadLetter{
		EventId: fmt.Sprintf("dl-%s-%s-%d", ns, job, seq),
		Reason:  "HTTP 500 after 3 attempts",
		At:      timestamppb.New(at),
		Due: &chimev1.Due{
			Namespace: ns, JobId: job, FireSeq: seq, Attempt: 3,
			Callback: &chimev1.HttpCallback{
				Url: "https://example.test/hook", Method: "PUT",
				Headers: map[string]string{"X-A": "1"}, Body: []byte(`{"k":1}`), Timeout: durationpb.New(5 * time.Second),
			},
			Retry:  &chimev1.RetryPolicy{MaxAttempts: 3, InitialInterval: durationpb.New(time.Second)},
			Labels: map[string]string{"team": "billing"},
		},
		Attempts: []*chimev1.CallbackOutcome{{Attempt: 3, StatusCode: 500, Error: "boom"}},
	}
}

// TestDeadLetters stores dead letters (one twice) and pages through them,
// newest first, with their dues intact.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	var b analytics.Batch
	for i := range 5 {
		b.AddDeadLetter(deadLetter("shop", "job", uint64(i+1), base.Add(time.Duration(i)*time.Minute)), analytics.Pos{Offset: int64(i)})
	}
	b.AddDeadLetter(deadLetter("other", "job", 1, base), analytics.Pos{Offset: 5})
	require.NoError(t, tb.store.Insert(tb.ctx, &b, "d1"))
	// A replayed record (another batch): stored once.
	b.Reset()
	b.AddDeadLetter(deadLetter("shop", "job", 1, base), analytics.Pos{Offset: 0})
	require.NoError(t, tb.store.Insert(tb.ctx, &b, "d2"))

	page, err := tb.store.ListDeadLetters(tb.ctx, "shop", analytics.DeadLetterQuery{Limit: 3})
	require.NoError(t, err)
	require.Len(t, page, 3)
	require.Equal(t, []uint64{5, 4, 3}, []uint64{page[0].FireSeq, page[1].FireSeq, page[2].FireSeq})
	last := page[2]
	page, err = tb.store.ListDeadLetters(tb.ctx, "shop", analytics.DeadLetterQuery{Limit: 3, Before: analytics.DeadLetterCursor{At: last.At, ID: last.ID}})
	require.NoError(t, err)
	require.Len(t, page, 2, "the duplicate is stored once")
	require.Equal(t, []uint64{2, 1}, []uint64{page[0].FireSeq, page[1].FireSeq})

	d, err := tb.store.GetDeadLetter(tb.ctx, "shop", "dl-shop-job-1")
	require.NoError(t, err)
	require.NotNil(t, d)
	want := deadLetter("shop", "job", 1, base)
	// The stored due carries every attempt of the dead letter as history.
	wantDue := proto.CloneOf(want.GetDue())
	wantDue.History = want.GetAttempts()
	require.True(t, proto.Equal(wantDue, d.Due), "due: %v", d.Due)
	require.Equal(t, base, d.At)
	require.Equal(t, "PUT", d.Method)
	require.Equal(t, int32(500), d.StatusCode)
	require.Equal(t, "boom", d.Error)
	require.Equal(t, uint32(3), d.Attempt)
	require.Equal(t, want.GetReason(), d.Reason)

	d, err = tb.store.GetDeadLetter(tb.ctx, "other", "dl-shop-job-1")
	require.NoError(t, err)
	require.Nil(t, d, "another namespace's dead letter is not found")

	// Filters: a time range and a job id prefix.
	page, err = tb.store.ListDeadLetters(tb.ctx, "shop", analytics.DeadLetterQuery{Limit: 10, From: base.Add(time.Minute), To: base.Add(3 * time.Minute)})
	require.NoError(t, err)
	require.Equal(t, []uint64{3, 2}, []uint64{page[0].FireSeq, page[1].FireSeq})
	page, err = tb.store.ListDeadLetters(tb.ctx, "shop", analytics.DeadLetterQuery{Limit: 10, JobIDPrefix: "jo"})
	require.NoError(t, err)
	require.Len(t, page, 5)
	page, err = tb.store.ListDeadLetters(tb.ctx, "shop", analytics.DeadLetterQuery{Limit: 10, JobIDPrefix: "x"})
	require.NoError(t, err)
	require.Empty(t, page)

	_, err = tb.store.ListDeadLetters(tb.ctx, "shop", analytics.DeadLetterQuery{})
	require.ErrorIs(t, err, analytics.ErrInvalid)
}

// TestDeadLetterReplays records replays as the API does and reads them
// with the dead letters: each dead letter says whether it was replayed,
// when and as which job; a replay recorded twice (a retry, two API
// processes) reads as the first one, before and after ClickHouse merges
// the rows; the listing and the count filter on it; and it survives a new
// connection, as a restarted API makes.
func TestDeadLetterReplays(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	var b analytics.Batch
	for i := range 4 {
		b.AddDeadLetter(deadLetter("shop", "job", uint64(i+1), base.Add(time.Duration(i)*time.Minute)), analytics.Pos{Offset: int64(i)})
	}
	// Another namespace's dead letter under the same id as one of shop's
	// (ids are chime's, but the topic is open to any writer).
	other := deadLetter("other", "job", 1, base)
	other.EventId = "dl-shop-job-1"
	b.AddDeadLetter(other, analytics.Pos{Offset: 4})
	require.NoError(t, tb.store.Insert(tb.ctx, &b, "replays"))
	get := func(store *analytics.Store, ns, id string) *analytics.DeadLetter {
		t.Helper()
		d, err := store.GetDeadLetter(tb.ctx, ns, id)
		require.NoError(t, err)
		require.NotNil(t, d)
		return d
	}

	replay := func(d *analytics.DeadLetter, job string, at time.Time) *analytics.DeadLetter {
		d.Replay = &analytics.Replay{JobID: job, At: at}
		return d
	}
	d1 := get(tb.store, "shop", "dl-shop-job-1")
	require.Nil(t, d1.Replay, "not replayed yet")
	first := base.Add(time.Hour)
	require.NoError(t, tb.store.RecordReplays(tb.ctx, []*analytics.DeadLetter{replay(d1, "job.replay-1", first.Add(time.Second))}))
	require.NoError(t, tb.store.RecordReplays(tb.ctx, []*analytics.DeadLetter{
		replay(get(tb.store, "shop", "dl-shop-job-1"), "job.replay-1", first),
		replay(get(tb.store, "shop", "dl-shop-job-3"), "job.replay-3", first.Add(time.Minute)),
	}))
	require.Equal(t, &analytics.Replay{JobID: "job.replay-1", At: first}, get(tb.store, "shop", "dl-shop-job-1").Replay, "the first replay")
	require.Nil(t, get(tb.store, "other", "dl-shop-job-1").Replay, "another namespace's dead letter is not replayed by shop's replay")

	replayed := func(store *analytics.Store, q analytics.DeadLetterQuery) []string {
		t.Helper()
		q.Limit = 10
		page, err := store.ListDeadLetters(tb.ctx, "shop", q)
		require.NoError(t, err)
		n, err := store.CountDeadLetters(tb.ctx, "shop", q)
		require.NoError(t, err)
		require.Equal(t, len(page), n, "the count of %+v", q)
		var out []string
		for _, d := range page {
			s := d.ID
			if d.Replay != nil {
				s += " as " + d.Replay.JobID + " at " + d.Replay.At.Format(time.TimeOnly)
			}
			out = append(out, s)
		}
		return out
	}
	yes, no := true, false
	for _, tt := range []struct {
		q    analytics.DeadLetterQuery
		want []string
	}{
		{analytics.DeadLetterQuery{}, []string{"dl-shop-job-4", "dl-shop-job-3 as job.replay-3 at 11:01:00", "dl-shop-job-2", "dl-shop-job-1 as job.replay-1 at 11:00:00"}},
		{analytics.DeadLetterQuery{Replayed: &yes}, []string{"dl-shop-job-3 as job.replay-3 at 11:01:00", "dl-shop-job-1 as job.replay-1 at 11:00:00"}},
		{analytics.DeadLetterQuery{Replayed: &no}, []string{"dl-shop-job-4", "dl-shop-job-2"}},
		{analytics.DeadLetterQuery{Replayed: &no, From: base.Add(2 * time.Minute)}, []string{"dl-shop-job-4"}},
		{analytics.DeadLetterQuery{Replayed: &yes, To: base.Add(2 * time.Minute)}, []string{"dl-shop-job-1 as job.replay-1 at 11:00:00"}},
		{analytics.DeadLetterQuery{Replayed: &yes, JobIDPrefix: "x"}, nil},
	} {
		require.Equal(t, tt.want, replayed(tb.store, tt.q), "%+v", tt.q)
	}

	// Merged, the rows of one dead letter keep the first replay.
	require.NoError(t, tb.store.Conn().Exec(tb.ctx, "OPTIMIZE TABLE "+analytics.TableDeadLetterReplays+" FINAL"))
	require.Equal(t, uint64(2), count(t, tb, "SELECT count() FROM "+analytics.TableDeadLetterReplays))
	require.Equal(t, &analytics.Replay{JobID: "job.replay-1", At: first}, get(tb.store, "shop", "dl-shop-job-1").Replay)

	// A new connection (a restarted or another API process) reads the same.
	again, err := analytics.Open(tb.ctx, tb.dsn, analytics.Options{})
	require.NoError(t, err)
	defer again.Close()
	require.Equal(t, []string{"dl-shop-job-3 as job.replay-3 at 11:01:00", "dl-shop-job-1 as job.replay-1 at 11:00:00"}, replayed(again, analytics.DeadLetterQuery{Replayed: &yes}))

	require.ErrorIs(t, tb.store.RecordReplays(tb.ctx, []*analytics.DeadLetter{{Namespace: "shop", ID: "dl-x"}}), analytics.ErrInvalid)
}
