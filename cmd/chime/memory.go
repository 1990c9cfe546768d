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
const (
	defaultGOGC   = 200
	memoryFloor   = 460 << 20
	liveMultiple  = 2
	memoryRefresh = time.Second
)

// tuneMemory applies defaultGOGC unless GOGC is set, and keeps the memory
// limit following the live heap until ctx ends, unless GOGC or GOMEMLIMIT
// is set.
func tuneMemory(ctx context.Context, getenv func(string) string) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(defaultGOGC)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	set := func() {
		metrics.Read(sample)
		live := int64(0)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			live = int64(min(sample[0].Value.Uint64(), math.MaxInt64/liveMultiple))
		}
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
