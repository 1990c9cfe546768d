package jobstore

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/internal/clocktest"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// cached opens a store with the write cache as the scheduler runs it
// (MaxHold 30 s), a fake Kafka and a clock.
func cached(t *testing.T, mutate ...func(*Options)) (*DB, *Partition, *fakeKafka, *clocktest.Clock) {
	t.Helper()
	clock := clocktest.New(t0)
	db := open(t, "", append([]func(*Options){func(o *Options) { o.Now, o.MaxHold = clock.Now, 30*time.Second }}, mutate...)...)
	t.Cleanup(func() { _ = db.Close() })
	part := recovered(t, db, 0)
	v, _ := kafkas.Load(db)
	return db, part, v.(*fakeKafka), clock
}

func sentKeys(f *fakeKafka) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys []string
	for _, r := range f.sent {
		keys = append(keys, r.key)
	}
	return keys
}

// TestWritesFoldWhileTheyMayChange: a row that will change within MaxHold
// (a timer before then, a fire awaiting its answer) waits, dirty, and the
// writes that follow fold into it: a job created, fired and settled costs
// one changelog record. Its input stays held back from the commit until
// the record is stored.
func TestWritesFoldWhileTheyMayChange(t *testing.T) {
	t.Parallel()
	_, part, kafka, clock := cached(t)
	var durable atomic.Int32
	part.db.OnDurable(func(int32) { durable.Add(1) })

	// Created, due in 15 s.
	part.SetInput(100)
	require.NoError(t, part.Set("ns/a", row(t, sched, t0, t0.Add(15*time.Second))))
	part.SetInput(-1)
	part.produceDue()
	require.Empty(t, sentKeys(kafka), "a row that will fire soon waits")
	require.EqualValues(t, 100, part.Hold(), "its command is not committed")

	// Fired at 15 s (a tick: no input), its fire awaiting an answer.
	clock.Set(t0.Add(15 * time.Second))
	fired := &chimev1.JobState{Status: sched, CreatedAt: timestamppb.New(t0), TimerAt: timestamppb.New(t0.Add(135 * time.Second)), RecoverAt: timestamppb.New(t0.Add(15 * time.Second))}
	raw, err := schema.JobStateCodec{}.Encode(fired)
	require.NoError(t, err)
	require.NoError(t, part.Set("ns/a", raw))
	part.produceDue()
	require.Empty(t, sentKeys(kafka), "a fire awaiting its answer waits")

	// Settled by the answer (input 101): completed, kept 7 days.
	part.SetInput(101)
	require.NoError(t, part.Set("ns/a", row(t, chimev1.JobStatus_JOB_STATUS_COMPLETED, t0, t0.Add(7*24*time.Hour))))
	part.SetInput(-1)
	part.produceDue()
	require.Equal(t, []string{"ns/a"}, sentKeys(kafka), "one record for the three writes")
	require.EqualValues(t, 100, part.Hold())
	kafka.last().Stored(0)
	require.Eventually(t, func() bool { return durable.Load() > 0 }, 5*time.Second, time.Millisecond)
	require.EqualValues(t, -1, part.Hold(), "both commands may be committed")
	require.NoError(t, part.flush())
	v, err := get(part.db.pdb, rowKey(0, "ns/a"))
	require.NoError(t, err)
	got, err := schema.JobStateCodec{}.Decode(v)
	require.NoError(t, err)
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_COMPLETED, got.(*chimev1.JobState).Status)
}

// TestDirtyRowsAreProducedInTime: a stable row goes at once; a changing
// one after MaxHold at the latest, or when the dirty rows pass
// MaxDirtyBytes (the oldest first), or when the partition closes.
func TestDirtyRowsAreProducedInTime(t *testing.T) {
	t.Parallel()
	t.Run("stable", func(t *testing.T) {
		t.Parallel()
		_, part, kafka, _ := cached(t)
		require.NoError(t, part.Set("ns/later", row(t, sched, t0, t0.Add(time.Hour))))
		part.produceDue()
		require.Equal(t, []string{"ns/later"}, sentKeys(kafka))
	})
	t.Run("after MaxHold", func(t *testing.T) {
		t.Parallel()
		_, part, kafka, clock := cached(t)
		require.NoError(t, part.Set("ns/soon", row(t, sched, t0, t0.Add(10*time.Second))))
		clock.Set(t0.Add(29 * time.Second))
		part.produceDue()
		require.Empty(t, sentKeys(kafka))
		clock.Set(t0.Add(30 * time.Second))
		part.produceDue()
		require.Equal(t, []string{"ns/soon"}, sentKeys(kafka))
	})
	t.Run("over MaxDirtyBytes", func(t *testing.T) {
		t.Parallel()
		one := len(row(t, sched, t0, t0.Add(time.Second)))
		_, part, kafka, _ := cached(t, func(o *Options) { o.MaxDirtyBytes = 2 * one })
		for _, k := range []string{"ns/a", "ns/b", "ns/c"} {
			require.NoError(t, part.Set(k, row(t, sched, t0, t0.Add(time.Second))))
		}
		part.produceDue()
		require.Equal(t, []string{"ns/a"}, sentKeys(kafka), "the oldest, until the rest fit")
	})
	t.Run("on close", func(t *testing.T) {
		t.Parallel()
		db, part, kafka, _ := cached(t)
		require.NoError(t, part.Set("ns/soon", row(t, sched, t0, t0.Add(10*time.Second))))
		go func() {
			require.Eventually(t, func() bool { return len(sentKeys(kafka)) == 1 }, 5*time.Second, time.Millisecond)
			kafka.last().Stored(0)
		}()
		require.NoError(t, part.Close())
		v, err := get(db.pdb, rowKey(0, "ns/soon"))
		require.NoError(t, err)
		require.NotNil(t, v, "stored and applied before the partition was let go")
	})
}
