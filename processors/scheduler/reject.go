package scheduler

// Rejections: a command that cannot be applied is answered on the
// rejections topic, with the command as received, never with a crash.

import (
	"fmt"
	"slices"
	"time"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/schema/command"
)

func (d *decider) reject(in *input, cmd *chimev1.JobCommand, field, reason string, now time.Time) decision {
	return decision{rejection: command.Reject(command.Refusal{
		EventID:   in.eventID(),
		CommandID: cmd.GetCommandId(),
		Namespace: cmd.GetNamespace(),
		JobID:     cmd.GetJobId(),
		Field:     field,
		Reason:    reason,
		At:        now,
		Topic:     in.topic,
		Partition: in.partition,
		Offset:    in.offset,
		Raw:       in.rawCmd(),
	})}
}

// refuse rejects the command being processed after it was decided (its
// decision could not be written).
func (d *decider) refuse(in *input, reason string, now time.Time) decision {
	ns, id, _ := schema.SplitJobKey(in.key)
	in.seq = 0 // the refused decision's event IDs were never written
	return d.reject(in, &chimev1.JobCommand{CommandId: in.commandID, Namespace: ns, JobId: id}, "", reason, now)
}

func allowList(m map[string]bool) string {
	var l []string
	for k := range m {
		l = append(l, k)
	}
	slices.Sort(l)
	if len(l) == 0 {
		return "empty"
	}
	return fmt.Sprint(l)
}
