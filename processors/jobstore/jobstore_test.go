package jobstore

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/internal/clocktest"
	"github.com/chime-sched/chime/internal/kafkatest"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func row(t *testing.T, status chimev1.JobStatus, created, timer time.Time) []byte {
	t.Helper()
	st := &chimev1.JobState{Status: status, CreatedAt: timestamppb.New(created)}
	if !timer.IsZero() {
		st.TimerAt = timestamppb.New(timer)
	}
	b, err := schema.JobStateCodec{}.Encode(st)
	require.NoError(t, err)
	return b
}

// open opens a store whose flusher runs only when a test says (and then
// produces every dirty row: MaxHold is 1 ns), with a fake Kafka.
func open(t testing.TB, dir string, mutate ...func(*Options)) *DB {
	t.Helper()
	o := Options{Dir: dir, Now: func() time.Time { return t0 }, FlushInterval: time.Hour, MaxHold: time.Nanosecond, CloseWait: 50 * time.Millisecond}
	for _, m := range mutate {
		m(&o)
	}
	db, err := Open(o)
	require.NoError(t, err)
	f := &fakeKafka{}
	kafkas.Store(db, f)
	db.SetProducer(f.produce)
	return db
}

// kafkas are the fake Kafkas of the tests' stores.
var kafkas sync.Map

// fakeKafka takes the records a store produces; a test says when (and
// at which offset) each is stored.
type fakeKafka struct {
	mu   sync.Mutex
	sent []*sent
}

type sent struct {
	p     int32
	key   string
	value []byte
	done  Done
}

// Stored says Kafka stored the record at offset.
func (r *sent) Stored(offset int64) { r.done.Stored(offset, nil) }

// Failed says Kafka did not store it.
func (r *sent) Failed(err error) { r.done.Stored(0, err) }

func (f *fakeKafka) produce(p int32, key string, value []byte, done Done) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, &sent{p: p, key: key, value: value, done: done})
}

func (f *fakeKafka) last() *sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.sent) == 0 {
		return nil
	}
	return f.sent[len(f.sent)-1]
}

// recovered returns partition p of db, opened and recovered with no
// changelog to replay.
func recovered(t testing.TB, db *DB, p int32) *Partition {
	t.Helper()
	part := db.Partition(p)
	require.NoError(t, part.Open())
	require.NoError(t, part.MarkRecovered())
	return part
}

// TestWritesWaitForKafka: a write after recovery is read at once but
// reaches the database only once its own changelog record is stored, in
// the order writes were made; what was not stored is gone after a crash
// and the stored offset is that of the last write applied.
func TestWritesWaitForKafka(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "db")
	db := open(t, dir)
	part := recovered(t, db, 3)
	a := row(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, t0, t0.Add(time.Hour))
	b := row(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, t0, t0.Add(2*time.Hour))
	wa := set(t, part, "ns/a", a)
	wb := set(t, part, "ns/b", b)
	set(t, part, "ns/a", b)
	got, err := part.Get("ns/a")
	require.NoError(t, err)
	require.Equal(t, b, got, "the overlay answers reads")

	// b's record stored before a's first: nothing can be applied yet.
	wb.Stored(11)
	require.NoError(t, part.flush())
	require.Zero(t, appliedTimers(t, part), "nothing applied while an earlier write waits")
	wa.Stored(10)
	require.NoError(t, part.flush())
	require.EqualValues(t, 2, appliedTimers(t, part))
	off, err := part.GetOffset(-1)
	require.NoError(t, err)
	require.EqualValues(t, 11, off)

	// The second write of a is never stored: a kill -9 loses it from
	// the database, and its stored offset still says where to replay from.
	crash(t, db)
	db2 := open(t, dir)
	t.Cleanup(func() { _ = db2.Close() })
	part2 := db2.Partition(3)
	require.NoError(t, part2.Open())
	off, err = part2.GetOffset(-1)
	require.NoError(t, err)
	require.EqualValues(t, 11, off)
	got, err = part2.Get("ns/a")
	require.NoError(t, err)
	require.Equal(t, a, got, "the unconfirmed write is not there")
	require.EqualValues(t, 2, part2.TimerCount())
}

// set writes a row and has the store produce it; it returns the record.
func set(t *testing.T, part *Partition, key string, value []byte) *sent {
	t.Helper()
	require.NoError(t, part.Set(key, value))
	part.produce(true)
	v, _ := kafkas.Load(part.db)
	r := v.(*fakeKafka).last()
	require.NotNil(t, r)
	require.Equal(t, key, r.key)
	return r
}

