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
	// hosts are the gates of the hosts called now (hostGate), at most
	// perHost calls each.
	hosts   map[string]*hostGate
	perHost int
}

// A hostGate lets as many calls at a time to one host (scheme, host and
// port) through as the HTTP client keeps connections to it
// (maxConnsPerHost). A due waits for it after its namespace's slot and
// before a global one, as it waits for those: until the admission wait
// ends, when it is deferred.
//
// Without it, calls beyond a host's connections took global slots and
// waited in fasthttp's queue for a connection, within their timeout: one
// busy host could hold every global slot (768 of 1,024 waiting behind its
// 256 connections) and stall the calls to every other host, and each
// waiting call cost a timer and a hand-over of its connection. Measured on
// the 100k burst to one receiver (chime-bench, runs alternated with the
// build before): with the gates about 5 % less CPU per job and 4 % more
// calls a second.
//
// A gate lives while dues hold or wait for it, so hosts called once
// leave nothing behind.
type hostGate struct {
	slots chan struct{}
	users int // dues holding or waiting for a slot; under lanes.mu
}

// defaultMaxConcurrency caps a namespace whose config sets no
// max_concurrency: the namespace default's.
var defaultMaxConcurrency = int(schema.NamespaceDefaults().GetMaxConcurrency())

func newLanes(maxInFlight, defConc, maxWaiting, perHost int) *lanes {
	return &lanes{byNS: map[string]*lane{}, global: make(chan struct{}, maxInFlight), defConc: defConc, maxWaiting: int32(maxWaiting),
		hosts: map[string]*hostGate{}, perHost: perHost}
}

// host returns the gate of host ("": none) and counts a user of it; put
// uncounts one.
func (l *lanes) host(host string) *hostGate {
	if host == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.hosts[host]
	if g == nil {
		g = &hostGate{slots: make(chan struct{}, l.perHost)}
		l.hosts[host] = g
	}
	g.users++
	return g
}

func (l *lanes) put(host string, g *hostGate) {
	if g == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if g.users--; g.users == 0 {
		delete(l.hosts, host)
	}
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
	l      *lanes
	ln     *lane
	host   string
	gate   *hostGate
	global chan struct{}
}

func (a admission) release() {
	<-a.global
	if a.gate != nil {
		<-a.gate.slots
		a.l.put(a.host, a.gate)
	}
	<-a.ln.slots
}

// acquire waits until the due may be called: a slot in its lane, a token
// from its bucket, a slot of its host's gate (host "": none), a global
// slot, all before deadline. On failure it returns the error kind that
// held it back (kindConcurrency or kindRateLimit) and holds nothing.
func (l *lanes) acquire(ctx context.Context, ln *lane, host string, deadline time.Time) (admission, string, bool) {
	// The timer is taken only when a wait comes: most dues find a slot.
	var timer *time.Timer
	expiry := func() <-chan time.Time {
		if timer == nil {
			timer = waitTimers.Get().(*time.Timer)
			timer.Reset(time.Until(deadline))
		}
		return timer.C
	}
	defer func() {
		if timer != nil {
			timer.Stop()
			waitTimers.Put(timer)
		}
	}()
	select {
	case ln.slots <- struct{}{}:
	default:
		if ln.waiting.Add(1) > l.maxWaiting {
			ln.waiting.Add(-1)
			return admission{}, kindConcurrency, false
		}
		ok := take(ctx, ln.slots, expiry)
		ln.waiting.Add(-1)
		if !ok {
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
	gate := l.host(host)
	// give back what is held when a later wait fails.
	giveBack := func(gateHeld bool) {
		if gateHeld {
			<-gate.slots
		}
		l.put(host, gate)
		<-ln.slots
	}
	if gate != nil && !take(ctx, gate.slots, expiry) {
		giveBack(false)
		return admission{}, kindConcurrency, false
	}
	if !take(ctx, l.global, expiry) {
		giveBack(gate != nil)
		return admission{}, kindConcurrency, false
	}
	return admission{l: l, ln: ln, host: host, gate: gate, global: l.global}, "", true
}

// waitTimers are stopped timers for acquire's waits: in a burst to one
// host most dues wait for its gate, and a timer made for each was two
// allocations a call. A stopped timer's channel holds nothing (Go 1.23's
// timers), so a timer is reused as new.
var waitTimers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// take puts a token in slots, waiting for room until expiry or until ctx
// ends (false). expiry makes its timer only when a wait comes.
func take(ctx context.Context, slots chan struct{}, expiry func() <-chan time.Time) bool {
	select {
	case slots <- struct{}{}:
		return true
	default:
	}
	select {
	case slots <- struct{}{}:
		return true
	case <-expiry():
		return false
	case <-ctx.Done():
		return false
	}
}
