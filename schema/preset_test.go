package schema

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// presetSample makes the specs and dues the preset decoders meet, and the
// ones they must leave to the generated decoder: every schedule and
// target kind, none, empty ones, zero instants.
type presetSample struct{ rng *rand.Rand }

func (p presetSample) stamp() *timestamppb.Timestamp {
	switch p.rng.IntN(6) {
	case 0:
		return nil
	case 1:
		return &timestamppb.Timestamp{} // present, and zero
	}
	return timestamppb.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).Add(time.Duration(p.rng.Int64N(int64(time.Hour)))))
}

// present is m, or an empty m where m is nil: a oneof's message is
// encoded (and so decoded) even when nil.
func present[M any](m *M) *M {
	if m == nil {
		return new(M)
	}
	return m
}

func (p presetSample) callback() *chimev1.HttpCallback {
	switch p.rng.IntN(5) {
	case 0:
		return nil
	case 1:
		return &chimev1.HttpCallback{}
	}
	return &chimev1.HttpCallback{Url: "http://127.0.0.1:1/cb", Method: "PUT", Body: []byte(`{"a":1}`),
		Headers: map[string]string{"x": "y"}, Timeout: durationpb.New(time.Second)}
}

func (p presetSample) spec() *chimev1.JobSpec {
	if p.rng.IntN(8) == 0 {
		return nil
	}
	s := &chimev1.JobSpec{Namespace: "ns", Id: "job", Labels: map[string]string{"k": "v"}}
	switch p.rng.IntN(5) {
	case 1:
		s.Schedule = &chimev1.Schedule{}
	case 2:
		s.Schedule = &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: present(p.stamp())}}
	case 3:
		s.Schedule = &chimev1.Schedule{Kind: &chimev1.Schedule_Cron{Cron: &chimev1.Cron{Expr: "* * * * *", StartAt: p.stamp()}},
			Jitter: durationpb.New(time.Second)}
	case 4:
		s.Schedule = &chimev1.Schedule{Kind: &chimev1.Schedule_Every{Every: &chimev1.Every{Interval: durationpb.New(time.Minute)}}}
	}
	switch p.rng.IntN(4) {
	case 1:
		s.Target = &chimev1.Target{}
	case 2:
		s.Target = &chimev1.Target{Kind: &chimev1.Target_Http{Http: present(p.callback())}}
	case 3:
		s.Target = &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{Topic: "t", Value: []byte("v")}}}
	}
	return s
}

func (p presetSample) due() *chimev1.Due {
	return &chimev1.Due{Namespace: "ns", JobId: "job", FireSeq: p.rng.Uint64N(9), ScheduledAt: p.stamp(), FireAt: p.stamp(),
		EmittedAt: p.stamp(), Deadline: p.stamp(), Callback: p.callback(), IdempotencyKey: "k",
		History: []*chimev1.CallbackOutcome{{Namespace: "ns"}}[:p.rng.IntN(2)]}
}

// A row whose spec is preset decodes as the generated decoder decodes it,
// whatever the spec holds, and round-trips.
func TestJobStateSpecDecodeMatchesTheGeneratedDecoder(t *testing.T) {
	t.Parallel()
	p := presetSample{rand.New(rand.NewPCG(30, 11))}
	for i := range 2000 {
		s := &chimev1.JobState{Spec: p.spec(), Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED, CreatedAt: p.stamp(), TimerAt: p.stamp()}
		raw, err := JobStateCodec{}.Encode(s)
		require.NoError(t, err)
		if i%3 == 0 && s.Spec != nil {
			// The spec again, as a merge would write it: the preset
			// follows the first occurrence only.
			more, err := proto.Marshal(&chimev1.JobState{Spec: p.spec()})
			require.NoError(t, err)
			raw = append(raw, more...)
		}
		requireRowDecodesAsGenerated(t, raw)
		if i%3 != 0 {
			v, err := JobStateCodec{}.Decode(raw)
			require.NoError(t, err)
			require.True(t, proto.Equal(s, v.(*chimev1.JobState)), "row %d round trip", i)
		}
	}
}

func requireRowDecodesAsGenerated(t *testing.T, raw []byte) {
	t.Helper()
	v, err := JobStateCodec{}.Decode(raw)
	want := new(chimev1.JobState)
	wantErr := want.UnmarshalVT(raw[jobStateHeader(raw):])
	require.Equal(t, wantErr == nil, err == nil, "%x: %v / %v", raw, err, wantErr)
	if err == nil {
		require.True(t, proto.Equal(want, v.(*chimev1.JobState)), "%x:\n%v\n%v", raw, want, v)
	}
}

