package analytics_test

import (
	"fmt"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/analytics"
	"github.com/chime-sched/chime/internal/clickhousetest"
	"github.com/chime-sched/chime/schema/chimev1"
)

// sinkTables are the tables the sink writes, all PARTITION BY toDate(at).
var sinkTables = []string{analytics.TableAttempts, analytics.TableTransitions, analytics.TableJobEvents, analytics.TableDeadLetters}

// midnightBatch holds, in each table, n rows alternating between the
// last seconds of the day before midnight and the first of the day after
// (the later day first), over Kafka partitions 0 and 1: a batch across
// midnight whose two days' offsets interleave. In each partition the
// offsets run from 0 to n/2-1, the even ones of the later day.
func midnightBatch(mid time.Time, n int) *analytics.Batch {
	b := new(analytics.Batch)
	late := func(i int) bool { return i%2 == 0 }
	at := func(i int) *timestamppb.Timestamp {
		if late(i) {
			return timestamppb.New(mid.Add(time.Duration(i) * time.Second))
		}
		return timestamppb.New(mid.Add(-time.Duration(i) * time.Second))
	}
	for i := range n {
		pos := analytics.Pos{Partition: int32(i / 2 % 2), Offset: int64(i/4*2 + i%2), Time: mid}
		o := outcome("acme", fmt.Sprint(i), 1, 1, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, at(i).AsTime(), time.Millisecond)
		b.AddOutcome(o, pos)
		b.AddTransition(&chimev1.BreakerTransition{EventId: fmt.Sprint("tr-", i), Namespace: "acme", At: at(i)}, pos)
		b.AddJobEvent(&chimev1.JobEvent{EventId: fmt.Sprint("je-", i), Namespace: "acme", JobId: fmt.Sprint(i), At: at(i)}, pos)
		b.AddDeadLetter(&chimev1.DeadLetter{EventId: fmt.Sprint("dl-", i), At: at(i), Due: &chimev1.Due{Namespace: "acme", JobId: fmt.Sprint(i)}}, pos)
	}
	return b
}

// TestInsertDayStoresOneDayInOnePart: a batch across midnight is stored
// day by day, each day of each table in one part (stored whole or not at
// all), and the stored offsets are per day: the earlier day's highest
// offset does not cover the later day's rows, although their offsets are
// lower.
func TestInsertDayStoresOneDayInOnePart(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	mid := time.Now().UTC().Truncate(24 * time.Hour)
	early, later := analytics.DayOf(mid.Add(-time.Millisecond)), analytics.DayOf(mid)
	require.Equal(t, early+1, later)
	const n = 40
	b := midnightBatch(mid, n)
	require.Equal(t, []analytics.Day{early, later}, b.Days())

	require.NoError(t, tb.store.InsertDay(tb.ctx, b, early, "tok"))
	for _, table := range sinkTables {
		require.Equal(t, uint64(n/2), count(t, tb, "SELECT count() FROM "+table), table)
		require.Equal(t, uint64(1), count(t, tb, "SELECT uniqExact(_part) FROM "+table), "%s: one part", table)
		require.Equal(t, uint64(n/2), count(t, tb, fmt.Sprintf("SELECT countIf(toDate(at) = '%s') FROM %s", early, table)), table)
	}
	offs, err := tb.store.StoredOffsets(tb.ctx)
	require.NoError(t, err)
	for _, table := range sinkTables {
		for p := range int32(2) {
			maxOff, ok := offs.Max(table, p)
			require.True(t, ok, "%s/%d", table, p)
			require.Equal(t, int64(n/2-1), maxOff, "%s/%d", table, p)
			require.True(t, offs.Has(table, p, early, maxOff), "%s/%d", table, p)
			// The later day's offsets are below the earlier day's highest,
			// but none of its rows is stored.
			for off := int64(0); off < n/2; off += 2 {
				require.False(t, offs.Has(table, p, later, off), "%s/%d/%d: the later day is not stored", table, p, off)
			}
		}
	}

	// Retried with the same token: dropped, rows and aggregates alike.
	require.NoError(t, tb.store.InsertDay(tb.ctx, b, early, "tok"))
	require.NoError(t, tb.store.Insert(tb.ctx, b, "tok"))
	require.NoError(t, tb.store.Insert(tb.ctx, b, "tok"))
	for _, table := range sinkTables {
		require.Equal(t, uint64(n), count(t, tb, "SELECT count() FROM "+table), table)
		require.Equal(t, uint64(2), count(t, tb, "SELECT uniqExact(_partition_id) FROM "+table), table)
	}
	require.Equal(t, uint64(n), count(t, tb, "SELECT sum(requests) FROM attempts_1m"))
	offs, err = tb.store.StoredOffsets(tb.ctx)
	require.NoError(t, err)
	require.True(t, offs.Has(analytics.TableDeadLetters, 0, later, int64(n/2-2)))
	require.False(t, offs.Has(analytics.TableDeadLetters, 0, later, int64(n/2-1)))
}

