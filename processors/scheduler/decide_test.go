package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// The decider is pure: these tests drive it with an explicit clock.

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

type rig struct {
	t   testing.TB
	d   *decider
	key string
	st  *chimev1.JobState
	off int64
	// everything emitted so far
	dues    []*chimev1.Due
	recalls []*chimev1.Due
	events  []*chimev1.JobEvent
	rejects []*chimev1.Rejection
	deliver []*chimev1.KafkaTarget
	deleted bool
	// ns is what the namespace view answers (nsKnown unless a test says).
	ns nsState
	// decided counts the steps whose decision did something.
	decided int
}

func newRig(t testing.TB, mutate ...func(*Config)) *rig {
	// Redelivery of unanswered fires is off unless a test turns it on:
	// most tests play the scheduler without a dispatcher.
	cfg := Config{AckTimeout: Off}
	for _, m := range mutate {
		m(&cfg)
	}
	require.NoError(t, cfg.validate())
	allowed := map[string]bool{cfg.Topics.BreakerTimers(): true, userTopic: true}
	return &rig{t: t, d: &decider{cfg: cfg, allowed: allowed}, key: "ns1/job1"}
}

func (r *rig) apply(dec decision) {
	// Whatever the test does, the decision fits in Kafka and the row in
	// its budget (bound.go).
	require.NoError(r.t, dec.oversized())
	if dec.state != nil && !dec.del {
		require.LessOrEqual(r.t, proto.Size(dec.state), r.d.cfg.MaxRowBytes, "row within budget")
	}
	r.dues = append(r.dues, dec.dues...)
	r.recalls = append(r.recalls, dec.recalls...)
	r.events = append(r.events, dec.events...)
	r.deliver = append(r.deliver, dec.deliver...)
	if dec.rejection != nil {
		r.rejects = append(r.rejects, dec.rejection)
	}
	if dec.del {
		r.st, r.deleted = nil, true
	} else if dec.state != nil {
		// Round-trip through the codec like goka does.
		b, err := schema.JobStateCodec{}.Encode(dec.state)
		require.NoError(r.t, err)
		v, err := schema.JobStateCodec{}.Decode(b)
		require.NoError(r.t, err)
		r.st = v.(*chimev1.JobState)
	}
}

func (r *rig) command(cmd *chimev1.JobCommand, now time.Time) {
	if cmd.CommandId == "" {
		cmd.CommandId = "c" + now.Format("150405.000000000") + string(rune('a'+r.off%26))
	}
	if cmd.Namespace == "" {
		cmd.Namespace, cmd.JobId = "ns1", "job1"
	}
	raw, err := proto.Marshal(cmd)
	require.NoError(r.t, err)
	r.off++
	in := &input{key: r.key, topic: "cmds", offset: r.off, raw: raw, ns: r.ns}
	cur, before := r.clone(), r.clone()
	dec := r.d.onCommand(in, cur, now)
	r.checkUntouched(before, cur, dec)
	r.apply(dec)
}

func (r *rig) tick(now time.Time) {
	r.off++
	in := &input{key: r.key, topic: "ticks", offset: r.off, ns: r.ns}
	cur, before := r.clone(), r.clone()
	dec := r.d.onTick(in, cur, now)
	r.checkUntouched(before, cur, dec)
	r.apply(dec)
}

// checkUntouched: a decision leaves the row it was made on as it was
// (rowcopy.go), whatever the test does.
func (r *rig) checkUntouched(before, cur *chimev1.JobState, dec decision) {
	requireUntouched(r.t, before, cur, dec)
	if dec.state != nil || dec.del || dec.rejection != nil || len(dec.dues)+len(dec.events)+len(dec.deliver) > 0 {
		r.decided++
	}
}

func (r *rig) clone() *chimev1.JobState {
	if r.st == nil {
		return nil
	}
	return proto.Clone(r.st).(*chimev1.JobState)
}

// runUntil ticks whenever the row's timer is due, up to end, like the pump.
func (r *rig) runUntil(end time.Time) {
	for i := 0; i < 10000; i++ {
		if r.st == nil || r.st.GetTimerAt() == nil {
			return
		}
		at := r.st.GetTimerAt().AsTime()
		if at.After(end) {
			return
		}
		r.tick(at)
	}
	r.t.Fatal("runUntil: too many ticks")
}

func httpSpec(s *chimev1.Schedule) *chimev1.JobSpec {
	return &chimev1.JobSpec{
		Namespace: "ns1", Id: "job1", Schedule: s,
		Target: &chimev1.Target{Kind: &chimev1.Target_Http{Http: &chimev1.HttpCallback{Url: "https://example.com/hook"}}},
	}
}

func upsert(spec *chimev1.JobSpec, issued time.Time) *chimev1.JobCommand {
	return &chimev1.JobCommand{IssuedAt: timestamppb.New(issued), Command: &chimev1.JobCommand_Upsert{Upsert: &chimev1.Upsert{Spec: spec}}}
}

func at(t time.Time) *chimev1.Schedule {
	return &chimev1.Schedule{Kind: &chimev1.Schedule_At{At: timestamppb.New(t)}}
}

func every(d time.Duration) *chimev1.Schedule {
	return &chimev1.Schedule{Kind: &chimev1.Schedule_Every{Every: &chimev1.Every{Interval: durationpb.New(d)}}}
}

