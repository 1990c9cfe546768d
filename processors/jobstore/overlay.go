package jobstore

import (
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/btree"

	"github.com/chime-sched/chime/schema"
)

// The overlay is the table's write cache, Kafka Streams' record cache for
// this store. A write after recovery is not produced at once: it waits
// here, where reads see it, as a dirty row; later writes of the same key
// fold into it (a job created, fired and settled within the hold costs one
// changelog record, not three). The database's flusher produces a dirty
// row through the producer the processor gave (SetProducer) once it is
// stable (no timer within MaxHold and no fire awaiting its answer: it will
// not change soon), once it has waited MaxHold, when the dirty rows pass
// MaxDirtyBytes (oldest first), and when the partition closes. Produced
// rows are applied to the database in the order of their changelog
// offsets once Kafka has stored them, with the offset of the last, in one
// batch: the database always holds the table exactly as the changelog is
// at its stored offset.
//
// A dirty row is not in Kafka: the input records that made it (commands,
// by their offsets) must not be committed before it is, or a kill -9
// would lose them. Hold says the lowest such input offset; the consumer
// commits below it (processors/scheduler's commit gate), and OnDurable
// says when it rises. What was made from no input record (the scheduler's
// ticks) is decided again from the stored row after a crash.
//
// Each write is confirmed by its own record's promise, never by key. Each
// applied write's offset must be the partition's next (the log's end when
// it recovered, then one past the last applied): a record between two of
// them was written by another writer (a zombie owner of the partition),
// one out of order was reordered on its way; either way, and after a
// failed record, the rows here are no longer the changelog's, so nothing
// from there on is applied, the partition's next write fails, and its
// processor is told (OnBroken) to recover it from the changelog.

// writeState is where a write is on its way to the database.
type writeState uint8

const (
	dirty    writeState = iota // in the cache only
	produced                   // its record sent, not stored yet
	stored                     // Kafka stored its record at offset
)

// write is one row's change on its way to the database.
type write struct {
	part *Partition // whose write it is (Stored)
	key  string
	// placed says where Timers finds the write's timer, placedAt.
	placed   timerPlace
	placedAt int64
	value    []byte // nil: the row is deleted
	// old is the index entries of the row the database will hold when
	// this write is applied (nil: no row): known when the write is made,
	// so applying it reads nothing.
	old   *RowIndex
	state writeState
	// offset is the record's offset once stored.
	offset int64
	// since is when the row became dirty; ready says it is stable and is
	// produced at the next pass.
	since time.Time
	ready bool
	// inputs are the offsets of the input records folded into the write,
	// each counted in overlay.pend until the write is stored.
	inputs []int64
}

type overlay struct {
	// latest is each key's last write (what reads see), until applied;
	// timers orders their timers (Timers reads them in time order beside
	// the database's), but for those the caller holds (SetHeld) and
	// those far ahead (far).
	latest map[string]*write
	timers *btree.BTreeG[Timer]
	// far counts the latest writes whose timer is farTimer or more ahead
	// of when they were made, and min is at most the earliest of those
	// timers: Timers scans latest for them only when its range reaches
	// min, which a write applied in time never lets happen.
	far struct {
		n   int
		min int64
	}
	// waiting are the dirty writes in the order they became dirty; ready
	// the dirty writes to produce at the next pass. A write leaves either
	// when produced or folded (lazily: entries whose write is no longer
	// dirty are skipped).
	waiting, readyQ []*write
	dirtyBytes      int
	dirtyN          int
	// inflight are the produced writes, in the order produced, until
	// applied from the head once stored.
	inflight []*write
	// delta is how the writes not applied yet change the live counts.
	delta map[string]int64
	// inputs are the input offsets of the writes not stored yet, in the
	// order first seen, and pend how many such writes carry each.
	inputs []int64
	pend   map[int64]int
	// err stops the partition: nothing after the write it names is
	// applied, and the partition's next write fails.
	err error
	// applyErr is the last failure to apply stored writes (the database
	// refused them); they stay held and are tried again.
	applyErr error
	// closing: every dirty write is produced now.
	closing bool
}

func newOverlay() overlay {
	return overlay{latest: map[string]*write{}, timers: btree.NewG(32, Timer.Less), delta: map[string]int64{}, pend: map[int64]int{}}
}

// farTimer is how far ahead of the store's clock a timer is left out of
// the overlay's order (overlay.far): a row that far from its timer is
// stable, so it is produced and applied long before the window comes
// near it (the database's index then has the timer); keeping the order
// cost two tree operations a write, most of them creates and completions.
const farTimer = 10 * time.Minute

// timerPlace is where Timers finds an unapplied write's timer.
type timerPlace uint8

const (
	unplaced timerPlace = iota // no timer, or the caller holds it (SetHeld)
	ordered                    // overlay.timers
	farOff                     // counted in overlay.far; Timers scans for it
)

