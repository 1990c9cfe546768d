package scheduler

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// both decides cmd for the encoded row raw the two ways decideCommand can:
// on the row (settleOnRow, after check, as decideCommand calls it) and by
// the decider on the decoded row. settled is nil when settleOnRow left it
// to the decider.
func both(t testing.TB, d *decider, key string, cmd *chimev1.JobCommand, raw []byte, now time.Time) (settled []byte, dec decision, cur *chimev1.JobState) {
	fast := &input{key: key, topic: "cmds", offset: 7, cmd: cmd}
	if _, reason := d.check(fast, cmd); reason == "" {
		fast.checked = true
		if out, ok := d.settleOnRow(fast, raw, now); ok {
			settled = out
		}
	}
	v, err := schema.JobStateCodec{}.Decode(raw)
	if err != nil {
		return settled, decision{}, nil
	}
	cur = v.(*chimev1.JobState)
	slow := &input{key: key, topic: "cmds", offset: 7, cmd: cmd}
	return settled, d.onCommand(slow, proto.CloneOf(cur), now), cur
}

// requireSame: a row settleOnRow wrote is the row the decider's decision
// writes, and the decision writes nothing else.
func requireSame(t testing.TB, settled []byte, dec decision) {
	t.Helper()
	require.NotNil(t, dec.state, "settled on the row, but the decider writes no row")
	require.False(t, dec.del)
	require.Empty(t, dec.events, "settled on the row, but the decider writes events")
	require.Empty(t, dec.dues)
	require.Empty(t, dec.recalls)
	require.Empty(t, dec.deliver)
	require.Nil(t, dec.rejection)
	require.NoError(t, dec.oversized())
	want, err := schema.JobStateCodec{}.Encode(dec.state)
	require.NoError(t, err)
	require.Equal(t, want[:17], settled[:17], "header (tick and recover_at)")
	got, err := schema.JobStateCodec{}.Decode(settled)
	require.NoError(t, err)
	require.True(t, proto.Equal(dec.state, got.(*chimev1.JobState)), "settled row:\n%v\ndecider's row:\n%v", got, dec.state)
	if len(dec.state.GetSpec().GetLabels())+len(dec.state.GetSpec().GetTarget().GetHttp().GetHeaders()) <= 1 {
		// No map to encode in a random order: the very same bytes.
		require.True(t, bytes.Equal(want, settled), "settled row's bytes differ from the decider's")
	}
}

// TestSettleOnRowMatchesTheDecider drives real rows (made by the decider:
// created, fired, sometimes retried or paused) to the answer, and decides
// the answer both ways: where settleOnRow takes the row, it writes what
// the decider would, byte for byte where the encoding is deterministic;
// the rows it must leave to the decider it leaves.
func TestSettleOnRowMatchesTheDecider(t *testing.T) {
	t.Parallel()
	rich := func(s *chimev1.Schedule) *chimev1.JobSpec {
		sp := httpSpec(s)
		cb := sp.GetTarget().GetHttp()
		cb.Method, cb.Body, cb.JsonBody = "PUT", []byte(`{"order":42}`), true
		cb.Headers = map[string]string{"X-A": "1", "X-B": "2"}
		cb.Timeout = durationpb.New(3 * time.Second)
		sp.Labels = map[string]string{"team": "a", "tier": "gold"}
		sp.Retry = &chimev1.RetryPolicy{MaxAttempts: 5, InitialInterval: durationpb.New(time.Second)}
		sp.MaxFires = 1
		return sp
	}
	succeeded := chimev1.AckResult_ACK_RESULT_SUCCEEDED
	for _, tc := range []struct {
		name   string
		cfg    func(*Config)
		spec   *chimev1.JobSpec
		before func(r *rig) // after the fire, before the answer
		answer func(due *chimev1.Due) *chimev1.JobCommand
		settle bool
	}{
		{name: "one-shot succeeded", settle: true},
		{name: "kept for ever", cfg: func(c *Config) { c.TerminalRetention = Keep }, settle: true},
		{name: "fire lead", cfg: func(c *Config) { c.FireLead = 2 * time.Second }, settle: true},
		{name: "redelivery armed (recover_at)", cfg: func(c *Config) { c.AckTimeout = 30 * time.Second }, settle: true},
		{name: "rich spec", spec: rich(at(t0.Add(time.Minute))), settle: true},
		{name: "long detail", answer: func(due *chimev1.Due) *chimev1.JobCommand {
			c := ack(due, succeeded)
			c.GetAck().Detail = strings.Repeat("é", 2000)
			return c
		}, settle: true},
		{name: "failed", answer: func(due *chimev1.Due) *chimev1.JobCommand { return ack(due, chimev1.AckResult_ACK_RESULT_FAILED) }},
		{name: "another fire", answer: func(due *chimev1.Due) *chimev1.JobCommand {
			c := ack(due, succeeded)
			c.GetAck().FireSeq++
			return c
		}},
		{name: "answer ahead of the row", answer: func(due *chimev1.Due) *chimev1.JobCommand {
			c := ack(due, succeeded)
			c.GetAck().EmitSeq += 5
			return c
		}},
		{name: "recurring", spec: httpSpec(every(time.Minute))},
		{name: "fire events", cfg: func(c *Config) { c.FireEvents = true }},
		{name: "paused", before: func(r *rig) {
			r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}}}, t0.Add(61*time.Second))
		}},
		{name: "another job's key", answer: func(due *chimev1.Due) *chimev1.JobCommand {
			c := ack(due, succeeded)
			c.Namespace, c.JobId = "ns1", "job2"
			return c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mut := []func(*Config){}
			if tc.cfg != nil {
				mut = append(mut, tc.cfg)
			}
			r := newRig(t, mut...)
			spec := tc.spec
			if spec == nil {
				spec = httpSpec(at(t0.Add(time.Minute)))
			}
			r.command(upsert(spec, t0), t0)
			r.runUntil(t0.Add(time.Minute))
			require.NotEmpty(t, r.dues, "fired")
			if tc.before != nil {
				tc.before(r)
			}
			cmd := ack(r.dues[len(r.dues)-1], succeeded)
			if tc.answer != nil {
				cmd = tc.answer(r.dues[len(r.dues)-1])
			}
			if cmd.Namespace == "" {
				cmd.Namespace, cmd.JobId = "ns1", "job1"
			}
			cmd.CommandId = "answer-1"
			raw, err := schema.JobStateCodec{}.Encode(r.st)
			require.NoError(t, err)
			settled, dec, _ := both(t, r.d, r.key, cmd, raw, t0.Add(90*time.Second))
			if !tc.settle {
				require.Nil(t, settled, "settled on the row, but the decider must decide it")
				return
			}
			require.NotNil(t, settled, "left to the decider")
			requireSame(t, settled, dec)
			require.Equal(t, chimev1.JobStatus_JOB_STATUS_COMPLETED, dec.state.GetStatus())
		})
	}
}

