package jobquery_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/infra/groups"
	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/internal/lifecycle/lifecycletest"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/scheduler"
	"github.com/chime-sched/chime/processors/scheduler/jobindex"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views/jobquery"
)

// Integration tests: real scheduler instances on a real broker (kfake, or
// Apache Kafka under make test-kafka), each with its query server,
// advertising it in the group; the router finds them from the group's
// description.

const (
	testPartitions = 4
	testSecret     = "router-test-query-secret"
)

type bundle struct {
	t       *testing.T
	cluster *kafkatest.Cluster
	topics  schema.Topics
	prod    *producer.Producer
	router  *jobquery.Router
	// want is every job created, by namespace and id, with the status
	// it was left in.
	want map[string]map[string]chimev1.JobStatus
}

func setup(t *testing.T) *bundle {
	t.Helper()
	c := kafkatest.New(t)
	tt := c.Topics()
	c.Provision(t, tt, testPartitions)
	p, err := producer.New(producer.Brokers(c.Brokers()), producer.TopicPrefix(tt.Prefix))
	require.NoError(t, err)
	t.Cleanup(p.Close)
	r, err := jobquery.NewRouter(jobquery.RouterConfig{Admin: c.Admin(t), Group: tt.SchedulerGroup(), Topic: tt.JobCommands(),
		Partitions: testPartitions, Secret: testSecret, Logger: testLogger(t)})
	require.NoError(t, err)
	return &bundle{t: t, cluster: c, topics: tt, prod: p, router: r, want: map[string]map[string]chimev1.JobStatus{}}
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("CHIME_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("test", t.Name())
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// instance is one scheduler with its query server.
type instance struct {
	s    *scheduler.Scheduler
	addr string
	stop func()
}

// startInstance runs a scheduler instance with its query server until
// stop (or the end of the test), and waits until it is ready.
func (b *bundle) startInstance() *instance {
	t := b.t
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s, err := scheduler.New(scheduler.Config{
		Config: processors.Config{
			Client:     processors.Client{Brokers: b.cluster.Brokers(), Logger: testLogger(t)},
			Topics:     b.topics,
			Membership: groups.Membership{Advertise: ln.Addr().String()},
		},
		Namespaces: kafkatest.EveryNamespace{},
	})
	require.NoError(t, err)
	srv, err := jobquery.NewServer(jobquery.ServerConfig{Source: s, Partitions: testPartitions, Secret: testSecret, Logger: testLogger(t)})
	require.NoError(t, err)
	query := jobquery.Listen(srv, ln)
	lifecycletest.Start(t, s, query)
	stop := func() {
		query.Stop()
		s.Stop()
		require.NoError(t, query.Err())
		require.NoError(t, s.Err())
	}
	return &instance{s: s, addr: ln.Addr().String(), stop: stop}
}

// create schedules n one-shot jobs due tomorrow in ns, then pauses every
// fifth and cancels every seventh, and waits until the table shows them
// (read through the instances given, which own every partition between
// them).
func (b *bundle) create(ns string, n int, owners ...*instance) {
	t := b.t
	t.Helper()
	ctx := context.Background()
	at := timestamppb.New(time.Now().Add(24 * time.Hour))
	want := map[string]chimev1.JobStatus{}
	var specs []*chimev1.JobSpec
	for i := range n {
		id := fmt.Sprintf("%s-%03d", ns, i)
		specs = append(specs, &chimev1.JobSpec{Namespace: ns, Id: id, Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: at}},
			Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: "http://127.0.0.1:9/hook"}}}})
		want[id] = chimev1.JobStatus_JOB_STATUS_SCHEDULED
	}
	_, err := b.prod.ScheduleMany(ctx, specs)
	require.NoError(t, err)
	// Pause and cancel only once the jobs exist (they are rejected before).
	kafkatest.WaitFor(t, 60*time.Second, fmt.Sprintf("%d jobs of %s in the table", n, ns), func() bool {
		return len(localListing(ns, jobindex.Query{}, owners...)) == n
	})
	for i := range n {
		id := fmt.Sprintf("%s-%03d", ns, i)
		switch {
		case i%7 == 0:
			_, err = b.prod.Cancel(ctx, ns, id, "test")
			want[id] = chimev1.JobStatus_JOB_STATUS_CANCELLED
		case i%5 == 0:
			_, err = b.prod.Pause(ctx, ns, id)
			want[id] = chimev1.JobStatus_JOB_STATUS_PAUSED
		}
		require.NoError(t, err)
	}
	b.want[ns] = want
	kafkatest.WaitFor(t, 60*time.Second, "the pauses and cancels in the table", func() bool {
		for _, e := range localListing(ns, jobindex.Query{}, owners...) {
			if want[e.ID] != e.Status {
				return false
			}
		}
		return true
	})
}

