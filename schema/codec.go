package schema

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// Codec is a goka codec for one protobuf message type. M is the message
// struct type and PM its pointer (the proto.Message).
type Codec[M any, PM interface {
	*M
	proto.Message
}] struct{}

// Encode implements goka.Codec.
func (Codec[M, PM]) Encode(value any) ([]byte, error) {
	m, ok := value.(PM)
	if !ok {
		return nil, fmt.Errorf("codec: expected %T, got %T", PM(nil), value)
	}
	return Marshal(m)
}

// Decode implements goka.Codec. The codecs decode what chime's processors
// write (see UnmarshalInternal).
func (Codec[M, PM]) Decode(data []byte) (any, error) {
	m := PM(new(M))
	if err := UnmarshalInternal(data, m); err != nil {
		return nil, fmt.Errorf("codec: decode %T: %w", m, err)
	}
	return m, nil
}

// Codecs for every message that crosses a topic.
type (
	JobCommandCodec        = Codec[chimev1.JobCommand, *chimev1.JobCommand]
	TickCodec              = Codec[chimev1.Tick, *chimev1.Tick]
	DueCodec               = Codec[chimev1.Due, *chimev1.Due]
	JobEventCodec          = Codec[chimev1.JobEvent, *chimev1.JobEvent]
	RejectionCodec         = Codec[chimev1.Rejection, *chimev1.Rejection]
	OutcomeCodec           = Codec[chimev1.CallbackOutcome, *chimev1.CallbackOutcome]
	DeadLetterCodec        = Codec[chimev1.DeadLetter, *chimev1.DeadLetter]
	BreakerStatusCodec     = Codec[chimev1.BreakerStatus, *chimev1.BreakerStatus]
	BreakerTransitionCodec = Codec[chimev1.BreakerTransition, *chimev1.BreakerTransition]
	NamespaceConfigCodec   = Codec[chimev1.NamespaceConfig, *chimev1.NamespaceConfig]
	BreakerTimerCodec      = Codec[chimev1.BreakerTimer, *chimev1.BreakerTimer]
	BreakerCommandCodec    = Codec[chimev1.BreakerCommand, *chimev1.BreakerCommand]
)

// BytesCodec passes raw bytes through, for Kafka-target deliveries.
type BytesCodec struct{}

// Encode implements goka.Codec.
func (BytesCodec) Encode(value any) ([]byte, error) {
	switch v := value.(type) {
	case []byte:
		return v, nil
	case nil:
		return nil, nil
	default:
		return nil, fmt.Errorf("codec: expected []byte, got %T", value)
	}
}

// Decode implements goka.Codec.
func (BytesCodec) Decode(data []byte) (any, error) { return data, nil }

// The scheduler table's value carries the row's timers in a fixed header in
// front of the protobuf, so the timer index can be maintained from raw
// storage writes, and rebuilt at recovery, without decoding the row:
//
//	byte 0       format version (2; 1 had no recover_at)
//	bytes 1..8   when the row wants its tick (tick_at, else timer_at) as
//	             Unix nanoseconds, big endian; 0 = no timer
//	bytes 9..16  recover_at likewise (format 2 only)
//	bytes 17..   chimev1.JobState
const (
	jobStateFormatV1    = 1
	jobStateHeaderLenV1 = 9
	jobStateFormat      = 2
	jobStateHeaderLen   = 17
)

// JobStateCodec encodes the scheduler table's rows.
type JobStateCodec struct{}

// Encode implements goka.Codec.
func (JobStateCodec) Encode(value any) ([]byte, error) {
	s, ok := value.(*chimev1.JobState)
	if !ok {
		return nil, fmt.Errorf("codec: expected *chimev1.JobState, got %T", value)
	}
	tick := s.GetTickAt()
	if tick == nil {
		tick = s.GetTimerAt()
	}
	buf := AppendJobStateHeader(make([]byte, 0, jobStateHeaderLen+s.SizeVT()), unixNanoOrZero(tick), unixNanoOrZero(s.GetRecoverAt()))
	return MarshalAppend(buf, s)
}

// AppendJobStateHeader appends an encoded row's header (the current
// format) to buf: tick is when the row wants its tick (tick_at, else
// timer_at), recover its recover_at, as Unix nanoseconds (0: unset). The
// protobuf of the row follows it.
func AppendJobStateHeader(buf []byte, tick, recover int64) []byte {
	buf = append(buf, jobStateFormat)
	buf = binary.BigEndian.AppendUint64(buf, uint64(tick))
	return binary.BigEndian.AppendUint64(buf, uint64(recover))
}

// JobStateProto is the protobuf of a row encoded in the current format,
// for code that edits a row without decoding it (ok false otherwise).
func JobStateProto(data []byte) (_ []byte, ok bool) {
	if jobStateHeader(data) != jobStateHeaderLen {
		return nil, false
	}
	return data[jobStateHeaderLen:], true
}

func unixNanoOrZero(t *timestamppb.Timestamp) int64 {
	if t == nil {
		return 0
	}
	return t.AsTime().UnixNano()
}

// jobStateHeader returns the header length of an encoded row, 0 if the
// value is malformed.
func jobStateHeader(data []byte) int {
	switch {
	case len(data) >= jobStateHeaderLen && data[0] == jobStateFormat:
		return jobStateHeaderLen
	case len(data) >= jobStateHeaderLenV1 && data[0] == jobStateFormatV1:
		return jobStateHeaderLenV1
	}
	return 0
}