func ack(due *chimev1.Due, res chimev1.AckResult) *chimev1.JobCommand {
	return &chimev1.JobCommand{Command: &chimev1.JobCommand_Ack{Ack: &chimev1.Ack{FireSeq: due.FireSeq, EmitSeq: due.EmitSeq, Attempt: due.Attempt, Result: res}}}
}

func TestOneShotFiresOnceAndCompletesOnAck(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.command(upsert(httpSpec(at(t0.Add(time.Minute))), t0), t0)
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, r.st.Status)
	require.Equal(t, t0.Add(time.Minute), r.st.TimerAt.AsTime())

	r.tick(t0.Add(30 * time.Second)) // early tick: nothing
	require.Empty(t, r.dues)

	r.tick(t0.Add(time.Minute))
	require.Len(t, r.dues, 1)
	d := r.dues[0]
	require.EqualValues(t, 1, d.FireSeq)
	require.EqualValues(t, 1, d.Attempt)
	require.Equal(t, "ns1/job1/1", d.IdempotencyKey)
	require.Equal(t, t0.Add(time.Minute), d.ScheduledAt.AsTime())
	require.Nil(t, r.st.TimerAt, "a fired one-shot waits for its ack, with no timer")

	r.tick(t0.Add(2 * time.Minute)) // a repeated tick does not fire again
	require.Len(t, r.dues, 1)

	r.command(ack(d, chimev1.AckResult_ACK_RESULT_SUCCEEDED), t0.Add(2*time.Minute))
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_COMPLETED, r.st.Status)
	r.command(ack(d, chimev1.AckResult_ACK_RESULT_SUCCEEDED), t0.Add(2*time.Minute)) // duplicate ack
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_COMPLETED, r.st.Status)

	// The completed row is removed after the retention.
	r.runUntil(t0.Add(8 * 24 * time.Hour))
	require.True(t, r.deleted)
}

// The COMPLETED event of a one-shot whose fire succeeded is implied by the
// successful outcome: it is written only with FireEvents. A failed one
// still ends with its DEAD event.
func TestOneShotSuccessWritesNoCompletedEventUnlessFireEvents(t *testing.T) {
	t.Parallel()
	types := func(r *rig) []chimev1.JobEventType {
		var out []chimev1.JobEventType
		for _, e := range r.events {
			out = append(out, e.Type)
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		fireEvents bool
		result     chimev1.AckResult
		want       []chimev1.JobEventType
	}{
		{"success", false, chimev1.AckResult_ACK_RESULT_SUCCEEDED, []chimev1.JobEventType{chimev1.JobEventType_JOB_EVENT_TYPE_CREATED}},
		{"success with fire events", true, chimev1.AckResult_ACK_RESULT_SUCCEEDED, []chimev1.JobEventType{
			chimev1.JobEventType_JOB_EVENT_TYPE_CREATED, chimev1.JobEventType_JOB_EVENT_TYPE_FIRED, chimev1.JobEventType_JOB_EVENT_TYPE_COMPLETED}},
		{"failure", false, chimev1.AckResult_ACK_RESULT_FAILED, []chimev1.JobEventType{
			chimev1.JobEventType_JOB_EVENT_TYPE_CREATED, chimev1.JobEventType_JOB_EVENT_TYPE_DEAD, chimev1.JobEventType_JOB_EVENT_TYPE_DEAD}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, func(c *Config) { c.FireEvents = tc.fireEvents })
			r.command(upsert(httpSpec(at(t0.Add(time.Minute))), t0), t0)
			r.tick(t0.Add(time.Minute))
			require.Len(t, r.dues, 1)
			r.command(ack(r.dues[0], tc.result), t0.Add(2*time.Minute))
			require.True(t, schema.JobEnded(r.st.Status))
			require.Equal(t, tc.want, types(r))
		})
	}
}

func TestEveryDoesNotDrift(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.command(upsert(httpSpec(every(10*time.Second)), t0), t0)
	// Ticks arrive late by varying amounts; occurrences stay on the grid.
	for i, late := range []time.Duration{0, 300 * time.Millisecond, 2 * time.Second, 50 * time.Millisecond} {
		r.tick(r.st.TimerAt.AsTime().Add(late))
		require.Len(t, r.dues, i+1)
		require.Equal(t, t0.Add(time.Duration(i+1)*10*time.Second), r.dues[i].ScheduledAt.AsTime())
		require.EqualValues(t, i+1, r.dues[i].FireSeq)
	}
}

func TestDowntimeFiresOnlyTheLatestMissedOccurrence(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.command(upsert(httpSpec(every(time.Minute)), t0), t0)
	// The scheduler was down for an hour: 60 occurrences were missed.
	now := t0.Add(time.Hour + 30*time.Second)
	r.tick(now)
	require.Len(t, r.dues, 1, "never a burst of every missed fire")
	require.Equal(t, t0.Add(time.Hour), r.dues[0].ScheduledAt.AsTime())
	require.EqualValues(t, 60, r.dues[0].FireSeq)
	var skipped *chimev1.JobEvent
	for _, e := range r.events {
		if e.Type == chimev1.JobEventType_JOB_EVENT_TYPE_SKIPPED {
			skipped = e
		}
	}
	require.NotNil(t, skipped)
	require.EqualValues(t, 59, skipped.Count)
	require.Equal(t, t0.Add(time.Hour+time.Minute), r.st.NextScheduledAt.AsTime())
}

