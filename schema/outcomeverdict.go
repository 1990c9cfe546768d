package schema

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// The breaker reads eight fields of every callback outcome; a whole
// decode also copies its ids, URL, method, dispatcher and error text and
// its scheduled time: seven allocations an outcome that nothing reads.
// UnmarshalOutcomeVerdict decodes only what the breaker reads.
// TestOutcomeVerdictDecidesAsTheWholeOutcome (processors/breaker) holds the
// breaker's decisions on it to those on the whole outcome.

// Field numbers of chime.v1.CallbackOutcome (outcome.proto) that
// UnmarshalOutcomeVerdict keeps.
const (
	outcomeNamespace  = 2
	outcomeClass      = 6
	outcomeStatusCode = 7
	outcomeLatency    = 8
	outcomeErrorKind  = 9
	outcomeProbe      = 12
	outcomeStartedAt  = 14
	outcomeFinishedAt = 15
)

// UnmarshalOutcomeVerdict decodes into o (which must be empty) the fields
// of a CallbackOutcome that decide a breaker: namespace, class,
// status_code, latency, error_kind, probe, started_at and finished_at.
// The others are checked to be well formed and skipped, as is a field of
// another wire type than its own (proto.Unmarshal keeps that as unknown).
// Like UnmarshalInternal, it is for what chime itself encoded.
func UnmarshalOutcomeVerdict(data []byte, o *chimev1.CallbackOutcome) error {
	for len(data) > 0 {
		num, typ, v, rest, err := NextField(data)
		if err != nil {
			return err
		}
		data = rest
		want := protowire.Type(-1) // none: skipped
		switch num {
		case outcomeNamespace, outcomeErrorKind, outcomeLatency, outcomeStartedAt, outcomeFinishedAt:
			want = protowire.BytesType
		case outcomeClass, outcomeStatusCode, outcomeProbe:
			want = protowire.VarintType
		}
		if typ != want {
			// Not kept, or sent with another wire type, which
			// proto.Unmarshal keeps as an unknown field.
			continue
		}
		if want == protowire.VarintType {
			switch x := VarintValue(v); num {
			case outcomeClass:
				o.Class = chimev1.OutcomeClass(int32(x))
			case outcomeStatusCode:
				o.StatusCode = int32(x)
			case outcomeProbe:
				o.Probe = x != 0
			}
			continue
		}
		switch num {
		case outcomeNamespace:
			o.Namespace = string(v)
		case outcomeErrorKind:
			o.ErrorKind = string(v)
		case outcomeLatency:
			if o.Latency == nil {
				o.Latency = &durationpb.Duration{}
			}
			err = mergeSecondsNanos(v, &o.Latency.Seconds, &o.Latency.Nanos)
		case outcomeStartedAt:
			if o.StartedAt == nil {
				o.StartedAt = &timestamppb.Timestamp{}
			}
			err = mergeSecondsNanos(v, &o.StartedAt.Seconds, &o.StartedAt.Nanos)
		case outcomeFinishedAt:
			if o.FinishedAt == nil {
				o.FinishedAt = &timestamppb.Timestamp{}
			}
			err = mergeSecondsNanos(v, &o.FinishedAt.Seconds, &o.FinishedAt.Nanos)
		}
		if err != nil {
			return fmt.Errorf("proto: chime.v1.CallbackOutcome field %d: %w", num, err)
		}
	}
	return nil
}

// mergeSecondsNanos decodes a google.protobuf.Timestamp or Duration (both
// are seconds, field 1, and nanos, field 2, varints) over s and ns, as the
// generated decoder merges a message field that occurs twice.
func mergeSecondsNanos(b []byte, s *int64, ns *int32) error {
	for len(b) > 0 {
		num, typ, v, rest, err := NextField(b)
		if err != nil {
			return err
		}
		b = rest
		switch {
		case typ != protowire.VarintType:
		case num == 1:
			*s = int64(VarintValue(v))
		case num == 2:
			*ns = int32(VarintValue(v))
		}
	}
	return nil
}
