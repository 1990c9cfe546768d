package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/internal/lifecycle"
	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/processors/scheduler"
	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// The kill can land after Kafka stored a fire's row and before it stored
// the fire's due event or Kafka-target write (two writes to two partitions,
// not atomic): the restarted scheduler recovers a row that says "fired",
// and the replayed tick finds nothing due. Under load this hits a few to
// hundreds of the fires in flight at the kill in about one run in five.
// The restarted scheduler is a new incarnation: it ticks every row that
// holds a fire or write of the old one at once and emits it again
// (JobState.recover_at). The helper keeps the default AckTimeout (2 min)
// and ConfirmAfter (3 min), and the test's deadline is shorter than both,
// so only that path can make it pass.
const restartDeadline = 90 * time.Second

// TestSchedulerProcessHelper is not a test: it is the scheduler process
// that TestKilledSchedulerLosesNothing starts and kills with SIGKILL. It is
// wired as `chime scheduler` wires LevelDB storage (cmd/chime/roles.go):
// through Config.LocalState, so a processor restarted inside the process
// wipes the cache as well.
func TestSchedulerProcessHelper(t *testing.T) {
	if os.Getenv("CHIME_SCHEDULER_HELPER") != "1" {
		t.Skip("helper process for TestKilledSchedulerLosesNothing")
	}
	local, err := scheduler.OpenLocalState(os.Getenv("CHIME_STORAGE_DIR"), testLogger(t))
	require.NoError(t, err)
	s, err := scheduler.New(scheduler.Config{
		Config: processors.Config{
			Client: processors.Client{Brokers: strings.Split(os.Getenv("CHIME_BROKERS"), ","), Logger: testLogger(t)},
			Topics: schema.NewTopics(os.Getenv("CHIME_TOPIC_PREFIX")),
		},
		LocalState:        local,
		TickResend:        2 * time.Second,
		KafkaTargetTopics: []string{os.Getenv("CHIME_TARGET_TOPIC")},
		Namespaces:        kafkatest.EveryNamespace{},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// SIGTERM stops it cleanly: the store is closed, its writes on disk.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	go func() {
		if err := lifecycle.Wait(ctx, s); err == nil {
			fmt.Println("scheduler-ready")
		}
	}()
	if f := os.Getenv("CHIME_STATUS_FILE"); f != "" {
		go writeStatus(ctx, f, s)
	}
	require.NoError(t, s.Start(ctx))
	<-s.Stopped()
	require.NoError(t, local.Close())
}

// helperStatus is what a scheduler helper process reports of itself.
type helperStatus struct {
	PID   int  `json:"pid"`
	Ready bool `json:"ready"`
	// Has: the row of ns/j0 is readable.
	Has       bool  `json:"has"`
	Pending   int   `json:"pending"`
	Stored    int   `json:"stored"`
	Recovered int64 `json:"recovered"`
}

// writeStatus rewrites path with the process's status every 20 ms.
func writeStatus(ctx context.Context, path string, s *scheduler.Scheduler) {
	for ctx.Err() == nil {
		ready := s.Ready() == nil
		row, _ := s.Get("ns/j0")
		b, _ := json.Marshal(helperStatus{PID: os.Getpid(), Ready: ready, Has: row != nil, Pending: s.PendingTimers(), Stored: s.StoredTimers(), Recovered: s.RecoveredRecords()})
		if os.WriteFile(path+".tmp", b, 0o600) == nil {
			_ = os.Rename(path+".tmp", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readStatus reads a helper's last status (zero if none yet).
func readStatus(path string) helperStatus {
	var st helperStatus
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &st)
	}
	return st
}

func startHelper(t *testing.T, b *bundle, storageDir string, env ...string) *exec.Cmd {
	t.Helper()
	return kafkatest.StartHelperProcess(t, "TestSchedulerProcessHelper", "scheduler-ready", append([]string{
		"CHIME_SCHEDULER_HELPER=1",
		"CHIME_BROKERS=" + strings.Join(b.cluster.Brokers(), ","),
		"CHIME_TOPIC_PREFIX=" + b.topics.Prefix,
		"CHIME_STORAGE_DIR=" + storageDir,
		"CHIME_TARGET_TOPIC=" + b.topics.Prefix + "app.events",
	}, env...)...)
}

// TestRestartReadsOnlyTheTail: the scheduler's store on disk keeps the
// changelog offset its rows stand at, in the same atomic write as the
// rows, and holds nothing Kafka has not confirmed. A scheduler killed with
// SIGKILL and restarted on it reads only the changelog records after that
// offset, not the table; a store that is lost or does not open is rebuilt
// from the whole changelog. Every pending job is there each time.
func TestRestartReadsOnlyTheTail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := filepath.Join(t.TempDir(), "scheduler")
	status := filepath.Join(t.TempDir(), "status.json")
	proc := startHelper(t, b, dir, "CHIME_STATUS_FILE="+status)

	const jobs = 3000
	later := time.Now().Add(time.Hour)
	specs := make([]*chimev1.JobSpec, jobs)
	for i := range specs {
		specs[i] = spec("ns", fmt.Sprintf("p%04d", i), atSchedule(later.Add(time.Duration(i)*time.Millisecond)))
	}
	_, err := b.prod.ScheduleMany(context.Background(), specs)
	require.NoError(t, err)
	running := func(p *exec.Cmd, what string) helperStatus {
		var st helperStatus
		waitFor(t, 60*time.Second, what, func() bool {
			st = readStatus(status)
			return st.PID == p.Process.Pid && st.Stored == jobs
		})
		return st
	}
	first := running(proc, "every job applied to the store")
	t.Logf("first start: %d changelog records recovered, %d pending", first.Recovered, first.Pending)

	restart := func(what string, before func()) helperStatus {
		t.Helper()
		require.NoError(t, proc.Process.Signal(syscall.SIGKILL))
		_ = proc.Wait()
		before()
		proc = startHelper(t, b, dir, "CHIME_STATUS_FILE="+status)
		st := running(proc, what)
		t.Logf("%s: %d changelog records recovered, %d pending", what, st.Recovered, st.Pending)
		return st
	}
	tail := restart("restarted after kill -9", func() {})
	require.Less(t, tail.Recovered, int64(jobs/10), "only the tail is read, not the table")

	lost := restart("restarted with its store lost", func() { require.NoError(t, os.RemoveAll(dir)) })
	require.GreaterOrEqual(t, lost.Recovered, int64(jobs), "rebuilt from the whole changelog")

	corrupt := restart("restarted with its store corrupt", func() {
		manifests, err := filepath.Glob(filepath.Join(dir, "table", "MANIFEST-*"))
		require.NoError(t, err)
		require.NotEmpty(t, manifests)
		for _, m := range manifests {
			require.NoError(t, os.WriteFile(m, []byte("not a manifest"), 0o600))
		}
	})
	require.GreaterOrEqual(t, corrupt.Recovered, int64(jobs), "rebuilt from the whole changelog")
}

// TestKilledSchedulerLosesNothing kills the scheduler process with SIGKILL
// while jobs are firing, restarts it on the same LevelDB storage, and
// checks that every job fires and that repeats carry the same fire_seq.
//
// Timeline: the restarted process joins the group only once the broker has
// expired the killed member's session (10 s); then it recovers the table
// from Kafka (the LevelDB cache is wiped), fires what is due and, within
// failoverAckTimeout, redelivers what the kill lost (see failoverAckTimeout).
// Every job has fired within a few seconds of the restart; the deadline
// below is only for a badly overloaded machine.
func TestKilledSchedulerLosesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	writes := kafkatest.Collect(t, b.cluster.Brokers(), b.targetTopic(), func(r *kgo.Record) (string, []byte) { return string(r.Key), r.Value })
	storageDir := filepath.Join(t.TempDir(), "scheduler")
	proc := startHelper(t, b, storageDir)

	// HTTP jobs (due events) and Kafka-target jobs (written by the
	// scheduler itself), interleaved 1 ms apart: the kill lands in the
	// middle of a stream of both.
	const jobs, kafkaJobs = 2000, 500
	start := time.Now().Add(3 * time.Second)
	specs := make([]*chimev1.JobSpec, 0, jobs+kafkaJobs)
	for i := range jobs {
		specs = append(specs, spec("ns", fmt.Sprintf("j%04d", i), atSchedule(start.Add(time.Duration(i)*time.Millisecond))))
		if i%4 == 0 {
			k := spec("ns", fmt.Sprintf("k%04d", i/4), atSchedule(start.Add(time.Duration(i)*time.Millisecond)))
			k.Target = &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{
				Topic: b.topics.Prefix + "app.events", Key: []byte(k.Id), Value: []byte("fired"),
			}}}
			specs = append(specs, k)
		}
	}
	_, err := b.prod.ScheduleMany(context.Background(), specs)
	require.NoError(t, err)
	waitFor(t, 30*time.Second, "some fires before the kill", func() bool { return b.dues.Keys() >= 300 })
	require.NoError(t, proc.Process.Signal(syscall.SIGKILL))
	_ = proc.Wait()
	killed := time.Now()
	firedBefore, writtenBefore := b.dues.Keys(), writes.Keys()

	startHelper(t, b, storageDir)
	ready := time.Now()
	t.Logf("before the kill: %d of %d HTTP jobs fired, %d of %d Kafka-target jobs written; restarted scheduler ready %s after the kill",
		firedBefore, jobs, writtenBefore, kafkaJobs, ready.Sub(killed).Round(time.Millisecond))
	missing := func(n int, key func(int) string, seen func(string) bool) []string {
		var out []string
		for i := range n {
			if k := key(i); !seen(k) {
				out = append(out, k)
			}
		}
		return out
	}
	httpKey := func(i int) string { return fmt.Sprintf("ns/j%04d", i) }
	kafkaKey := func(i int) string { return fmt.Sprintf("k%04d", i) }
	for deadline := ready.Add(restartDeadline); b.dues.Keys() < jobs || writes.Keys() < kafkaJobs; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			mh := missing(jobs, httpKey, func(k string) bool { return len(b.dues.Get(k)) > 0 })
			mk := missing(kafkaJobs, kafkaKey, func(k string) bool { return len(writes.Get(k)) > 0 })
			t.Fatalf("within %s of the restart, %d of %d HTTP jobs never fired (first: %v) and %d of %d Kafka-target jobs were never written (first: %v)",
				restartDeadline, len(mh), jobs, mh[:min(len(mh), 20)], len(mk), kafkaJobs, mk[:min(len(mk), 20)])
		}
	}
	t.Logf("every job fired %s after the restart; due events: %d, Kafka-target writes: %d (repeats included)",
		time.Since(ready).Round(time.Millisecond), b.dues.Count(), writes.Count())
	for i := range jobs {
		for _, d := range b.dues.Get(httpKey(i)) {
			require.EqualValues(t, 1, d.FireSeq, "a repeat carries the same fire_seq")
			require.EqualValues(t, 1, d.Attempt)
		}
	}
}

