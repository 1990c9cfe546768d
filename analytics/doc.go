// Package analytics owns chime's history in ClickHouse: the schema and its
// migrations (callback attempts, breaker transitions, job lifecycle events,
// per-minute per-namespace aggregates), the batched writes the sink makes
// (analytics/sink), and the queries operators ask: a namespace's breaker
// history, its request statistics over time, and one job's attempts.
//
// Writes are exactly-once in effect although Kafka delivers at least once:
// every row carries the Kafka partition and offset it came from; a batch
// is inserted day by day (InsertDay), so that each insert fills one
// partition, one part, stored whole or not at all; materialized views keep
// the highest offset stored per source table, partition and day
// (sink_day_offsets), and the sink skips a record at or below the one of
// its row's day when it resumes (Stored). A retried insert carries the
// same insert_deduplication_token, so ClickHouse drops it (and its
// materialized-view rows) if the first try landed. The raw tables are also
// ReplacingMergeTrees on the event id, as a last line of defence.
package analytics
