package circuit

import (
	"time"

	"github.com/chime-sched/chime/schema/chimev1"
)

// BucketCount is the number of buckets the observability window is cut
// into: an outcome leaves the window at most one bucket width (window/10)
// late.
const BucketCount = 10

// LatencyBoundsMs are the upper bounds of the latency histogram's buckets;
// a last bucket takes everything slower. Fixed in code so that buckets
// written by any version add up.
var LatencyBoundsMs = [...]uint64{5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000}

const histLen = len(LatencyBoundsMs) + 1

// bucketWidthMs cuts window into BucketCount buckets of at least 1 ms.
func bucketWidthMs(window time.Duration) int64 {
	return max(window.Milliseconds()/BucketCount, 1)
}

// sample is one request as the window counts it.
type sample struct {
	at      time.Time // event time: when the call finished
	failure bool
	slow    bool
	latency time.Duration
}

// ring is the status's buckets seen as a ring indexed by event time: slot
// i holds the bucket whose start is (i mod BucketCount) widths from the
// epoch, and a slot holding an older start is empty.
type ring struct {
	width int64 // ms
	b     []*chimev1.Bucket
}

// ringOf views st's buckets as a ring for window. Buckets laid out for
// another window (the namespace's configuration changed) are dropped.
func ringOf(st *chimev1.BreakerStatus, window time.Duration) ring {
	r := ring{width: bucketWidthMs(window), b: st.Buckets}
	if st.BucketWidthMs != r.width || len(r.b) != BucketCount || !r.aligned() {
		st.BucketWidthMs = r.width
		r.b = make([]*chimev1.Bucket, BucketCount)
		for i := range r.b {
			r.b[i] = &chimev1.Bucket{LatencyHist: make([]uint64, histLen)}
		}
		st.Buckets = r.b
	}
	return r
}

func (r ring) aligned() bool {
	for i, b := range r.b {
		if b == nil {
			return false
		}
		if b.GetRequests() == 0 {
			continue
		}
		s := b.GetStartUnixMs()
		if s%r.width != 0 || int(floorDiv(s, r.width)%BucketCount) != i || len(b.GetLatencyHist()) != histLen {
			return false
		}
	}
	return true
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func (r ring) slot(startMs int64) int {
	m := floorDiv(startMs, r.width) % BucketCount
	if m < 0 {
		m += BucketCount
	}
	return int(m)
}

// newest is the start of the newest non-empty bucket: the window's end by
// event time. ok is false for an empty ring.
func (r ring) newest() (start int64, ok bool) {
	for _, b := range r.b {
		if b.GetRequests() > 0 && (!ok || b.GetStartUnixMs() > start) {
			start, ok = b.GetStartUnixMs(), true
		}
	}
	return start, ok
}

// add counts s. It reports false for a sample older than the window, which
// is not counted.
func (r ring) add(s sample) bool {
	ms := s.at.UnixMilli()
	start := floorDiv(ms, r.width) * r.width
	if hwm, ok := r.newest(); ok && start <= hwm-BucketCount*r.width {
		return false
	}
	b := r.b[r.slot(start)]
	if b.GetRequests() > 0 && b.StartUnixMs != start {
		if b.StartUnixMs > start {
			return false // the slot holds a newer bucket: s is out of the window
		}
		reset(b)
	}
	if b.GetRequests() == 0 {
		reset(b)
	}
	b.StartUnixMs = start
	b.Requests++
	if s.failure {
		b.Failures++
	}
	if s.slow {
		b.SlowCalls++
	}
	lat := uint64(max(s.latency.Milliseconds(), 0))
	b.LatencySumMs += lat
	b.LatencyHist[histIndex(lat)]++
	return true
}

func reset(b *chimev1.Bucket) {
	b.StartUnixMs, b.Requests, b.Failures, b.SlowCalls, b.LatencySumMs = 0, 0, 0, 0, 0
	if len(b.LatencyHist) != histLen {
		b.LatencyHist = make([]uint64, histLen)
	}
	clear(b.LatencyHist)
}

func histIndex(ms uint64) int {
	for i, ub := range LatencyBoundsMs {
		if ms <= ub {
			return i
		}
	}
	return len(LatencyBoundsMs)
}

// stats sums the buckets within one window of the newest.
func (r ring) stats() stats {
	var s stats
	hwm, ok := r.newest()
	if !ok {
		return s
	}
	for _, b := range r.b {
		if b.GetRequests() == 0 || b.GetStartUnixMs() <= hwm-BucketCount*r.width {
			continue
		}
		s.requests += b.Requests
		s.failures += b.Failures
		s.slow += b.SlowCalls
		s.latencySumMs += b.LatencySumMs
		for i, n := range b.LatencyHist {
			s.hist[i] += n
		}
	}
	return s
}

// stats are the window's figures.
type stats struct {
	requests, failures, slow, latencySumMs uint64
	hist                                   [histLen]uint64
}

func pct(n, of uint64) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

func (s stats) failureRate() float64 { return pct(s.failures, s.requests) }
func (s stats) slowRate() float64    { return pct(s.slow, s.requests) }

func (s stats) avgMs() float64 {
	if s.requests == 0 {
		return 0
	}
	return float64(s.latencySumMs) / float64(s.requests)
}

// quantileMs estimates the q-quantile from the histogram, interpolating
// linearly inside the bucket it falls in; the open-ended last bucket
// answers with its lower bound.
func (s stats) quantileMs(q float64) float64 {
	var n uint64
	for _, c := range s.hist {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := q * float64(n)
	var cum uint64
	for i, c := range s.hist {
		if c == 0 || float64(cum+c) < rank {
			cum += c
			continue
		}
		if i == len(LatencyBoundsMs) {
			return float64(LatencyBoundsMs[i-1])
		}
		lo := 0.0
		if i > 0 {
			lo = float64(LatencyBoundsMs[i-1])
		}
		hi := float64(LatencyBoundsMs[i])
		return lo + (hi-lo)*(rank-float64(cum))/float64(c)
	}
	return float64(LatencyBoundsMs[len(LatencyBoundsMs)-1])
}

func (s stats) proto() *chimev1.WindowStats {
	w := new(chimev1.WindowStats)
	s.fill(w)
	return w
}

// fill overwrites w with the figures, in place: it runs for every outcome.
func (s stats) fill(w *chimev1.WindowStats) {
	w.Requests = s.requests
	w.Failures = s.failures
	w.SlowCalls = s.slow
	w.FailureRate = s.failureRate()
	w.SlowCallRate = s.slowRate()
	w.P50Ms = s.quantileMs(0.50)
	w.P99Ms = s.quantileMs(0.99)
	w.AvgMs = s.avgMs()
}
