package main

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The Go collector lets the heap grow to (1 + GOGC/100) times what was
// live after the last collection. chime runs with GOGC 200: at 100k fires
// a second, collecting twice as often cost about a tenth of the CPU. But
// three times the live heap is a lot of memory when the live heap is large
// (two million pending jobs) or briefly inflated (a burst in flight).
//
// So chime also sets a soft memory limit that follows the live heap: the
// larger of memoryFloor and twice the live heap. Below the floor the
// collector runs as GOGC 200 says; above it, as GOGC 100 would; and the
// runtime returns memory over the limit to the operating system instead of
// keeping it after a peak. An operator's GOMEMLIMIT or GOGC turns this
// off.
//
// The live heap is measured by collections, and none runs while nothing is
// allocated: after a burst the last measure (taken mid-burst) would hold
// the limit, and the memory, up for minutes. So when settleAfter passes
// with no collection, and at least settleAllocs were allocated since the
// last such trim, one collection runs and the memory it frees goes back at
// once: one trim after each spell of work. An idle chime allocates next to
// nothing and never pays for it.
const (
	defaultGOGC   = 200
	memoryFloor   = 460 << 20
	liveMultiple  = 2
	memoryRefresh = time.Second
	settleAfter   = 5 * time.Second
	settleAllocs  = 32 << 20
)

// tuneMemory applies defaultGOGC unless GOGC is set, and keeps the memory
// limit following the live heap until ctx ends, unless GOGC or GOMEMLIMIT
// is set.
func tuneMemory(ctx context.Context, getenv func(string) string) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(defaultGOGC)
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/allocs:bytes"}}
	read := func(i int) uint64 {
		if samples[i].Value.Kind() == metrics.KindUint64 {
			return samples[i].Value.Uint64()
		}
		return 0
	}
	var cycles, allocsAtTrim uint64
	lastGC := time.Now()
	set := func() {
		metrics.Read(samples)
		if c := read(1); c != cycles {
			cycles, lastGC = c, time.Now()
		} else if time.Since(lastGC) >= settleAfter && read(2)-allocsAtTrim >= settleAllocs {
			debug.FreeOSMemory()
			metrics.Read(samples)
			cycles, allocsAtTrim, lastGC = read(1), read(2), time.Now()
		}
		live := int64(min(read(0), math.MaxInt64/liveMultiple))
		debug.SetMemoryLimit(max(memoryFloor, liveMultiple*live))
	}
	set()
	go func() {
		t := time.NewTicker(memoryRefresh)
		defer t.Stop()
		defer debug.SetMemoryLimit(math.MaxInt64)
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				set()
			}
		}
	}()
}
