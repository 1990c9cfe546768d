package schema

import (
	"time"
	"unicode/utf8"
)

// Limits on what chime writes to Kafka, whatever a tenant does within its
// quotas. A record over the broker's limit cannot be written, and in a goka
// processor a failed write stops the processor for every tenant of its
// partitions: every record chime writes must stay under MaxRecordBytes by
// construction, and the writers check it before they write.
const (
	// MaxRecordBytes is the largest record value chime writes: under
	// sarama's default Producer.MaxMessageBytes (1,000,000, which goka's
	// processors keep) and Kafka's default message.max.bytes (1,048,588),
	// with room for the key, headers and batch framing.
	MaxRecordBytes = 960 << 10

	// MaxRowBytes is the budget of one job's row in the scheduler's table
	// (its encoded JobState). The largest valid spec (a Kafka target with a
	// 512 KiB value, or an HTTP callback with a 64 KiB body and 16 KiB of
	// headers) fits with room for its fires; what a row holds beyond its
	// spec (open fires, retries, their attempt history, unconfirmed Kafka
	// writes) is shed, oldest first, to stay within it.
	MaxRowBytes = 768 << 10

	// MaxOpenFires bounds the fires one job holds between its due event
	// and its final outcome (in flight, waiting for a retry, or deferred by
	// an open breaker). A trigger beyond it is refused; a scheduled
	// occurrence beyond it closes the oldest open fire as dead.
	MaxOpenFires = 256

	// DefaultJobRetention is how long a completed, cancelled or dead job's
	// row stays in the scheduler's table (readable, its id taken) before
	// it is removed. CHIME_JOB_RETENTION sets it.
	DefaultJobRetention = 7 * 24 * time.Hour

	// MinJobRetention is the shortest retention chime accepts: a finished
	// row must outlive the outcomes and acknowledgements still on their
	// way to it, and the retries of the create that made it.
	MinJobRetention = time.Minute

	// MaxHistoryError and MaxHistorySnippet bound what a fire keeps of each
	// failed attempt in its row and due events (the outcomes topic and
	// ClickHouse keep every attempt whole).
	MaxHistoryError   = 512
	MaxHistorySnippet = 256

	// MaxRejectedCommand bounds the copy of a refused command a rejection
	// event carries: a command near the broker's limit plus the rejection's
	// own fields would not fit.
	MaxRejectedCommand = 64 << 10
)

// Truncate cuts s to at most n bytes without splitting a UTF-8 sequence
// (a cut string must still encode as a protobuf string).
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// MaxBackfill is the most occurrences one backfill fires: each opens a
// fire that stays in the job's row until answered. A longer range is
// refused (by the API at once, and by the scheduler); split it.
const MaxBackfill = 100
