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

// presetSample makes the dues DecodeDues meets, and the ones it must
// leave to the generated decoder: instants and callbacks missing, empty,
// zero.
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

func (p presetSample) due() *chimev1.Due {
	return &chimev1.Due{Namespace: "ns", JobId: "job", FireSeq: p.rng.Uint64N(9), ScheduledAt: p.stamp(), FireAt: p.stamp(),
		EmittedAt: p.stamp(), Deadline: p.stamp(), Callback: p.callback(), IdempotencyKey: "k",
		History: []*chimev1.CallbackOutcome{{Namespace: "ns"}}[:p.rng.IntN(2)]}
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
