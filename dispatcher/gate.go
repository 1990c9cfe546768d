package dispatcher

import (
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/chime-sched/chime/processors/breaker/circuit"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// This file is where the circuit breaker holds a callback back. The
// breaker processor decides a namespace's state from the outcome stream;
// the dispatcher reads it through a view (Config.Breakers) and asks
// circuit.Gate before every call:
//
//   - closed, forced closed: the call goes out;
//   - open, disabled, forced open: the due is deferred back to the
//     scheduler, not charged an attempt, outcome DEFERRED with error kind
//     "breaker_open";
//   - half-open: the first probes_granted dues of the episode go out as
//     probes (outcome probe=true), the rest are deferred.
//
// The ramp. A deferred due comes back when the scheduler re-emits it at
// not_before, so the release after a close is shaped when the due is
// deferred, not when the breaker closes: not_before is Gate's retryAt (the
// breaker's next check) plus an offset in [0, ramp) taken from a hash of
// the idempotency key, ramp = max(the breaker's cool-off, Config.BreakerRamp).
// Every due deferred during one open episode aims at the same next check,
// so the backlog comes back spread uniformly over the ramp window behind
// it, instead of all at the instant the breaker half-opens. The first ones
// back find the breaker half-open: the granted probes go out, the rest are
// deferred again (one cool-off plus their offset), and by then the probes
// have closed or reopened it. The offset is deterministic, so a due
// deferred several times in one episode keeps its place in the ramp.
// Nothing is dropped or charged: the scheduler keeps the attempt number.
//
// Probes are counted here, per namespace and breaker version (a version
// is one half-open episode). One dispatcher owns a namespace's partition
// at a time, so the count is exact (a spread namespace sends an episode's
// probes from one shard, hence one partition: schema/spread.go); a probe taken but not sent (admission
// refused, or its outcome is one the breaker does not count, like a
// refused URL) is given back, so a half-open breaker always gets its
// granted probes' outcomes. After a handover the new owner starts counting
// from zero: at most one extra set of probes.

// Breakers returns a namespace's breaker status; views.Breakers implements
// it. A nil status is closed.
type Breakers interface {
	Get(ns string) *chimev1.BreakerStatus
}

// kindBreaker is the error kind of a due deferred by its namespace's
// breaker (open, half-open with its probes out, disabled, forced open).
const kindBreaker = "breaker_open"

type gate struct {
	src     Breakers // nil: every namespace is closed
	rampMin time.Duration

	mu sync.Mutex
	// probes of the namespaces whose breaker this dispatcher last saw
	// half-open.
	probes map[string]*probeCount
}

type probeCount struct {
	version uint64 // the half-open episode
	sent    uint32
}

// verdict is the gate's answer for one due.
type verdict struct {
	allow, probe bool
	retryAt      time.Time
	st           *chimev1.BreakerStatus
}

func newGate(src Breakers, rampMin time.Duration) *gate {
	return &gate{src: src, rampMin: rampMin, probes: map[string]*probeCount{}}
}

// peek answers without taking a probe: the cheap check before admission,
// so a due of an open namespace is deferred at once rather than after
// queueing for its lane (and burning rate-limit tokens).
func (g *gate) peek(due *chimev1.Due, now time.Time) verdict {
	if g.src == nil {
		return verdict{allow: true}
	}
	st := g.src.Get(due.GetNamespace())
	g.mu.Lock()
	sent := g.sentLocked(due, st)
	g.mu.Unlock()
	allow, probe, at := circuit.Gate(st, now, sent)
	return verdict{allow: allow, probe: probe, retryAt: at, st: st}
}

// take answers right before the call; a probe it grants is counted.
func (g *gate) take(due *chimev1.Due, now time.Time) verdict {
	if g.src == nil {
		return verdict{allow: true}
	}
	st := g.src.Get(due.GetNamespace())
	g.mu.Lock()
	defer g.mu.Unlock()
	allow, probe, at := circuit.Gate(st, now, g.sentLocked(due, st))
	if probe {
		g.probes[probeKey(due)].sent++
	}
	return verdict{allow: allow, probe: probe, retryAt: at, st: st}
}

// giveBack returns a probe that take granted but that produced nothing
// the breaker counts.
func (g *gate) giveBack(due *chimev1.Due, v verdict) {
	if !v.probe {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if pc := g.probes[probeKey(due)]; pc != nil && pc.version == v.st.GetVersion() && pc.sent > 0 {
		pc.sent--
	}
}

// sentLocked is the probes sent in st's half-open episode by due's
// namespace shard; it forgets the count of an episode that ended. Of a
// spread namespace only the episode's probe shard sends probes
// (schema.ProbeShard): for the others they are all out. g.mu is held.
func (g *gate) sentLocked(due *chimev1.Due, st *chimev1.BreakerStatus) uint32 {
	key := probeKey(due)
	if circuit.StateOf(st) != chimev1.BreakerState_BREAKER_STATE_HALF_OPEN {
		delete(g.probes, key)
		return 0
	}
	if n, shard := shardOf(due); shard != schema.ProbeShard(st.GetVersion(), n) {
		return st.GetProbesGranted()
	}
	pc := g.probes[key]
	if pc == nil || pc.version != st.GetVersion() {
		pc = &probeCount{version: st.GetVersion()}
		g.probes[key] = pc
	}
	return pc.sent
}

func probeKey(due *chimev1.Due) string {
	n, shard := shardOf(due)
	return laneKey(due.GetNamespace(), n, shard)
}

// notBefore is when a due held back by v comes back: v.retryAt plus its
// place in the ramp (see the comment at the top of this file).
func (g *gate) notBefore(v verdict, idempotencyKey string) time.Time {
	ramp := max(v.st.GetCoolOff().AsDuration(), g.rampMin)
	if ramp <= 0 {
		return v.retryAt
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(idempotencyKey))
	return v.retryAt.Add(time.Duration(h.Sum64() % uint64(ramp)))
}

// why says in the outcome why the breaker held the due back.
func (v verdict) why(ns string) string {
	st := v.st
	switch circuit.StateOf(st) {
	case chimev1.BreakerState_BREAKER_STATE_HALF_OPEN:
		return fmt.Sprintf("namespace %s: breaker half-open, its %d probes are out; deferred", ns, st.GetProbesGranted())
	case chimev1.BreakerState_BREAKER_STATE_OPEN:
		return fmt.Sprintf("namespace %s: breaker open (%s); deferred", ns, st.GetReason())
	case chimev1.BreakerState_BREAKER_STATE_DISABLED:
		return fmt.Sprintf("namespace %s: breaker disabled until an operator resets it (%s); deferred", ns, st.GetReason())
	default:
		return fmt.Sprintf("namespace %s: breaker %s (%s); deferred", ns, circuit.StateOf(st), st.GetReason())
	}
}
