package schedule

import (
	"encoding/binary"
	"hash/fnv"
	"math/bits"
	"time"
)

// Jitter returns the delay in [0, maxJitter) added to occurrence fireSeq of
// the job identified by key (its "namespace/job_id"); 0 if maxJitter <= 0.
//
// It is a pure function of its arguments so that a restarted or replaying
// scheduler arms the same timer. Changing the formula moves the timers of
// every job with jitter: don't.
func Jitter(maxJitter time.Duration, key string, fireSeq uint64) time.Duration {
	if maxJitter <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], fireSeq)
	_, _ = h.Write(seq[:])
	// FNV-1a barely moves its high bits when only the last byte changes, so
	// consecutive fire sequences would get nearly equal delays; a finalizer
	// (SplitMix64's) spreads every input bit over the whole word.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	// The high word of x*max is uniform in [0, max) without modulo bias.
	d, _ := bits.Mul64(x, uint64(maxJitter))
	return time.Duration(d)
}
