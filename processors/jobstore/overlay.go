package jobstore

import (
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/chime-sched/chime/schema"
)

// The overlay: goka writes a row to its storage (Set) before Kafka has
// stored the row's changelog record and the records emitted with it.
// Applied at once, the local rows would run ahead of Kafka after a kill -9
// (a row saying "fired" whose due event never reached the broker). So a
// write after recovery is held here, where reads see it, until its own
// record is stored; then the confirmed writes at the head are applied in
// the order made. Each write is confirmed by its own record (the
// processor's producer asks Emitting for the write it is about to emit),
// never by key: a failed record followed by a stored one of the same key
// must not confirm bytes Kafka never stored.

// Write is one row write held until Kafka stores its changelog record.
type Write struct {
	part  *Partition
	key   string
	value []byte // nil: the row is deleted
	// old is the index entries of the row before the write (nil: no
	// row), which the write replaces: known when the write is made (the
	// processor has just read the row), so applying it reads nothing.
	old    *RowIndex
	offset int64 // the changelog record's offset; -1 until stored
}

type overlay struct {
	// pending holds the writes made since recovery, in the order made,
	// until they are applied; latest is each key's last one (what reads
	// see); confirmed counts the stored writes at the head of pending.
	pending   []*Write
	latest    map[string]*Write
	confirmed int
	// delta is how the pending writes change the live counts.
	delta map[string]int64
	// last is the last write made, until the producer takes it.
	last *Write
	// err stops the partition: nothing after the write it names is
	// applied, and the partition's next write fails (its processor then
	// recovers the partition from the changelog).
	err error
	// applyErr is the last failure to apply confirmed writes (the
	// database refused them); they stay held and are tried again.
	applyErr error
}

func newOverlay() overlay {
	return overlay{latest: map[string]*Write{}, delta: map[string]int64{}}
}

