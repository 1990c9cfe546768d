package schema

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// verdictOf is the part of o that UnmarshalOutcomeVerdict keeps (the
// unknown fields of its timestamps and latency dropped too).
func verdictOf(o *chimev1.CallbackOutcome) *chimev1.CallbackOutcome {
	v := &chimev1.CallbackOutcome{Namespace: o.GetNamespace(), Class: o.GetClass(), StatusCode: o.GetStatusCode(),
		ErrorKind: o.GetErrorKind(), Probe: o.GetProbe()}
	if d := o.GetLatency(); d != nil {
		v.Latency = &durationpb.Duration{Seconds: d.GetSeconds(), Nanos: d.GetNanos()}
	}
	if t := o.GetStartedAt(); t != nil {
		v.StartedAt = &timestamppb.Timestamp{Seconds: t.GetSeconds(), Nanos: t.GetNanos()}
	}
	if t := o.GetFinishedAt(); t != nil {
		v.FinishedAt = &timestamppb.Timestamp{Seconds: t.GetSeconds(), Nanos: t.GetNanos()}
	}
	return v
}

// Whatever proto.Unmarshal reads, the verdict reads too, with the same
// values in the fields it keeps. (The generated decoder is laxer in one
// corner: a tenth varint byte above 1 in a skipped field.)
func FuzzOutcomeVerdict(f *testing.F) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 5, time.UTC)
	for _, o := range []*chimev1.CallbackOutcome{
		{},
		{Namespace: "acme", Class: chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, StatusCode: 200, Latency: durationpb.New(20 * time.Millisecond),
			StartedAt: timestamppb.New(at), FinishedAt: timestamppb.New(at.Add(time.Second)), EventId: "out-1", JobId: "j", Url: "http://x/", Method: "POST"},
		{Namespace: "b", Class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, StatusCode: -1, ErrorKind: "timeout", Error: "e", Probe: true,
			Latency: durationpb.New(-time.Second), ScheduledAt: timestamppb.New(at), NextAttemptAt: timestamppb.New(at), BodySnippet: []byte{0xff}},
	} {
		raw, err := Marshal(o)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte{0x42, 0x02, 0x08}) // latency: a truncated varint
	f.Add([]byte{0x32, 0x00})       // class with the wrong wire type
	f.Fuzz(func(t *testing.T, raw []byte) {
		full, part := new(chimev1.CallbackOutcome), new(chimev1.CallbackOutcome)
		if proto.Unmarshal(raw, full) != nil {
			_ = UnmarshalOutcomeVerdict(raw, part) // an error or not; no panic
			return
		}
		if err := UnmarshalOutcomeVerdict(raw, part); err != nil {
			t.Fatalf("proto.Unmarshal reads %x, the verdict does not: %v", raw, err)
		}
		if want := verdictOf(full); !proto.Equal(want, part) {
			t.Fatalf("%x: verdict %v, want %v", raw, part, want)
		}
	})
}