func TestDowntimePastRelevancyWindowExpires(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	spec := httpSpec(at(t0.Add(time.Minute)))
	spec.RelevancyWindow = durationpb.New(5 * time.Minute)
	r.command(upsert(spec, t0), t0)
	r.tick(t0.Add(10 * time.Minute))
	require.Empty(t, r.dues)
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_COMPLETED, r.st.Status)
	require.Equal(t, chimev1.AckResult_ACK_RESULT_EXPIRED, r.st.LastResult)
	require.Contains(t, r.st.LastDetail, "relevancy window")
}

func TestRetryAndDeferRearmTheSameFire(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.command(upsert(httpSpec(at(t0)), t0), t0)
	r.tick(t0)
	require.Len(t, r.dues, 1)
	d1 := r.dues[0]

	retry := &chimev1.JobCommand{Command: &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{
		FireSeq: 1, EmitSeq: d1.EmitSeq, Attempt: 2, NotBefore: timestamppb.New(t0.Add(5 * time.Second)), Reason: "503"}}}
	r.command(retry, t0.Add(time.Second))
	r.command(proto.Clone(retry).(*chimev1.JobCommand), t0.Add(time.Second)) // duplicate
	require.Equal(t, t0.Add(5*time.Second), r.st.TimerAt.AsTime())
	r.tick(t0.Add(5 * time.Second))
	require.Len(t, r.dues, 2)
	d2 := r.dues[1]
	require.EqualValues(t, 1, d2.FireSeq, "a retry carries the same fire_seq")
	require.EqualValues(t, 2, d2.Attempt)
	require.Equal(t, d1.IdempotencyKey, d2.IdempotencyKey)

	// A stale retry answering the first emission is ignored.
	r.command(retry, t0.Add(6*time.Second))
	require.Nil(t, r.st.TimerAt)

	// Defer: same attempt, counted as a deferral.
	r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Defer{Defer: &chimev1.Defer{
		FireSeq: 1, EmitSeq: d2.EmitSeq, NotBefore: timestamppb.New(t0.Add(10 * time.Second)), Reason: "breaker open"}}}, t0.Add(7*time.Second))
	r.tick(t0.Add(10 * time.Second))
	require.Len(t, r.dues, 3)
	d3 := r.dues[2]
	require.EqualValues(t, 2, d3.Attempt)
	require.EqualValues(t, 1, d3.Deferrals)

	r.command(ack(d3, chimev1.AckResult_ACK_RESULT_DEAD), t0.Add(11*time.Second))
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_DEAD, r.st.Status)
}

// TestFireCarriesItsAttemptHistory: each Retry hands the failed attempt to
// the row; the next due carries all earlier failures (the most recent
// MaxAttemptHistory), across deferrals and redeliveries, for the dead letter.
func TestFireCarriesItsAttemptHistory(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.AckTimeout = time.Minute })
	r.command(upsert(httpSpec(at(t0)), t0), t0)
	r.tick(t0)
	now := t0
	const attempts = MaxAttemptHistory + 4
	for a := uint32(1); a < attempts; a++ {
		last := r.dues[len(r.dues)-1]
		require.EqualValues(t, a, last.Attempt)
		require.Len(t, last.History, min(int(a)-1, MaxAttemptHistory), "attempt %d", a)
		for i, h := range last.History {
			require.EqualValues(t, int(a)-len(last.History)+i, h.Attempt, "oldest first, the most recent kept")
		}
		now = now.Add(time.Second)
		r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{
			FireSeq: 1, EmitSeq: last.EmitSeq, Attempt: a + 1, NotBefore: timestamppb.New(now.Add(time.Second)), Reason: "HTTP 503",
			Outcome: &chimev1.CallbackOutcome{Attempt: a, StatusCode: 503, Class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE}}}}, now)
		if a == 3 {
			// A deferral between attempts keeps the history.
			r.tick(now.Add(time.Second))
			d := r.dues[len(r.dues)-1]
			r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Defer{Defer: &chimev1.Defer{
				FireSeq: 1, EmitSeq: d.EmitSeq, NotBefore: timestamppb.New(now.Add(2 * time.Second))}}}, now.Add(time.Second))
			require.Len(t, d.History, 3)
			now = now.Add(time.Second)
		}
		r.tick(now.Add(time.Second))
		now = now.Add(time.Second)
	}
	// A redelivered due (no answer) carries the same history.
	last := r.dues[len(r.dues)-1]
	r.tick(now.Add(time.Minute))
	again := r.dues[len(r.dues)-1]
	require.Equal(t, last.EmitSeq, again.EmitSeq)
	require.Len(t, again.History, MaxAttemptHistory)
	for i := range last.History {
		require.True(t, proto.Equal(last.History[i], again.History[i]), "history entry %d", i)
	}
}

