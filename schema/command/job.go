package command

import (
	"time"

	"github.com/chime-sched/chime/schema/chimev1"
)

// Upsert creates the job spec describes, or replaces its spec and
// reschedules it. Namespace and job id are the spec's; a nil spec is left
// for validation to report.
func Upsert(spec *chimev1.JobSpec) *chimev1.JobCommand {
	return &chimev1.JobCommand{
		Namespace: spec.GetNamespace(),
		JobId:     spec.GetId(),
		Command:   &chimev1.JobCommand_Upsert{Upsert: &chimev1.Upsert{Spec: spec}},
	}
}

// Cancel stops job id of namespace ns for good.
func Cancel(ns, id, reason string) *chimev1.JobCommand {
	return &chimev1.JobCommand{
		Namespace: ns,
		JobId:     id,
		Command:   &chimev1.JobCommand_Cancel{Cancel: &chimev1.Cancel{Reason: reason}},
	}
}

// Pause stops the job from firing until a Resume.
func Pause(ns, id string) *chimev1.JobCommand {
	return &chimev1.JobCommand{
		Namespace: ns,
		JobId:     id,
		Command:   &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}},
	}
}

// Resume lets a paused job fire again.
func Resume(ns, id string) *chimev1.JobCommand {
	return &chimev1.JobCommand{
		Namespace: ns,
		JobId:     id,
		Command:   &chimev1.JobCommand_Resume{Resume: &chimev1.Resume{}},
	}
}

// Trigger fires the job once now, beside its schedule: the fire takes its
// own fire number and the schedule is unchanged.
func Trigger(ns, id string) *chimev1.JobCommand {
	return &chimev1.JobCommand{
		Namespace: ns,
		JobId:     id,
		Command:   &chimev1.JobCommand_Trigger{Trigger: &chimev1.Trigger{}},
	}
}

// Emission names the due event that a Retry, Defer or Ack answers: the
// job, its fire, and which emission of that fire (the scheduler ignores an
// answer to a stale one).
type Emission struct {
	Namespace string
	JobID     string
	FireSeq   uint64
	EmitSeq   uint64
}

// EmissionOf is the emission due carries.
func EmissionOf(due *chimev1.Due) Emission {
	return Emission{Namespace: due.GetNamespace(), JobID: due.GetJobId(), FireSeq: due.GetFireSeq(), EmitSeq: due.GetEmitSeq()}
}

// Retry re-arms the timer of e's fire for attempt number attempt, not
// before notBefore, charging an attempt. failed, if set, is the attempt that
// failed, for the fire's history (a dead letter then lists every attempt).
func Retry(e Emission, attempt uint32, notBefore time.Time, reason string, failed *chimev1.CallbackOutcome) *chimev1.JobCommand {
	return &chimev1.JobCommand{
		Namespace: e.Namespace,
		JobId:     e.JobID,
		Command: &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{
			FireSeq:   e.FireSeq,
			EmitSeq:   e.EmitSeq,
			Attempt:   attempt,
			NotBefore: timestamp(notBefore),
			Reason:    reason,
			Outcome:   failed,
		}},
	}
}

// Defer re-arms the timer of e's fire, not before notBefore, without
// charging an attempt (breaker open, rate limit, concurrency cap).
func Defer(e Emission, notBefore time.Time, reason string) *chimev1.JobCommand {
	return &chimev1.JobCommand{
		Namespace: e.Namespace,
		JobId:     e.JobID,
		Command: &chimev1.JobCommand_Defer{Defer: &chimev1.Defer{
			FireSeq:   e.FireSeq,
			EmitSeq:   e.EmitSeq,
			NotBefore: timestamp(notBefore),
			Reason:    reason,
		}},
	}
}

// Ack closes e's fire with its result; attempt is the attempt that ended it.
func Ack(e Emission, attempt uint32, result chimev1.AckResult, detail string) *chimev1.JobCommand {
	// One allocation where three messages are: the dispatcher answers
	// every call with one.
	p := &struct {
		cmd chimev1.JobCommand
		one chimev1.JobCommand_Ack
		ack chimev1.Ack
	}{}
	p.ack = chimev1.Ack{
		FireSeq: e.FireSeq,
		EmitSeq: e.EmitSeq,
		Attempt: attempt,
		Result:  result,
		Detail:  detail,
	}
	p.one.Ack = &p.ack
	p.cmd = chimev1.JobCommand{Namespace: e.Namespace, JobId: e.JobID, Command: &p.one}
	return &p.cmd
}

// Backfill fires now the occurrences of the job's schedule in [from, to).
func Backfill(ns, id string, from, to time.Time) *chimev1.JobCommand {
	return &chimev1.JobCommand{
		Namespace: ns,
		JobId:     id,
		Command:   &chimev1.JobCommand_Backfill{Backfill: &chimev1.Backfill{From: timestamp(from), To: timestamp(to)}},
	}
}

// Kind names a job command's kind ("upsert", "cancel", ...), as the
// producer's record header carries it; "" for a command without one.
func Kind(cmd *chimev1.JobCommand) string {
	switch cmd.GetCommand().(type) {
	case *chimev1.JobCommand_Upsert:
		return "upsert"
	case *chimev1.JobCommand_Cancel:
		return "cancel"
	case *chimev1.JobCommand_Pause:
		return "pause"
	case *chimev1.JobCommand_Resume:
		return "resume"
	case *chimev1.JobCommand_Trigger:
		return "trigger"
	case *chimev1.JobCommand_Retry:
		return "retry"
	case *chimev1.JobCommand_Defer:
		return "defer"
	case *chimev1.JobCommand_Ack:
		return "ack"
	case *chimev1.JobCommand_Batch:
		return "batch"
	case *chimev1.JobCommand_Backfill:
		return "backfill"
	default:
		return ""
	}
}
