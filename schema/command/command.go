// Package command owns how chime's commands are built: one builder for each
// job command (Upsert, Cancel, Pause, Resume, Trigger, Retry, Defer, Ack),
// for each namespace command and each breaker command, and the scheme their
// command_ids follow. The producer SDK, the API, the dispatcher and the
// breaker all build their commands here, so a command of one kind looks the
// same whoever publishes it. [Reject] builds the other side: the rejection
// event a processor publishes for a command it will not apply, the same
// from the scheduler, the namespace processor and the breaker.
//
// A builder sets the command's target and payload. The command_id and
// issued_at are left to [Stamp] (the producer stamps what it publishes), or
// set by the caller before, when the id must be derived (see [ReplayID] and
// [CoolOffID]).
//
// # Command ids
//
// A command_id is a UUIDv7 (RFC 9562, [NewID]): ids of one process sort in
// the order they were issued, and ids of all processes roughly by time, in
// logs and in ClickHouse. Two ids are derived instead of drawn, because the
// command they name must be recognised when it is issued again: the
// scheduler ignores an Upsert whose command_id repeats its row's last one.
//
//   - "replay-<32 hex digits>": a dead letter's replay ([ReplayID]), so a
//     replay repeated on any API instance is one job.
//   - "breaker-cooloff/<namespace>/<version>/<fire_at ms>": the timer job that
//     ends a breaker's cool-off ([CoolOffID]), unique per arming.
//
// Their formats are part of the wire: changing one would make a replay or an
// arming issued before an upgrade look new after it. Readers never parse a
// command_id; any non-empty string is accepted, older ids included.
package command

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// chime's UUIDs (command ids, generated job ids) name things; none is a
// secret. Drawn from a pool of random bytes read 4 KB at a time instead of
// one read of the system's generator each: a fired job makes one for its
// outcome, and the reads were about 1 % of its CPU. Set before any UUID is
// made (google/uuid asks that it not change while UUIDs are made).
func init() { uuid.EnableRandPool() }

// NewID returns a fresh command_id: a UUIDv7. Its time is the wall clock's
// (google/uuid keeps it monotonic within the process), not an injected one:
// issued_at carries that, and a frozen test clock must not make ids collide.
func NewID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// ReplayID is the command_id of the Upsert that replays dead letter
// deadLetterID of namespace ns: "replay-" and the first 16 bytes of the
// SHA-256 of "ns\x00deadLetterID", in hex.
func ReplayID(ns, deadLetterID string) string {
	h := sha256.Sum256([]byte(ns + "\x00" + deadLetterID))
	return "replay-" + hex.EncodeToString(h[:16])
}

// CoolOffID is the command_id of the Upsert that arms namespace ns's
// cool-off timer of version version, due at fireAt. It is unique per
// arming even if the breaker table were rebuilt from scratch and its
// versions started again, and the same when one arming is issued twice.
func CoolOffID(ns string, version uint64, fireAt time.Time) string {
	return "breaker-cooloff/" + ns + "/" + strconv.FormatUint(version, 10) + "/" + strconv.FormatInt(fireAt.UnixMilli(), 10)
}

// Stamp fills in a command's command_id (a [NewID]) and issued_at (now),
// keeping what the caller set: a republished command keeps its id. cmd is
// a *chimev1.JobCommand, *chimev1.NamespaceCommand or
// *chimev1.BreakerCommand; any other value is left alone.
func Stamp(cmd any, now time.Time) {
	var (
		id     *string
		issued **timestamppb.Timestamp
	)
	switch c := cmd.(type) {
	case *chimev1.JobCommand:
		if c == nil {
			return
		}
		id, issued = &c.CommandId, &c.IssuedAt
	case *chimev1.NamespaceCommand:
		if c == nil {
			return
		}
		id, issued = &c.CommandId, &c.IssuedAt
	case *chimev1.BreakerCommand:
		if c == nil {
			return
		}
		id, issued = &c.CommandId, &c.IssuedAt
	default:
		return
	}
	if *id == "" {
		*id = NewID()
	}
	if *issued == nil {
		*issued = timestamppb.New(now)
	}
}

// timestamp leaves a zero time unset, so validation reports it missing
// instead of seeing year 1.
func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
