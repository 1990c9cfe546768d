package timerindex

import (
	"fmt"
	"runtime"
)

// Footprint measures the heap the timer index needs per pending job,
// by filling an index with n timers under realistic keys
// ("namespace-NN/job-NNNNNNNN", 25 bytes). It is for the benchmark report.
func Footprint(n int) (bytesPerTimer float64) {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("namespace-%02d/job-%08d", i%64, i)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := New()
	for i, k := range keys {
		// Timers spread over a day, in no particular order.
		x.Set(k, int64((i*7919)%86_400)*1e9)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(x)
	runtime.KeepAlive(keys)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}