// FuzzSettleOnRow: for any row the codec decodes and any answer, either
// settleOnRow leaves it to the decider or it writes the decider's row.
// (Rows that do not decode are the decider's to refuse; the scheduler
// writes only rows that do.)
func FuzzSettleOnRow(f *testing.F) {
	seed := func(cfg func(*Config), spec *chimev1.JobSpec) []byte {
		r := newRig(f, cfg)
		r.command(upsert(spec, t0), t0)
		r.runUntil(t0.Add(time.Minute))
		raw, err := schema.JobStateCodec{}.Encode(r.st)
		require.NoError(f, err)
		return raw[17:]
	}
	plain := seed(func(*Config) {}, httpSpec(at(t0.Add(time.Minute))))
	f.Add(plain, uint64(1), uint64(1), "ok", int64(90), false)
	f.Add(plain, uint64(1), uint64(2), "", int64(-90), true)
	f.Add(seed(func(c *Config) { c.AckTimeout = 30 * time.Second; c.FireLead = time.Second }, httpSpec(at(t0.Add(time.Minute)))), uint64(1), uint64(1), "", int64(61), false)
	f.Add(seed(func(*Config) {}, httpSpec(every(time.Minute))), uint64(1), uint64(1), "x", int64(61), false)
	f.Fuzz(func(t *testing.T, row []byte, fireSeq, emitSeq uint64, detail string, nowSec int64, keep bool) {
		d := newRig(t, func(c *Config) {
			if keep {
				c.TerminalRetention = Keep
			}
		}).d
		raw := schema.AppendJobStateHeader(nil, 0, 0)
		raw = append(raw, row...)
		cmd := &chimev1.JobCommand{CommandId: "answer", Namespace: "ns1", JobId: "job1",
			Command: &chimev1.JobCommand_Ack{Ack: &chimev1.Ack{FireSeq: fireSeq, EmitSeq: emitSeq, Attempt: 1, Result: chimev1.AckResult_ACK_RESULT_SUCCEEDED, Detail: detail}}}
		if schema.ValidateCommand(cmd, schema.ValidateOptions{AllowReserved: true}) != nil {
			return
		}
		settled, dec, cur := both(t, d, "ns1/job1", cmd, raw, t0.Add(time.Duration(nowSec%(1<<40))*time.Second))
		if settled == nil || cur == nil {
			return
		}
		requireSame(t, settled, dec)
	})
}

// BenchmarkSettleOnRow compares the two ways of settling a one-shot's
// successful answer: on the encoded row, and decoding, deciding and
// encoding it.
func BenchmarkSettleOnRow(b *testing.B) {
	r := newRig(b)
	sp := httpSpec(at(t0.Add(time.Minute)))
	sp.GetTarget().GetHttp().Body = []byte(`{"order":42,"note":"a sixty-byte body, like the burst's"}`)
	sp.Labels = map[string]string{"team": "a"}
	r.command(upsert(sp, t0), t0)
	r.runUntil(t0.Add(time.Minute))
	cmd := ack(r.dues[0], chimev1.AckResult_ACK_RESULT_SUCCEEDED)
	cmd.Namespace, cmd.JobId, cmd.CommandId = "ns1", "job1", "answer"
	raw, err := schema.JobStateCodec{}.Encode(r.st)
	require.NoError(b, err)
	now := t0.Add(90 * time.Second)
	b.Run("on the row", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			in := &input{key: r.key, cmd: cmd, checked: true}
			if _, ok := r.d.settleOnRow(in, raw, now); !ok {
				b.Fatal("not settled")
			}
		}
	})
	b.Run("decoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			in := &input{key: r.key, cmd: cmd, checked: true}
			v, err := schema.JobStateCodec{}.Decode(raw)
			if err != nil {
				b.Fatal(err)
			}
			dec := r.d.onCommand(in, v.(*chimev1.JobState), now)
			if _, err := (schema.JobStateCodec{}).Encode(dec.state); err != nil {
				b.Fatal(err)
			}
		}
	})
}
