package circuit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Thresholds are a namespace's breaker settings, every field resolved.
type Thresholds struct {
	Window      time.Duration
	MinRequests uint32
	// Percentages, 50 = 50 %.
	FailureRateThreshold  float64
	SlowCallDuration      time.Duration
	SlowCallRateThreshold float64
	// LatencyThreshold trips on the window's average latency; 0 is off.
	LatencyThreshold time.Duration
	CoolOff          time.Duration
	MaxCoolOff       time.Duration
	HalfOpenProbes   uint32
	TripsToDisable   uint32
}

// ThresholdsFrom reads a BreakerConfig whose defaults are already filled in
// (schema.EffectiveNamespace).
func ThresholdsFrom(b *chimev1.BreakerConfig) Thresholds {
	return Thresholds{
		Window:                b.GetWindow().AsDuration(),
		MinRequests:           b.GetMinRequests(),
		FailureRateThreshold:  b.GetFailureRateThreshold(),
		SlowCallDuration:      b.GetSlowCallDuration().AsDuration(),
		SlowCallRateThreshold: b.GetSlowCallRateThreshold(),
		LatencyThreshold:      b.GetLatencyThreshold().AsDuration(),
		CoolOff:               b.GetCoolOff().AsDuration(),
		MaxCoolOff:            b.GetMaxCoolOff().AsDuration(),
		HalfOpenProbes:        b.GetHalfOpenProbes(),
		TripsToDisable:        b.GetTripsToDisable(),
	}
}

// ThresholdsFor is the breaker configuration of namespace ns given its stored
// configuration (nil for a namespace that set nothing).
func ThresholdsFor(ns string, cfg *chimev1.NamespaceConfig) Thresholds {
	return ThresholdsFrom(schema.EffectiveNamespace(ns, cfg).GetBreaker())
}

// CoolOffFor is how long the breaker stays open after its trips-th
// consecutive trip: CoolOff doubled for every trip after the first, capped
// at MaxCoolOff.
func CoolOffFor(cfg Thresholds, trips uint32) time.Duration {
	d := cfg.CoolOff
	for i := uint32(1); i < trips && d < cfg.MaxCoolOff; i++ {
		d *= 2
	}
	if cfg.MaxCoolOff > 0 && d > cfg.MaxCoolOff {
		d = cfg.MaxCoolOff
	}
	return d
}

// NewStatus is the status of a namespace the breaker has not seen: closed.
func NewStatus(ns string) *chimev1.BreakerStatus {
	return &chimev1.BreakerStatus{Namespace: ns, State: chimev1.BreakerState_BREAKER_STATE_CLOSED}
}

// StateOf is st's state; a missing status or an unset state is closed.
func StateOf(st *chimev1.BreakerStatus) chimev1.BreakerState {
	if s := st.GetState(); s != chimev1.BreakerState_BREAKER_STATE_UNSPECIFIED {
		return s
	}
	return chimev1.BreakerState_BREAKER_STATE_CLOSED
}

// Result is what one input did to a status.
type Result struct {
	// Changed says the status was modified and must be written back.
	Changed bool
	// Transitions are the state changes, in order, for the transitions
	// topic.
	Transitions []*chimev1.BreakerTransition
	// Timer, when set, is the cool-off timer to arm: the breaker opened.
	Timer *chimev1.BreakerTimer
	// Ignored explains an input that changed nothing, for the log.
	Ignored string
}

// Classify says how the breaker counts an outcome: whether it is a request
// at all, and whether it failed. Deferred, expired and refused outcomes
// were never sent and say nothing about the client; a permanent (4xx)
// answer proves the client alive and counts as a success.
func Classify(o *chimev1.CallbackOutcome) (request, failure bool) {
	switch o.GetClass() {
	case chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, chimev1.OutcomeClass_OUTCOME_CLASS_PERMANENT:
		return true, false
	case chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE:
		// 5xx, 408/425/429, timeouts, connection errors.
		return true, true
	}
	return false, false
}

