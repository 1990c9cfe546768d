package scheduler

// Rejections: a command that cannot be applied is answered on the
// rejections topic, with the command as received, never with a crash.

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

func (d *decider) reject(in *input, cmd *chimev1.JobCommand, field, reason string, now time.Time) decision {
	dec := decision{rejection: &chimev1.Rejection{
		EventId:   in.eventID(),
		CommandId: cmd.GetCommandId(),
		Namespace: cmd.GetNamespace(),
		JobId:     cmd.GetJobId(),
		Reason:    reason,
		Field:     field,
		At:        timestamppb.New(now),
		Topic:     in.topic,
		Partition: in.partition,
		Offset:    in.offset,
		Command:   in.raw,
	}}
	if len(in.raw) > schema.MaxRejectedCommand {
		dec.rejection.Command = in.raw[:schema.MaxRejectedCommand]
		dec.rejection.CommandSize = uint32(len(in.raw))
	}
	return dec
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
