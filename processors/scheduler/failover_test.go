package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/infra/kafkatest"
	"github.com/chime-sched/chime/processors/scheduler"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// failoverAckTimeout is the helper scheduler's AckTimeout. A kill can land
// after Kafka stored a fire's row and before it stored the fire's due event
// (two writes to two partitions, not atomic): the restarted scheduler
// recovers a row that says "fired", the replayed tick finds nothing due, and
// only redelivery after AckTimeout emits the due event again (with the same
// fire_seq; docs/guarantees.md, "What survives kill -9"). Under load this
// hits a few to hundreds of the fires in flight at the kill in about one run
// in five; with the default 2 min the test then took ~2 min and passed
// only ~40 s inside its deadline. A short AckTimeout lets that documented
// path finish within seconds of the restart.
const failoverAckTimeout = 5 * time.Second

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
		Brokers:    strings.Split(os.Getenv("CHIME_BROKERS"), ","),
		Topics:     schema.NewTopics(os.Getenv("CHIME_TOPIC_PREFIX")),
		LocalState: local,
		Logger:     testLogger(t),
		TickResend: 2 * time.Second,
		AckTimeout: failoverAckTimeout,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	go func() {
		if err := s.WaitReady(ctx); err == nil {
			fmt.Println("scheduler-ready")
		}
	}()
	_ = s.Run(ctx)
	require.NoError(t, local.Close())
}

func startHelper(t *testing.T, b *bundle, storageDir string) *exec.Cmd {
	t.Helper()
	return kafkatest.StartHelperProcess(t, "TestSchedulerProcessHelper", "scheduler-ready",
		"CHIME_SCHEDULER_HELPER=1",
		"CHIME_BROKERS="+strings.Join(b.cluster.Brokers(), ","),
		"CHIME_TOPIC_PREFIX="+b.topics.Prefix,
		"CHIME_STORAGE_DIR="+storageDir,
	)
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
	storageDir := filepath.Join(t.TempDir(), "scheduler")
	proc := startHelper(t, b, storageDir)

	const jobs = 2000
	start := time.Now().Add(3 * time.Second)
	specs := make([]*chimev1.JobSpec, jobs)
	for i := range jobs {
		// 1 ms apart: the kill lands in the middle of a stream of fires.
		specs[i] = spec("ns", fmt.Sprintf("j%04d", i), atSchedule(start.Add(time.Duration(i)*time.Millisecond)))
	}
	_, err := b.prod.ScheduleMany(context.Background(), specs)
	require.NoError(t, err)
	waitFor(t, 30*time.Second, "some fires before the kill", func() bool { return b.dues.Keys() >= 300 })
	require.NoError(t, proc.Process.Signal(syscall.SIGKILL))
	_ = proc.Wait()
	killed := time.Now()
	firedBefore := b.dues.Keys()

	startHelper(t, b, storageDir)
	ready := time.Now()
	t.Logf("fired before the kill: %d of %d; restarted scheduler ready %s after the kill",
		firedBefore, jobs, ready.Sub(killed).Round(time.Millisecond))
	const within = 150 * time.Second
	for deadline := ready.Add(within); b.dues.Keys() < jobs; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			var missing []string
			for i := range jobs {
				if k := fmt.Sprintf("ns/j%04d", i); len(b.dues.Get(k)) == 0 {
					missing = append(missing, k)
				}
			}
			n := len(missing)
			t.Fatalf("%d of %d jobs never fired within %s of the restart (%d fired before the kill); first missing: %v",
				n, jobs, within, firedBefore, missing[:min(n, 20)])
		}
	}
	t.Logf("every job fired %s after the restart; total due events: %d (redeliveries included)",
		time.Since(ready).Round(time.Millisecond), b.dues.Count())
	for i := range jobs {
		for _, d := range b.dues.Get(fmt.Sprintf("ns/j%04d", i)) {
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
	start := time.Now().Add(2 * time.Second)
	for i := range jobs {
		b.schedule(spec("ns", fmt.Sprintf("steady%03d", i), atSchedule(start.Add(time.Duration(i)*5*time.Millisecond))))
	}
	waitFor(t, 30*time.Second, "steady-state fires", func() bool { return b.dues.Keys() == jobs })
	// Give duplicates, if any, time to show up: wait for a later marker.
	b.schedule(spec("ns", "marker", atSchedule(time.Now().Add(3*time.Second))))
	waitFor(t, 30*time.Second, "marker", func() bool { return len(b.dues.Get("ns/marker")) == 1 })
	for i := range jobs {
		require.Len(t, b.dues.Get(fmt.Sprintf("ns/steady%03d", i)), 1, "each fire emitted once in steady state")
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