// latencyOf is the call's latency: the reported one, else finish - start.
func latencyOf(o *chimev1.CallbackOutcome) time.Duration {
	if o.GetLatency() != nil {
		return o.GetLatency().AsDuration()
	}
	if o.GetStartedAt().IsValid() && o.GetFinishedAt().IsValid() {
		return o.GetFinishedAt().AsTime().Sub(o.GetStartedAt().AsTime())
	}
	return 0
}

// maxSkew bounds how far in the future an outcome's finish time is
// believed: a dispatcher with a wrong clock must not push the window ahead
// and expire every bucket.
const maxSkew = time.Minute

func eventTime(o *chimev1.CallbackOutcome, now time.Time) time.Time {
	t := now
	if o.GetFinishedAt().IsValid() {
		t = o.GetFinishedAt().AsTime()
	}
	if t.After(now.Add(maxSkew)) {
		t = now
	}
	return t
}

// Observe counts outcome o in st's window and moves the state machine.
// st is modified in place.
func Observe(st *chimev1.BreakerStatus, cfg Thresholds, o *chimev1.CallbackOutcome, now time.Time) Result {
	request, failure := Classify(o)
	if !request {
		return Result{Ignored: "outcome class " + o.GetClass().String() + " is not a request"}
	}
	lat := latencyOf(o)
	slow := cfg.SlowCallDuration > 0 && lat >= cfg.SlowCallDuration
	r := ringOf(st, cfg.Window)
	counted := r.add(sample{at: eventTime(o, now), failure: failure, slow: slow, latency: lat})
	var res Result
	var s stats
	if counted {
		res.Changed = true
		s = r.stats()
		if st.Window == nil {
			st.Window = new(chimev1.WindowStats)
		}
		s.fill(st.Window)
	}
	switch StateOf(st) {
	case chimev1.BreakerState_BREAKER_STATE_CLOSED:
		if !counted {
			res.Ignored = "outcome finished before the window"
			return res
		}
		if reason, trip := tripReason(cfg, s); trip {
			trip1(st, cfg, reason, now, &res)
		}
	case chimev1.BreakerState_BREAKER_STATE_HALF_OPEN:
		if !o.GetProbe() {
			return res // a call sent before the breaker opened
		}
		res.Changed = true
		if failure || slow {
			trip1(st, cfg, "probe "+describeFailure(o, slow, lat, cfg), now, &res)
			return res
		}
		st.ProbesSucceeded++
		if st.ProbesSucceeded >= st.ProbesGranted {
			reason := fmt.Sprintf("%d of %d probes succeeded", st.ProbesSucceeded, st.ProbesGranted)
			st.ConsecutiveTrips = 0
			st.NextCheckAt, st.CoolOff = nil, nil
			st.ProbesGranted, st.ProbesSucceeded = 0, 0
			// The failures that opened the breaker must not trip it again.
			st.Buckets, st.Window = nil, &chimev1.WindowStats{}
			res.Transitions = append(res.Transitions, transition(st, chimev1.BreakerState_BREAKER_STATE_CLOSED, reason, now))
		}
	}
	// Open, disabled and forced states only record the outcome.
	return res
}

