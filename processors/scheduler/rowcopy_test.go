package scheduler

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// fill sets every field of m, and of the messages in it, to a value other
// than its default, and gives each message an unknown field: a copy that
// leaves a field out is then told apart from the original.
func fill(m protoreflect.Message, depth int) {
	m.SetUnknown(protoreflect.RawFields{0xf8, 0x3f, 0x01}) // field 1023, varint 1
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
				if depth > 0 {
					e := l.NewElement()
					fill(e.Message(), depth-1)
					l.Append(e)
				}
				continue
			}
			l.Append(scalar(fd))
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				continue
			}
			m.Mutable(fd).Map().Set(scalar(fd.MapKey()).MapKey(), scalar(fd.MapValue()))
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			if depth > 0 {
				fill(m.Mutable(fd).Message(), depth-1)
			}
		default:
			m.Set(fd, scalar(fd))
		}
	}
}

func scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(1)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(7)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(7)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(7)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(7)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(1.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(1.5)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("x")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("x"))
	}
	panic("scalar: kind " + fd.Kind().String())
}

// TestCopyRowCopiesEveryField: the copy equals the row in every field
// (also those added to the schema after copyRow was written: the test then
// fails until copyRow copies them), and what decisions change in place is
// not shared.
func TestCopyRowCopiesEveryField(t *testing.T) {
	t.Parallel()
	st := new(chimev1.JobState)
	fill(st.ProtoReflect(), 4)
	require.NotEmpty(t, st.Open)
	require.NotEmpty(t, st.Pending)
	require.NotEmpty(t, st.Unconfirmed)

	c := copyRow(st)
	require.True(t, proto.Equal(st, c), "copyRow leaves out a field:\n%v\n%v", st, c)
	require.NotSame(t, st, c)
	require.NotSame(t, &st.Open[0], &c.Open[0], "the open list is copied")
	require.NotSame(t, st.Open[0], c.Open[0], "an open fire is copied")
	require.NotSame(t, &st.Pending[0], &c.Pending[0], "the pending list is copied")
	require.NotSame(t, st.Pending[0], c.Pending[0], "a pending retry is copied")
	require.NotSame(t, &st.Unconfirmed[0], &c.Unconfirmed[0], "the unconfirmed list is copied")
	require.NotSame(t, st.Unconfirmed[0], c.Unconfirmed[0], "an unconfirmed write is copied")

	require.Nil(t, copyRow(nil))
	empty := copyRow(&chimev1.JobState{})
	require.Nil(t, empty.Open, "an empty list stays nil")
	require.Nil(t, empty.Pending)
	require.Nil(t, empty.Unconfirmed)
}

// requireUntouched fails when a decision changed the row it was made on,
// or returned a row that shares with it what decisions change in place.
func requireUntouched(t testing.TB, before, cur *chimev1.JobState, dec decision) {
	t.Helper()
	require.True(t, proto.Equal(before, cur), "the decision changed the row it was given:\nbefore %v\nafter  %v", before, cur)
	if cur == nil || dec.state == nil {
		return
	}
	require.NotSame(t, cur, dec.state, "the decision returned the row it was given")
	requireNoneShared(t, "open fire", cur.GetOpen(), dec.state.GetOpen())
	requireNoneShared(t, "pending retry", cur.GetPending(), dec.state.GetPending())
	requireNoneShared(t, "unconfirmed write", cur.GetUnconfirmed(), dec.state.GetUnconfirmed())
}

func requireNoneShared[M any](t testing.TB, what string, cur, out []*M) {
	t.Helper()
	in := make(map[*M]bool, len(cur))
	for _, m := range cur {
		in[m] = true
	}
	for _, m := range out {
		if in[m] {
			t.Fatalf("the new row shares a%s %s with the row it was made from", map[bool]string{true: "n"}[what[0] == 'o' || what[0] == 'u'], what)
		}
	}
}