// localListing is the namespace's whole listing as the instances' own
// indexes hold it, merged: the truth the router's answers are held to.
func localListing(ns string, q jobindex.Query, owners ...*instance) []jobindex.Entry {
	q.Limit = 1 << 20
	var all []jobindex.Entry
	for _, o := range owners {
		es, _ := o.s.ListJobs(ns, q)
		all = append(all, es...)
	}
	slices.SortFunc(all, jobindex.Compare)
	return all
}

// live is the namespace's jobs that have not ended, as created.
func (b *bundle) live(ns string) int64 {
	var n int64
	for _, st := range b.want[ns] {
		if !schema.JobEnded(st) {
			n++
		}
	}
	return n
}

// settled waits until the instances own every partition between them,
// each some, all ready.
func settled(t *testing.T, what string, owners ...*instance) {
	t.Helper()
	kafkatest.WaitFor(t, 2*time.Minute, what, func() bool {
		var all []int32
		for _, o := range owners {
			ps := o.s.Partitions()
			if len(ps) == 0 || o.s.Ready() != nil {
				return false
			}
			all = append(all, ps...)
		}
		slices.Sort(all)
		return slices.Equal(all, []int32{0, 1, 2, 3})
	})
}

// served is the partitions the instance serves now, sorted.
func served(o *instance) []int32 {
	ps, _ := o.s.Serving()
	return slices.Sorted(slices.Values(ps))
}

// walk reads the whole listing page by page through the router.
func walk(r *jobquery.Router, ns string, q jobindex.Query) ([]jobindex.Entry, error) {
	var all []jobindex.Entry
	for range 1000 {
		page, more, err := r.ListJobs(ns, q, nil)
		if err != nil {
			return nil, err
		}
		for _, j := range page {
			if j.Row == nil || j.Row.GetSpec().GetId() != j.ID || j.Row.GetStatus() != j.Status {
				return nil, fmt.Errorf("job %s listed with the row %v", j.ID, j.Row)
			}
			all = append(all, j.Entry)
		}
		if !more {
			return all, nil
		}
		if len(page) == 0 {
			return nil, fmt.Errorf("an empty page says more follow")
		}
		q.After = jobindex.CursorAt(page[len(page)-1].Entry)
	}
	return nil, fmt.Errorf("more than 1000 pages")
}

func ids(es []jobindex.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// TestRouterReadsAcrossOwners: with the partitions split between two
// scheduler instances, the router's rows, listing pages (order, cursor,
// state filter) and live counts are exactly the table's.
func TestRouterReadsAcrossOwners(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.startInstance()
	b.create("a", 60, a)
	b.create("b", 9, a)
	c := b.startInstance()
	settled(t, "two instances sharing the partitions", a, c)
	truth := localListing("a", jobindex.Query{}, a, c)
	require.Len(t, truth, 60)

	// The reads are retried while the group's description catches up
	// with the assignment (the group was described before the rebalance).
	kafkatest.WaitFor(t, time.Minute, "the router to answer", func() bool {
		_, err := b.router.LiveJobs("a", nil)
		return err == nil
	})

	for _, tc := range []struct {
		name string
		q    jobindex.Query
		want func(jobindex.Entry) bool
	}{
		{"pages of 1", jobindex.Query{Limit: 1}, nil},
		{"pages of 7", jobindex.Query{Limit: 7}, nil},
		{"one page", jobindex.Query{Limit: 500}, nil},
		{"paused", jobindex.Query{Limit: 4, Statuses: []chimev1.JobStatus{chimev1.JobStatus_JOB_STATUS_PAUSED}},
			func(e jobindex.Entry) bool { return e.Status == chimev1.JobStatus_JOB_STATUS_PAUSED }},
		{"paused or cancelled", jobindex.Query{Limit: 5, Statuses: []chimev1.JobStatus{chimev1.JobStatus_JOB_STATUS_CANCELLED, chimev1.JobStatus_JOB_STATUS_PAUSED}},
			func(e jobindex.Entry) bool { return e.Status != chimev1.JobStatus_JOB_STATUS_SCHEDULED }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := truth
			if tc.want != nil {
				want = slices.DeleteFunc(slices.Clone(truth), func(e jobindex.Entry) bool { return !tc.want(e) })
			}
			got, err := walk(b.router, "a", tc.q)
			require.NoError(t, err)
			require.Equal(t, ids(want), ids(got), "every job once, newest first")
			require.Equal(t, want, got)
		})
	}
	// A cursor from the middle goes on where it left off.
	page, more, err := b.router.ListJobs("a", jobindex.Query{Limit: 10, After: jobindex.CursorAt(truth[24])}, nil)
	require.NoError(t, err)
	require.True(t, more)
	require.Len(t, page, 10)
	require.Equal(t, truth[25].ID, page[0].ID)

	for ns, want := range b.want {
		n, err := b.router.LiveJobs(ns, nil)
		require.NoError(t, err)
		require.Equal(t, b.live(ns), n, "live jobs of %s", ns)
		var names []string
		for id := range want {
			names = append(names, id)
		}
		rows, _, err := b.router.Rows(ns, append(names, "no-such-job"))
		require.NoError(t, err)
		for i, id := range names {
			require.Equal(t, id, rows[i].GetSpec().GetId())
			require.Equal(t, want[id], rows[i].GetStatus(), "job %s", id)
		}
		require.Nil(t, rows[len(names)], "a job that does not exist has no row")
	}
	n, err := b.router.LiveJobs("nobody", nil)
	require.NoError(t, err)
	require.Zero(t, n)
	row, _, err := b.router.Get("a", "a-001")
	require.NoError(t, err)
	require.Equal(t, "a-001", row.GetSpec().GetId())
	row, _, err = b.router.Get("a", "missing")
	require.NoError(t, err)
	require.Nil(t, row)
	for _, e := range truth {
		require.Equal(t, b.want["a"][e.ID], e.Status, "the index and the commands agree on %s", e.ID)
	}
}

