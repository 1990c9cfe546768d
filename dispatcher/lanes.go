package dispatcher

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/chime-sched/chime/schema/chimev1"
)

// A lane is one namespace's share of the dispatcher: its own concurrency
// slots and token bucket. Every due waits only in its own namespace's lane
// (and then for one of the global slots, which a namespace can hold at most
// max_concurrency of), so a namespace whose endpoint hangs fills its own
// lane and nobody else's. Namespaces map to one partition each, so one
// dispatcher owns a namespace's lane at a time and the limits are exact.
type lane struct {
	slots chan struct{}
	// waiting counts dues waiting for a slot; beyond maxWaiting a due is
	// deferred at once, so a hanging namespace's backlog cannot fill the
	// partition's buffer and pause fetching for everyone.
	waiting atomic.Int32
	limiter *rate.Limiter // nil: no rate limit
	// params the lane was built from; a config change builds a new lane
	// (calls in flight release the slots of the lane they took them from).
	maxConc int
	perSec  float64
	burst   int
}

type lanes struct {
	mu         sync.Mutex
	byNS       map[string]*lane
	global     chan struct{}
	defConc    int
	maxWaiting int32
}

func newLanes(maxInFlight, defConc, maxWaiting int) *lanes {
	return &lanes{byNS: map[string]*lane{}, global: make(chan struct{}, maxInFlight), defConc: defConc, maxWaiting: int32(maxWaiting)}
}

// get returns ns's lane for its current config.
func (l *lanes) get(ns string, cfg *chimev1.NamespaceConfig) *lane {
	maxConc := int(cfg.GetMaxConcurrency())
	if maxConc <= 0 {
		maxConc = l.defConc
	}
	perSec := cfg.GetRateLimit().GetPerSecond()
	burst := int(cfg.GetRateLimit().GetBurst())
	if perSec > 0 && burst <= 0 {
		burst = max(1, int(perSec))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := l.byNS[ns]
	if ln != nil && ln.maxConc == maxConc && ln.perSec == perSec && ln.burst == burst {
		return ln
	}
	ln = &lane{slots: make(chan struct{}, maxConc), maxConc: maxConc, perSec: perSec, burst: burst}
	if perSec > 0 {
		ln.limiter = rate.NewLimiter(rate.Limit(perSec), burst)
	}
	l.byNS[ns] = ln
	return ln
}

// admission is what acquire grants; release gives it back.
type admission struct {
	ln     *lane
	global chan struct{}
}

func (a admission) release() {
	<-a.global
	<-a.ln.slots
}

// acquire waits until the due may be called: a slot in its lane, a token
// from its bucket, a global slot, all before deadline. On failure it
// returns the error kind that held it back (kindConcurrency or
// kindRateLimit) and holds nothing.
func (l *lanes) acquire(ctx context.Context, ln *lane, deadline time.Time) (admission, string, bool) {
	// The timer is made only when a wait comes: most dues find a slot.
	var timer *time.Timer
	expiry := func() <-chan time.Time {
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
		}
		return timer.C
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	select {
	case ln.slots <- struct{}{}:
	default:
		if ln.waiting.Add(1) > l.maxWaiting {
			ln.waiting.Add(-1)
			return admission{}, kindConcurrency, false
		}
		select {
		case ln.slots <- struct{}{}:
			ln.waiting.Add(-1)
		case <-expiry():
			ln.waiting.Add(-1)
			return admission{}, kindConcurrency, false
		case <-ctx.Done():
			ln.waiting.Add(-1)
			return admission{}, kindConcurrency, false
		}
	}
	if ln.limiter != nil {
		// The bucket paces real sends, so it runs on the real clock, not
		// the injected one.
		now := time.Now()
		r := ln.limiter.ReserveN(now, 1)
		d := r.DelayFrom(now)
		if !r.OK() || d > time.Until(deadline) {
			r.CancelAt(now)
			<-ln.slots
			return admission{}, kindRateLimit, false
		}
		if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				r.Cancel()
				<-ln.slots
				return admission{}, kindRateLimit, false
			}
		}
	}
	select {
	case l.global <- struct{}{}:
	default:
		select {
		case l.global <- struct{}{}:
		case <-expiry():
			<-ln.slots
			return admission{}, kindConcurrency, false
		case <-ctx.Done():
			<-ln.slots
			return admission{}, kindConcurrency, false
		}
	}
	return admission{ln: ln, global: l.global}, "", true
}