// TestTwoInstancesShareTheWork: two schedulers in one group cover all
// partitions and emit each fire once; stopping one hands its partitions to
// the other, whose pump then fires its jobs.
func TestTwoInstancesShareTheWork(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, stopA := b.startScheduler()
	c, _ := b.startScheduler()

	owned := func(ss ...*scheduler.Scheduler) []int32 {
		var ps []int32
		for _, s := range ss {
			ps = append(ps, s.Partitions()...)
		}
		slices.Sort(ps)
		return ps
	}
	all := []int32{0, 1, 2, 3}
	waitFor(t, 60*time.Second, "both instances to own partitions", func() bool {
		return len(a.Partitions()) > 0 && len(c.Partitions()) > 0 && slices.Equal(owned(a, c), all)
	})

	const jobs = 200
	ownedA, ownedC := slices.Sorted(slices.Values(a.Partitions())), slices.Sorted(slices.Values(c.Partitions()))
	start := time.Now().Add(2 * time.Second)
	for i := range jobs {
		b.schedule(spec("ns", fmt.Sprintf("steady%03d", i), atSchedule(start.Add(time.Duration(i)*5*time.Millisecond))))
	}
	waitFor(t, 30*time.Second, "steady-state fires", func() bool { return b.dues.Keys() == jobs })
	// Give duplicates, if any, time to show up: wait for a later marker.
	b.schedule(spec("ns", "marker", atSchedule(time.Now().Add(3*time.Second))))
	waitFor(t, 30*time.Second, "marker", func() bool { return len(b.dues.Get("ns/marker")) == 1 })
	// A partition that changed owner meanwhile (a late rebalance of the
	// group) has its open fires emitted again by the new owner, by design
	// (nobody acks them here): "once" holds only if no partition moved.
	if slices.Equal(ownedA, slices.Sorted(slices.Values(a.Partitions()))) && slices.Equal(ownedC, slices.Sorted(slices.Values(c.Partitions()))) {
		for i := range jobs {
			require.Len(t, b.dues.Get(fmt.Sprintf("ns/steady%03d", i)), 1, "each fire emitted once in steady state")
		}
	} else {
		t.Logf("partitions moved during the steady phase (%v/%v → %v/%v); not checking for repeats", ownedA, ownedC, a.Partitions(), c.Partitions())
	}
	for i := range jobs {
		for _, d := range b.dues.Get(fmt.Sprintf("ns/steady%03d", i)) {
			require.EqualValues(t, 1, d.FireSeq, "a repeat is the same fire")
		}
	}

	// Jobs due after A is gone.
	later := time.Now().Add(4 * time.Second)
	for i := range jobs {
		b.schedule(spec("ns", fmt.Sprintf("handover%03d", i), atSchedule(later.Add(time.Duration(i)*5*time.Millisecond))))
	}
	stopA()
	waitFor(t, 60*time.Second, "the survivor to own every partition", func() bool { return slices.Equal(owned(c), all) })
	waitFor(t, 60*time.Second, "handed-over jobs to fire", func() bool { return b.dues.Keys() == 2*jobs+1 })
}

