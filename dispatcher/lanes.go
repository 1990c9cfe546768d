package dispatcher

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// A lane is one namespace's share of the dispatcher: its own concurrency
// slots and token bucket. Every due waits only in its own namespace's lane
// (and then for one of the global slots, which a namespace can hold at most
// max_concurrency of), so a namespace whose endpoint hangs fills its own
// lane and nobody else's. Namespaces map to one partition each, so one
// dispatcher owns a namespace's lane at a time and the limits are exact;
// a spread namespace has a lane per shard, each on its own partition.
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

// defaultMaxConcurrency caps a namespace whose config sets no
// max_concurrency: the namespace default's.
var defaultMaxConcurrency = int(schema.NamespaceDefaults().GetMaxConcurrency())

func newLanes(maxInFlight, defConc, maxWaiting int) *lanes {
	return &lanes{byNS: map[string]*lane{}, global: make(chan struct{}, maxInFlight), defConc: defConc, maxWaiting: int32(maxWaiting)}
}

// get returns the lane of due's namespace shard for the namespace's
// current config. A namespace that is not spread has one lane with its
// whole limits; a spread one has a lane per shard, with the shard's share
// of them (schema/spread.go), so the lanes of all dispatchers together
// hold the namespace's limits.
func (l *lanes) get(due *chimev1.Due, cfg *chimev1.NamespaceConfig) *lane {
	n, shard := shardOf(due)
	maxConc := int(cfg.GetMaxConcurrency())
	if maxConc <= 0 {
		maxConc = l.defConc
	}
	// At least one: the API refuses a spread above max_concurrency, so
	// a zero share comes only from this dispatcher's own default being
	// below the spread.
	maxConc = max(1, int(schema.Share(uint32(maxConc), n, shard)))
	var perSec float64
	var burst int
	if rl := cfg.GetRateLimit(); rl.GetPerSecond() > 0 {
		perSec = rl.GetPerSecond() / float64(n)
		burst = max(1, int(schema.Share(schema.Burst(rl), n, shard)))
	}
	key := laneKey(due.GetNamespace(), n, shard)
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := l.byNS[key]
	if ln != nil && ln.maxConc == maxConc && ln.perSec == perSec && ln.burst == burst {
		return ln
	}
	ln = &lane{slots: make(chan struct{}, maxConc), maxConc: maxConc, perSec: perSec, burst: burst}
	if perSec > 0 {
		ln.limiter = rate.NewLimiter(rate.Limit(perSec), burst)
	}
	l.byNS[key] = ln
	return ln
}

// shardOf is due's spread (at least 1) and its shard in it.
func shardOf(due *chimev1.Due) (n, shard uint32) {
	n = max(due.GetSpread(), 1)
	return n, due.GetShard() % n
}

// laneKey names a namespace shard's lane and probe count: the namespace
// itself when it is not spread.
func laneKey(ns string, n, shard uint32) string {
	if n <= 1 {
		return ns
	}
	return ns + "#" + strconv.FormatUint(uint64(shard), 10)
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
