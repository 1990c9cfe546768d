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

// Fire is one occurrence as the scheduler fires it: its number, the time
// it is scheduled for, and the time it goes out (scheduled plus the job's
// jitter for that number).
type Fire struct {
	Seq         uint64
	ScheduledAt time.Time
	FireAt      time.Time
}

// Upcoming returns up to n occurrences of the job identified by key, the
// first scheduled at next and numbered seq+1, each with its jitter: the
// fires the scheduler makes when it runs on time (processors/scheduler's
// fireNext takes the same steps). For a job not created yet, next is
// First(created) and seq 0; for a row, its next_scheduled_at and fire_seq.
// c must know the job's anchor where NeedsAnchor says so.
func (c *Compiled) Upcoming(key string, next time.Time, seq uint64, n int) []Fire {
	out := make([]Fire, 0, n)
	for t := next; n > 0; {
		seq++
		out = append(out, Fire{Seq: seq, ScheduledAt: t, FireAt: t.Add(Jitter(c.jitter, key, seq))})
		if len(out) == n || c.kind == KindAt {
			break
		}
		var ok bool
		if t, ok = c.Next(t); !ok {
			break
		}
	}
	return out
}

// DefaultScanLimit bounds the cron occurrences counted one by one when a
// job catches up (the scheduler's CatchupScanLimit by default).
const DefaultScanLimit = 10_000

// CatchUp says which occurrence fires when a job whose next occurrence is
// from (numbered seq+1) is looked at late, at now, from's jittered time
// having passed: the latest occurrence due by now with its own jitter,
// numbered seq+count; the count-1 before it are skipped. A catch-up fire
// (count > 1) goes out without jitter, at once. scanLimit bounds the cron
// steps; exact is false when count is a lower bound.
func (c *Compiled) CatchUp(key string, from time.Time, seq uint64, now time.Time, scanLimit int) (f Fire, count uint64, exact bool) {
	last, count, exact := c.Latest(from, now, scanLimit)
	if count > 1 && last.Add(Jitter(c.jitter, key, seq+count)).After(now) {
		// The latest occurrence is not due yet with its jitter: it fires
		// on its own timer; the one before it is the latest missed one.
		last, count, exact = c.Latest(from, last.Add(-time.Nanosecond), scanLimit)
	}
	fireAt := from.Add(Jitter(c.jitter, key, seq+1))
	if count > 1 {
		fireAt = last
	}
	return Fire{Seq: seq + count, ScheduledAt: last, FireAt: fireAt}, count, exact
}

// Preview is what a job created at created fires, in order, while chime
// runs on time: Upcoming from its first occurrence, except that when that
// occurrence is already due at creation, the latest due one fires at once
// (CatchUp) and the ones before it are skipped, as the scheduler does.
// c must know the job's anchor (WithAnchor(created)).
func (c *Compiled) Preview(key string, created time.Time, n int) []Fire {
	first, ok := c.First(created)
	if !ok || n <= 0 {
		return nil
	}
	if first.Add(Jitter(c.jitter, key, 1)).After(created) {
		return c.Upcoming(key, first, 0, n)
	}
	f, _, _ := c.CatchUp(key, first, 0, created, DefaultScanLimit)
	out := []Fire{f}
	if next, ok := c.Next(f.ScheduledAt); ok && n > 1 {
		out = append(out, c.Upcoming(key, next, f.Seq, n-1)...)
	}
	return out
}