// place makes w's timer readable by Timers, unless the caller holds it
// (held). part.mu is held.
func (part *Partition) place(w *write, held bool, now time.Time) {
	w.placed = unplaced
	at, _ := schema.JobStateTimer(w.value)
	switch {
	case at == 0 || held:
		return
	case at >= now.Add(farTimer).UnixNano():
		if far := &part.ov.far; far.n == 0 || at < far.min {
			far.min = at
		}
		part.ov.far.n++
		w.placed = farOff
	default:
		part.ov.timers.ReplaceOrInsert(Timer{At: at, Key: w.key})
		w.placed = ordered
	}
	w.placedAt = at
}

// unplace takes w's timer out of what Timers reads: w is replaced or
// applied. part.mu is held.
func (part *Partition) unplace(w *write) {
	switch w.placed {
	case ordered:
		part.ov.timers.Delete(Timer{At: w.placedAt, Key: w.key})
	case farOff:
		part.ov.far.n--
	}
	w.placed = unplaced
}

// SetInput says which input record the writes that follow come from
// (-1: none, a tick): its offset is held back from the commit until they
// are stored. Call it on the partition's writer, before the writes.
func (part *Partition) SetInput(offset int64) {
	part.mu.Lock()
	part.input = offset
	part.mu.Unlock()
}

// hold adds a write to the cache; held says the caller holds its timer
// (SetHeld). part.mu is held.
func (part *Partition) hold(key string, value []byte, held bool) error {
	if err := part.ov.err; err != nil {
		return fmt.Errorf("jobstore: partition %d applies no more writes: %w", part.p, err)
	}
	if n := part.ov.dirtyN + len(part.ov.inflight); n >= part.db.opts.MaxHeld {
		part.ov.err = fmt.Errorf("%d writes are held in memory, unapplied (the store refuses them, or Kafka does not store them): %v", n, part.ov.applyErr)
		go part.db.broke(part.p, part.ov.err)
		return fmt.Errorf("jobstore: partition %d applies no more writes: %w", part.p, part.ov.err)
	}
	// A sleeping flusher (DB.settle) wakes for the write, which it sees
	// once part.mu is released.
	if part.db.idle.Load() {
		part.db.wake()
	}
	// The new version's counts and timer; its labels are read when it is
	// applied, against the old version's (old, below).
	var nextX, prevX RowIndex
	next := transientIndex(&nextX, value)
	now := part.db.opts.Now()
	w := part.ov.latest[key]
	if w != nil && w.state == dirty {
		// Fold into the dirty row: one record for both.
		countDelta(key, transientIndex(&prevX, w.value), next, part.ov.delta)
		part.ov.dirtyBytes += len(value) - len(w.value)
		part.unplace(w)
		w.value = value
		part.place(w, held, now)
	} else {
		old, err := part.oldIndex(key)
		if err != nil {
			return err
		}
		if w != nil {
			part.unplace(w) // on its way: this write replaces it
		}
		countDelta(key, old, next, part.ov.delta)
		w = &write{part: part, key: key, value: value, old: old, offset: -1, since: now}
		part.ov.latest[key] = w
		part.place(w, held, now)
		part.ov.dirtyBytes += len(value)
		part.ov.dirtyN++
		if part.db.opts.AutoConfirm {
			// No producer (goka's tester): stored as made.
			part.markProduced(w)
			part.markStored(w, 0)
			return nil
		}
		part.ov.waiting = append(part.ov.waiting, w)
	}
	part.lastOK = false
	if in := part.input; in >= 0 && !slices.Contains(w.inputs, in) {
		w.inputs = append(w.inputs, in)
		if part.ov.pend[in] == 0 && (len(part.ov.inputs) == 0 || part.ov.inputs[len(part.ov.inputs)-1] != in) {
			part.ov.inputs = append(part.ov.inputs, in)
		}
		part.ov.pend[in]++
	}
	if !w.ready && part.stable(next, now) {
		w.ready = true
		part.ov.readyQ = append(part.ov.readyQ, w)
	}
	if w.ready {
		part.db.wake()
	}
	return nil
}

// stable says a row written now will likely not change within MaxHold:
// no timer before then, and no fire awaiting its answer (recover_at).
func (part *Partition) stable(x *RowIndex, now time.Time) bool {
	if x == nil {
		return true
	}
	return x.RecoverAt == 0 && (x.Timer == 0 || x.Timer > now.Add(part.db.opts.MaxHold).UnixNano())
}