func TestPauseResumeCancel(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.command(upsert(httpSpec(every(time.Minute)), t0), t0)
	r.runUntil(t0.Add(2 * time.Minute))
	require.Len(t, r.dues, 2)

	r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}}}, t0.Add(2*time.Minute+time.Second))
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_PAUSED, r.st.Status)
	require.Nil(t, r.st.TimerAt)
	r.tick(t0.Add(5 * time.Minute))
	require.Len(t, r.dues, 2, "a paused job does not fire")

	// Resume continues on the schedule: the next grid point after now.
	r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Resume{Resume: &chimev1.Resume{}}}, t0.Add(5*time.Minute+10*time.Second))
	require.Equal(t, t0.Add(6*time.Minute), r.st.TimerAt.AsTime())
	r.runUntil(t0.Add(6 * time.Minute))
	require.Len(t, r.dues, 3)
	require.Equal(t, t0.Add(6*time.Minute), r.dues[2].ScheduledAt.AsTime())
	require.Greater(t, r.dues[2].FireSeq, r.dues[1].FireSeq)

	r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Cancel{Cancel: &chimev1.Cancel{Reason: "done"}}}, t0.Add(6*time.Minute+time.Second))
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_CANCELLED, r.st.Status)
	r.tick(t0.Add(7 * time.Minute))
	require.Len(t, r.dues, 3, "a cancelled job does not fire")
}

func TestUpsertReschedulesAndKeepsFireSeqGrowing(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.command(upsert(httpSpec(every(time.Minute)), t0), t0)
	r.runUntil(t0.Add(3 * time.Minute))
	require.Len(t, r.dues, 3)

	// The same spec again changes nothing.
	before := proto.Clone(r.st)
	r.command(upsert(httpSpec(every(time.Minute)), t0.Add(3*time.Minute+time.Second)), t0.Add(3*time.Minute+time.Second))
	require.True(t, proto.Equal(before, r.st))

	spec := httpSpec(at(t0.Add(10 * time.Minute)))
	r.command(upsert(spec, t0.Add(4*time.Minute)), t0.Add(4*time.Minute))
	require.Equal(t, t0.Add(10*time.Minute), r.st.TimerAt.AsTime())
	r.runUntil(t0.Add(time.Hour))
	require.Len(t, r.dues, 4)
	require.EqualValues(t, 4, r.dues[3].FireSeq)
}

func TestRejections(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	// Undecodable bytes.
	r.off++
	r.apply(r.d.onCommand(&input{key: r.key, raw: []byte{0xff, 0xff, 0xff}}, nil, t0))
	// Unknown job.
	r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}}}, t0)
	// Kafka target not on the allowlist.
	spec := httpSpec(at(t0))
	spec.Target = &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{Topic: "payments", Value: []byte("x")}}}
	r.command(upsert(spec, t0), t0)
	// Key does not match the command.
	cmd := upsert(httpSpec(at(t0)), t0)
	r.key = "ns1/other"
	r.command(cmd, t0)
	require.Len(t, r.rejects, 4)
	require.Contains(t, r.rejects[0].Reason, "does not decode")
	require.Contains(t, r.rejects[1].Reason, "does not exist")
	require.Contains(t, r.rejects[2].Reason, "allowlist")
	require.Equal(t, "upsert.spec.target.kafka.topic", r.rejects[2].Field)
	require.Contains(t, r.rejects[3].Reason, "does not match")
	require.Nil(t, r.st)
}

func TestKafkaTargetIsDeliveredByTheScheduler(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	spec := httpSpec(at(t0.Add(time.Second)))
	topic := userTopic
	spec.Target = &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{Topic: topic, Key: []byte("ns1"), Value: []byte("check")}}}
	r.command(upsert(spec, t0), t0)
	r.tick(t0.Add(time.Second))
	require.Empty(t, r.dues)
	require.Len(t, r.deliver, 1)
	require.Equal(t, topic, r.deliver[0].Topic)
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_COMPLETED, r.st.Status)
}

