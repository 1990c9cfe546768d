package circuit

import (
	"time"

	"github.com/chime-sched/chime/schema/chimev1"
)

// HeldRecheck is how long a callback held back by a disabled or
// forced-open breaker waits before it asks again: those states end only by
// an operator's command, which no timer predicts.
const HeldRecheck = 30 * time.Second

// MinRecheck is the shortest wait Gate answers: an open breaker whose
// cool-off has ended but whose half-open state has not reached the view yet
// is asked again this soon.
const MinRecheck = time.Second

// Gate answers the dispatcher's question for one due callback of the
// namespace whose breaker status is st (nil: the breaker has not seen the
// namespace, which is closed):
//   - allow: send it now; probe: it is a half-open probe, report its
//     outcome with probe=true;
//   - otherwise defer it (not charged an attempt) to retryAt, to which the
//     dispatcher adds its own spread.
//
// probesSent is how many probes the dispatcher has already sent in this
// half-open episode (st.Version identifies the episode): one dispatcher
// owns a namespace at a time, so it counts them exactly. Gate is pure.
func Gate(st *chimev1.BreakerStatus, now time.Time, probesSent uint32) (allow, probe bool, retryAt time.Time) {
	switch StateOf(st) {
	case chimev1.BreakerState_BREAKER_STATE_OPEN:
		at := st.GetNextCheckAt().AsTime()
		if !st.GetNextCheckAt().IsValid() || at.Before(now.Add(MinRecheck)) {
			at = now.Add(MinRecheck)
		}
		return false, false, at
	case chimev1.BreakerState_BREAKER_STATE_HALF_OPEN:
		if probesSent < st.GetProbesGranted() {
			return true, true, time.Time{}
		}
		// The granted probes are out; their outcomes close or reopen the
		// breaker within about one cool-off.
		return false, false, now.Add(max(st.GetCoolOff().AsDuration(), MinRecheck))
	case chimev1.BreakerState_BREAKER_STATE_DISABLED, chimev1.BreakerState_BREAKER_STATE_FORCED_OPEN:
		return false, false, now.Add(HeldRecheck)
	}
	// Closed, forced closed.
	return true, false, time.Time{}
}