// TestDecisionsLeaveTheirRowAsItIs: every kind of command and tick decides
// on a row it does not change (the rig checks every step of every test the
// same way; these cases make sure each kind is reached with a row that
// has open fires, pending retries, history and unconfirmed writes).
func TestDecisionsLeaveTheirRowAsItIs(t *testing.T) {
	t.Parallel()
	kafkaSpec := func(s *chimev1.Schedule, value string) *chimev1.JobSpec {
		spec := httpSpec(s)
		spec.Target = &chimev1.Target{Kind: &chimev1.Target_Kafka{Kafka: &chimev1.KafkaTarget{Topic: userTopic, Key: []byte("k"), Value: []byte(value)}}}
		return spec
	}
	// fired: an every-minute HTTP job with fire 1 open after a failed
	// attempt (its history) and fire 2 open.
	fired := func(r *rig) {
		r.command(upsert(httpSpec(every(time.Minute)), t0), t0)
		r.tick(t0.Add(time.Minute))
		r.command(retryOf(r.dues[0], t0.Add(90*time.Second)), t0.Add(61*time.Second))
		r.tick(t0.Add(90 * time.Second))
		r.tick(t0.Add(2 * time.Minute))
	}
	// retrying: fire 1 waits for its retry.
	retrying := func(r *rig) {
		r.command(upsert(httpSpec(every(time.Hour)), t0), t0)
		r.tick(t0.Add(time.Hour))
		r.command(retryOf(r.dues[0], t0.Add(2*time.Hour)), t0.Add(time.Hour+time.Second))
	}
	// delivered: a recurring Kafka-target job with an unconfirmed write.
	delivered := func(r *rig) {
		r.command(upsert(kafkaSpec(every(time.Hour), "v1"), t0), t0)
		r.tick(t0.Add(time.Hour))
	}
	lastDue := func(r *rig) *chimev1.Due { return r.dues[len(r.dues)-1] }
	cases := []struct {
		name  string
		setup func(r *rig)
		// then is the command or tick under test, at now.
		then func(r *rig, now time.Time)
	}{
		{"upsert replaces the spec", fired, func(r *rig, now time.Time) {
			r.command(upsert(httpSpec(every(2*time.Minute)), now), now)
		}},
		{"upsert replaces a Kafka target with writes unconfirmed", delivered, func(r *rig, now time.Time) {
			r.command(upsert(kafkaSpec(every(time.Hour), "v2"), now), now)
		}},
		{"cancel", retrying, func(r *rig, now time.Time) {
			r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Cancel{Cancel: &chimev1.Cancel{Reason: "done"}}}, now)
		}},
		{"pause", fired, func(r *rig, now time.Time) {
			r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}}}, now)
		}},
		{"resume over missed occurrences", func(r *rig) {
			fired(r)
			r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}}}, t0.Add(2*time.Minute+time.Second))
		}, func(r *rig, now time.Time) {
			r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Resume{Resume: &chimev1.Resume{}}}, now.Add(10*time.Minute))
		}},
		{"trigger", fired, func(r *rig, now time.Time) {
			r.command(trigger(), now)
		}},
		{"retry", fired, func(r *rig, now time.Time) {
			r.command(retryOf(lastDue(r), now.Add(time.Minute)), now)
		}},
		{"defer", fired, func(r *rig, now time.Time) {
			due := lastDue(r)
			r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Defer{Defer: &chimev1.Defer{FireSeq: due.FireSeq, EmitSeq: due.EmitSeq, NotBefore: timestamppb.New(now.Add(time.Minute)), Reason: "breaker open"}}}, now)
		}},
		{"ack succeeded", fired, func(r *rig, now time.Time) {
			r.command(ack(lastDue(r), chimev1.AckResult_ACK_RESULT_SUCCEEDED), now)
		}},
		{"ack dead", fired, func(r *rig, now time.Time) {
			r.command(ack(r.dues[0], chimev1.AckResult_ACK_RESULT_DEAD), now)
		}},
		{"rejected command", func(r *rig) {
			fired(r)
			r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Cancel{Cancel: &chimev1.Cancel{}}}, t0.Add(3*time.Minute))
		}, func(r *rig, now time.Time) {
			r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Pause{Pause: &chimev1.Pause{}}}, now)
		}},
		{"tick fires the next occurrence", fired, func(r *rig, now time.Time) {
			r.tick(t0.Add(3 * time.Minute))
		}},
		{"tick fires a retry", retrying, func(r *rig, now time.Time) {
			r.tick(t0.Add(2 * time.Hour))
		}},
		{"tick catches up after downtime", fired, func(r *rig, now time.Time) {
			r.tick(t0.Add(time.Hour))
		}},
		{"tick redelivers an unanswered fire", fired, func(r *rig, now time.Time) {
			r.tick(now.Add(r.d.cfg.AckTimeout))
		}},
		{"tick of a new incarnation re-sends what the last one emitted", fired, func(r *rig, now time.Time) {
			r.d.incarnation.Store(new("b"))
			r.tick(now)
		}},
		{"tick of a new incarnation writes a Kafka target again", delivered, func(r *rig, now time.Time) {
			r.d.incarnation.Store(new("b"))
			r.tick(now)
		}},
		{"tick confirms a Kafka-target write", delivered, func(r *rig, now time.Time) {
			r.tick(t0.Add(time.Hour + r.d.cfg.ConfirmAfter))
		}},
		{"tick removes an ended row", func(r *rig) {
			fired(r)
			r.command(&chimev1.JobCommand{Command: &chimev1.JobCommand_Cancel{Cancel: &chimev1.Cancel{}}}, t0.Add(3*time.Minute))
		}, func(r *rig, now time.Time) {
			r.tick(now.Add(r.d.cfg.TerminalRetention))
		}},
		{"recovery tick", func(r *rig) {
			r.command(upsert(httpSpec(every(time.Hour)), t0), t0)
			r.tick(t0.Add(time.Hour))
		}, func(r *rig, now time.Time) {
			r.tick(now)
		}},
		{"tick of a held create whose namespace arrived", func(r *rig) {
			r.ns = nsAbsent
			r.command(upsert(httpSpec(every(time.Hour)), t0), t0)
		}, func(r *rig, now time.Time) {
			r.ns = nsKnown
			r.tick(now)
		}},
		{"tick of a held create still waiting", func(r *rig) {
			r.ns = nsAbsent
			r.command(upsert(httpSpec(every(time.Hour)), t0), t0)
		}, func(r *rig, now time.Time) {
			r.tick(r.st.GetTimerAt().AsTime())
		}},
		// The rig's every step checks the row; bound sheds from the
		// decision's row in the steps past 40 s (3 KiB).
		{"a row over its budget sheds history", func(r *rig) {
			r.d.cfg.MaxRowBytes = 3 << 10
			spec := httpSpec(every(time.Second))
			spec.Retry = &chimev1.RetryPolicy{MaxAttempts: 100, InitialInterval: durationpb.New(time.Second), MaxInterval: durationpb.New(time.Second), Multiplier: 1}
			r.command(upsert(spec, t0), t0)
			for i := range 45 {
				at := t0.Add(time.Duration(i+1) * time.Second)
				before := len(r.dues)
				r.tick(at)
				for _, due := range r.dues[before:] {
					r.command(retryOf(due, at.Add(time.Second)), at)
				}
			}
		}, func(r *rig, now time.Time) {
			r.tick(t0.Add(46 * time.Second))
			require.True(r.t, slices.ContainsFunc(r.st.GetOpen(), func(em *chimev1.Emission) bool { return em.GetAttempt() > 1 && len(em.GetHistory()) == 0 }),
				"the history of a retried fire was shed to keep the row in budget")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, func(c *Config) { c.AckTimeout = time.Minute })
			r.d.incarnation.Store(new("a"))
			tc.setup(r)
			require.NotNil(t, r.st)
			steps := r.off
			before := r.decided
			tc.then(r, t0.Add(3*time.Minute+time.Second))
			require.Equal(t, steps+1, r.off, "one step under test")
			require.Greater(t, r.decided, before, "the step decided something (the rig checked its row stayed as it was)")
		})
	}
}

// BenchmarkCopyRow: what a decision pays for leaving its input as it is,
// against proto.Clone, on a row with an open fire, its failed attempt and
// a pending retry.
func BenchmarkCopyRow(b *testing.B) {
	r := newRig(b)
	r.command(upsert(httpSpec(every(time.Minute)), t0), t0)
	r.tick(t0.Add(time.Minute))
	r.command(retryOf(r.dues[0], t0.Add(90*time.Second)), t0.Add(61*time.Second))
	r.tick(t0.Add(90 * time.Second))
	r.command(retryOf(r.dues[1], t0.Add(2*time.Minute)), t0.Add(91*time.Second))
	st := r.st
	require.Len(b, st.Open, 1)
	require.Len(b, st.Pending, 1)
	for _, bc := range []struct {
		name string
		copy func(*chimev1.JobState) *chimev1.JobState
	}{
		{"copyRow", copyRow},
		{"proto.Clone", func(st *chimev1.JobState) *chimev1.JobState { return proto.CloneOf(st) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.copy(st)
			}
		})
	}
}
