package api

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// liveCounts is what the pending-jobs quota knows of each namespace's jobs
// that have not ended: the count the schedulers gave when last asked, plus
// the jobs this process admitted since that read began, less the live
// jobs it cancelled since. A create never waits for a count: one older
// than liveCountAge is read again in the background, after a command of
// the namespace is acknowledged (the read then shows it) or a create is
// refused (jobs may have ended since), and creates are admitted against
// what is known meanwhile.
//
// A namespace this process has no count of yet (its first create here,
// or every read failed so far) is admitted against the jobs this process
// admitted for it since: it can overshoot its quota by what it creates
// before the first read answers, a few milliseconds of its
// jobs-per-second quota when the schedulers answer, more while none can.
// A count misses the creates in flight when it was read (admitted, not
// yet acknowledged by Kafka), and jobs admitted but never published (a
// request refused after the check, a publish that failed) count until the
// next read; each read corrects both.
type liveCounts struct {
	// read counts ns's live jobs, once the schedulers have applied the
	// commands this process published for it.
	read func(ns string) (int64, error)
	now  func() time.Time
	// readDone is told each read's outcome (the metric).
	readDone func(ok bool)

	// mu guards every liveCount.
	mu sync.Mutex
	by *expirable.LRU[string, *liveCount]
}

const (
	// liveCountAge is how long a count is used before a create has it
	// read again.
	liveCountAge = 2 * time.Second
	// liveCountRetry is the least time between two reads of a namespace
	// whose last read failed.
	liveCountRetry = time.Second
	// liveCountTTL forgets a namespace that created nothing for that long
	// (its next create is admitted as a first one); liveCountMax bounds
	// the namespaces kept.
	liveCountTTL = 10 * time.Minute
	liveCountMax = 100_000
)

type liveCount struct {
	known bool
	live  int64 // as last read
	// change is the jobs admitted less the live jobs cancelled by this
	// process since the namespace was first seen; base is change when
	// the last read that answered began.
	change, base int64
	// readAt is when the last read that answered began, tried when the
	// last read began.
	readAt, tried time.Time
	reading       bool
}

func newLiveCounts(read func(string) (int64, error), now func() time.Time, readDone func(bool)) *liveCounts {
	return &liveCounts{read: read, now: now, readDone: readDone, by: expirable.NewLRU[string, *liveCount](liveCountMax, nil, liveCountTTL)}
}

// get returns ns's count. Call with mu held.
func (l *liveCounts) get(ns string) *liveCount {
	c, ok := l.by.Get(ns)
	if !ok {
		c = &liveCount{}
		l.by.Add(ns, c)
	}
	return c
}

// touch has ns's count read if it is due: unknown or older than
// liveCountAge, and no read in flight or failed a moment ago.
func (l *liveCounts) touch(ns string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.get(ns)
	l.by.Add(ns, c) // keeps it another liveCountTTL
	now := l.now()
	due := !c.known || now.Sub(c.readAt) >= liveCountAge
	if due && !c.reading && (c.tried.IsZero() || now.Sub(c.tried) >= liveCountRetry) {
		c.reading, c.tried = true, now
		go l.refresh(ns, c, c.change, now)
	}
}

// refresh reads ns's count; base is c.change as the read began.
func (l *liveCounts) refresh(ns string, c *liveCount, base int64, began time.Time) {
	n, err := l.read(ns)
	l.mu.Lock()
	c.reading = false
	if err == nil {
		c.known, c.live, c.base, c.readAt = true, n, base, began
	}
	l.mu.Unlock()
	l.readDone(err == nil)
}

// estimate is the namespace's live jobs as this process knows them now.
func (l *liveCounts) estimate(ns string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.get(ns)
	return max(0, c.live+c.change-c.base)
}

// add counts n more live jobs of ns (negative: jobs that ended).
func (l *liveCounts) add(ns string, n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.get(ns).change += n
}