// Decode implements goka.Codec.
func (JobStateCodec) Decode(data []byte) (any, error) {
	n := jobStateHeader(data)
	if n == 0 {
		return nil, fmt.Errorf("codec: job state: bad header (len %d)", len(data))
	}
	// The generated decoder, as it is: presetting the row's messages in
	// one allocation cost more than it saved (preset.go).
	s := new(chimev1.JobState)
	if err := s.UnmarshalVT(data[n:]); err != nil {
		return nil, fmt.Errorf("codec: decode job state: %w", err)
	}
	return s, nil
}

// JobStateTimer reads when the row wants its tick (tick_at, else
// timer_at) from an encoded row without decoding it. ok is false for a
// malformed value; timer 0 means the row has no timer.
func JobStateTimer(data []byte) (timerUnixNano int64, ok bool) {
	if jobStateHeader(data) == 0 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(data[1:])), true
}

// JobStateRecoverAt reads recover_at from an encoded row without decoding
// it; 0 when unset, malformed or written in format 1.
func JobStateRecoverAt(data []byte) int64 {
	if jobStateHeader(data) != jobStateHeaderLen {
		return 0
	}
	return int64(binary.BigEndian.Uint64(data[9:]))
}

// JobEnded says a job in status s will not fire again: its row is kept
// only to be read.
func JobEnded(s chimev1.JobStatus) bool {
	return s == chimev1.JobStatus_JOB_STATUS_COMPLETED ||
		s == chimev1.JobStatus_JOB_STATUS_CANCELLED ||
		s == chimev1.JobStatus_JOB_STATUS_DEAD
}

// JobState's field numbers read by JobStateSummary.
const (
	jobStateStatusField  = 2
	jobStateCreatedField = 9
)

// JobSummary is what listings and the pending-jobs count need of a row.
type JobSummary struct {
	Status chimev1.JobStatus
	// Created is created_at in Unix nanoseconds (0 when unset).
	Created int64
}

// Live says the job has not ended.
func (j JobSummary) Live() bool { return !JobEnded(j.Status) }

// JobStateSummary reads a row's status and created_at without decoding it
// (no allocation): job listings and the pending-jobs count read every row
// at recovery and every write after. ok is false for a malformed value.
func JobStateSummary(data []byte) (sum JobSummary, ok bool) {
	n := jobStateHeader(data)
	if n == 0 {
		return sum, false
	}
	b := data[n:]
	for len(b) > 0 {
		num, typ, v, rest, err := NextField(b)
		if err != nil {
			return sum, false
		}
		b = rest
		switch {
		case num == jobStateStatusField && typ == protowire.VarintType:
			sum.Status = chimev1.JobStatus(VarintValue(v))
		case num == jobStateCreatedField && typ == protowire.BytesType:
			sum.Created = timestampNanos(v)
		}
	}
	return sum, true
}

// timestampNanos reads an encoded google.protobuf.Timestamp.
func timestampNanos(b []byte) int64 {
	var secs, nanos int64
	for len(b) > 0 {
		num, typ, v, rest, err := NextField(b)
		if err != nil || typ != protowire.VarintType {
			return 0
		}
		b = rest
		switch num {
		case 1:
			secs = int64(VarintValue(v))
		case 2:
			nanos = int64(int32(VarintValue(v)))
		}
	}
	return secs*1e9 + nanos
}

// Field numbers read by JobStateLabels: JobState.spec, JobSpec.labels, and
// a map entry's key and value.
const (
	jobStateSpecField  = 1
	jobSpecLabelsField = 7
	mapEntryKeyField   = 1
	mapEntryValueField = 2
)

// JobStateLabels reads a row's labels (its spec's) from its encoded bytes
// without decoding the row, sorted by key: the listing's label index is
// written from them at every change of a job's listing. nil when the row
// has none or is malformed.
func JobStateLabels(data []byte) []Label {
	n := jobStateHeader(data)
	if n == 0 {
		return nil
	}
	spec, ok := bytesField(data[n:], jobStateSpecField)
	if !ok {
		return nil
	}
	var out []Label
	for b := spec; len(b) > 0; {
		num, typ, entry, rest, err := NextField(b)
		if err != nil {
			return nil
		}
		b = rest
		if num == jobSpecLabelsField && typ == protowire.BytesType {
			k, _ := bytesField(entry, mapEntryKeyField)
			v, _ := bytesField(entry, mapEntryValueField)
			out = append(out, Label{Key: string(k), Value: string(v)})
		}
	}
	// A map's last entry of a key wins (protobuf's rule); an encoder
	// writes each key once, so this only guards.
	slices.SortStableFunc(out, func(a, b Label) int { return strings.Compare(a.Key, b.Key) })
	kept := out[:0]
	for i, l := range out {
		if i+1 < len(out) && out[i+1].Key == l.Key {
			continue
		}
		kept = append(kept, l)
	}
	return kept
}

// bytesField returns the last occurrence of length-delimited field num in
// message b (false: none, or b is malformed).
func bytesField(b []byte, num protowire.Number) (v []byte, ok bool) {
	for len(b) > 0 {
		n, typ, f, rest, err := NextField(b)
		if err != nil {
			return nil, false
		}
		b = rest
		if n == num && typ == protowire.BytesType {
			v, ok = f, true
		}
	}
	return v, ok
}