// tripReason says whether the window's figures trip the breaker, and why.
func tripReason(cfg Thresholds, s stats) (string, bool) {
	if s.requests == 0 || s.requests < uint64(cfg.MinRequests) {
		return "", false
	}
	over := func() string { return fmt.Sprintf("over %d requests in %s", s.requests, cfg.Window) }
	if cfg.FailureRateThreshold > 0 && s.failureRate() >= cfg.FailureRateThreshold {
		return fmt.Sprintf("failure rate %s%% >= %s%% %s", fmtPct(s.failureRate()), fmtPct(cfg.FailureRateThreshold), over()), true
	}
	if cfg.SlowCallRateThreshold > 0 && s.slowRate() >= cfg.SlowCallRateThreshold {
		return fmt.Sprintf("slow-call rate %s%% >= %s%% (calls >= %s) %s", fmtPct(s.slowRate()), fmtPct(cfg.SlowCallRateThreshold), cfg.SlowCallDuration, over()), true
	}
	if cfg.LatencyThreshold > 0 && s.avgMs() >= float64(cfg.LatencyThreshold.Milliseconds()) {
		avg := time.Duration(s.avgMs() * float64(time.Millisecond)).Round(time.Millisecond)
		return fmt.Sprintf("average latency %s >= %s %s", avg, cfg.LatencyThreshold, over()), true
	}
	return "", false
}

