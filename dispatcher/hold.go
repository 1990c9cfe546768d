package dispatcher

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// holder keeps the dues that arrived before their fire_at (the scheduler
// emits them up to its FireLead early) until it comes, in one goroutine
// with one timer, and starts each then. A goroutine and a timer per held
// due cost a wake-up each, even when a thousand dues share an instant (a
// cron at the full minute, a batch created at once); the holder wakes once
// for all of them.
//
// The holder wakes on a grid of HoldTick (Config): a due starts at the
// first multiple of the tick at or after its fire_at, never before it and
// less than a tick after, with every due of that tick. At a steady rate
// the fire times are all different (2,000 a second, each its own
// millisecond), and waking for each, then waking a worker for its call,
// was much of what a dispatcher spent beside the calls themselves. On
// Apache Kafka at 2,000 fires/s (make bench's capacity phase, 1 December
// 2026), the dispatcher took 127-131 us a call waking at each fire_at, 121
// on a 5 ms grid, 100 on 10 ms and 81 on 20 ms; the endpoint, taking the
// calls in groups, 86-91, 72, 54 and 44 us.
//
// A held due counts as in flight, as before: nothing after it is
// committed, and a revoke waits for it (RevokeWait). A recall takes its
// due out at once, completed (recall); a lost partition's due is dropped
// uncompleted when its time comes. If the calls are cut (callCtx, a
// shutdown that gave up waiting) or the holder closes, every held due is
// dropped uncompleted.
type holder struct {
	tick time.Duration // the grid it wakes on; 0: each due's own time
	// rate is the dues a second it started over the last full second
	// (the loop's own: read and written on its goroutine only).
	rate      float64
	rateSince time.Time
	rateCount int
	mu        sync.Mutex
	items     heldHeap
	byKey     map[emission][]*heldDue
	seq       uint64
	closed    bool
	// wake tells the loop that an item came before the earliest.
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// heldDue is one due waiting for its time, and what becomes of it (run).
type heldDue struct {
	at    time.Time
	seq   uint64 // in arrival order among dues of one instant
	key   emission
	run   heldRun
	index int // in the heap
}

// heldRun is what the holder does with a held due: start it at its time
// (on the holder's goroutine: it must not block), or say that it was
// recalled before, or dropped (the holder closed).
type heldRun interface {
	start()
	recalled()
	drop()
}

func newHolder(ctx context.Context, tick time.Duration) *holder {
	h := &holder{tick: max(tick, 0), byKey: map[emission][]*heldDue{}, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go h.loop(ctx)
	return h
}

// add holds the due of emission key until at, then starts r.
func (h *holder) add(at time.Time, key emission, r heldRun) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		r.drop()
		return
	}
	h.seq++
	d := &heldDue{at: at, seq: h.seq, key: key, run: r}
	heap.Push(&h.items, d)
	h.byKey[key] = append(h.byKey[key], d)
	first := h.items[0] == d
	h.mu.Unlock()
	if first {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// recall takes the held dues of emission key out, completed.
func (h *holder) recall(key emission) {
	h.mu.Lock()
	ds := h.byKey[key]
	delete(h.byKey, key)
	for _, d := range ds {
		heap.Remove(&h.items, d.index)
	}
	h.mu.Unlock()
	for _, d := range ds {
		d.run.recalled()
	}
}

// forget removes d from byKey. h.mu is held.
func (h *holder) forget(d *heldDue) {
	ds := h.byKey[d.key]
	for i, x := range ds {
		if x == d {
			ds = append(ds[:i], ds[i+1:]...)
			break
		}
	}
	if len(ds) == 0 {
		delete(h.byKey, d.key)
	} else {
		h.byKey[d.key] = ds
	}
}

// held is how many dues wait.
func (h *holder) held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.items)
}

func (h *holder) loop(ctx context.Context) {
	defer close(h.done)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var ready []*heldDue
	for {
		h.mu.Lock()
		now := time.Now()
		for len(h.items) > 0 && !h.items[0].at.After(now) {
			d := heap.Pop(&h.items).(*heldDue)
			h.forget(d)
			ready = append(ready, d)
		}
		h.count(now, len(ready))
		next := time.Duration(-1)
		if len(h.items) > 0 {
			next = holdWake(h.items[0].at, gridTick(h.tick, h.rate)).Sub(now)
		}
		h.mu.Unlock()
		for i, d := range ready {
			d.run.start()
			ready[i] = nil
		}
		ready = ready[:0]
		if next >= 0 {
			t.Reset(next)
		} else {
			t.Stop()
		}
		select {
		case <-t.C:
		case <-h.wake:
		case <-ctx.Done():
			h.dropAll()
			return
		case <-h.stop:
			h.dropAll()
			return
		}
	}
}

// holdGroupMax bounds the dues a grid point gathers: above it (a rate
// times the tick) each due starts at its own time again. At 12,500 fires
// a second a 20 ms grid started 250 calls at once to one endpoint, and in
// two of three sustained runs in chime dev (make bench's sustained phase,
// 1 December 2026) the dispatcher fell behind (8,400-8,800 of 12,500/s,
// 160 us a job against 107-121 waking at each fire_at); at such a rate
// the wake-ups are shared by the dues of each millisecond anyway.
const holdGroupMax = 64

// gridTick is the grid for a holder that starts rate dues a second: tick,
// unless a grid point would gather more than holdGroupMax of them.
func gridTick(tick time.Duration, rate float64) time.Duration {
	if rate*tick.Seconds() > holdGroupMax {
		return 0
	}
	return tick
}

// count adds n dues started at now to the rate.
func (h *holder) count(now time.Time, n int) {
	if h.rateSince.IsZero() {
		h.rateSince = now
	}
	h.rateCount += n
	if el := now.Sub(h.rateSince); el >= time.Second {
		h.rate = float64(h.rateCount) / el.Seconds()
		h.rateSince, h.rateCount = now, 0
	}
}

// holdWake is when the holder wakes for a due of time at: the first
// multiple of tick (since the Unix epoch) at or after at; at itself when
// tick is 0.
func holdWake(at time.Time, tick time.Duration) time.Time {
	if tick <= 0 {
		return at
	}
	ns, t := at.UnixNano(), int64(tick)
	r := ns % t
	if r < 0 {
		r += t
	}
	if r != 0 {
		ns += t - r
	}
	return time.Unix(0, ns)
}

// dropAll gives up every held due, and any added from now on.
func (h *holder) dropAll() {
	h.mu.Lock()
	h.closed = true
	items := h.items
	h.items, h.byKey = nil, map[emission][]*heldDue{}
	h.mu.Unlock()
	for _, d := range items {
		d.run.drop()
	}
}

// close drops what is held and stops the goroutine.
func (h *holder) close() {
	close(h.stop)
	<-h.done
}

// heldHeap orders held dues by time, then arrival (container/heap).
type heldHeap []*heldDue

func (q heldHeap) Len() int { return len(q) }
func (q heldHeap) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q heldHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *heldHeap) Push(x any) {
	d := x.(*heldDue)
	d.index = len(*q)
	*q = append(*q, d)
}
func (q *heldHeap) Pop() any {
	old := *q
	n := len(old)
	x := old[n-1]
	old[n-1] = nil
	*q = old[:n-1]
	return x
}
