package schema

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// BenchmarkDuesDecode compares DecodeDues with the generated decoder on a
// batch of 200 one-shot dues, as the scheduler writes them.
func BenchmarkDuesDecode(b *testing.B) {
	p := presetSample{rand.New(rand.NewPCG(1, 2))}
	rec := &chimev1.Due{}
	for range 200 {
		d := p.due()
		d.ScheduledAt, d.FireAt, d.EmittedAt, d.Deadline = timestamppb.Now(), timestamppb.Now(), timestamppb.Now(), nil
		d.Callback = &chimev1.HttpCallback{Url: "http://127.0.0.1:8080/cb", Body: []byte(`{"n":123}`)}
		d.History = nil
		rec.Batch = append(rec.Batch, d)
	}
	raw, _ := proto.Marshal(rec)
	b.Run("preset", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeDues(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeDuesSlow(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
