package schema

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// The generated decoder allocates every message it decodes, one by one: a
// row of a fired one-shot is about twenty allocations, a due event a dozen,
// and the scheduler decodes two rows and the dispatcher one due for every
// job it fires (the burst's allocation profile). But it decodes a message
// field into the one already set. So the decoders here first walk the
// encoding (nextField, no allocation) and point the message fields it has
// at one allocation holding them all; the fields it has not stay nil, so
// the decoded message equals the generated decoder's (the tests and fuzz
// targets in preset_test.go and stamps_test.go hold them to it, errors
// included). A field seen only in a later occurrence of its parent, or
// with another wire type, is not preset: the generated decoder allocates
// it as before.

// presetRow presets a row's own timestamps and its spec's messages.
func presetRow(s *chimev1.JobState, body []byte) {
	var spec []byte
	presetStamps(s, body, &spec)
	if spec != nil {
		s.Spec = presetSpec(spec)
	}
}

// A row carries up to ten timestamps of its own (eight in a fired
// one-shot's).
//
// jobStateStamps are JobState's own timestamp fields, by number
// (TestJobStateStampsAreItsTimestampFields holds them to the descriptor).
var jobStateStamps = [...]struct {
	num protowire.Number
	set func(*chimev1.JobState, *timestamppb.Timestamp)
}{
	{4, func(s *chimev1.JobState, t *timestamppb.Timestamp) { s.NextScheduledAt = t }},
	{5, func(s *chimev1.JobState, t *timestamppb.Timestamp) { s.TimerAt = t }},
	{9, func(s *chimev1.JobState, t *timestamppb.Timestamp) { s.CreatedAt = t }},
	{10, func(s *chimev1.JobState, t *timestamppb.Timestamp) { s.UpdatedAt = t }},
	{11, func(s *chimev1.JobState, t *timestamppb.Timestamp) { s.Anchor = t }},
	{15, func(s *chimev1.JobState, t *timestamppb.Timestamp) { s.LastFiredAt = t }},
	{18, func(s *chimev1.JobState, t *timestamppb.Timestamp) { s.LastScheduledAt = t }},
	{20, func(s *chimev1.JobState, t *timestamppb.Timestamp) { s.RecoverAt = t }},
	{22, func(s *chimev1.JobState, t *timestamppb.Timestamp) { s.HeldUntil = t }},
	{23, func(s *chimev1.JobState, t *timestamppb.Timestamp) { s.TickAt = t }},
}

// presetStamps sets the timestamp fields body has to one slice of
// timestamps, and *spec to the first occurrence of the spec field (nil:
// none). A malformed body is left to the decoder to refuse.
func presetStamps(s *chimev1.JobState, body []byte, spec *[]byte) {
	var present [len(jobStateStamps)]bool
	n := 0
	for len(body) > 0 {
		num, typ, v, rest, err := nextField(body)
		if err != nil {
			return
		}
		body = rest
		if typ != protowire.BytesType {
			continue
		}
		if num == jobStateSpecField && *spec == nil {
			*spec = v[:len(v):len(v)]
			continue
		}
		for i := range jobStateStamps {
			if jobStateStamps[i].num == num && !present[i] {
				present[i] = true
				n++
				break
			}
		}
	}
	if n < 2 {
		return // one allocation either way
	}
	slab := make([]timestamppb.Timestamp, n)
	for i := range present {
		if present[i] {
			n--
			jobStateStamps[i].set(s, &slab[n])
		}
	}
}

// specTree is a one-shot HTTP job's spec as the generated decoder would
// allocate it: seven messages, two of them oneof wrappers.
type specTree struct {
	spec   chimev1.JobSpec
	sched  chimev1.Schedule
	at     chimev1.Schedule_At
	atTime timestamppb.Timestamp
	target chimev1.Target
	http   chimev1.Target_Http
	call   chimev1.HttpCallback
}

// JobSpec's, Schedule's and Target's field numbers presetSpec reads.
const (
	jobSpecScheduleField = 3
	jobSpecTargetField   = 4
	scheduleAtField      = 1
	targetHTTPField      = 1
)