// countDelta adds to delta how a row's change from old to next (nil: no
// row) changes the live counts, as index does when it is applied.
func countDelta(key string, old, next *RowIndex, delta map[string]int64) {
	hasTimer := func(x *RowIndex) int64 {
		if x != nil && x.Timer != 0 {
			return 1
		}
		return 0
	}
	if d := hasTimer(next) - hasTimer(old); d != 0 {
		delta[timersName] += d
	}
	ns, id, ok := schema.SplitJobKey(key)
	if !ok || Internal(id) {
		return
	}
	live := func(x *RowIndex) int64 {
		if x != nil && x.Listed && !schema.JobEnded(x.Status) {
			return 1
		}
		return 0
	}
	if d := live(next) - live(old); d != 0 {
		delta[ns] += d
	}
}

// Produce sends one table record: the row (nil: a tombstone) of key in
// partition p; done is called with its offset once Kafka stored it, or
// the error. Records of one partition must keep the order of the calls.
type Produce func(p int32, key string, value []byte, done Done)

// Done hears what became of one produced record: its offset once Kafka
// stored it, or the error. It is an interface, not a func, so that the
// write itself is what the producer is given: a closure for each record
// was an allocation a row on the hot path.
type Done interface {
	Stored(offset int64, err error)
}

// Stored implements Done.
func (w *write) Stored(offset int64, err error) { w.part.produced(w, offset, err) }

// markProduced moves a dirty write to the in-flight ones. part.mu is held.
func (part *Partition) markProduced(w *write) {
	w.state = produced
	part.ov.dirtyBytes -= len(w.value)
	part.ov.dirtyN--
	part.ov.inflight = append(part.ov.inflight, w)
}

// markStored records that w's record is stored at offset, and releases
// its inputs. part.mu is held.
func (part *Partition) markStored(w *write, offset int64) {
	w.state, w.offset = stored, offset
	moved := false
	for _, in := range w.inputs {
		if part.ov.pend[in]--; part.ov.pend[in] <= 0 {
			delete(part.ov.pend, in)
		}
	}
	w.inputs = nil
	for len(part.ov.inputs) > 0 && part.ov.pend[part.ov.inputs[0]] == 0 {
		part.ov.inputs = part.ov.inputs[1:]
		moved = true
	}
	if moved && !part.db.opts.AutoConfirm {
		go part.db.durable(part.p)
	}
}

// Hold is the lowest input offset whose writes are not stored in Kafka
// yet, -1 for none: the input may be committed below it only.
func (part *Partition) Hold() int64 {
	part.mu.Lock()
	defer part.mu.Unlock()
	if len(part.ov.inputs) == 0 {
		return -1
	}
	return part.ov.inputs[0]
}

// produceDue sends the dirty writes that are due (see the file comment),
// in one pass; all of them when the partition closes.
func (part *Partition) produceDue() { part.produce(false) }

// produce sends the dirty writes that are due, or all of them.
func (part *Partition) produce(all bool) {
	part.sendMu.Lock()
	defer part.sendMu.Unlock()
	produce := part.db.producer()
	if produce == nil {
		return
	}
	part.mu.Lock()
	if part.closed || part.ov.err != nil || !part.recovered {
		part.mu.Unlock()
		return
	}
	now := part.db.opts.Now()
	var out []*write
	take := func(w *write) {
		if w.state == dirty {
			part.markProduced(w)
			out = append(out, w)
		}
	}
	for _, w := range part.ov.readyQ {
		take(w)
	}
	part.ov.readyQ = part.ov.readyQ[:0]
	limit := part.db.opts.MaxDirtyBytes
	i := 0
	for ; i < len(part.ov.waiting); i++ {
		w := part.ov.waiting[i]
		if w.state != dirty {
			continue
		}
		if !all && !part.ov.closing && part.ov.dirtyBytes <= limit && now.Sub(w.since) < part.db.opts.MaxHold {
			break
		}
		take(w)
	}
	part.ov.waiting = part.ov.waiting[i:]
	if len(part.ov.waiting) == 0 {
		part.ov.waiting = nil
	}
	part.mu.Unlock()
	// In the order taken, outside the lock (the producer may block while
	// its buffer is full): the in-flight list has the same order.
	for _, w := range out {
		produce(part.p, w.key, w.value, w)
	}
}

// produced is a record's promise.
func (part *Partition) produced(w *write, offset int64, err error) {
	part.mu.Lock()
	defer part.mu.Unlock()
	if part.closed && !part.ov.closing {
		return
	}
	if err != nil {
		if part.ov.err == nil {
			part.ov.err = fmt.Errorf("the changelog record of %q was not stored: %w", w.key, err)
			part.db.opts.Logger.Error("scheduler table store: a table write failed; the partition applies nothing after it until it is recovered from Kafka", "partition", part.p, "key", w.key, "err", err)
			go part.db.broke(part.p, part.ov.err)
		}
		return
	}
	part.markStored(w, offset)
	if w == part.ov.inflight[0] || len(part.ov.inflight) >= part.db.opts.FlushAfter {
		part.db.wake()
	}
}

