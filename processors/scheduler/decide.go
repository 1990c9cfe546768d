package scheduler

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// This file is where chime decides that a job is due. The functions here are
// pure: given the row, the input and the time, they return a decision that
// the goka callbacks (apply.go) apply. Everything that must hold across
// crashes follows from two rules:
//
//   - the row is the only authority. A tick is a hint to look at the row; a
//     tick that finds nothing due does nothing, so lost, repeated and stale
//     ticks are harmless;
//   - fire_seq only grows. Every occurrence, fired or skipped, takes the
//     next number, and the idempotency key "ns/job/fire_seq" never names
//     two different occurrences, also across upserts.
//
// The decider's entry points, onCommand and onTick, are here; what they
// decide is in one file per concern:
//
//	command.go    decode, validate and route a command; upsert, cancel,
//	              pause, resume, trigger
//	outcome.go    the dispatcher's answers: retry, defer, ack; completion
//	tick.go       what a tick finds due: retries, occurrences, catch-up,
//	              retention
//	fire.go       an occurrence becomes a due event or a Kafka write
//	redeliver.go  what was left unanswered or unconfirmed is sent again
//	rowtimer.go   when the row next needs a tick
//	reject.go     a command that cannot be applied is answered
//	bound.go      the row stays within its byte budget
//	nswait.go     a create waits for its namespace

// decision is what one input does to one row.
type decision struct {
	// state is the new row; nil leaves the row as it is. It is never the
	// row the decision was made on (rowcopy.go); the helpers that add to a
	// decision change this row.
	state *chimev1.JobState
	// del removes the row.
	del  bool
	dues []*chimev1.Due
	// recalls take back due events emitted ahead of their time
	// (recall.go).
	recalls   []*chimev1.Due
	deliver   []*chimev1.KafkaTarget
	events    []*chimev1.JobEvent
	rejection *chimev1.Rejection
}

// input identifies the record being processed; event IDs derive from it so
// that replaying the record yields the same IDs (analytics deduplicates on
// them). It is the one thing a decision writes to besides what it returns:
// it numbers the decision's events (seq) and notes the command's id, which
// refuse reads when the decision cannot be written.
type input struct {
	key       string
	topic     string
	partition int32
	offset    int64
	// sub is 1 + the command's place in its batch record; 0 for a record
	// of its own.
	sub int
	// raw is the record's value; cmd the command, once decoded (a batch's
	// command has no raw of its own until one is needed: rawCmd).
	raw       []byte
	cmd       *chimev1.JobCommand
	seq       int
	commandID string
	// checked says the command passed check already (settle.go).
	checked bool
	// nsWindow is the namespace's relevancy window (0: none set), from the
	// namespace table the scheduler looks up.
	nsWindow time.Duration
	// partitions is the input topic's partition count (0: unknown), to
	// refuse a record written to another partition than its key's.
	partitions int32
	// nsSpread is the namespace's effective spread (schema.Spread; 1: not
	// spread).
	nsSpread uint32
	// ns says whether the namespace exists (nswait.go).
	ns nsState
}

func (in *input) eventID() string {
	in.seq++
	off := strconv.FormatInt(in.offset, 10)
	if in.sub > 0 {
		off += "." + strconv.Itoa(in.sub-1)
	}
	return in.topic + "-" + strconv.Itoa(int(in.partition)) + "-" + off + "-" + strconv.Itoa(in.seq)
}

// rawCmd is the command as bytes: the record's value, or a batch's
// command encoded (for a rejection, or a create held for its namespace).
func (in *input) rawCmd() []byte {
	if in.raw == nil && in.cmd != nil {
		in.raw, _ = schema.Marshal(in.cmd)
	}
	return in.raw
}

// decider holds what decisions depend on besides the row and the input.
type decider struct {
	cfg     Config
	allowed map[string]bool
	// incarnation names the running goka processor; a new one starts with
	// every processor (re)start. See chimev1.Delivery.
	incarnation atomic.Pointer[string]
	// backlog is how far behind the dispatchers are, their worst
	// partition (nanoseconds; backlog.go): redelivery waits for it on top
	// of the ack timeout. flow is the least behind of their busy
	// partitions: above FlowBacklog the pump takes no timers
	// (heldBack).
	backlog, flow atomic.Int64
}

func (d *decider) currentIncarnation() string {
	if p := d.incarnation.Load(); p != nil {
		return *p
	}
	return ""
}

// onCommand applies a job command to cur, the row as stored (nil: none).
// raw is the record's value; a command that does not decode or validate is
// answered with a rejection, never a crash. cur is left as it is; the new
// row, which fits the row budget (bound.go), is the decision's state.
func (d *decider) onCommand(in *input, cur *chimev1.JobState, now time.Time) decision {
	dec := d.command(in, cur, now)
	d.bound(in, &dec, now)
	return dec
}

func (d *decider) event(in *input, st *chimev1.JobState, typ chimev1.JobEventType, now time.Time) *chimev1.JobEvent {
	return &chimev1.JobEvent{
		EventId:   in.eventID(),
		Namespace: st.GetSpec().GetNamespace(),
		JobId:     st.GetSpec().GetId(),
		Type:      typ,
		At:        sameInstant(st.GetUpdatedAt(), now), // most decisions stamp the row at now first
		FireSeq:   st.GetFireSeq(),
		CommandId: in.commandID,
	}
}

// onTick fires whatever in the row is due at now. cur is left as it is;
// the new row, which fits the row budget (bound.go), is the decision's
// state.
func (d *decider) onTick(in *input, cur *chimev1.JobState, now time.Time) decision {
	dec := d.tick(in, cur, now)
	d.bound(in, &dec, now)
	return dec
}