// TestKafkaTargetWriteSurvivesARestart: the row keeps a Kafka-target write
// until ConfirmAfter has passed under the incarnation that made it. A new
// incarnation (the scheduler restarted, or the partition moved) writes it
// again, since the old one may have died before Kafka stored it.
func TestKafkaTargetWriteSurvivesARestart(t *testing.T) {
	t.Parallel()
	setInc := func(r *rig, s string) { r.d.incarnation.Store(&s) }
	kafkaSpec := func(r *rig, s *chimev1.Schedule) *chimev1.JobSpec {
		spec := httpSpec(s)
		spec.Target = &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{Topic: userTopic, Key: []byte("ns1"), Value: []byte("check")}}}
		return spec
	}
	confirm := time.Minute
	withConfirm := func(c *Config) { c.ConfirmAfter = confirm }

	t.Run("same incarnation confirms", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, withConfirm)
		setInc(r, "a")
		r.command(upsert(kafkaSpec(r, at(t0.Add(time.Second))), t0), t0)
		r.tick(t0.Add(time.Second))
		require.Len(t, r.deliver, 1)
		require.Equal(t, chimev1.JobStatus_JOB_STATUS_COMPLETED, r.st.Status, "a one-shot completes when written")
		require.Len(t, r.st.Unconfirmed, 1)
		require.Equal(t, t0.Add(time.Second+confirm), r.st.TimerAt.AsTime(), "the row wakes to confirm, before its retention")
		r.runUntil(t0.Add(time.Hour))
		require.Len(t, r.deliver, 1, "confirmed, not written again")
		require.Empty(t, r.st.Unconfirmed)
		require.Equal(t, r.st.UpdatedAt.AsTime().Add(r.d.cfg.TerminalRetention), r.st.TimerAt.AsTime())
	})
	t.Run("a new incarnation writes again", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, withConfirm)
		setInc(r, "a")
		r.command(upsert(kafkaSpec(r, at(t0.Add(time.Second))), t0), t0)
		r.tick(t0.Add(time.Second))
		require.Len(t, r.deliver, 1)
		setInc(r, "b") // "a" died; its write may be lost
		r.runUntil(t0.Add(time.Hour))
		require.Len(t, r.deliver, 2)
		require.True(t, proto.Equal(r.deliver[0], r.deliver[1]), "the same write")
		require.Empty(t, r.st.Unconfirmed, "b's own write confirms")
		require.Equal(t, chimev1.JobEventType_JOB_EVENT_TYPE_REDELIVERED, r.events[len(r.events)-1].Type)
		require.EqualValues(t, 1, r.events[len(r.events)-1].FireSeq)
	})
	t.Run("recurring keeps a bounded list", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, withConfirm, func(c *Config) { c.MaxOpenFires = 8 })
		setInc(r, "a")
		r.command(upsert(kafkaSpec(r, every(time.Second)), t0), t0)
		r.runUntil(t0.Add(30 * time.Second))
		require.Len(t, r.deliver, 30)
		require.Len(t, r.st.Unconfirmed, 8)
		r.runUntil(t0.Add(5 * time.Minute))
		require.Len(t, r.st.Unconfirmed, 8)
		require.GreaterOrEqual(t, r.st.Unconfirmed[0].DeliveredAt.AsTime(), t0.Add(5*time.Minute-confirm))
	})
	t.Run("cancelled row keeps it until confirmed", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, withConfirm)
		setInc(r, "a")
		r.command(upsert(kafkaSpec(r, every(time.Hour)), t0), t0)
		r.tick(t0.Add(time.Hour))
		r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Cancel{Cancel: &chimev1.Cancel{}}}, t0.Add(time.Hour+time.Second))
		require.Equal(t, chimev1.JobStatus_JOB_STATUS_CANCELLED, r.st.Status)
		setInc(r, "b")
		r.runUntil(t0.Add(2 * time.Hour))
		require.Len(t, r.deliver, 2)
		require.False(t, r.deleted)
		r.runUntil(t0.Add(30 * 24 * time.Hour))
		require.True(t, r.deleted, "removed after its retention once confirmed")
	})
}

// TestRestartedSchedulerReemitsOpenFiresAtOnce: a fire emitted by another
// incarnation is emitted again on the recovery tick, without waiting for
// AckTimeout: the due event may have died with its process.
func TestRestartedSchedulerReemitsOpenFiresAtOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.AckTimeout = 2 * time.Minute })
	a, b := "a", "b"
	r.d.incarnation.Store(&a)
	r.command(upsert(httpSpec(every(time.Hour)), t0), t0)
	r.tick(t0.Add(time.Hour))
	require.Len(t, r.dues, 1)
	first := r.dues[0]
	require.Equal(t, t0.Add(time.Hour), r.st.RecoverAt.AsTime(), "an open fire sets recover_at")
	require.Equal(t, t0.Add(time.Hour+2*time.Minute), r.st.TimerAt.AsTime())

	// Same incarnation, early tick (the partition came back): no re-send;
	// the row is rewritten so the index takes its timer again.
	r.tick(t0.Add(time.Hour + time.Second))
	require.Len(t, r.dues, 1)

	// Another incarnation recovers the row: the fire goes out again now.
	r.d.incarnation.Store(&b)
	r.tick(t0.Add(time.Hour + 10*time.Second))
	require.Len(t, r.dues, 2)
	again := r.dues[1]
	require.Equal(t, first.EmitSeq, again.EmitSeq)
	require.Equal(t, first.IdempotencyKey, again.IdempotencyKey)
	require.Zero(t, r.st.Open[0].Redeliveries, "a restart is not an unanswered redelivery")
	require.Equal(t, chimev1.JobEventType_JOB_EVENT_TYPE_REDELIVERED, r.events[len(r.events)-1].Type)
	require.Equal(t, t0.Add(time.Hour+10*time.Second+2*time.Minute), r.st.TimerAt.AsTime(), "AckTimeout counts from the re-send")
	r.tick(t0.Add(time.Hour + 11*time.Second))
	require.Len(t, r.dues, 2, "taken over: no second re-send")

	// Answered fires leave nothing to recover.
	r.command(ack(again, chimev1.AckResult_ACK_RESULT_SUCCEEDED), t0.Add(time.Hour+12*time.Second))
	require.Nil(t, r.st.RecoverAt)

	// A fire waiting for its retry is not re-sent: the Retry was stored.
	r.tick(t0.Add(2 * time.Hour))
	d3 := r.dues[len(r.dues)-1]
	r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{
		FireSeq: d3.FireSeq, EmitSeq: d3.EmitSeq, Attempt: 2, NotBefore: timestamppb.New(t0.Add(2*time.Hour + time.Minute))}}}, t0.Add(2*time.Hour+time.Second))
	require.Nil(t, r.st.RecoverAt)
	n := len(r.dues)
	r.d.incarnation.Store(&a)
	r.tick(t0.Add(2*time.Hour + 2*time.Second))
	require.Len(t, r.dues, n)
}

