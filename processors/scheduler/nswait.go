package scheduler

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// A job must belong to a namespace that exists: the namespace carries its
// policy (allowed hosts, signing secret, limits), and the API answers 404
// for jobs of an unknown one. Commands published straight to Kafka (the
// producer SDK) are held to the same rule here.
//
// The scheduler's view of the namespace table may lag the API's: a
// namespace created over the API and a job created right after it (through
// the API, which checked the namespace) can reach the scheduler before the
// namespace does. So a create for an unknown namespace is not refused at
// once: its command is held in the job's row (held_command) and looked at
// again, a quarter second later and then at doubling intervals, until the
// namespace exists (the command is then applied as if it had just
// arrived, anchored at its issue time) or until Config.NamespaceWait has
// passed (it is then rejected, reason and field "namespace").

// nsState is what the scheduler's namespace view says of a command's
// namespace.
type nsState uint8

const (
	nsKnown nsState = iota
	nsAbsent
	// nsUnreadable: the view failed to answer. A held command is never
	// rejected on that.
	nsUnreadable
)

// firstNamespaceCheck is how soon a held create is looked at again.
const firstNamespaceCheck = 250 * time.Millisecond

func heldRow(st *chimev1.JobState) bool { return st != nil && st.GetHeldCommand() != nil }

// holdForNamespace holds a create whose namespace the scheduler does not
// know (yet). cur is nil or a held row (a later create replaces the held
// one, and keeps its deadline).
func (d *decider) holdForNamespace(in *input, cur *chimev1.JobState, now time.Time) decision {
	st := &chimev1.JobState{CreatedAt: timestamppb.New(now), HeldUntil: timestamppb.New(now.Add(d.cfg.NamespaceWait))}
	if heldRow(cur) {
		st.CreatedAt, st.HeldUntil = cur.GetCreatedAt(), cur.GetHeldUntil()
	}
	st.HeldCommand = in.rawCmd()
	st.TimerAt = timestamppb.New(d.namespaceCheckAt(st, now))
	return decision{state: st}
}

// namespaceCheckAt is when a held row is looked at again: as long after
// now as it has been held (at least firstNamespaceCheck), and not after
// its deadline.
func (d *decider) namespaceCheckAt(st *chimev1.JobState, now time.Time) time.Time {
	at := now.Add(max(firstNamespaceCheck, now.Sub(st.GetCreatedAt().AsTime())))
	if until := st.GetHeldUntil().AsTime(); until.Before(at) {
		return until
	}
	return at
}

// onHeld handles a tick or a command on a held row.
func (d *decider) onHeld(in *input, cur *chimev1.JobState, cmd *chimev1.JobCommand, now time.Time) decision {
	if cmd != nil && cmd.GetUpsert() == nil {
		// Cancel, pause, resume or trigger of a job whose create waits for
		// its namespace.
		return d.reject(in, cmd, "namespace", fmt.Sprintf("job %q is not created yet: its namespace %q does not exist; its create is held until %s, then rejected",
			in.key, cmd.GetNamespace(), cur.GetHeldUntil().AsTime().Format(time.RFC3339)), now)
	}
	if cmd != nil && in.ns != nsKnown {
		return d.holdForNamespace(in, cur, now) // a newer create replaces the held one
	}
	if cmd == nil {
		// A tick: apply the held create now that the namespace exists.
		in.raw, in.cmd = cur.GetHeldCommand(), nil
		switch {
		case in.ns == nsKnown:
		case in.ns == nsAbsent && !now.Before(cur.GetHeldUntil().AsTime()):
			held := new(chimev1.JobCommand)
			_ = schema.UnmarshalInput(in.raw, held) // it decoded when it was held
			in.commandID = held.GetCommandId()
			dec := d.reject(in, held, "namespace", fmt.Sprintf("namespace %q does not exist: create it first (PUT /v1/namespaces/%s), then publish its jobs; this create was held %s for it",
				held.GetNamespace(), held.GetNamespace(), d.cfg.NamespaceWait), now)
			dec.del = true
			return dec
		case cur.GetTimerAt().AsTime().After(now):
			return decision{} // an early tick: the timer decides
		default:
			st := copyRow(cur)
			st.TimerAt = timestamppb.New(d.namespaceCheckAt(cur, now))
			return decision{state: st}
		}
	}
	// The namespace exists: the create (held, or the one just received)
	// is applied as if the row did not exist.
	return d.command(in, nil, now)
}

// namespaceState classifies what the namespace view answered.
func namespaceState(cfg *chimev1.NamespaceConfig, err error) nsState {
	switch {
	case err != nil:
		return nsUnreadable
	case cfg == nil:
		return nsAbsent
	}
	return nsKnown
}
