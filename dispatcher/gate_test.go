package dispatcher

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/processors/breaker/circuit"
	"github.com/chime-sched/chime/schema/chimev1"
)

// fakeBreakers is a settable Breakers.
type fakeBreakers struct {
	mu sync.Mutex
	st map[string]*chimev1.BreakerStatus
}

func (f *fakeBreakers) set(st *chimev1.BreakerStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st == nil {
		f.st = map[string]*chimev1.BreakerStatus{}
	}
	f.st[st.GetNamespace()] = st
}

func (f *fakeBreakers) Get(ns string) *chimev1.BreakerStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st[ns]
}

func TestGateWithoutBreakersAllows(t *testing.T) {
	t.Parallel()
	g := newGate(nil, 5*time.Second)
	require.True(t, g.peek(nsDue("acme"), time.Now()).allow)
	require.True(t, g.take(nsDue("acme"), time.Now()).allow)
}

func TestGateCountsProbesPerEpisode(t *testing.T) {
	t.Parallel()
	src := &fakeBreakers{}
	g := newGate(src, 5*time.Second)
	now := time.Now()
	half := func(version uint64) *chimev1.BreakerStatus {
		return &chimev1.BreakerStatus{Namespace: "acme", State: chimev1.BreakerState_BREAKER_STATE_HALF_OPEN,
			Version: version, ProbesGranted: 2, CoolOff: durationpb.New(time.Second)}
	}
	src.set(half(3))
	require.True(t, g.peek(nsDue("acme"), now).probe, "peek does not take the probe")
	require.True(t, g.peek(nsDue("acme"), now).probe)
	v1, v2 := g.take(nsDue("acme"), now), g.take(nsDue("acme"), now)
	require.True(t, v1.allow && v1.probe)
	require.True(t, v2.allow && v2.probe)
	v3 := g.take(nsDue("acme"), now)
	require.False(t, v3.allow, "only the granted probes")
	require.Equal(t, now.Add(time.Second), v3.retryAt)
	require.False(t, g.peek(nsDue("acme"), now).allow)

	// A probe that was not sent is given back to the episode.
	g.giveBack(nsDue("acme"), v2)
	require.True(t, g.take(nsDue("acme"), now).probe)
	require.False(t, g.take(nsDue("acme"), now).allow)

	// A new episode (the breaker reopened and half-opened again) grants
	// afresh; a give-back from the old one is ignored.
	src.set(half(5))
	g.giveBack(nsDue("acme"), v1)
	require.True(t, g.take(nsDue("acme"), now).probe)
	require.True(t, g.take(nsDue("acme"), now).probe)
	require.False(t, g.take(nsDue("acme"), now).allow)

	// Closed: everything goes, nothing is a probe; the count is forgotten.
	src.set(&chimev1.BreakerStatus{Namespace: "acme", State: chimev1.BreakerState_BREAKER_STATE_CLOSED, Version: 6})
	v := g.take(nsDue("acme"), now)
	require.True(t, v.allow)
	require.False(t, v.probe)
	require.Empty(t, g.probes)
}

func TestGateHoldsBackOpenDisabledForced(t *testing.T) {
	t.Parallel()
	src := &fakeBreakers{}
	g := newGate(src, 5*time.Second)
	now := time.Now()
	next := now.Add(3 * time.Second)
	for _, st := range []*chimev1.BreakerStatus{
		{Namespace: "open", State: chimev1.BreakerState_BREAKER_STATE_OPEN, NextCheckAt: timestamppb.New(next), CoolOff: durationpb.New(2 * time.Second)},
		{Namespace: "disabled", State: chimev1.BreakerState_BREAKER_STATE_DISABLED},
		{Namespace: "forced", State: chimev1.BreakerState_BREAKER_STATE_FORCED_OPEN},
	} {
		src.set(st)
		for _, v := range []verdict{g.peek(nsDue(st.Namespace), now), g.take(nsDue(st.Namespace), now)} {
			require.False(t, v.allow, st.Namespace)
			require.Contains(t, v.why(st.Namespace), "deferred")
		}
	}
	require.True(t, next.Equal(g.take(nsDue("open"), now).retryAt))
	require.Equal(t, now.Add(circuit.HeldRecheck), g.take(nsDue("disabled"), now).retryAt)
	src.set(&chimev1.BreakerStatus{Namespace: "fc", State: chimev1.BreakerState_BREAKER_STATE_FORCED_CLOSED})
	require.True(t, g.take(nsDue("fc"), now).allow)
}

// The ramp: dues held back by one open episode come back spread over
// [next check, next check + ramp), each at a place fixed by its key.
func TestGateSpreadsDeferralsOverTheRamp(t *testing.T) {
	t.Parallel()
	g := newGate(nil, 5*time.Second)
	next := time.Now().Add(time.Second)
	v := verdict{retryAt: next, st: &chimev1.BreakerStatus{State: chimev1.BreakerState_BREAKER_STATE_OPEN, CoolOff: durationpb.New(time.Second)}}
	const n = 1000
	var buckets [5]int // one per second of the ramp
	for i := range n {
		key := fmt.Sprintf("acme/job-%d/1", i)
		at := g.notBefore(v, key)
		require.Equal(t, at, g.notBefore(v, key), "deterministic")
		off := at.Sub(next)
		require.GreaterOrEqual(t, off, time.Duration(0))
		require.Less(t, off, 5*time.Second, "ramp = max(cool-off 1s, minimum 5s)")
		buckets[off/time.Second]++
	}
	for i, c := range buckets {
		require.InDelta(t, n/5, c, n/10, "second %d of the ramp holds about a fifth", i)
	}
	// A longer cool-off widens the ramp.
	v.st.CoolOff = durationpb.New(20 * time.Second)
	var maxOff time.Duration
	for i := range n {
		maxOff = max(maxOff, g.notBefore(v, fmt.Sprintf("k%d", i)).Sub(next))
	}
	require.Greater(t, maxOff, 10*time.Second)
	require.Less(t, maxOff, 20*time.Second)
}

func TestDoneMetadataRoundTrips(t *testing.T) {
	t.Parallel()
	var entries []*entry
	for _, o := range []struct {
		off  int64
		done bool
	}{{100, false}, {101, true}, {102, true}, {104, true}, {105, false}, {106, true}, {107, false}} {
		entries = append(entries, &entry{offset: o.off, done: o.done})
	}
	meta := encodeDone(100, entries)
	require.Equal(t, "chime-done/1:1-4,6", meta)
	require.Equal(t, map[int64]bool{101: true, 102: true, 103: true, 104: true, 106: true}, decodeDone(100, meta))
	require.Empty(t, encodeDone(100, entries[:1]), "nothing done beyond the prefix")
	require.Nil(t, decodeDone(100, "some-member-id"), "another client's metadata")
	require.Nil(t, decodeDone(100, "chime-done/1:3-x"))

	// Cut at the size limit, keeping the nearest ranges.
	entries = entries[:0]
	for i := range int64(5000) {
		entries = append(entries, &entry{offset: i, done: i%2 == 1})
	}
	meta = encodeDone(0, entries)
	require.LessOrEqual(t, len(meta), maxDoneMeta)
	skip := decodeDone(0, meta)
	require.True(t, skip[1])
	require.False(t, skip[2])
	require.False(t, skip[4999])
}

// nsDue is a due of namespace ns that is not spread.
func nsDue(ns string) *chimev1.Due { return &chimev1.Due{Namespace: ns} }