func TestJitterIsStableAndBounded(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := every(time.Minute)
	s.Jitter = durationpb.New(10 * time.Second)
	r.command(upsert(httpSpec(s), t0), t0)
	first := r.st.TimerAt.AsTime()
	require.False(t, first.Before(t0.Add(time.Minute)))
	require.True(t, first.Before(t0.Add(time.Minute+10*time.Second)))
	r.tick(first)
	require.Len(t, r.dues, 1)
	require.Equal(t, t0.Add(time.Minute), r.dues[0].ScheduledAt.AsTime())
	require.Equal(t, first, r.dues[0].FireAt.AsTime())
}

func TestUnansweredFireIsRedeliveredWithBackoff(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.AckTimeout = time.Minute })
	r.command(upsert(httpSpec(at(t0)), t0), t0)
	r.tick(t0)
	require.Len(t, r.dues, 1)
	require.Equal(t, t0.Add(time.Minute), r.st.TimerAt.AsTime())
	r.tick(t0.Add(time.Minute))
	require.Len(t, r.dues, 2)
	d1, d2 := r.dues[0], r.dues[1]
	require.Equal(t, d1.EmitSeq, d2.EmitSeq, "a redelivery is the same emission")
	require.Equal(t, d1.IdempotencyKey, d2.IdempotencyKey)
	require.Equal(t, t0.Add(3*time.Minute), r.st.TimerAt.AsTime(), "the wait doubles")
	r.command(ack(d2, chimev1.AckResult_ACK_RESULT_SUCCEEDED), t0.Add(2*time.Minute))
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_COMPLETED, r.st.Status)
	r.runUntil(t0.Add(time.Hour))
	require.Len(t, r.dues, 2)
}

func TestUpsertWithPastStartDoesNotRefire(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := &chimev1.Schedule{Kind: &chimev1.Schedule_Every{Every: &chimev1.Every{Interval: durationpb.New(time.Minute), StartAt: timestamppb.New(t0)}}}
	r.command(upsert(httpSpec(s), t0), t0)
	r.runUntil(t0.Add(10 * time.Minute))
	require.Len(t, r.dues, 11)
	// Change only the callback: the schedule continues after 12:10.
	spec := httpSpec(s)
	spec.Target.GetHttp().Url = "https://example.com/other"
	r.command(upsert(spec, t0.Add(10*time.Minute+time.Second)), t0.Add(10*time.Minute+time.Second))
	require.Equal(t, t0.Add(11*time.Minute), r.st.TimerAt.AsTime())
	r.runUntil(t0.Add(11 * time.Minute))
	require.Len(t, r.dues, 12)
	require.Equal(t, t0.Add(11*time.Minute), r.dues[11].ScheduledAt.AsTime())
	require.EqualValues(t, 12, r.dues[11].FireSeq)
	require.EqualValues(t, 0, r.st.Skipped)
}

func TestCatchupRespectsJitter(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	s := every(10 * time.Second)
	s.Jitter = durationpb.New(9 * time.Second)
	r.command(upsert(httpSpec(s), t0), t0)
	// Every tick is 1.5 s late: no occurrence may be skipped, none early.
	for range 40 {
		r.tick(r.st.TimerAt.AsTime().Add(1500 * time.Millisecond))
	}
	for i, d := range r.dues {
		require.EqualValues(t, i+1, d.FireSeq, "no occurrence skipped")
		require.False(t, d.EmittedAt.AsTime().Before(d.FireAt.AsTime()), "never before its jittered time")
	}
	require.EqualValues(t, 0, r.st.Skipped)
}

func TestResumeCompletesAFinishedJob(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.command(upsert(httpSpec(at(t0)), t0), t0)
	r.tick(t0)
	r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}}}, t0.Add(time.Second))
	r.command(ack(r.dues[0], chimev1.AckResult_ACK_RESULT_SUCCEEDED), t0.Add(2*time.Second))
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_PAUSED, r.st.Status)
	r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Resume{Resume: &chimev1.Resume{}}}, t0.Add(3*time.Second))
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_COMPLETED, r.st.Status)
	// Cancelling a completed job changes nothing.
	before := proto.Clone(r.st)
	r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Cancel{Cancel: &chimev1.Cancel{}}}, t0.Add(4*time.Second))
	require.True(t, proto.Equal(before, r.st))
}

func TestKafkaTargetOffTheAllowlistIsNotEmitted(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	spec := httpSpec(at(t0.Add(time.Second)))
	spec.Target = &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{Topic: userTopic, Value: []byte("x")}}}
	r.command(upsert(spec, t0), t0)
	// The topic leaves the allowlist before the fire (config change).
	r.d.allowed = map[string]bool{}
	r.tick(t0.Add(time.Second))
	require.Empty(t, r.deliver)
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_DEAD, r.st.Status)
	require.Contains(t, r.st.LastDetail, "allowlist")
}