// holding says the partition holds a write the database has not applied
// (dirty, or on its way), so the flusher has work to come.
func (part *Partition) holding() bool {
	part.mu.Lock()
	defer part.mu.Unlock()
	return part.ov.dirtyN > 0 || len(part.ov.inflight) > 0 || len(part.ov.readyQ) > 0
}

// settled says every write is stored (or the partition cannot store
// more).
func (part *Partition) settled() bool {
	part.mu.Lock()
	defer part.mu.Unlock()
	if part.ov.err != nil {
		return true
	}
	if part.ov.dirtyN > 0 {
		return false
	}
	for _, w := range part.ov.inflight {
		if w.state != stored {
			return false
		}
	}
	return true
}

// broken says why the partition cannot apply its writes, nil if it can.
func (part *Partition) broken() error {
	part.mu.Lock()
	defer part.mu.Unlock()
	if part.ov.err != nil {
		return part.ov.err
	}
	return part.ov.applyErr
}

// applyFailed records that stored writes could not be applied.
func (part *Partition) applyFailed(err error) {
	part.mu.Lock()
	first := part.ov.applyErr == nil
	part.ov.applyErr = err
	part.mu.Unlock()
	if first {
		part.db.opts.Logger.Error("scheduler table store: applying stored writes failed; they stay in memory and are retried", "partition", part.p, "err", err)
	}
}

// flush applies the stored writes at the head of the in-flight ones, with
// their index changes and the last one's offset, in one batch. Their
// offsets must follow each other and the partition's last one (see the
// file comment).
func (part *Partition) flush() error {
	part.sendMu.Lock()
	defer part.sendMu.Unlock()
	part.mu.Lock()
	n := 0
	for n < len(part.ov.inflight) && part.ov.inflight[n].state == stored {
		n++
	}
	if (part.closed && !part.ov.closing) || n == 0 {
		part.mu.Unlock()
		return nil
	}
	ws := slices.Clone(part.ov.inflight[:n])
	next := part.next
	var gap error
	if !part.db.opts.AutoConfirm {
		for i, w := range ws {
			if next >= 0 && w.offset != next {
				gap = fmt.Errorf("the write of %q is stored at changelog offset %d where %d was next: another writer's records came in between, or this process's records were stored out of order", w.key, w.offset, next)
				ws = ws[:i]
				break
			}
			next = w.offset + 1
		}
	}
	part.mu.Unlock()

	b := part.db.pdb.NewBatch()
	defer b.Close()
	index := &indexBatches{db: part.db.pdb}
	defer index.close()
	delta := map[string]int64{}
	for _, w := range ws {
		if err := part.apply(rowEdit{b: b, index: index, key: w.key, delta: delta}, w.old, w.value); err != nil {
			return err
		}
	}
	if err := index.into(b); err != nil {
		return err
	}
	if len(ws) > 0 && !part.db.opts.AutoConfirm {
		if err := b.Set(prefix(kindOffset, part.p, 0), checkpointValue(ws[len(ws)-1].offset, part.db.opts.Now()), nil); err != nil {
			return err
		}
	}
	part.mu.Lock()
	defer part.mu.Unlock()
	if part.closed && !part.ov.closing {
		return nil
	}
	if gap != nil && part.ov.err == nil {
		part.ov.err = gap
		part.db.opts.Logger.Warn("scheduler table store: the changelog no longer follows this process's writes; the partition applies nothing more and is recovered from Kafka", "partition", part.p, "err", gap)
		go part.db.broke(part.p, gap)
	}
	if len(ws) == 0 {
		return nil
	}
	for ns, d := range delta {
		part.applied[ns] += d
		if err := b.Set(countKey(part.p, ns), int64Bytes(part.applied[ns]), nil); err != nil {
			return err
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		for ns, d := range delta {
			part.applied[ns] -= d
		}
		return err
	}
	part.ov.applyErr = nil
	// The filter has the rows' keys before the cache lets them go.
	keys := make([]string, 0, len(ws))
	for _, w := range ws {
		if w.value != nil {
			keys = append(keys, w.key)
		}
	}
	part.db.addKeys(part.p, part.keys, keys...)
	for ns, d := range delta {
		if part.ov.delta[ns] -= d; part.ov.delta[ns] == 0 {
			delete(part.ov.delta, ns)
		}
	}
	for _, w := range ws {
		if part.ov.latest[w.key] == w {
			part.unplace(w)
			delete(part.ov.latest, w.key)
		}
	}
	clear(part.ov.inflight[:len(ws)])
	part.ov.inflight = part.ov.inflight[len(ws):]
	if len(part.ov.inflight) == 0 {
		part.ov.inflight = nil // let the array go
	}
	if !part.db.opts.AutoConfirm {
		part.next = next
	}
	return nil
}
