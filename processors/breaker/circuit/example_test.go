package circuit_test

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/processors/breaker/circuit"
	"github.com/chime-sched/chime/schema/chimev1"
)

// A dispatcher asks Gate before each callback, with the status its
// breaker view holds and the probes it has sent in this half-open episode.
func ExampleGate() {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

	open := &chimev1.BreakerStatus{State: chimev1.BreakerState_BREAKER_STATE_OPEN, NextCheckAt: timestamppb.New(now.Add(10 * time.Second))}
	allow, probe, retryAt := circuit.Gate(open, now, 0)
	fmt.Println("open:", allow, probe, retryAt.Sub(now))

	half := &chimev1.BreakerStatus{State: chimev1.BreakerState_BREAKER_STATE_HALF_OPEN, ProbesGranted: 2, Version: 7}
	for sent := uint32(0); sent < 3; sent++ {
		allow, probe, _ = circuit.Gate(half, now, sent)
		fmt.Println("half-open, sent", sent, "→", allow, probe)
	}

	allow, probe, _ = circuit.Gate(nil, now, 0)
	fmt.Println("unknown namespace:", allow, probe)
	// Output:
	// open: false false 10s
	// half-open, sent 0 → true true
	// half-open, sent 1 → true true
	// half-open, sent 2 → false false
	// unknown namespace: true false
}
