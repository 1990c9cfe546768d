package circuit

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// FuzzInputs: whatever arrives on the breaker's inputs (outcomes, timers,
// commands: any bytes, decoded as the processor decodes them) moves the
// machine from any state without a panic, and the status it leaves has a
// known state.
func FuzzInputs(f *testing.F) {
	o, _ := proto.Marshal(&chimev1.CallbackOutcome{EventId: "e", Namespace: "acme", Class: chimev1.OutcomeClass_OUTCOME_CLASS_RETRYABLE, Latency: durationpb.New(time.Second)})
	c, _ := proto.Marshal(&chimev1.BreakerCommand{CommandId: "c", Namespace: "acme"})
	tm, _ := proto.Marshal(&chimev1.BreakerTimer{Namespace: "acme", Version: 1})
	f.Add(uint8(0), o, uint8(1), uint64(1))
	f.Add(uint8(1), c, uint8(2), uint64(3))
	f.Add(uint8(2), tm, uint8(3), uint64(1))
	f.Add(uint8(0), []byte{0xff}, uint8(0), uint64(0))
	cfg := ThresholdsFrom(&chimev1.BreakerConfig{MinRequests: 2, CoolOff: durationpb.New(time.Second), HalfOpenProbes: 1})
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, which uint8, raw []byte, state uint8, version uint64) {
		st := NewStatus("acme")
		// The status comes from the breaker's own table: a state it wrote.
		st.State = chimev1.BreakerState(int32(state) % int32(len(chimev1.BreakerState_name)))
		st.Version = version
		switch which % 3 {
		case 0:
			o := new(chimev1.CallbackOutcome)
			if proto.Unmarshal(raw, o) != nil {
				return
			}
			OnOutcome(st, cfg, o, now)
		case 1:
			tm := new(chimev1.BreakerTimer)
			if proto.Unmarshal(raw, tm) != nil {
				return
			}
			OnTimer(st, cfg, tm, now)
		case 2:
			cmd := new(chimev1.BreakerCommand)
			if proto.Unmarshal(raw, cmd) != nil || ValidateCommand("acme", cmd) != nil {
				return
			}
			OnCommand(st, cfg, cmd, now)
		}
		if _, ok := chimev1.BreakerState_name[int32(StateOf(st))]; !ok {
			t.Fatalf("state %d is not a known state", StateOf(st))
		}
	})
}
