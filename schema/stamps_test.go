package schema

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// jobStateStamps names JobState's own timestamp fields by number, each
// with the setter of that field, and misses none.
func TestJobStateStampsAreItsTimestampFields(t *testing.T) {
	t.Parallel()
	md := (&chimev1.JobState{}).ProtoReflect().Descriptor()
	listed := map[protoreflect.FieldNumber]bool{}
	for _, e := range jobStateStamps {
		fd := md.Fields().ByNumber(e.num)
		require.NotNil(t, fd, "field %d", e.num)
		require.False(t, fd.IsList(), fd.FullName())
		require.Equal(t, protoreflect.FullName("google.protobuf.Timestamp"), fd.Message().FullName(), fd.FullName())
		s := new(chimev1.JobState)
		e.set(s, timestamppb.Now())
		require.True(t, s.ProtoReflect().Has(fd), "the setter of field %d sets %s", e.num, fd.FullName())
		listed[e.num] = true
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Timestamp" && !fd.IsList() {
			require.True(t, listed[fd.Number()], "%s is not in jobStateStamps", fd.FullName())
		}
	}
}

// A row decodes the same with its timestamps preset as without: those it
// has, zero instants included, and no others.
func TestJobStateDecodeMatchesTheGeneratedDecoder(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(11, 30))
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	stamp := func() *timestamppb.Timestamp {
		if rng.IntN(5) == 0 {
			return &timestamppb.Timestamp{} // present, and zero
		}
		return timestamppb.New(at.Add(time.Duration(rng.Int64N(int64(time.Hour)))))
	}
	for i := range 500 {
		s := &chimev1.JobState{
			Spec:   &chimev1.JobSpec{Namespace: "ns", Id: "job", Schedule: &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: stamp()}}},
			Status: chimev1.JobStatus_JOB_STATUS_SCHEDULED, FireSeq: uint64(i), LastCommandId: "c",
			Open: []*chimev1.Emission{{FireSeq: 1, ScheduledAt: stamp(), EmittedAt: stamp(), FireAt: stamp()}},
		}
		mask := rng.Uint32()
		if i == 0 {
			mask = 0
		} else if i == 1 {
			mask = ^uint32(0)
		}
		for k, e := range jobStateStamps {
			if mask&(1<<k) != 0 {
				e.set(s, stamp())
			}
		}
		raw, err := JobStateCodec{}.Encode(s)
		require.NoError(t, err)
		v, err := JobStateCodec{}.Decode(raw)
		require.NoError(t, err)
		want := new(chimev1.JobState)
		require.NoError(t, want.UnmarshalVT(raw[jobStateHeader(raw):]))
		require.True(t, proto.Equal(want, v.(*chimev1.JobState)), "row %d (mask %b):\n%v\n%v", i, mask, want, v)
		require.True(t, proto.Equal(s, v.(*chimev1.JobState)), "row %d round trip", i)
	}
}

// Whatever the row's body, Decode answers as the generated decoder does.
func FuzzJobStateDecode(f *testing.F) {
	at := timestamppb.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	for _, s := range []*chimev1.JobState{
		{},
		{CreatedAt: at, UpdatedAt: at, TimerAt: &timestamppb.Timestamp{}, TickAt: at, Spec: &chimev1.JobSpec{Id: "j"}},
		{NextScheduledAt: at, HeldUntil: at, RecoverAt: at, Anchor: at, LastFiredAt: at, LastScheduledAt: at},
	} {
		raw, err := JobStateCodec{}.Encode(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw[jobStateHeaderLen:])
	}
	f.Add([]byte{0x2a, 0x02, 0x08})       // timer_at: a truncated varint
	f.Add([]byte{0x2a, 0x00, 0x2a, 0x00}) // timer_at twice
	f.Fuzz(func(t *testing.T, body []byte) {
		raw := append(make([]byte, jobStateHeaderLen), body...)
		raw[0] = jobStateFormat
		got, gotErr := JobStateCodec{}.Decode(raw)
		want := new(chimev1.JobState)
		wantErr := want.UnmarshalVT(body)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%x: Decode says %v, the generated decoder %v", body, gotErr, wantErr)
		}
		if gotErr == nil && !proto.Equal(want, got.(*chimev1.JobState)) {
			t.Fatalf("%x:\n%v\n%v", body, want, got)
		}
	})
}
