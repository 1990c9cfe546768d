package command

import (
	"time"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Refusal is what a processor knows of a command it will not apply: the
// rejection event [Reject] builds from it is the command's answer on the
// rejections topic.
type Refusal struct {
	// EventID is the rejection's event_id, derived from where the command
	// was read, so that a re-processed command is rejected under the same
	// id.
	EventID string
	// CommandID, Namespace and JobID are the command's, as far as it
	// decoded.
	CommandID, Namespace, JobID string
	// Field names the offending field ("" for the command as a whole);
	// Reason says why, for a person.
	Field, Reason string
	At            time.Time
	// Topic, Partition and Offset are where the command was read.
	Topic     string
	Partition int32
	Offset    int64
	// Raw is the command as read.
	Raw []byte
}

// Reject builds the rejection event of r. It carries the command as read,
// cut to schema.MaxRejectedCommand bytes (CommandSize then says how large
// it was): a command near the broker's record limit plus the rejection's
// own fields would not fit in one record, and a processor that cannot
// write its rejection fails on the same command at every restart.
func Reject(r Refusal) *chimev1.Rejection {
	rej := &chimev1.Rejection{
		EventId:   r.EventID,
		CommandId: r.CommandID,
		Namespace: r.Namespace,
		JobId:     r.JobID,
		Reason:    r.Reason,
		Field:     r.Field,
		At:        timestamp(r.At),
		Topic:     r.Topic,
		Partition: r.Partition,
		Offset:    r.Offset,
		Command:   r.Raw,
	}
	if len(r.Raw) > schema.MaxRejectedCommand {
		rej.Command = r.Raw[:schema.MaxRejectedCommand]
		rej.CommandSize = uint32(len(r.Raw))
	}
	return rej
}
