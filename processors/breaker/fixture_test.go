package breaker

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// What the processor's tests feed it. The state machine's own tests, with
// every shape of outcome, are in circuit/machine_test.go.

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

const (
	closed     = chimev1.BreakerState_BREAKER_STATE_CLOSED
	open       = chimev1.BreakerState_BREAKER_STATE_OPEN
	halfOpen   = chimev1.BreakerState_BREAKER_STATE_HALF_OPEN
	forcedOpen = chimev1.BreakerState_BREAKER_STATE_FORCED_OPEN
)

// oc is a callback outcome of namespace acme, 20 ms long, before its time.
type oc struct {
	class  chimev1.OutcomeClass
	status int32
	probe  bool
}

var (
	success = oc{class: chimev1.OutcomeClass_OUTCOME_CLASS_SUCCESS, status: 200}
	failure = oc{class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, status: 503}
)

func (o oc) asProbe() oc { o.probe = true; return o }

func (o oc) at(finished time.Time) *chimev1.CallbackOutcome {
	return &chimev1.CallbackOutcome{Namespace: "acme", Class: o.class, StatusCode: o.status,
		Latency: durationpb.New(20 * time.Millisecond), Probe: o.probe, FinishedAt: timestamppb.New(finished)}
}

// withID gives an operator's command (built by package command) the id
// the test names it by.
func withID(id string, cmd *chimev1.BreakerCommand) *chimev1.BreakerCommand {
	cmd.CommandId = id
	return cmd
}
