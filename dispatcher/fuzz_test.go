package dispatcher

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// FuzzDueDecisions: a record on the due topic is anyone's bytes (it is
// written by the scheduler, but the topic is open to whoever may write to
// the cluster). Whatever it decodes to, everything the dispatcher decides
// without the network (its lane and share of the limits, the breaker gate,
// expiry, the retry policy and Retry-After, what follows a call of any
// class) runs without a panic and every event it would publish marshals.
// The call itself is not made: a fuzzed URL must not reach the network.
func FuzzDueDecisions(f *testing.F) {
	seed, _ := proto.Marshal(newDue("acme", "j1", "https://example.com/h"))
	f.Add(seed, uint8(1), 503, "120", uint32(5), uint32(2))
	f.Add([]byte{0x0a, 0x01, 'x', 0x88, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f}, uint8(2), 0, "Wed, 21 Oct 2015 07:28:00 GMT", uint32(0), uint32(0))
	f.Add([]byte{}, uint8(0), 200, "", uint32(1), uint32(1))
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	d := &Dispatcher{cfg: Config{ID: "fuzz", Now: func() time.Time { return now }, AdmissionWait: time.Second, DeferDelay: time.Second}}
	src := &fakeBreakers{}
	d.gate = newGate(src, 5*time.Second)
	d.lanes = newLanes(16, 4, 8, maxConnsPerHost)
	f.Fuzz(func(t *testing.T, raw []byte, class uint8, status int, retryAfter string, maxConc, spread uint32) {
		due := new(chimev1.Due)
		if proto.Unmarshal(raw, due) != nil {
			return
		}
		ns := &chimev1.NamespaceConfig{Namespace: due.GetNamespace(), MaxConcurrency: maxConc % 64, Spread: spread % 8,
			RateLimit: &chimev1.RateLimit{PerSecond: float64(maxConc % 10), Burst: spread % 5},
			Retry:     &chimev1.RetryPolicy{MaxAttempts: 3, InitialInterval: durationpb.New(time.Second)}}
		ln := d.lanes.get(due, ns)
		if ln.maxConc < 1 || (ln.limiter != nil && ln.burst < 1) {
			t.Fatalf("lane without capacity: %+v", ln)
		}
		src.set(&chimev1.BreakerStatus{Namespace: due.GetNamespace(), State: chimev1.BreakerState(int32(class) % int32(len(chimev1.BreakerState_name))),
			Version: uint64(status), ProbesGranted: uint32(class % 4), CoolOff: durationpb.New(time.Second)})
		v := d.gate.take(due, now)
		if !v.allow {
			mustMarshal(t, d.held(due, v))
		}
		if res := d.expired(due, ns); res != nil {
			mustMarshal(t, *res)
		}
		_ = d.timeoutOf(due.GetCallback())
		cr := callResult{class: chimev1.OutcomeClass(int32(class) % int32(len(chimev1.OutcomeClass_name))), status: status,
			retryAfter: retryAfter, started: now, url: due.GetCallback().GetUrl()}
		mustMarshal(t, d.decide(due, ns, cr))
		mustMarshal(t, d.deferred(due, kindRateLimit))
	})
}

func mustMarshal(t *testing.T, res result) {
	t.Helper()
	for _, m := range []proto.Message{res.outcome, res.dead} { // a nil *DeadLetter marshals empty
		if _, err := proto.Marshal(m); err != nil {
			t.Fatalf("%T does not marshal: %v", m, err)
		}
	}
	for _, c := range res.cmds {
		if _, err := proto.Marshal(c); err != nil {
			t.Fatalf("command does not marshal: %v", err)
		}
	}
}