func TestReservedJobIDs(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.key = "ns1/" + schema.ReservedJobIDPrefix + "x"
	cmd := upsert(httpSpec(at(t0)), t0)
	cmd.Namespace, cmd.JobId = "ns1", schema.ReservedJobIDPrefix+"x"
	cmd.GetUpsert().Spec.Id = cmd.JobId
	r.command(cmd, t0)
	require.Len(t, r.rejects, 1)
	require.Contains(t, r.rejects[0].Reason, "reserved")

	// chime's own timer into its own topic is accepted.
	ok := upsert(httpSpec(at(t0)), t0)
	ok.Namespace, ok.JobId = "ns1", schema.ReservedJobIDPrefix+"x"
	ok.GetUpsert().Spec.Id = ok.JobId
	ok.GetUpsert().Spec.Target = &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{Topic: r.d.cfg.Topics.BreakerTimers(), Value: []byte("t")}}}
	r.command(ok, t0)
	require.Len(t, r.rejects, 1)
	require.NotNil(t, r.st)

	// Clients are refused before publishing.
	require.ErrorContains(t, schema.ValidateJobID(schema.ReservedJobIDPrefix+"x"), "reserved")
	require.ErrorContains(t, schema.ValidateCommand(ok, schema.ValidateOptions{}), "reserved")
}

// A command written to another partition than its key's would make a
// second row for the job there; it is refused, and the right partition
// accepts the same command.
func TestCommandOnAnotherPartitionIsRefused(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cmd := upsert(httpSpec(at(t0.Add(time.Minute))), t0)
	cmd.CommandId, cmd.Namespace, cmd.JobId = "c1", "ns1", "job1"
	raw, err := proto.Marshal(cmd)
	require.NoError(t, err)
	const partitions = 4
	home := processors.PartitionOf(r.key, partitions)
	wrong := (home + 1) % partitions
	r.apply(r.d.onCommand(&input{key: r.key, topic: "cmds", partition: wrong, partitions: partitions, offset: 1, raw: raw}, nil, t0))
	require.Len(t, r.rejects, 1)
	require.Contains(t, r.rejects[0].Reason, "belongs to partition")
	require.EqualValues(t, wrong, r.rejects[0].Partition)
	require.Nil(t, r.st, "no row on the wrong partition")

	r.apply(r.d.onCommand(&input{key: r.key, topic: "cmds", partition: home, partitions: partitions, offset: 2, raw: raw}, nil, t0))
	require.Len(t, r.rejects, 1)
	require.NotNil(t, r.st, "the key's own partition takes it")
}

// FuzzOnCommand: any record on job-commands (any bytes, any key, with or
// without a row) is decided without a panic: applied, ignored or rejected.
func FuzzOnCommand(f *testing.F) {
	valid, err := proto.Marshal(&chimev1.JobCommand{CommandId: "c", Namespace: "ns1", JobId: "job1",
		Command: &chimev1.JobCommand_Upsert{Upsert: &chimev1.Upsert{Spec: httpSpec(at(t0.Add(time.Minute)))}}})
	require.NoError(f, err)
	ack, err := proto.Marshal(&chimev1.JobCommand{CommandId: "a", Namespace: "ns1", JobId: "job1",
		Command: &chimev1.JobCommand_Ack{Ack: &chimev1.Ack{FireSeq: 1, EmitSeq: 1, Attempt: 1}}})
	require.NoError(f, err)
	f.Add(valid, "ns1/job1", false)
	f.Add(ack, "ns1/job1", true)
	f.Add([]byte{0xff, 0x01}, "", true)
	f.Add(valid, "ns1/other", true)
	f.Fuzz(func(t *testing.T, raw []byte, key string, withRow bool) {
		r := newRig(t)
		var cur *chimev1.JobState
		if withRow {
			r.command(upsert(httpSpec(at(t0.Add(time.Second))), t0), t0)
			r.tick(t0.Add(time.Second))
			cur = r.clone()
		}
		in := &input{key: key, topic: "cmds", partition: 0, partitions: 1, offset: 99, raw: raw}
		before := proto.CloneOf(cur)
		dec := r.d.onCommand(in, cur, t0.Add(2*time.Second))
		requireUntouched(t, before, cur, dec)
		if dec.rejection != nil && dec.state != nil {
			t.Fatalf("a rejected command changed the row")
		}
	})
}

// TestTriggerFiresNowAndLeavesTheSchedule: a triggered one-shot fires at
// once under its own fire_seq (own idempotency key), completes only after
// its scheduled fire too, and an ended job cannot be triggered.
func TestTriggerFiresNowAndLeavesTheSchedule(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	trigger := &chimev1.JobCommand{Command: &chimev1.JobCommand_Trigger{Trigger: &chimev1.Trigger{}}}
	r.command(upsert(httpSpec(at(t0.Add(time.Hour))), t0), t0)
	r.command(proto.Clone(trigger).(*chimev1.JobCommand), t0.Add(time.Second))
	require.Len(t, r.dues, 1, "fired at once")
	manual := r.dues[0]
	require.Equal(t, "ns1/job1/1", manual.IdempotencyKey)
	require.Equal(t, t0.Add(time.Second), manual.ScheduledAt.AsTime())
	require.Equal(t, t0.Add(time.Hour), r.st.NextScheduledAt.AsTime(), "the schedule is unchanged")
	require.Equal(t, chimev1.JobEventType_JOB_EVENT_TYPE_TRIGGERED, r.events[len(r.events)-1].Type)

	r.command(ack(manual, chimev1.AckResult_ACK_RESULT_SUCCEEDED), t0.Add(2*time.Second))
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, r.st.Status, "the one-shot still waits for its time")
	r.tick(t0.Add(time.Hour))
	require.Len(t, r.dues, 2)
	require.Equal(t, "ns1/job1/2", r.dues[1].IdempotencyKey, "the scheduled fire has its own key")
	r.command(ack(r.dues[1], chimev1.AckResult_ACK_RESULT_SUCCEEDED), t0.Add(time.Hour+time.Second))
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_COMPLETED, r.st.Status)

	r.command(proto.Clone(trigger).(*chimev1.JobCommand), t0.Add(2*time.Hour))
	require.Len(t, r.dues, 2)
	require.Len(t, r.rejects, 1, "an ended job is not triggered")
	require.Contains(t, r.rejects[0].Reason, "completed")
}

