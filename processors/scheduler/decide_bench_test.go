package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// benchStep is one record of a job's life as the processor sees it: the
// row as stored (encoded, decoded per record as goka does) and the input.
type benchStep struct {
	row  []byte // nil: no row
	in   input
	tick bool
	now  time.Time
	// out is how many records the rig's decision emitted, to check that
	// the replay decides the same.
	out int
}

// benchLife plays a job's life once through the rig and records each step,
// so that the benchmark replays exactly the decisions the rig made.
func benchLife(b *testing.B, play func(r *benchRig)) (*decider, []benchStep) {
	r := &benchRig{rig: newRig(b, func(c *Config) { c.AckTimeout = 2 * time.Minute }), b: b}
	r.rig.d.incarnation.Store(new("bench"))
	play(r)
	return r.rig.d, r.steps
}

type benchRig struct {
	rig   *rig
	b     *testing.B
	steps []benchStep
}

func (r *benchRig) record(tick bool, raw []byte, now time.Time) {
	var row []byte
	if r.rig.st != nil {
		var err error
		row, err = schema.JobStateCodec{}.Encode(r.rig.st)
		require.NoError(r.b, err)
	}
	r.rig.off++
	r.steps = append(r.steps, benchStep{row: row, tick: tick, now: now,
		in: input{key: r.rig.key, topic: "in", offset: r.rig.off, raw: raw, nsSpread: 1}, out: r.emitted()})
}

func (r *benchRig) command(cmd *chimev1.JobCommand, now time.Time) {
	if cmd.CommandId == "" {
		cmd.CommandId = "c" + now.Format("150405.000000000")
	}
	cmd.Namespace, cmd.JobId = "ns1", "job1"
	raw, err := proto.Marshal(cmd)
	require.NoError(r.b, err)
	r.record(false, raw, now)
	r.rig.command(cmd, now)
	r.counted()
}

func (r *benchRig) tick(now time.Time) {
	r.record(true, nil, now)
	r.rig.tick(now)
	r.counted()
}

// counted notes what the last step emitted (record noted what came
// before it in out).
func (r *benchRig) counted() {
	last := &r.steps[len(r.steps)-1]
	last.out = r.emitted() - last.out
}

func (r *benchRig) emitted() int {
	return len(r.rig.dues) + len(r.rig.events) + len(r.rig.deliver) + len(r.rig.rejects)
}

func (r *benchRig) lastDue() *chimev1.Due { return r.rig.dues[len(r.rig.dues)-1] }

// BenchmarkDecide measures the decisions of one job's life, per job: each
// step decodes the stored row (as goka's ctx.Value does) and decides.
//
//	go test -bench Decide -run '^$' ./processors/scheduler
func BenchmarkDecide(b *testing.B) {
	lives := []struct {
		name string
		play func(r *benchRig)
	}{
		{"one-shot/create-fire-ack", func(r *benchRig) {
			r.command(upsert(httpSpec(at(t0.Add(time.Minute))), t0), t0)
			r.tick(t0.Add(time.Minute))
			r.command(ack(r.lastDue(), chimev1.AckResult_ACK_RESULT_SUCCEEDED), t0.Add(time.Minute+time.Second))
		}},
		{"one-shot/fire-retry-fire-ack", func(r *benchRig) {
			r.command(upsert(httpSpec(at(t0.Add(time.Minute))), t0), t0)
			r.tick(t0.Add(time.Minute))
			r.command(retryOf(r.lastDue(), t0.Add(2*time.Minute)), t0.Add(time.Minute+time.Second))
			r.tick(t0.Add(2 * time.Minute))
			r.command(ack(r.lastDue(), chimev1.AckResult_ACK_RESULT_SUCCEEDED), t0.Add(2*time.Minute+time.Second))
		}},
		{"every/tick-ack", func(r *benchRig) {
			r.rig.command(upsert(httpSpec(every(time.Minute)), t0), t0)
			r.tick(t0.Add(time.Minute))
			r.command(ack(r.lastDue(), chimev1.AckResult_ACK_RESULT_SUCCEEDED), t0.Add(time.Minute+time.Second))
		}},
		{"kafka/create-deliver", func(r *benchRig) {
			spec := httpSpec(at(t0.Add(time.Minute)))
			spec.Target = &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{Topic: userTopic, Key: []byte("k"), Value: []byte("v")}}}
			r.command(upsert(spec, t0), t0)
			r.tick(t0.Add(time.Minute))
		}},
		{"stale-tick", func(r *benchRig) {
			r.rig.command(upsert(httpSpec(at(t0.Add(time.Hour))), t0), t0)
			r.tick(t0.Add(time.Minute))
		}},
	}
	for _, l := range lives {
		b.Run(l.name, func(b *testing.B) {
			d, steps := benchLife(b, l.play)
			for _, s := range steps {
				dec := s.decide(b, d)
				require.Equal(b, s.out, len(dec.dues)+len(dec.events)+len(dec.deliver)+len(dec.rejectionList()), "the replay decides as the rig did")
			}
			b.ReportAllocs()
			for b.Loop() {
				for _, s := range steps {
					s.decide(b, d)
				}
			}
		})
	}
}

func (s *benchStep) decide(b *testing.B, d *decider) decision {
	var cur *chimev1.JobState
	if s.row != nil {
		v, err := schema.JobStateCodec{}.Decode(s.row)
		if err != nil {
			b.Fatal(err)
		}
		cur = v.(*chimev1.JobState)
	}
	in := s.in
	if s.tick {
		return d.onTick(&in, cur, s.now)
	}
	return d.onCommand(&in, cur, s.now)
}

func (d decision) rejectionList() []*chimev1.Rejection {
	if d.rejection == nil {
		return nil
	}
	return []*chimev1.Rejection{d.rejection}
}