// presetSpec returns the JobSpec to decode the spec field body into, with
// its schedule's instant and its HTTP target preset where body has them.
func presetSpec(body []byte) *chimev1.JobSpec {
	t := new(specTree)
	var sched, target bool
	for len(body) > 0 {
		num, typ, v, rest, err := nextField(body)
		if err != nil {
			break
		}
		body = rest
		if typ != protowire.BytesType {
			continue
		}
		switch {
		case num == jobSpecScheduleField && !sched:
			sched = true
			t.spec.Schedule = &t.sched
			if hasMessageField(v, scheduleAtField) {
				t.at.At = &t.atTime
				t.sched.Kind = &t.at
			}
		case num == jobSpecTargetField && !target:
			target = true
			t.spec.Target = &t.target
			if hasMessageField(v, targetHTTPField) {
				t.http.Http = &t.call
				t.target.Kind = &t.http
			}
		}
	}
	return &t.spec
}

// hasMessageField says whether body has field num with the wire type of a
// message.
func hasMessageField(body []byte, num protowire.Number) bool {
	for len(body) > 0 {
		n, typ, _, rest, err := nextField(body)
		if err != nil {
			return false
		}
		if n == num && typ == protowire.BytesType {
			return true
		}
		body = rest
	}
	return false
}

// dueTree is what a due event's generated decode allocates besides its
// strings and lists: the due, its four instants and its callback.
type dueTree struct {
	due    chimev1.Due
	stamps [4]timestamppb.Timestamp
	call   chimev1.HttpCallback
}

// Due's message fields preset by presetDue; the rest of its numbers.
const (
	dueScheduledAtField = 6
	dueFireAtField      = 7
	dueEmittedAtField   = 8
	dueDeadlineField    = 9
	dueCallbackField    = 10
	dueBatchField       = 20
)

// presetDue presets the instants and the callback of t.due that body has.
func presetDue(t *dueTree, body []byte) {
	d := &t.due
	for len(body) > 0 {
		num, typ, _, rest, err := nextField(body)
		if err != nil {
			return
		}
		body = rest
		if typ != protowire.BytesType {
			continue
		}
		switch num {
		case dueScheduledAtField:
			if d.ScheduledAt == nil {
				d.ScheduledAt = &t.stamps[0]
			}
		case dueFireAtField:
			if d.FireAt == nil {
				d.FireAt = &t.stamps[1]
			}
		case dueEmittedAtField:
			if d.EmittedAt == nil {
				d.EmittedAt = &t.stamps[2]
			}
		case dueDeadlineField:
			if d.Deadline == nil {
				d.Deadline = &t.stamps[3]
			}
		case dueCallbackField:
			if d.Callback == nil {
				d.Callback = &t.call
			}
		}
	}
}

// outcomeParts are a callback outcome's instants and latency: the sink
// decodes every outcome whole, four or five allocations of these where
// one does.
type outcomeParts struct {
	scheduled, started, finished, next timestamppb.Timestamp
	latency                            durationpb.Duration
}

// CallbackOutcome's message fields presetOutcome presets.
const (
	outcomeLatencyField     = 8
	outcomeScheduledAtField = 13
	outcomeStartedAtField   = 14
	outcomeFinishedAtField  = 15
	outcomeNextAttemptField = 18
)

// presetOutcome presets the instants and the latency o's encoding body
// has.
func presetOutcome(o *chimev1.CallbackOutcome, body []byte) {
	var p *outcomeParts
	for len(body) > 0 {
		num, typ, _, rest, err := nextField(body)
		if err != nil {
			return
		}
		body = rest
		if typ != protowire.BytesType {
			continue
		}
		if p == nil {
			switch num {
			case outcomeLatencyField, outcomeScheduledAtField, outcomeStartedAtField, outcomeFinishedAtField, outcomeNextAttemptField:
				p = new(outcomeParts)
			}
		}
		switch {
		case num == outcomeLatencyField && o.Latency == nil:
			o.Latency = &p.latency
		case num == outcomeScheduledAtField && o.ScheduledAt == nil:
			o.ScheduledAt = &p.scheduled
		case num == outcomeStartedAtField && o.StartedAt == nil:
			o.StartedAt = &p.started
		case num == outcomeFinishedAtField && o.FinishedAt == nil:
			o.FinishedAt = &p.finished
		case num == outcomeNextAttemptField && o.NextAttemptAt == nil:
			o.NextAttemptAt = &p.next
		}
	}
}