// appliedTimers counts the timers the database holds for the partition.
func appliedTimers(t *testing.T, part *Partition) int64 {
	t.Helper()
	part.mu.Lock()
	defer part.mu.Unlock()
	return part.applied[timersName]
}

// crash stops db as a kill -9 would: no flush; the process's files and
// lock go with it.
func crash(t *testing.T, db *DB) {
	t.Helper()
	db.mu.Lock()
	close(db.stop)
	db.mu.Unlock()
	<-db.done
	db.scans.Wait()
	require.NoError(t, db.pdb.Close())
	db.cache.Unref()
	require.NoError(t, db.lock.Close())
}

// TestRecoveryWritesWithTheirOffset: the changelog's records, replayed
// before MarkRecovered, are applied with their offset.
func TestRecoveryWritesWithTheirOffset(t *testing.T) {
	t.Parallel()
	db := open(t, "")
	t.Cleanup(func() { _ = db.Close() })
	part := db.Partition(0)
	require.NoError(t, part.Open())
	for i := range 10 {
		require.NoError(t, part.Set("ns/j"+string(rune('0'+i)), row(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, t0, t0.Add(time.Duration(i)*time.Minute))))
		require.NoError(t, part.SetOffset(int64(100+i)))
	}
	require.NoError(t, part.Delete("ns/j0"))
	require.NoError(t, part.SetOffset(110))
	require.NoError(t, part.MarkRecovered())
	off, err := part.GetOffset(-1)
	require.NoError(t, err)
	require.EqualValues(t, 110, off)
	require.EqualValues(t, 9, part.Live("ns"))
	var timers []Timer
	_, err = part.Timers(Timer{}, Timer{At: math.MaxInt64}, math.MaxInt, func(tm Timer) { timers = append(timers, tm) })
	require.NoError(t, err)
	require.Len(t, timers, 9)
	require.Equal(t, "ns/j1", timers[0].Key)
	for i := 1; i < len(timers); i++ {
		require.True(t, timers[i-1].Less(timers[i]), "in time order")
	}
}

// TestListingAndCounts: newest first, equal times by id descending (also
// when one id is a prefix of another), from a cursor; chime's own jobs
// listed but not counted; ended jobs listed but not counted; a create held
// for its namespace neither.
func TestListingAndCounts(t *testing.T) {
	t.Parallel()
	db := open(t, "", func(o *Options) { o.AutoConfirm = true })
	t.Cleanup(func() { _ = db.Close() })
	part := recovered(t, db, 1)
	set := func(id string, status chimev1.JobStatus, created time.Time) {
		require.NoError(t, part.Set("ns/"+id, row(t, status, created, time.Time{})))
	}
	sched := chimev1.JobStatus_JOB_STATUS_SCHEDULED
	set("a", sched, t0)
	set("ab", sched, t0)
	set("b", chimev1.JobStatus_JOB_STATUS_COMPLETED, t0)
	set("newest", sched, t0.Add(time.Second))
	set(schema.ReservedJobIDPrefix+"timer", sched, t0)
	set("held", chimev1.JobStatus_JOB_STATUS_UNSPECIFIED, t0)
	require.NoError(t, part.Set("other/x", row(t, sched, t0, time.Time{})))
	require.NoError(t, part.flush())

	var ids []string
	list := func(afterCreated int64, afterID string) {
		ids = nil
		require.NoError(t, part.List("ns", nil, afterCreated, afterID, func(l Listed) bool { ids = append(ids, l.ID); return true }))
	}
	list(0, "")
	require.Equal(t, []string{"newest", "b", "ab", "a", schema.ReservedJobIDPrefix + "timer"}, ids)
	list(t0.UnixNano(), "b")
	require.Equal(t, []string{"ab", "a", schema.ReservedJobIDPrefix + "timer"}, ids, "after the cursor")
	require.EqualValues(t, 3, part.Live("ns"), "a, ab, newest")
	require.EqualValues(t, 1, part.Live("other"))

	set("a", chimev1.JobStatus_JOB_STATUS_CANCELLED, t0)
	require.NoError(t, part.Delete("ns/newest"))
	require.NoError(t, part.flush())
	require.EqualValues(t, 1, part.Live("ns"))
	list(0, "")
	require.Equal(t, []string{"b", "ab", "a", schema.ReservedJobIDPrefix + "timer"}, ids)
}