// TestDayOfIsClickHousePartition: the day the sink computes for a row is
// the partition ClickHouse puts it in, to the millisecond around midnight
// and whatever the session's time zone; times ClickHouse's Date cannot
// hold are moved into range first.
func TestDayOfIsClickHousePartition(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	conn := tb.store.Conn()
	tokyo := ch.Context(tb.ctx, ch.WithSettings(ch.Settings{"session_timezone": "Asia/Tokyo"}))
	mid := time.Now().UTC().Truncate(24 * time.Hour)
	type tc struct {
		event, kafka time.Time // zero event: none
	}
	var cases []tc
	for _, d := range []time.Duration{-time.Millisecond, -time.Microsecond, -1, 0, 1, time.Millisecond - 1, time.Millisecond, -9 * time.Hour, 15 * time.Hour} {
		cases = append(cases, tc{event: mid.Add(d), kafka: mid}, tc{kafka: mid.Add(d)})
	}
	for _, k := range []time.Time{
		time.UnixMilli(-1), time.UnixMilli(-86_400_001), time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(0, 0), time.UnixMilli(86_399_999), time.Date(2106, 2, 6, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(2106, 2, 7, 0, 0, 0, 0, time.UTC), time.Date(2149, 6, 7, 0, 0, 0, 0, time.UTC), time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		cases = append(cases, tc{kafka: k}, tc{event: k, kafka: mid})
	}
	// The tables' TTL would drop rows of 1970 and 2106 at once: a table of
	// the same column and partition key holds every case.
	require.NoError(t, conn.Exec(tb.ctx, `CREATE TABLE days (id UInt32, at DateTime64(3, 'UTC'))
		ENGINE = MergeTree PARTITION BY toDate(at) ORDER BY id`))
	want := map[uint32]analytics.Day{}
	bt, err := conn.PrepareBatch(tokyo, "INSERT INTO days")
	require.NoError(t, err)
	var b analytics.Batch
	for i, c := range cases {
		o := &chimev1.CallbackOutcome{EventId: fmt.Sprint(i), Namespace: "acme"}
		if !c.event.IsZero() {
			o.FinishedAt = timestamppb.New(c.event)
		}
		pos := analytics.Pos{Offset: int64(i), Time: c.kafka}
		at := analytics.RowTime(o, pos)
		want[uint32(i)] = analytics.DayOf(at)
		require.NoError(t, bt.Append(uint32(i), at))
		if at.Year() > 2000 && at.Year() < 2100 {
			// Not 1970 nor 2106: the tables' TTL (at + 90 days, a
			// DateTime) drops those.
			b.AddOutcome(o, pos)
		}
	}
	require.NoError(t, bt.Send())
	require.NoError(t, tb.store.Insert(tokyo, &b, ""))

	check := func(q string, key func(id uint32) uint32) {
		rows, err := conn.Query(tokyo, q)
		require.NoError(t, err)
		defer rows.Close()
		seen := 0
		for rows.Next() {
			var (
				id         uint32
				day        int32
				part, what string
			)
			require.NoError(t, rows.Scan(&id, &day, &part, &what))
			d := want[key(id)]
			require.Equal(t, d, analytics.Day(day), "case %d (%+v): %s", key(id), cases[key(id)], what)
			require.Equal(t, mustParse(t, d.String()).Format("20060102"), part, "case %d: %s", key(id), what)
			seen++
		}
		require.NoError(t, rows.Err())
		require.Positive(t, seen)
	}
	check("SELECT id, toInt32(toDate(at)), _partition_id, toString(at) FROM days", func(id uint32) uint32 { return id })
	check("SELECT toUInt32(event_id), toInt32(toDate(at)), _partition_id, toString(at) FROM callback_attempts", func(id uint32) uint32 { return id })
	require.Equal(t, uint64(b.Len()), count(t, tb, "SELECT count() FROM callback_attempts"))
	// The per-minute aggregates land on the same day.
	require.Zero(t, count(t, tb, `SELECT count() FROM attempts_1m WHERE toDate(minute) NOT IN (SELECT DISTINCT toDate(at) FROM callback_attempts)`))
}

func mustParse(t *testing.T, day string) time.Time {
	t.Helper()
	d, err := time.Parse(time.DateOnly, day)
	require.NoError(t, err)
	return d
}

// TestMigration5KeepsTheOldOffsets: a database of migration 4, whose
// sink_offsets has no day, is migrated: what it stored stays readable and
// is still skipped, and later inserts are counted per day only.
func TestMigration5KeepsTheOldOffsets(t *testing.T) {
	t.Parallel()
	db := clickhousetest.New(t)
	tb := &testBundle{ctx: t.Context(), dsn: db.DSN}
	opts, err := ch.ParseDSN(db.DSN)
	require.NoError(t, err)
	conn, err := ch.Open(opts)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, analytics.MigrateTo(tb.ctx, conn, 4))
	require.NoError(t, conn.Exec(tb.ctx, `INSERT INTO callback_attempts (event_id, namespace, at, kafka_partition, kafka_offset)
		SELECT toString(number), 'acme', now64(3), 0, number FROM numbers(10)`))

	store, err := analytics.Open(tb.ctx, db.DSN, analytics.Options{})
	require.NoError(t, err)
	defer store.Close()
	tb.store = store
	v, err := analytics.SchemaVersion(tb.ctx, conn)
	require.NoError(t, err)
	require.Equal(t, uint32(6), v)
	require.Zero(t, count(t, tb, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name LIKE 'sink\\_offsets\\_%'"),
		"the views without a day are gone")
	require.Equal(t, uint64(10), count(t, tb, "SELECT count() FROM callback_attempts"))
	require.Equal(t, uint64(9), count(t, tb, "SELECT toUInt64(max(max_offset)) FROM sink_offsets"))

	today := analytics.DayOf(time.Now())
	offs, err := store.StoredOffsets(tb.ctx)
	require.NoError(t, err)
	require.True(t, offs.Has(analytics.TableAttempts, 0, today, 9), "stored before the migration")
	require.True(t, offs.Has(analytics.TableAttempts, 0, today-3, 0), "stored before the migration, whatever the day")
	require.False(t, offs.Has(analytics.TableAttempts, 0, today, 10))
	require.False(t, offs.Has(analytics.TableAttempts, 1, today, 0))

	var b analytics.Batch
	for i := range 5 {
		b.AddOutcome(outcome("acme", fmt.Sprint("new-", i), 1, 1, chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, time.Now(), time.Millisecond),
			analytics.Pos{Partition: 0, Offset: int64(10 + i)})
	}
	require.NoError(t, store.Insert(tb.ctx, &b, "after"))
	require.Equal(t, uint64(9), count(t, tb, "SELECT toUInt64(max(max_offset)) FROM sink_offsets"), "no longer written")
	offs, err = store.StoredOffsets(tb.ctx)
	require.NoError(t, err)
	require.True(t, offs.Has(analytics.TableAttempts, 0, today, 14))
	require.False(t, offs.Has(analytics.TableAttempts, 0, today+1, 12), "the new rows are of today only")

	// Migrating again changes nothing.
	again, err := analytics.Open(tb.ctx, db.DSN, analytics.Options{})
	require.NoError(t, err)
	again.Close()
	require.Equal(t, uint64(6), count(t, tb, "SELECT count() FROM schema_migrations FINAL"))
}