func fmtPct(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func describeFailure(o *chimev1.CallbackOutcome, slow bool, lat time.Duration, cfg Thresholds) string {
	var what []string
	if o.GetClass() == chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE {
		if o.GetStatusCode() != 0 {
			what = append(what, "answered "+strconv.Itoa(int(o.GetStatusCode())))
		}
		if o.GetErrorKind() != "" {
			what = append(what, "failed: "+o.GetErrorKind())
		}
		if len(what) == 0 {
			what = append(what, "failed")
		}
	}
	if slow {
		what = append(what, fmt.Sprintf("took %s >= %s", lat.Round(time.Millisecond), cfg.SlowCallDuration))
	}
	return strings.Join(what, ", ")
}

// trip1 opens the breaker after one more consecutive trip, or disables it
// when that makes TripsToDisable.
func trip1(st *chimev1.BreakerStatus, cfg Thresholds, reason string, now time.Time, res *Result) {
	res.Changed = true
	st.ConsecutiveTrips++
	st.ProbesGranted, st.ProbesSucceeded = 0, 0
	if cfg.TripsToDisable > 0 && st.ConsecutiveTrips >= cfg.TripsToDisable {
		st.NextCheckAt, st.CoolOff = nil, nil
		reason += fmt.Sprintf("; %d consecutive trips without a healthy close: disabled until an operator resets it", st.ConsecutiveTrips)
		res.Transitions = append(res.Transitions, transition(st, chimev1.BreakerState_BREAKER_STATE_DISABLED, reason, now))
		return
	}
	d := CoolOffFor(cfg, st.ConsecutiveTrips)
	at := now.Add(d)
	st.CoolOff = durationpb.New(d)
	st.NextCheckAt = timestamppb.New(at)
	reason += fmt.Sprintf("; open for %s (trip %d)", d, st.ConsecutiveTrips)
	res.Transitions = append(res.Transitions, transition(st, chimev1.BreakerState_BREAKER_STATE_OPEN, reason, now))
	res.Timer = &chimev1.BreakerTimer{Namespace: st.GetNamespace(), Version: st.GetVersion(), FireAt: timestamppb.New(at)}
}

// transition moves st to state `to` and describes the change.
func transition(st *chimev1.BreakerStatus, to chimev1.BreakerState, reason string, now time.Time) *chimev1.BreakerTransition {
	from := StateOf(st)
	st.Version++
	st.State = to
	st.Since = timestamppb.New(now)
	st.Reason = reason
	tr := &chimev1.BreakerTransition{
		EventId:          transitionID(st.GetNamespace(), st.GetVersion()),
		Namespace:        st.GetNamespace(),
		From:             from,
		To:               to,
		Reason:           reason,
		At:               st.Since,
		ConsecutiveTrips: st.GetConsecutiveTrips(),
		CoolOff:          st.GetCoolOff(),
	}
	if st.Window != nil {
		tr.Window = proto.Clone(st.Window).(*chimev1.WindowStats)
	} else {
		tr.Window = &chimev1.WindowStats{}
	}
	return tr
}

// transitionID is the transition's event id: the same on a replay, so
// consumers can deduplicate.
func transitionID(ns string, version uint64) string {
	return "breaker/" + ns + "/" + strconv.FormatUint(version, 10)
}

// OnTimer handles the breaker's timer. An open breaker armed at this
// version goes half-open and grants its probes. A half-open breaker whose
// probes have not all answered by the timer starts a new half-open episode:
// probes whose outcomes never count (deferred, expired, refused, lost with a
// dispatcher) must not keep it half-open forever, and an idle namespace must
// not be tripped for having no traffic. Any other timer is stale.
func OnTimer(st *chimev1.BreakerStatus, cfg Thresholds, tm *chimev1.BreakerTimer, now time.Time) Result {
	state := StateOf(st)
	if (state != chimev1.BreakerState_BREAKER_STATE_OPEN && state != chimev1.BreakerState_BREAKER_STATE_HALF_OPEN) || tm.GetVersion() != st.GetVersion() {
		return Result{Ignored: fmt.Sprintf("stale breaker timer for version %d: breaker is %s at version %d", tm.GetVersion(), state, st.GetVersion())}
	}
	wait := HalfOpenTimeout(cfg)
	var reason string
	if state == chimev1.BreakerState_BREAKER_STATE_OPEN {
		st.ProbesGranted = max(cfg.HalfOpenProbes, 1)
		reason = fmt.Sprintf("cool-off of %s ended; %d probes granted", st.GetCoolOff().AsDuration(), st.ProbesGranted)
	} else {
		reason = fmt.Sprintf("%d of %d probes answered within %s; probes granted again", st.GetProbesSucceeded(), st.GetProbesGranted(), wait)
	}
	st.ProbesSucceeded = 0
	at := now.Add(wait)
	st.NextCheckAt = timestamppb.New(at)
	tr := transition(st, chimev1.BreakerState_BREAKER_STATE_HALF_OPEN, reason, now)
	return Result{
		Changed:     true,
		Transitions: []*chimev1.BreakerTransition{tr},
		Timer:       &chimev1.BreakerTimer{Namespace: st.GetNamespace(), Version: st.GetVersion(), FireAt: timestamppb.New(at)},
	}
}

// TimerGrace is how long past next_check_at a breaker waits for its timer
// before an outcome stands in for it.
const TimerGrace = 5 * time.Second

// OnOutcome handles one callback outcome: an overdue timer first (see
// Overdue), then the outcome itself (Observe).
func OnOutcome(st *chimev1.BreakerStatus, cfg Thresholds, o *chimev1.CallbackOutcome, now time.Time) Result {
	res, _ := Overdue(st, cfg, now)
	return merge(res, Observe(st, cfg, o, now))
}

// Overdue stands in for a lost timer. The cool-off and half-open timers are
// scheduler jobs whose delivery can be lost in a crash; while a breaker is
// open, dispatchers keep reporting the callbacks they hold back (DEFERRED
// outcomes), so the first outcome seen well past next_check_at does what
// the timer would have done. ok is false when nothing is overdue.
func Overdue(st *chimev1.BreakerStatus, cfg Thresholds, now time.Time) (res Result, ok bool) {
	state := StateOf(st)
	if (state != chimev1.BreakerState_BREAKER_STATE_OPEN && state != chimev1.BreakerState_BREAKER_STATE_HALF_OPEN) ||
		st.GetNextCheckAt() == nil || now.Before(st.GetNextCheckAt().AsTime().Add(TimerGrace)) {
		return Result{}, false
	}
	late := now.Sub(st.GetNextCheckAt().AsTime()).Round(time.Millisecond)
	res = OnTimer(st, cfg, &chimev1.BreakerTimer{Namespace: st.GetNamespace(), Version: st.GetVersion(), FireAt: st.GetNextCheckAt()}, now)
	for _, tr := range res.Transitions {
		tr.Reason += fmt.Sprintf(" (its timer was %s overdue; an outcome stood in for it)", late)
		st.Reason = tr.Reason
	}
	return res, true
}

// merge combines the results of two steps applied one after the other.
func merge(a, b Result) Result {
	out := Result{Changed: a.Changed || b.Changed, Transitions: append(a.Transitions, b.Transitions...), Timer: b.Timer, Ignored: b.Ignored}
	if out.Timer == nil {
		out.Timer = a.Timer
	}
	return out
}

// HalfOpenTimeout is how long a half-open episode waits for its probes'
// outcomes before granting them again.
func HalfOpenTimeout(cfg Thresholds) time.Duration {
	return max(cfg.CoolOff, 10*time.Second)
}

// ErrCommand wraps every reason a command is refused.
var ErrCommand = errors.New("breaker command")

// ValidateCommand checks a manual command received under record key key.
func ValidateCommand(key string, cmd *chimev1.BreakerCommand) error {
	switch {
	case cmd.GetCommandId() == "":
		return fmt.Errorf("%w: command_id must be set", ErrCommand)
	case cmd.GetNamespace() != key:
		return fmt.Errorf("%w: record key %q does not match the command's namespace %q; publish with the namespace as key", ErrCommand, key, cmd.GetNamespace())
	case cmd.GetCommand() == nil:
		return fmt.Errorf("%w: exactly one of force_open, force_closed, auto, reset must be set", ErrCommand)
	}
	return schema.ValidateNamespace(key)
}

// OnCommand applies an operator's command (validated by ValidateCommand).
func OnCommand(st *chimev1.BreakerStatus, cfg Thresholds, cmd *chimev1.BreakerCommand, now time.Time) Result {
	note := ""
	if cmd.GetNote() != "" {
		note = ": " + cmd.GetNote()
	}
	cur := StateOf(st)
	var res Result
	hold := func(to chimev1.BreakerState, what string) {
		if cur == to {
			res.Ignored = "breaker is already " + to.String()
			return
		}
		res.Changed = true
		st.NextCheckAt = nil
		st.ProbesGranted, st.ProbesSucceeded = 0, 0
		res.Transitions = append(res.Transitions, transition(st, to, "operator "+what+" (command "+cmd.GetCommandId()+")"+note, now))
	}
	switch cmd.GetCommand().(type) {
	case *chimev1.BreakerCommand_ForceOpen:
		hold(chimev1.BreakerState_BREAKER_STATE_FORCED_OPEN, "forced it open")
	case *chimev1.BreakerCommand_ForceClosed:
		hold(chimev1.BreakerState_BREAKER_STATE_FORCED_CLOSED, "forced it closed")
	case *chimev1.BreakerCommand_Auto:
		if cur != chimev1.BreakerState_BREAKER_STATE_FORCED_OPEN && cur != chimev1.BreakerState_BREAKER_STATE_FORCED_CLOSED {
			res.Ignored = "breaker is already automatic (" + cur.String() + ")"
			return res
		}
		res.Changed = true
		st.CoolOff = nil
		res.Transitions = append(res.Transitions, transition(st, chimev1.BreakerState_BREAKER_STATE_CLOSED, "operator returned it to automatic (command "+cmd.GetCommandId()+")"+note, now))
		// The window kept counting while forced: it decides at once.
		if reason, trip := tripReason(cfg, ringOf(st, cfg.Window).stats()); trip {
			trip1(st, cfg, reason, now, &res)
		}
	case *chimev1.BreakerCommand_ResetBreaker:
		res.Changed = true
		st.ConsecutiveTrips = 0
		st.NextCheckAt, st.CoolOff = nil, nil
		st.ProbesGranted, st.ProbesSucceeded = 0, 0
		st.Buckets, st.Window = nil, &chimev1.WindowStats{}
		res.Transitions = append(res.Transitions, transition(st, chimev1.BreakerState_BREAKER_STATE_CLOSED, "operator reset it (command "+cmd.GetCommandId()+")"+note, now))
	}
	return res
}