// TestOldCheckpointIsRebuilt: a partition whose offset was stored longer
// ago than MaxCheckpointAge starts from nothing (a compacted changelog may
// have lost the tombstones of what it holds).
func TestOldCheckpointIsRebuilt(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "db")
	clock := clocktest.New(t0)
	db := open(t, dir, func(o *Options) { o.Now = clock.Now })
	part := db.Partition(0)
	require.NoError(t, part.Open())
	require.NoError(t, part.Set("ns/a", row(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, t0, t0.Add(time.Hour))))
	require.NoError(t, part.SetOffset(7))
	require.NoError(t, part.MarkRecovered())
	require.NoError(t, part.Close())

	clock.Set(t0.Add(21 * time.Hour))
	part = db.Partition(0)
	require.NoError(t, part.Open())
	off, err := part.GetOffset(-2)
	require.NoError(t, err)
	require.EqualValues(t, -2, off, "rebuilt from the start of the changelog")
	got, err := part.Get("ns/a")
	require.NoError(t, err)
	require.Nil(t, got)
	require.Zero(t, part.TimerCount())
	require.NoError(t, db.Close())
}

// TestUnreadableDatabaseIsRebuilt: a database that does not open is wiped.
func TestUnreadableDatabaseIsRebuilt(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "db")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "CURRENT"), []byte("MANIFEST-garbage\n"), 0o600))
	db := open(t, dir)
	part := recovered(t, db, 0)
	off, err := part.GetOffset(-1)
	require.NoError(t, err)
	require.EqualValues(t, -1, off)
	require.NoError(t, db.Close())
}

