package producer

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// HeaderCommand is the record header naming the command's kind ("upsert",
// "cancel", ...), so tools can filter the topic without decoding values.
const HeaderCommand = "chime-command"

// The builders below set the command's target and payload only; Publish
// stamps command_id and issued_at.

func upsertCommand(spec *chimev1.JobSpec) *chimev1.JobCommand {
	return &chimev1.JobCommand{
		Namespace: spec.GetNamespace(),
		JobId:     spec.GetId(),
		Command:   &chimev1.JobCommand_Upsert{Upsert: &chimev1.Upsert{Spec: spec}},
	}
}

func cancelCommand(ns, id, reason string) *chimev1.JobCommand {
	return &chimev1.JobCommand{
		Namespace: ns,
		JobId:     id,
		Command:   &chimev1.JobCommand_Cancel{Cancel: &chimev1.Cancel{Reason: reason}},
	}
}

func pauseCommand(ns, id string) *chimev1.JobCommand {
	return &chimev1.JobCommand{
		Namespace: ns,
		JobId:     id,
		Command:   &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}},
	}
}

func resumeCommand(ns, id string) *chimev1.JobCommand {
	return &chimev1.JobCommand{
		Namespace: ns,
		JobId:     id,
		Command:   &chimev1.JobCommand_Resume{Resume: &chimev1.Resume{}},
	}
}

func retryCommand(ns, id string, fireSeq, emitSeq uint64, attempt uint32, notBefore time.Time, reason string) *chimev1.JobCommand {
	return &chimev1.JobCommand{
		Namespace: ns,
		JobId:     id,
		Command: &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{
			FireSeq:   fireSeq,
			EmitSeq:   emitSeq,
			Attempt:   attempt,
			NotBefore: timestamp(notBefore),
			Reason:    reason,
		}},
	}
}

func deferCommand(ns, id string, fireSeq, emitSeq uint64, notBefore time.Time, reason string) *chimev1.JobCommand {
	return &chimev1.JobCommand{
		Namespace: ns,
		JobId:     id,
		Command: &chimev1.JobCommand_Defer{Defer: &chimev1.Defer{
			FireSeq:   fireSeq,
			EmitSeq:   emitSeq,
			NotBefore: timestamp(notBefore),
			Reason:    reason,
		}},
	}
}

func ackCommand(ns, id string, fireSeq, emitSeq uint64, attempt uint32, result chimev1.AckResult, detail string) *chimev1.JobCommand {
	return &chimev1.JobCommand{
		Namespace: ns,
		JobId:     id,
		Command: &chimev1.JobCommand_Ack{Ack: &chimev1.Ack{
			FireSeq: fireSeq,
			EmitSeq: emitSeq,
			Attempt: attempt,
			Result:  result,
			Detail:  detail,
		}},
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

// commandKind is the value of HeaderCommand; "" for a command without one.
func commandKind(cmd *chimev1.JobCommand) string {
	switch cmd.GetCommand().(type) {
	case *chimev1.JobCommand_Upsert:
		return "upsert"
	case *chimev1.JobCommand_Cancel:
		return "cancel"
	case *chimev1.JobCommand_Pause:
		return "pause"
	case *chimev1.JobCommand_Resume:
		return "resume"
	case *chimev1.JobCommand_Retry:
		return "retry"
	case *chimev1.JobCommand_Defer:
		return "defer"
	case *chimev1.JobCommand_Ack:
		return "ack"
	default:
		return ""
	}
}

// stamp fills in what the publisher owns, keeping what the caller set: a
// caller republishing a command keeps its command_id.
func stamp(cmd *chimev1.JobCommand, now time.Time) {
	if cmd.GetCommandId() == "" {
		cmd.CommandId = newCommandID(now)
	}
	if cmd.GetIssuedAt() == nil {
		cmd.IssuedAt = timestamppb.New(now)
	}
}

// newCommandID returns a UUIDv7 (RFC 9562): 48 bits of Unix milliseconds,
// then 74 random bits. IDs sort by issue time in logs and ClickHouse, and
// the random bits keep them unique across producers and a frozen test clock.
func newCommandID(now time.Time) string {
	var u [16]byte
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(now.UnixMilli()))
	copy(u[:6], ms[2:])
	_, _ = rand.Read(u[6:]) // never fails: crypto/rand panics rather than return an error
	u[6] = 0x70 | u[6]&0x0f // version 7
	u[8] = 0x80 | u[8]&0x3f // variant 10

	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}