// TestStoreFollowsTheChangelog: a scheduler restarted on its store after
// the changelog it was built from is gone (the topics deleted and created
// again, as chime's startup error advises on a mismatch; another partition
// count; another topic prefix on the same state dir) serves none of the
// old rows: the store is rebuilt from what Kafka holds now.
func TestStoreFollowsTheChangelog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dir := filepath.Join(t.TempDir(), "scheduler")
	status := filepath.Join(t.TempDir(), "status.json")
	const jobs = 5
	later := time.Now().Add(time.Hour)
	schedule := func(b *bundle) {
		t.Helper()
		for i := range jobs {
			_, err := b.prod.Schedule(context.Background(), spec("ns", fmt.Sprintf("j%d", i), atSchedule(later)))
			require.NoError(t, err)
		}
	}
	schedule(b)
	proc := startHelper(t, b, dir, "CHIME_STATUS_FILE="+status)
	waitFor(t, 60*time.Second, "every job in the store", func() bool { return readStatus(status).Pending == jobs })

	restart := func(what string, b *bundle, change func()) {
		t.Helper()
		// A clean stop: a kill -9 may lose the store's last writes (Pebble
		// writes without syncing), and a store behind is no test.
		require.NoError(t, proc.Process.Signal(syscall.SIGTERM))
		require.NoError(t, proc.Wait())
		change()
		proc = startHelper(t, b, dir, "CHIME_STATUS_FILE="+status)
		// Ready: every partition recovered; give the status a moment to
		// be written by the new process.
		var st helperStatus
		waitFor(t, 30*time.Second, what+": the new process ready", func() bool {
			st = readStatus(status)
			return st.PID == proc.Process.Pid && st.Ready
		})
		require.Zero(t, st.Pending, "%s: rows of the old changelog are served", what)
		require.False(t, st.Has, "%s: a row of the old changelog is read", what)
		schedule(b)
		waitFor(t, 60*time.Second, what+": the jobs created again", func() bool { return readStatus(status).Pending == jobs })
	}
	recreate := func(partitions int32) func() {
		return func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			adm := b.cluster.Admin(t)
			var names []string
			for _, spec := range b.topics.All() {
				names = append(names, spec.Name)
			}
			_, err := adm.DeleteTopics(ctx, names...)
			require.NoError(t, err)
			// A real cluster deletes topics in the background.
			waitFor(t, 60*time.Second, "the topics deleted", func() bool {
				td, err := adm.ListTopics(ctx, names...)
				if err != nil {
					return false
				}
				for _, d := range td {
					if d.Err == nil {
						return false
					}
				}
				return true
			})
			b.cluster.Provision(t, b.topics, partitions)
			// The producer knew the old topics' IDs.
			p, err := producer.New(producer.Brokers(b.cluster.Brokers()), producer.TopicPrefix(b.topics.Prefix))
			require.NoError(t, err)
			t.Cleanup(p.Close)
			b.prod = p
		}
	}
	restart("topics deleted and created again", b, recreate(testPartitions))
	restart("another partition count", b, recreate(testPartitions+1))

	other := &bundle{t: t, cluster: b.cluster, topics: schema.NewTopics(b.topics.Prefix + "x.")}
	b.cluster.Provision(t, other.topics, testPartitions)
	p, err := producer.New(producer.Brokers(b.cluster.Brokers()), producer.TopicPrefix(other.topics.Prefix))
	require.NoError(t, err)
	t.Cleanup(p.Close)
	other.prod = p
	restart("another topic prefix on the same state dir", other, func() {})
}