// TestIndexesFollowTheRows: after any sequence of writes and deletes, the
// time index, the recovery index, the listing and the counts are exactly
// what the rows say (the store writes only the entries that change).
func TestIndexesFollowTheRows(t *testing.T) {
	t.Parallel()
	db := open(t, "", func(o *Options) { o.AutoConfirm = true })
	t.Cleanup(func() { _ = db.Close() })
	part := recovered(t, db, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	statuses := []chimev1.JobStatus{chimev1.JobStatus_JOB_STATUS_UNSPECIFIED, chimev1.JobStatus_JOB_STATUS_SCHEDULED,
		chimev1.JobStatus_JOB_STATUS_PAUSED, chimev1.JobStatus_JOB_STATUS_COMPLETED, chimev1.JobStatus_JOB_STATUS_DEAD}
	rows := map[string]*chimev1.JobState{}
	for i := range 5000 {
		key := fmt.Sprintf("ns%d/j%d", rng.IntN(2), rng.IntN(60))
		if i%1000 == 999 {
			require.NoError(t, part.flush())
		}
		if rng.IntN(8) == 0 {
			require.NoError(t, part.Delete(key))
			delete(rows, key)
			continue
		}
		st := &chimev1.JobState{Status: statuses[rng.IntN(len(statuses))], CreatedAt: timestamppb.New(t0.Add(time.Duration(rng.IntN(3)) * time.Second))}
		if rng.IntN(3) > 0 {
			st.TimerAt = timestamppb.New(t0.Add(time.Duration(rng.IntN(4)) * time.Minute))
		}
		if rng.IntN(3) == 0 {
			st.RecoverAt = timestamppb.New(t0.Add(time.Duration(rng.IntN(2)) * time.Second))
		}
		if n := rng.IntN(4); n > 0 {
			// Labels that come, go and change value between versions.
			st.Spec = &chimev1.JobSpec{Labels: map[string]string{}}
			for range n {
				st.Spec.Labels[[]string{"team", "tier", "x/y"}[rng.IntN(3)]] = []string{"a", "b", "a:b"}[rng.IntN(3)]
			}
		}
		b, err := schema.JobStateCodec{}.Encode(st)
		require.NoError(t, err)
		require.NoError(t, part.Set(key, b))
		rows[key] = st
	}
	checkLabelListings(t, part, rows) // the database's and the overlay's
	require.NoError(t, part.flush())

	var timers []Timer
	_, err := part.Timers(Timer{}, Timer{At: math.MaxInt64}, math.MaxInt, func(tm Timer) { timers = append(timers, tm) })
	require.NoError(t, err)
	var recovering []Timer
	require.NoError(t, part.Recovering(func(tm Timer) { recovering = append(recovering, tm) }))
	wantTimers, wantRecovering := 0, 0
	live := map[string]int64{}
	listed := map[string]int{}
	for key, st := range rows {
		if st.TimerAt != nil {
			wantTimers++
			require.Contains(t, timers, Timer{At: st.TimerAt.AsTime().UnixNano(), Key: key})
		}
		if st.RecoverAt != nil {
			wantRecovering++
			require.Contains(t, recovering, Timer{At: st.RecoverAt.AsTime().UnixNano(), Key: key})
		}
		ns, _, _ := schema.SplitJobKey(key)
		if st.Status != chimev1.JobStatus_JOB_STATUS_UNSPECIFIED {
			listed[ns]++
			if !schema.JobEnded(st.Status) {
				live[ns]++
			}
		}
	}
	require.Len(t, timers, wantTimers)
	require.Len(t, recovering, wantRecovering)
	require.EqualValues(t, wantTimers, part.TimerCount())
	for _, ns := range []string{"ns0", "ns1"} {
		require.Equal(t, live[ns], part.Live(ns), ns)
		n := 0
		require.NoError(t, part.List(ns, nil, 0, "", func(l Listed) bool {
			st := rows[ns+"/"+l.ID]
			require.NotNil(t, st, "listed %s/%s", ns, l.ID)
			require.Equal(t, st.Status, l.Status)
			require.Equal(t, st.CreatedAt.AsTime().UnixNano(), l.Created)
			n++
			return true
		}))
		require.Equal(t, listed[ns], n, ns)
	}
	checkLabelListings(t, part, rows)
}

// checkLabelListings lists every namespace of rows by one and by two
// labels, and checks each listing holds exactly the rows with them, in
// listing order, through a cursor too.
func checkLabelListings(t *testing.T, part *Partition, rows map[string]*chimev1.JobState) {
	t.Helper()
	var all []schema.Label
	for _, k := range []string{"team", "tier", "x/y"} {
		for _, v := range []string{"a", "b", "a:b"} {
			all = append(all, schema.Label{Key: k, Value: v})
		}
	}
	queries := [][]schema.Label{}
	for i, l := range all {
		queries = append(queries, []schema.Label{l})
		for _, m := range all[i+1:] {
			queries = append(queries, []schema.Label{l, m})
		}
	}
	for _, ns := range []string{"ns0", "ns1"} {
		for _, q := range queries {
			var want []Listed
			for key, st := range rows {
				rns, id, _ := schema.SplitJobKey(key)
				if rns != ns || st.Status == chimev1.JobStatus_JOB_STATUS_UNSPECIFIED {
					continue
				}
				has := true
				for _, l := range q {
					if v, ok := st.GetSpec().GetLabels()[l.Key]; !ok || v != l.Value {
						has = false
					}
				}
				if has {
					want = append(want, Listed{ID: id, Created: st.CreatedAt.AsTime().UnixNano(), Status: st.Status})
				}
			}
			slices.SortFunc(want, func(a, b Listed) int {
				if a.newer(b) {
					return -1
				}
				return 1
			})
			var got []Listed
			require.NoError(t, part.List(ns, q, 0, "", func(l Listed) bool { got = append(got, l); return true }))
			require.Equal(t, want, got, "%s %v", ns, q)
			if len(want) > 2 {
				got = nil
				require.NoError(t, part.List(ns, q, want[1].Created, want[1].ID, func(l Listed) bool { got = append(got, l); return true }))
				require.Equal(t, want[2:], got, "%s %v after a cursor", ns, q)
			}
		}
	}
}

// TestStatsSayWhatTheDatabaseDid: the rows written to disk show in the
// bytes flushed, a row read from the files in the cache's lookups, and a
// closed store says nothing (a scrape during shutdown).
func TestStatsSayWhatTheDatabaseDid(t *testing.T) {
	t.Parallel()
	db := open(t, filepath.Join(t.TempDir(), "db"))
	part := recovered(t, db, 1)
	require.Zero(t, db.Stats().FlushedBytes, "nothing written yet")
	v := row(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, t0, t0.Add(time.Hour))
	for i := range 100 {
		set(t, part, fmt.Sprintf("ns/j%d", i), v).Stored(int64(i))
	}
	require.NoError(t, part.flush())
	require.NoError(t, db.pdb.Flush()) // the memtable into a file
	st := db.Stats()
	require.Greater(t, st.FlushedBytes, uint64(100*len(v)), "the flush wrote the rows")

	// Out of the write cache now: a read goes to the files through the
	// block cache.
	got, err := part.Get("ns/j7")
	require.NoError(t, err)
	require.Equal(t, v, got)
	after := db.Stats()
	require.Greater(t, after.CacheHits+after.CacheMisses, st.CacheHits+st.CacheMisses, "the read looked up blocks")

	require.NoError(t, db.Close())
	require.Equal(t, Stats{}, db.Stats())
}

// TestFlusherSleepsUntilAWrite: with nothing held the flusher stops
// ticking, and a write wakes it, even one that is not produced at once (a
// row that may change within MaxHold): the flusher ticks again, produces
// it once MaxHold has passed, applies it once stored, and sleeps again.
// Were the wake missing, the row would wait for the minute's touch and the
// test would time out.
func TestFlusherSleepsUntilAWrite(t *testing.T) {
	t.Parallel()
	db, part, kafka, clock := cached(t, func(o *Options) { o.FlushInterval = time.Millisecond })
	asleep := func() bool { return db.idle.Load() }
	kafkatest.WaitFor(t, 5*time.Second, "the flusher asleep with nothing held", asleep)

	// Its timer within MaxHold: the row waits to fold later writes.
	require.NoError(t, part.Set("ns/soon", row(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, t0, t0.Add(10*time.Second))))
	clock.Set(t0.Add(30 * time.Second))
	kafkatest.WaitFor(t, 5*time.Second, "the row produced after MaxHold", func() bool { return len(sentKeys(kafka)) == 1 })
	kafka.last().Stored(0)
	kafkatest.WaitFor(t, 5*time.Second, "the row applied", func() bool { return appliedTimers(t, part) == 1 })
	kafkatest.WaitFor(t, 5*time.Second, "the flusher asleep again", asleep)
}

// TestHeldTimersAreLeftToTheCaller: a row written with SetHeld is read at
// once, but Timers leaves it out while the write is unapplied (the
// caller holds its timer), and returns it from the database once applied.
// A later Set of the same row, folded into the unapplied write or not,
// orders its timer again; a SetHeld after a Set takes it out.
func TestHeldTimersAreLeftToTheCaller(t *testing.T) {
	t.Parallel()
	db := open(t, "")
	t.Cleanup(func() { _ = db.Close() })
	part := recovered(t, db, 0)
	timers := func() []Timer {
		t.Helper()
		var out []Timer
		_, err := part.Timers(Timer{}, Timer{At: math.MaxInt64}, math.MaxInt, func(tm Timer) { out = append(out, tm) })
		require.NoError(t, err)
		return out
	}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	scheduled := func(d time.Duration) []byte { return row(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, t0, at(d)) }

	require.NoError(t, part.SetHeld("ns/held", scheduled(time.Second)))
	require.NoError(t, part.Set("ns/set", scheduled(2*time.Second)))
	got, err := part.Get("ns/held")
	require.NoError(t, err)
	require.Equal(t, scheduled(time.Second), got, "the overlay answers reads")
	require.Equal(t, []Timer{{At: at(2 * time.Second).UnixNano(), Key: "ns/set"}}, timers(), "the held row's timer is the caller's")
	require.EqualValues(t, 2, part.TimerCount(), "counted all the same")

	// Folded into the dirty write: a Set orders it again, a SetHeld
	// takes it out again.
	require.NoError(t, part.Set("ns/held", scheduled(3*time.Second)))
	require.ElementsMatch(t, []Timer{{At: at(2 * time.Second).UnixNano(), Key: "ns/set"}, {At: at(3 * time.Second).UnixNano(), Key: "ns/held"}}, timers())
	require.NoError(t, part.SetHeld("ns/held", scheduled(4*time.Second)))
	require.Equal(t, []Timer{{At: at(2 * time.Second).UnixNano(), Key: "ns/set"}}, timers())
	require.NoError(t, part.SetHeld("ns/set", scheduled(5*time.Second)))
	require.Empty(t, timers(), "both held")

	// Applied, the rows' timers come from the database.
	part.produce(true)
	v, _ := kafkas.Load(db)
	for i, r := range v.(*fakeKafka).sent {
		r.Stored(int64(i))
	}
	require.NoError(t, part.flush())
	require.EqualValues(t, 2, appliedTimers(t, part))
	require.Equal(t, []Timer{{At: at(4 * time.Second).UnixNano(), Key: "ns/held"}, {At: at(5 * time.Second).UnixNano(), Key: "ns/set"}}, timers())

	// A new write after the one in flight: a Set of an applied row
	// orders the new timer, and the database's older one is not returned.
	require.NoError(t, part.Set("ns/held", scheduled(6*time.Second)))
	require.Equal(t, []Timer{{At: at(5 * time.Second).UnixNano(), Key: "ns/set"}, {At: at(6 * time.Second).UnixNano(), Key: "ns/held"}}, timers())
	require.NoError(t, part.SetHeld("ns/held", scheduled(7*time.Second)))
	require.Equal(t, []Timer{{At: at(5 * time.Second).UnixNano(), Key: "ns/set"}}, timers())
}

// TestFarTimersAreFound: a write whose timer is farTimer or more ahead is
// not ordered, but Timers still returns it while it is unapplied, within
// the range asked and only then; replaced by a near one (folded, or after
// it went on its way) it is ordered again, and once applied the database
// has it.
func TestFarTimersAreFound(t *testing.T) {
	t.Parallel()
	db := open(t, "")
	t.Cleanup(func() { _ = db.Close() })
	part := recovered(t, db, 0)
	timers := func(from, to time.Time) []Timer {
		t.Helper()
		var out []Timer
		_, err := part.Timers(Timer{At: from.UnixNano()}, Timer{At: to.UnixNano()}, math.MaxInt, func(tm Timer) { out = append(out, tm) })
		require.NoError(t, err)
		slices.SortFunc(out, func(a, b Timer) int { return cmp.Compare(a.At, b.At) })
		return out
	}
	far1, far2, near := t0.Add(farTimer), t0.Add(3*farTimer), t0.Add(time.Minute)
	scheduled := func(at time.Time) []byte { return row(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, t0, at) }
	tm := func(at time.Time, key string) Timer { return Timer{At: at.UnixNano(), Key: key} }
	farN := func() int { part.mu.Lock(); defer part.mu.Unlock(); return part.ov.far.n }

	require.NoError(t, part.Set("ns/a", scheduled(far1)))
	require.NoError(t, part.Set("ns/b", scheduled(far2)))
	require.NoError(t, part.Set("ns/c", scheduled(near)))
	require.Equal(t, 2, farN())
	require.Equal(t, []Timer{tm(near, "ns/c"), tm(far1, "ns/a"), tm(far2, "ns/b")}, timers(t0, far2.Add(1)))
	require.Equal(t, []Timer{tm(near, "ns/c")}, timers(t0, far1), "to is exclusive")
	require.Equal(t, []Timer{tm(far2, "ns/b")}, timers(far1.Add(1), far2.Add(time.Hour)), "from is inclusive, and far ones below it are left out")

	// Folded into the dirty write: near now, then far again.
	require.NoError(t, part.Set("ns/a", scheduled(near.Add(time.Second))))
	require.Equal(t, 1, farN())
	require.Equal(t, []Timer{tm(near, "ns/c"), tm(near.Add(time.Second), "ns/a")}, timers(t0, far1))
	require.NoError(t, part.Set("ns/a", scheduled(far1)))
	require.Equal(t, 2, farN())

	// Applied: the database has them, and nothing is left to scan for.
	part.produce(true)
	v, _ := kafkas.Load(db)
	for i, r := range v.(*fakeKafka).sent {
		r.Stored(int64(i))
	}
	require.NoError(t, part.flush())
	require.Zero(t, farN())
	require.Equal(t, []Timer{tm(near, "ns/c"), tm(far1, "ns/a"), tm(far2, "ns/b")}, timers(t0, far2.Add(1)))

	// A write after one on its way: the new one counts, the old does not.
	require.NoError(t, part.Set("ns/b", scheduled(far2.Add(time.Hour))))
	part.produce(true)
	require.NoError(t, part.Set("ns/b", scheduled(near.Add(2*time.Second))))
	require.Zero(t, farN())
	require.Equal(t, []Timer{tm(near, "ns/c"), tm(near.Add(2*time.Second), "ns/b"), tm(far1, "ns/a")}, timers(t0, far2.Add(2*time.Hour)))
	require.NoError(t, part.Delete("ns/b"))
	require.Equal(t, []Timer{tm(near, "ns/c"), tm(far1, "ns/a")}, timers(t0, far2.Add(2*time.Hour)))
}
