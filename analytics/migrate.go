package analytics

import (
	"context"
	"fmt"
	"strings"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Table names.
const (
	TableAttempts    = "callback_attempts"
	TableTransitions = "breaker_transitions"
	TableJobEvents   = "job_events"
	TableAttempts1m  = "attempts_1m"
	TableSinkOffsets = "sink_offsets"
	TableDeadLetters = "dead_letters"
	TableMigrations  = "schema_migrations"

	// TableSinkDayOffsets replaces TableSinkOffsets from migration 5.
	TableSinkDayOffsets = "sink_day_offsets"

	// TableDeadLetterReplays, from migration 6, is written by the API,
	// not the sink: which dead letters were replayed, when, as which job.
	TableDeadLetterReplays = "dead_letter_replays"
)

// DefaultRetention is how long rows are kept when Options.Retention is 0.
const DefaultRetention = 90 * 24 * time.Hour

// migration is one versioned schema change. Its statements are idempotent
// (IF NOT EXISTS), so a migration interrupted half-way is simply run again.
// Never edit a released migration: add a new one.
type migration struct {
	version uint32
	name    string
	stmts   []string
}

// Every table has a deduplication window: a retried insert (same
// insert_deduplication_token) is dropped by the raw table, and by each
// materialized view's target only if that table has a window too. The
// targets deduplicate the view's blocks by content, so attempts_1m keeps
// the Kafka offsets its rows came from: two different batches with the
// same counts for a namespace and minute must not look like one retried.
//
// {ttl} is replaced by the retention in days. Retention set later is
// applied by Migrate with ALTER ... MODIFY TTL, not by a migration.
var migrations = []migration{
	{1, "callback attempts, breaker transitions, job events", []string{
		`CREATE TABLE IF NOT EXISTS callback_attempts (
			event_id        String,
			namespace       LowCardinality(String),
			job_id          String,
			fire_seq        UInt64,
			attempt         UInt32,
			class           LowCardinality(String),
			status_code     Int32,
			latency_ms      Float64,
			error_kind      LowCardinality(String),
			error           String,
			probe           Bool,
			at              DateTime64(3, 'UTC'),
			scheduled_at    DateTime64(3, 'UTC'),
			started_at      DateTime64(3, 'UTC'),
			finished_at     DateTime64(3, 'UTC'),
			will_retry      Bool,
			next_attempt_at DateTime64(3, 'UTC'),
			dispatcher_id   LowCardinality(String),
			url             String,
			method          LowCardinality(String),
			kafka_partition Int32,
			kafka_offset    Int64
		) ENGINE = ReplacingMergeTree
		PARTITION BY toDate(at)
		ORDER BY (namespace, job_id, event_id)
		TTL toDateTime(at) + INTERVAL {ttl} DAY
		SETTINGS non_replicated_deduplication_window = 1000`,
		`CREATE TABLE IF NOT EXISTS breaker_transitions (
			event_id              String,
			namespace             LowCardinality(String),
			at                    DateTime64(3, 'UTC'),
			from_state            LowCardinality(String),
			to_state              LowCardinality(String),
			reason                String,
			window_requests       UInt64,
			window_failures       UInt64,
			window_slow_calls     UInt64,
			window_failure_rate   Float64,
			window_slow_call_rate Float64,
			window_p50_ms         Float64,
			window_p99_ms         Float64,
			window_avg_ms         Float64,
			consecutive_trips     UInt32,
			cool_off_ms           Int64,
			kafka_partition       Int32,
			kafka_offset          Int64
		) ENGINE = ReplacingMergeTree
		PARTITION BY toDate(at)
		ORDER BY (namespace, at, event_id)
		TTL toDateTime(at) + INTERVAL {ttl} DAY
		SETTINGS non_replicated_deduplication_window = 1000`,
		`CREATE TABLE IF NOT EXISTS job_events (
			event_id           String,
			namespace          LowCardinality(String),
			job_id             String,
			type               LowCardinality(String),
			at                 DateTime64(3, 'UTC'),
			fire_seq           UInt64,
			attempt            UInt32,
			count              UInt64,
			first_scheduled_at DateTime64(3, 'UTC'),
			last_scheduled_at  DateTime64(3, 'UTC'),
			detail             String,
			command_id         String,
			kafka_partition    Int32,
			kafka_offset       Int64
		) ENGINE = ReplacingMergeTree
		PARTITION BY toDate(at)
		ORDER BY (namespace, job_id, at, event_id)
		TTL toDateTime(at) + INTERVAL {ttl} DAY
		SETTINGS non_replicated_deduplication_window = 1000`,
	}},
	{2, "per-minute per-namespace attempt aggregates", []string{
		`CREATE TABLE IF NOT EXISTS attempts_1m (
			namespace  LowCardinality(String),
			minute     DateTime('UTC'),
			requests   SimpleAggregateFunction(sum, UInt64),
			successes  SimpleAggregateFunction(sum, UInt64),
			failures   SimpleAggregateFunction(sum, UInt64),
			retryable  SimpleAggregateFunction(sum, UInt64),
			permanent  SimpleAggregateFunction(sum, UInt64),
			deferred   SimpleAggregateFunction(sum, UInt64),
			expired    SimpleAggregateFunction(sum, UInt64),
			refused    SimpleAggregateFunction(sum, UInt64),
			latency_ms AggregateFunction(quantiles(0.5, 0.99), Float64),
			kafka_offset_min SimpleAggregateFunction(min, Int64),
			kafka_offset_max SimpleAggregateFunction(max, Int64)
		) ENGINE = AggregatingMergeTree
		PARTITION BY toDate(minute)
		ORDER BY (namespace, minute)
		TTL minute + INTERVAL {ttl} DAY
		SETTINGS non_replicated_deduplication_window = 1000`,
		// requests are the calls that went out over HTTP; deferred,
		// expired and refused outcomes never reached the client.
		`CREATE MATERIALIZED VIEW IF NOT EXISTS attempts_1m_mv TO attempts_1m AS
		SELECT
			namespace,
			toStartOfMinute(at) AS minute,
			countIf(class IN ('success', 'retryable', 'permanent')) AS requests,
			countIf(class = 'success') AS successes,
			countIf(class IN ('retryable', 'permanent')) AS failures,
			countIf(class = 'retryable') AS retryable,
			countIf(class = 'permanent') AS permanent,
			countIf(class = 'deferred') AS deferred,
			countIf(class = 'expired') AS expired,
			countIf(class = 'refused') AS refused,
			quantilesStateIf(0.5, 0.99)(latency_ms, class IN ('success', 'retryable', 'permanent')) AS latency_ms,
			min(kafka_offset) AS kafka_offset_min,
			max(kafka_offset) AS kafka_offset_max
		FROM callback_attempts
		GROUP BY namespace, minute`,
	}},
	{3, "highest Kafka offset stored per source partition", []string{
		`CREATE TABLE IF NOT EXISTS sink_offsets (
			source          LowCardinality(String),
			kafka_partition Int32,
			max_offset      SimpleAggregateFunction(max, Int64)
		) ENGINE = AggregatingMergeTree
		ORDER BY (source, kafka_partition)
		SETTINGS non_replicated_deduplication_window = 1000`,
		`CREATE MATERIALIZED VIEW IF NOT EXISTS sink_offsets_attempts_mv TO sink_offsets AS
		SELECT 'callback_attempts' AS source, kafka_partition, max(kafka_offset) AS max_offset
		FROM callback_attempts GROUP BY kafka_partition`,
		`CREATE MATERIALIZED VIEW IF NOT EXISTS sink_offsets_transitions_mv TO sink_offsets AS
		SELECT 'breaker_transitions' AS source, kafka_partition, max(kafka_offset) AS max_offset
		FROM breaker_transitions GROUP BY kafka_partition`,
		`CREATE MATERIALIZED VIEW IF NOT EXISTS sink_offsets_job_events_mv TO sink_offsets AS
		SELECT 'job_events' AS source, kafka_partition, max(kafka_offset) AS max_offset
		FROM job_events GROUP BY kafka_partition`,
	}},
	// A dead letter keeps the due it gave up on (callback, retry policy,
	// labels) as protobuf bytes, so it can be replayed as it was.
	{4, "dead letters", []string{
		`CREATE TABLE IF NOT EXISTS dead_letters (
			event_id        String,
			namespace       LowCardinality(String),
			job_id          String,
			fire_seq        UInt64,
			attempt         UInt32,
			reason          String,
			at              DateTime64(3, 'UTC'),
			url             String,
			method          LowCardinality(String),
			status_code     Int32,
			error           String,
			due             String,
			kafka_partition Int32,
			kafka_offset    Int64
		) ENGINE = ReplacingMergeTree
		PARTITION BY toDate(at)
		ORDER BY (namespace, event_id)
		TTL toDateTime(at) + INTERVAL {ttl} DAY
		SETTINGS non_replicated_deduplication_window = 1000`,
		`CREATE MATERIALIZED VIEW IF NOT EXISTS sink_offsets_dead_letters_mv TO sink_offsets AS
		SELECT 'dead_letters' AS source, kafka_partition, max(kafka_offset) AS max_offset
		FROM dead_letters GROUP BY kafka_partition`,
	}},
	// The sink skips a replayed record if its offset is at or below the
	// highest stored for its table, Kafka partition and day (the row's
	// partition, toDate(at)): one insert per day is atomic, one across days
	// is not, so the highest offset per partition alone could cover rows
	// of another day that were never stored. The new views are created
	// before the old ones are dropped, so no insert in between is missed;
	// sink_offsets keeps what was stored before, read as a floor. The views
	// read toDate(at) exactly as the tables' PARTITION BY does.
	{5, "highest Kafka offset stored per source partition and day", []string{
		`CREATE TABLE IF NOT EXISTS sink_day_offsets (
			source          LowCardinality(String),
			kafka_partition Int32,
			day             Date,
			max_offset      SimpleAggregateFunction(max, Int64)
		) ENGINE = AggregatingMergeTree
		ORDER BY (source, kafka_partition, day)
		TTL day + INTERVAL {ttl} DAY + INTERVAL 24 HOUR
		SETTINGS non_replicated_deduplication_window = 1000`,
		`CREATE MATERIALIZED VIEW IF NOT EXISTS sink_day_offsets_attempts_mv TO sink_day_offsets AS
		SELECT 'callback_attempts' AS source, kafka_partition, toDate(at) AS day, max(kafka_offset) AS max_offset
		FROM callback_attempts GROUP BY kafka_partition, day`,
		`CREATE MATERIALIZED VIEW IF NOT EXISTS sink_day_offsets_transitions_mv TO sink_day_offsets AS
		SELECT 'breaker_transitions' AS source, kafka_partition, toDate(at) AS day, max(kafka_offset) AS max_offset
		FROM breaker_transitions GROUP BY kafka_partition, day`,
		`CREATE MATERIALIZED VIEW IF NOT EXISTS sink_day_offsets_job_events_mv TO sink_day_offsets AS
		SELECT 'job_events' AS source, kafka_partition, toDate(at) AS day, max(kafka_offset) AS max_offset
		FROM job_events GROUP BY kafka_partition, day`,
		`CREATE MATERIALIZED VIEW IF NOT EXISTS sink_day_offsets_dead_letters_mv TO sink_day_offsets AS
		SELECT 'dead_letters' AS source, kafka_partition, toDate(at) AS day, max(kafka_offset) AS max_offset
		FROM dead_letters GROUP BY kafka_partition, day`,
		`DROP VIEW IF EXISTS sink_offsets_attempts_mv`,
		`DROP VIEW IF EXISTS sink_offsets_transitions_mv`,
		`DROP VIEW IF EXISTS sink_offsets_job_events_mv`,
		`DROP VIEW IF EXISTS sink_offsets_dead_letters_mv`,
	}},
	// A dead letter's replays, recorded by the API once Kafka confirmed
	// the replay's job (see RecordReplays). The API, not the sink, writes
	// it: the next listing on any API process shows the replay at once,
	// with no topic in between. Every column but replayed_at derives from
	// the dead letter, so the key is the dead letter; replays recorded
	// twice (a retry, two API processes racing) merge into the first one
	// (min), which the queries read with the same min before merges. It
	// lives in its dead letter's partition and dies with it (TTL).
	{6, "dead letter replays", []string{
		`CREATE TABLE IF NOT EXISTS dead_letter_replays (
			namespace        LowCardinality(String),
			dead_letter_id   String,
			dead_lettered_at DateTime64(3, 'UTC'),
			job_id           String,
			replayed_at      SimpleAggregateFunction(min, DateTime64(3, 'UTC'))
		) ENGINE = AggregatingMergeTree
		PARTITION BY toDate(dead_lettered_at)
		ORDER BY (namespace, dead_letter_id, dead_lettered_at, job_id)
		TTL toDateTime(dead_lettered_at) + INTERVAL {ttl} DAY`,
	}},
}

// ttlExprs are the TTL of each table that has one, for a retention change.
var ttlExprs = map[string]string{
	TableAttempts:    "toDateTime(at) + INTERVAL {ttl} DAY",
	TableTransitions: "toDateTime(at) + INTERVAL {ttl} DAY",
	TableJobEvents:   "toDateTime(at) + INTERVAL {ttl} DAY",
	TableAttempts1m:  "minute + INTERVAL {ttl} DAY",
	TableDeadLetters: "toDateTime(at) + INTERVAL {ttl} DAY",
	// A replay goes when its dead letter does.
	TableDeadLetterReplays: "toDateTime(dead_lettered_at) + INTERVAL {ttl} DAY",
	// A day's offsets outlive its rows (at + {ttl} days, at up to the end
	// of the day) by a margin, so a replay never re-inserts kept rows.
	TableSinkDayOffsets: "day + INTERVAL {ttl} DAY + INTERVAL 24 HOUR",
}

// Migrate brings the connection's database up to the latest schema version
// and applies the retention. It is safe to run at every start and from
// several processes at once.
func Migrate(ctx context.Context, conn driver.Conn, retention time.Duration) error {
	days, err := retentionDays(retention)
	if err != nil {
		return err
	}
	if err := migrateTo(ctx, conn, days, ^uint32(0)); err != nil {
		return err
	}
	return applyRetention(ctx, conn, days)
}

// migrateTo applies the migrations up to version upTo.
func migrateTo(ctx context.Context, conn driver.Conn, days int, upTo uint32) error {
	if err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    UInt32,
			name       String,
			applied_at DateTime64(3, 'UTC') DEFAULT now64(3)
		) ENGINE = ReplacingMergeTree ORDER BY version`); err != nil {
		return fmt.Errorf("analytics: create schema_migrations: %w", err)
	}
	applied, err := appliedVersions(ctx, conn)
	if err != nil {
		return err
	}
	for _, m := range migrations {
		if applied[m.version] || m.version > upTo {
			continue
		}
		for _, s := range m.stmts {
			if err := conn.Exec(ctx, withTTL(s, days)); err != nil {
				return fmt.Errorf("analytics: migration %d (%s): %w", m.version, m.name, err)
			}
		}
		if err := conn.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES (?, ?)", m.version, m.name); err != nil {
			return fmt.Errorf("analytics: record migration %d: %w", m.version, err)
		}
	}
	return nil
}

// SchemaVersion is the highest migration applied to the database.
func SchemaVersion(ctx context.Context, conn driver.Conn) (uint32, error) {
	var v uint32
	err := conn.QueryRow(ctx, "SELECT max(version) FROM schema_migrations").Scan(&v)
	return v, err
}

func appliedVersions(ctx context.Context, conn driver.Conn) (map[uint32]bool, error) {
	rows, err := conn.Query(ctx, "SELECT DISTINCT version FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("analytics: read schema_migrations: %w", err)
	}
	defer rows.Close()
	out := map[uint32]bool{}
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out[v] = true
	}
	return out, rows.Err()
}

// applyRetention changes the TTL of tables whose TTL is not the configured
// one. Rows already stored are re-checked at the next merge, not at once
// (materialize_ttl_after_modify = 0), so a start is never slowed down.
func applyRetention(ctx context.Context, conn driver.Conn, days int) error {
	for table, expr := range ttlExprs {
		var ddl string
		if err := conn.QueryRow(ctx,
			"SELECT create_table_query FROM system.tables WHERE database = currentDatabase() AND name = ?", table).Scan(&ddl); err != nil {
			return fmt.Errorf("analytics: read the TTL of %s: %w", table, err)
		}
		if strings.Contains(ddl, fmt.Sprintf("toIntervalDay(%d)", days)) {
			continue
		}
		qctx := ch.Context(ctx, ch.WithSettings(ch.Settings{"materialize_ttl_after_modify": 0}))
		if err := conn.Exec(qctx, fmt.Sprintf("ALTER TABLE %s MODIFY TTL %s", table, withTTL(expr, days))); err != nil {
			return fmt.Errorf("analytics: set the retention of %s to %d days: %w", table, days, err)
		}
	}
	return nil
}

func retentionDays(r time.Duration) (int, error) {
	if r == 0 {
		r = DefaultRetention
	}
	if r < 24*time.Hour || r%(24*time.Hour) != 0 {
		return 0, fmt.Errorf("analytics: retention %s must be a whole number of days, at least one", r)
	}
	return int(r / (24 * time.Hour)), nil
}

func withTTL(s string, days int) string {
	return strings.ReplaceAll(s, "{ttl}", fmt.Sprint(days))
}