// hold adds a write to the overlay. part.mu is held.
func (part *Partition) hold(key string, value []byte) error {
	if err := part.ov.err; err != nil {
		return fmt.Errorf("jobstore: partition %d applies no more writes: %w", part.p, err)
	}
	if n := len(part.ov.pending); n >= part.db.opts.MaxHeld {
		part.ov.err = fmt.Errorf("%d writes are held in memory, unapplied (the store refuses them, or Kafka does not confirm them): %v", n, part.ov.applyErr)
		go part.db.broke(part.p, part.ov.err)
		return fmt.Errorf("jobstore: partition %d applies no more writes: %w", part.p, part.ov.err)
	}
	old, err := part.oldIndex(key)
	if err != nil {
		return err
	}
	part.lastOK = false
	w := &Write{part: part, key: key, value: value, old: old, offset: -1}
	part.ov.pending = append(part.ov.pending, w)
	part.ov.latest[key] = w
	var next *RowIndex
	if value != nil {
		next = IndexOf(value)
	}
	countDelta(key, old, next, part.ov.delta)
	if part.db.opts.AutoConfirm {
		w.offset = 0
		part.ov.confirmed = countConfirmed(part.ov.pending, part.ov.confirmed)
		return nil
	}
	part.ov.last = w
	return nil
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

// Emitting returns the write whose changelog record the processor's
// producer emits now for key in partition p: the last write made there
// (goka writes the storage, then emits the record, on the partition's
// goroutine). nil when there is none: a record not made by a write of an
// open partition's storage.
func (db *DB) Emitting(p int32, key string) *Write {
	part := db.open1(p)
	if part == nil {
		return nil
	}
	part.mu.Lock()
	defer part.mu.Unlock()
	w := part.ov.last
	if w == nil || w.key != key {
		return nil
	}
	part.ov.last = nil
	return w
}

// Stored says that Kafka stored the write's changelog record at offset.
func (w *Write) Stored(offset int64) {
	part := w.part
	part.mu.Lock()
	if part.closed || w.offset >= 0 {
		part.mu.Unlock()
		return
	}
	w.offset = offset
	part.ov.confirmed = countConfirmed(part.ov.pending, part.ov.confirmed)
	n := part.ov.confirmed
	part.mu.Unlock()
	if n >= part.db.opts.FlushAfter {
		part.db.wake()
	}
}

// Failed says that Kafka did not store the write's changelog record: the
// partition applies nothing from it on.
func (w *Write) Failed(err error) {
	part := w.part
	part.mu.Lock()
	defer part.mu.Unlock()
	if part.closed || part.ov.err != nil {
		return
	}
	part.ov.err = fmt.Errorf("the changelog record of %q was not stored: %w", w.key, err)
	part.db.opts.Logger.Error("scheduler table store: a table write failed; the partition applies nothing after it until it is recovered from Kafka", "partition", part.p, "key", w.key, "err", err)
	go part.db.broke(part.p, part.ov.err)
}

// countConfirmed extends the confirmed head of pending from n.
func countConfirmed(pending []*Write, n int) int {
	for n < len(pending) && pending[n].offset >= 0 {
		n++
	}
	return n
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

// applyFailed records that confirmed writes could not be applied.
func (part *Partition) applyFailed(err error) {
	part.mu.Lock()
	first := part.ov.applyErr == nil
	part.ov.applyErr = err
	part.mu.Unlock()
	if first {
		part.db.opts.Logger.Error("scheduler table store: applying confirmed writes failed; they stay in memory and are retried", "partition", part.p, "err", err)
	}
}

// flush applies the confirmed writes at the head of pending, with their
// index changes and the last one's offset, in one batch. Their offsets
// must follow each other and the partition's last one: a record between
// two of them was written by another writer (a zombie owner of the
// partition), and one out of order was reordered on its way; either way
// the rows here are no longer the changelog's, so nothing from there on is
// applied and the partition is recovered from the changelog.
func (part *Partition) flush() error {
	part.mu.Lock()
	if part.closed || part.ov.confirmed == 0 || part.ov.err != nil && part.ov.confirmed == 0 {
		part.mu.Unlock()
		return nil
	}
	ws := slices.Clone(part.ov.pending[:part.ov.confirmed])
	next := part.next
	n := len(ws)
	var gap error
	if !part.db.opts.AutoConfirm {
		for i, w := range ws {
			if next >= 0 && w.offset != next {
				gap = fmt.Errorf("the write of %q is stored at changelog offset %d where %d was next: another writer's records came in between, or this process's records were stored out of order", w.key, w.offset, next)
				n = i
				break
			}
			next = w.offset + 1
		}
	}
	part.mu.Unlock()
	ws = ws[:n]

	b := part.db.pdb.NewBatch()
	defer b.Close()
	delta := map[string]int64{}
	for _, w := range ws {
		if err := part.apply(rowEdit{b: b, key: w.key, delta: delta}, w.old, w.value); err != nil {
			return err
		}
	}
	if len(ws) > 0 && !part.db.opts.AutoConfirm {
		if err := b.Set(prefix(kindOffset, part.p, 0), checkpointValue(ws[len(ws)-1].offset, part.db.opts.Now()), nil); err != nil {
			return err
		}
	}
	part.mu.Lock()
	defer part.mu.Unlock()
	if part.closed {
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
	for ns, d := range delta {
		if part.ov.delta[ns] -= d; part.ov.delta[ns] == 0 {
			delete(part.ov.delta, ns)
		}
	}
	for _, w := range ws {
		if part.ov.latest[w.key] == w {
			delete(part.ov.latest, w.key)
		}
	}
	clear(part.ov.pending[:len(ws)])
	part.ov.pending = part.ov.pending[len(ws):]
	part.ov.confirmed -= len(ws)
	if len(part.ov.pending) == 0 {
		part.ov.pending = nil // let the array go
	}
	if !part.db.opts.AutoConfirm {
		part.next = next
	}
	return nil
}