// DecodeDues answers as the generated decoder and DuesOf do: for a batch,
// a lone due, a record with a batch and more, and malformed ones.
func TestDecodeDuesMatchesTheGeneratedDecoder(t *testing.T) {
	t.Parallel()
	p := presetSample{rand.New(rand.NewPCG(12, 1))}
	for i := range 1000 {
		var rec *chimev1.Due
		switch i % 4 {
		case 0:
			rec = p.due()
		case 3:
			rec = p.due()
			rec.Batch = []*chimev1.Due{p.due()}
		default:
			rec = &chimev1.Due{}
			for range 1 + p.rng.IntN(5) {
				rec.Batch = append(rec.Batch, p.due())
			}
		}
		raw, err := proto.Marshal(rec)
		require.NoError(t, err)
		requireDuesDecodeAsGenerated(t, raw)
		dues, err := DecodeDues(raw)
		require.NoError(t, err)
		wantDues := DuesOf(rec)
		require.Len(t, dues, len(wantDues))
		for k := range dues {
			require.True(t, proto.Equal(wantDues[k], dues[k]), "record %d due %d round trip", i, k)
		}
		if len(raw) > 2 {
			requireDuesDecodeAsGenerated(t, raw[:len(raw)-1-p.rng.IntN(len(raw)/2)])
		}
	}
}

func requireDuesDecodeAsGenerated(t *testing.T, raw []byte) {
	t.Helper()
	got, err := DecodeDues(raw)
	want := new(chimev1.Due)
	wantErr := UnmarshalInternal(raw, want)
	require.Equal(t, wantErr == nil, err == nil, "%x: %v / %v", raw, err, wantErr)
	wantDues := DuesOf(want)
	require.Len(t, got, len(wantDues), "%x", raw)
	for k := range got {
		require.True(t, proto.Equal(wantDues[k], got[k]), "%x due %d:\n%v\n%v", raw, k, wantDues[k], got[k])
	}
}

func FuzzDecodeDues(f *testing.F) {
	p := presetSample{rand.New(rand.NewPCG(3, 4))}
	for range 4 {
		raw, err := proto.Marshal(&chimev1.Due{Batch: []*chimev1.Due{p.due(), p.due()}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	one, _ := proto.Marshal(p.due())
	f.Add(one)
	f.Add(protowire.AppendTag(nil, dueBatchField, protowire.VarintType)) // batch, as a varint
	f.Fuzz(func(t *testing.T, raw []byte) {
		requireDuesDecodeAsGenerated(t, raw)
	})
}

func FuzzJobStateSpecDecode(f *testing.F) {
	p := presetSample{rand.New(rand.NewPCG(5, 6))}
	for range 6 {
		raw, err := JobStateCodec{}.Encode(&chimev1.JobState{Spec: p.spec(), CreatedAt: p.stamp()})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw[jobStateHeaderLen:])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		raw := append(make([]byte, jobStateHeaderLen), body...)
		raw[0] = jobStateFormat
		requireRowDecodesAsGenerated(t, raw)
	})
}

func (p presetSample) outcome() *chimev1.CallbackOutcome {
	o := &chimev1.CallbackOutcome{EventId: "e", Namespace: "ns", JobId: "j", FireSeq: 3, Class: chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS,
		StatusCode: 200, ScheduledAt: p.stamp(), StartedAt: p.stamp(), FinishedAt: p.stamp(), NextAttemptAt: p.stamp(), Url: "http://127.0.0.1/x"}
	if p.rng.IntN(3) > 0 {
		o.Latency = durationpb.New(time.Duration(p.rng.Int64N(int64(time.Second))))
	}
	return o
}

// An outcome decoded by UnmarshalInternal, its instants preset, equals the
// generated decoder's.
func TestOutcomeDecodeMatchesTheGeneratedDecoder(t *testing.T) {
	t.Parallel()
	p := presetSample{rand.New(rand.NewPCG(7, 8))}
	for i := range 1000 {
		want := p.outcome()
		raw, err := proto.Marshal(want)
		require.NoError(t, err)
		requireOutcomeDecodesAsGenerated(t, raw)
		got := new(chimev1.CallbackOutcome)
		require.NoError(t, UnmarshalInternal(raw, got))
		require.True(t, proto.Equal(want, got), "outcome %d round trip", i)
		requireOutcomeDecodesAsGenerated(t, raw[:p.rng.IntN(len(raw))])
	}
}

func requireOutcomeDecodesAsGenerated(t *testing.T, raw []byte) {
	t.Helper()
	got, want := new(chimev1.CallbackOutcome), new(chimev1.CallbackOutcome)
	err, wantErr := UnmarshalInternal(raw, got), want.UnmarshalVT(raw)
	require.Equal(t, wantErr == nil, err == nil, "%x: %v / %v", raw, err, wantErr)
	if err == nil {
		require.True(t, proto.Equal(want, got), "%x:\n%v\n%v", raw, want, got)
	}
}

func FuzzOutcomeDecode(f *testing.F) {
	p := presetSample{rand.New(rand.NewPCG(9, 10))}
	for range 4 {
		raw, err := proto.Marshal(p.outcome())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		requireOutcomeDecodesAsGenerated(t, raw)
	})
}