// sharedByTwo is a bundle whose partitions two scheduler instances share,
// once the router answers.
func sharedByTwo(t *testing.T) *bundle {
	t.Helper()
	b := setup(t)
	a := b.startInstance()
	c := b.startInstance()
	settled(t, "two instances sharing the partitions", a, c)
	kafkatest.WaitFor(t, time.Minute, "the router to answer", func() bool {
		_, err := b.router.LiveJobs("any", nil)
		return err == nil
	})
	return b
}

// tomorrow is a one-shot job due in a day.
func tomorrow(ns, id string) *chimev1.JobSpec {
	return &chimev1.JobSpec{Namespace: ns, Id: id, Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(time.Now().Add(24 * time.Hour))}},
		Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: "http://127.0.0.1:9/hook"}}}}
}

// TestRowsSayHowFarTheyApplied: a row read says how far its partition had
// applied the job commands, and a command at or below that shows in the
// row (the API's read-your-writes retires its memory on it). Read while
// the commands are on their way, every answer holds to that, and each
// command's partition gets there.
func TestRowsSayHowFarTheyApplied(t *testing.T) {
	t.Parallel()
	b := sharedByTwo(t)
	ctx := context.Background()
	receipts := map[string]producer.Receipt{}
	for i := range 20 {
		id := fmt.Sprintf("r-%02d", i)
		r, err := b.prod.Schedule(ctx, tomorrow("r", id))
		require.NoError(t, err)
		receipts[id] = r
	}
	ids := slices.Sorted(maps.Keys(receipts))
	kafkatest.WaitFor(t, time.Minute, "every partition to reach its commands", func() bool {
		rows, reached, err := b.router.Rows("r", ids)
		require.NoError(t, err)
		all := true
		for i, id := range ids {
			r := receipts[id]
			off, ok := reached[r.Partition]
			if !ok || off < r.Offset {
				all = false
				continue
			}
			require.Equal(t, r.CommandID, rows[i].GetLastCommandId(), "%s: partition %d reached %d, at or past its command's %d", id, r.Partition, off, r.Offset)
		}
		return all
	})
}

// TestRouterReadsItsWrites: a listing or a count carrying the offsets of
// the commands just published shows them: 20 creates each followed at
// once by a listing list every one, and a pause and a cancel show at
// once in the state filters and the live count. Without the offsets the
// owners answer from wherever they are.
func TestRouterReadsItsWrites(t *testing.T) {
	t.Parallel()
	b := sharedByTwo(t)
	ctx := context.Background()
	after := jobquery.Offsets{}
	published := func(r producer.Receipt, err error) {
		t.Helper()
		require.NoError(t, err)
		after.Add(r.Partition, r.Offset)
	}
	listed := func(q jobindex.Query) []string {
		t.Helper()
		q.Limit = 100
		page, _, err := b.router.ListJobs("w", q, after)
		require.NoError(t, err)
		var ids []string
		for _, j := range page {
			ids = append(ids, j.ID)
		}
		slices.Sort(ids)
		return ids
	}
	var want []string
	for i := range 20 {
		id := fmt.Sprintf("w-%02d", i)
		published(b.prod.Schedule(ctx, tomorrow("w", id)))
		want = append(want, id)
		require.Equal(t, want, listed(jobindex.Query{}), "the listing right after create %d", i+1)
	}
	n, err := b.router.LiveJobs("w", after)
	require.NoError(t, err)
	require.EqualValues(t, 20, n)

	published(b.prod.Pause(ctx, "w", "w-03"))
	require.Equal(t, []string{"w-03"}, listed(jobindex.Query{Statuses: []chimev1.JobStatus{chimev1.JobStatus_JOB_STATUS_PAUSED}}), "paused, at once")
	published(b.prod.Cancel(ctx, "w", "w-07", "test"))
	require.Equal(t, []string{"w-07"}, listed(jobindex.Query{Statuses: []chimev1.JobStatus{chimev1.JobStatus_JOB_STATUS_CANCELLED}}), "cancelled, at once")
	n, err = b.router.LiveJobs("w", after)
	require.NoError(t, err)
	require.EqualValues(t, 19, n, "the cancel counted at once")
}