// TestTriggerRepeatedFiresOnce: a trigger published again under the same
// command id (a producer retrying a publish whose answer it lost) fires
// once; a new trigger fires again.
func TestTriggerRepeatedFiresOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.command(upsert(httpSpec(at(t0.Add(time.Hour))), t0), t0)
	trigger := func(id string) *chimev1.JobCommand {
		return &chimev1.JobCommand{CommandId: id, Command: &chimev1.JobCommand_Trigger{Trigger: &chimev1.Trigger{}}}
	}
	r.command(trigger("t-1"), t0.Add(time.Second))
	r.command(trigger("t-1"), t0.Add(2*time.Second))
	require.Len(t, r.dues, 1, "the repeated trigger fired nothing")
	r.command(trigger("t-2"), t0.Add(3*time.Second))
	require.Len(t, r.dues, 2, "a new trigger fires")
}

// TestAnswerAheadOfTheRowSettlesTheFire: a fire's decision held unwritten
// (held.go) is lost with its scheduler; the stored row still holds
// the timer that fired. The answer to that fire reaches the next owner
// before it fires the occurrence again: the row catches up on the lost
// fire and takes the answer, instead of dropping it as a duplicate and
// waiting AckTimeout for another (the dispatcher that answered suppresses
// the repeat).
func TestAnswerAheadOfTheRowSettlesTheFire(t *testing.T) {
	t.Parallel()
	retryOf := func(d *chimev1.Due) *chimev1.JobCommand {
		return &chimev1.JobCommand{Command: &chimev1.JobCommand_Retry{Retry: &chimev1.Retry{
			FireSeq: d.FireSeq, EmitSeq: d.EmitSeq, Attempt: d.Attempt + 1, NotBefore: timestamppb.New(t0.Add(time.Minute)), Reason: "503"}}}
	}
	deferOf := func(d *chimev1.Due) *chimev1.JobCommand {
		return &chimev1.JobCommand{Command: &chimev1.JobCommand_Defer{Defer: &chimev1.Defer{
			FireSeq: d.FireSeq, EmitSeq: d.EmitSeq, NotBefore: timestamppb.New(t0.Add(time.Minute)), Reason: "breaker open"}}}
	}
	for _, tc := range []struct {
		name   string
		answer func(*chimev1.Due) *chimev1.JobCommand
		check  func(t *testing.T, r *rig)
	}{
		{"ack", func(d *chimev1.Due) *chimev1.JobCommand { return ack(d, chimev1.AckResult_ACK_RESULT_SUCCEEDED) }, func(t *testing.T, r *rig) {
			require.Equal(t, chimev1.JobStatus_JOB_STATUS_COMPLETED, r.st.Status)
		}},
		{"retry", retryOf, func(t *testing.T, r *rig) {
			require.Len(t, r.st.Pending, 1)
			require.EqualValues(t, 2, r.st.Pending[0].Attempt)
			require.Equal(t, t0.Add(time.Minute), r.st.TimerAt.AsTime(), "the retry's time, not the lost fire's")
		}},
		{"defer", deferOf, func(t *testing.T, r *rig) {
			require.Len(t, r.st.Pending, 1)
			require.EqualValues(t, 1, r.st.Pending[0].Deferrals)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			r.command(upsert(httpSpec(at(t0)), t0), t0)
			stored := r.clone()
			r.tick(t0)
			require.Len(t, r.dues, 1)
			lost := r.dues[0]
			r.st, r.dues = stored, nil // the fire's row was never written

			r.command(tc.answer(lost), t0.Add(time.Second))
			require.Empty(t, r.dues, "the answered emission is not emitted again")
			require.EqualValues(t, lost.FireSeq, r.st.FireSeq)
			require.EqualValues(t, lost.EmitSeq, r.st.EmitSeq)
			tc.check(t, r)
			r.tick(t0.Add(2 * time.Second)) // the next owner's first tick fires nothing
			require.Empty(t, r.dues)
		})
	}

	// An answer naming an emission the row would not make is still stale.
	r := newRig(t)
	r.command(upsert(httpSpec(at(t0.Add(time.Hour))), t0), t0)
	events := len(r.events)
	r.command(ack(&chimev1.Due{FireSeq: 1, EmitSeq: 1}, chimev1.AckResult_ACK_RESULT_SUCCEEDED), t0.Add(time.Second))
	require.Equal(t, chimev1.JobStatus_JOB_STATUS_SCHEDULED, r.st.Status, "the fire is not due: the answer is not its")
	require.Empty(t, r.dues)
	require.Len(t, r.events, events)
}
