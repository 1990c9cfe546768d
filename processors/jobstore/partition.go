package jobstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/lovoo/goka/storage"
)

// write is a row write held in the overlay until Kafka stores its
// changelog record.
type write struct {
	key   string
	value []byte // nil: the row is deleted
	// old is the index entries of the row before the write (nil: no
	// row), which the write replaces: known when the write is made (the
	// processor has just read the row), so applying it reads nothing.
	old    *RowIndex
	offset int64 // the changelog record's offset; -1 until confirmed
}

// Partition is one table partition's goka storage (storage.Storage) and
// its indexes. goka calls Set, Delete and Get from the partition's
// goroutine; Confirm comes from the producer's, flushes from the
// database's, index reads from the scheduler's pump and from queries.
type Partition struct {
	db *DB
	p  int32

	mu sync.Mutex
	// pending holds the writes made since recovery, in the order made,
	// until they are applied; latest is each key's last one (what Get
	// sees); waiting is each key's unconfirmed ones, oldest first.
	pending   []*write
	latest    map[string]*write
	waiting   map[string][]*write
	confirmed int // writes at the head of pending that are confirmed
	// live counts each namespace's live jobs as applied (Live).
	live      map[string]int64
	recovered bool
	closed    bool
	// During recovery: writes and offsets from the changelog, applied in
	// batches.
	rb  *pebble.Batch
	rbN int
	// iterateBefore, if set, bounds Iterator to the rows whose timer is
	// before it (see Iterator).
	iterateBefore func() int64
	// lastKey and lastIdx are the index entries of the last row read
	// from the database, or hinted (Hint): a write of the same key (the
	// processor reads a row, then writes it) takes them from there.
	lastKey string
	lastIdx *RowIndex
	lastOK  bool
}

func newPartition(db *DB, p int32) *Partition {
	return &Partition{db: db, p: p, latest: map[string]*write{}, waiting: map[string][]*write{}, live: map[string]int64{}}
}

// Open implements storage.Storage: it loads the live counts.
func (part *Partition) Open() error {
	it, err := part.db.pdb.NewIter(&pebble.IterOptions{LowerBound: prefix(kindCount, part.p, 0), UpperBound: upperBound(prefix(kindCount, part.p, 0))})
	if err != nil {
		return err
	}
	part.mu.Lock()
	for it.First(); it.Valid(); it.Next() {
		if v := it.Value(); len(v) == 8 {
			part.live[string(it.Key()[5:])] = int64(binary.BigEndian.Uint64(v))
		}
	}
	part.mu.Unlock()
	return it.Close()
}

// Close implements storage.Storage. Writes not applied yet are dropped:
// the next storage of the partition reads them from the changelog.
func (part *Partition) Close() error {
	part.mu.Lock()
	part.closed = true
	rb := part.rb
	part.rb = nil
	part.pending, part.latest, part.waiting = nil, map[string]*write{}, map[string][]*write{}
	part.mu.Unlock()
	part.db.forget(part)
	if rb != nil {
		return rb.Close()
	}
	return nil
}

func rowKey(p int32, key string) []byte {
	return append(prefix(kindRow, p, len(key)), key...)
}

// Has implements storage.Storage.
func (part *Partition) Has(key string) (bool, error) {
	v, err := part.Get(key)
	return v != nil, err
}

// Get implements storage.Storage: the row as last written, confirmed or
// not. The caller must not change the slice.
func (part *Partition) Get(key string) ([]byte, error) {
	part.mu.Lock()
	if w, ok := part.latest[key]; ok {
		part.mu.Unlock()
		return w.value, nil
	}
	rb := part.rb
	part.mu.Unlock()
	if rb != nil {
		// Recovery reads what it wrote (goka does not, the scheduler's
		// pump does not run yet; kept for completeness).
		return get(rb, rowKey(part.p, key))
	}
	v, err := get(part.db.pdb, rowKey(part.p, key))
	if err == nil {
		x := IndexOf(v)
		part.mu.Lock()
		part.lastKey, part.lastIdx, part.lastOK = key, x, true
		part.mu.Unlock()
	}
	return v, err
}

// Stored returns the index entries of key's row as the database holds it,
// if key was the last row read from it (nil: no row).
func (part *Partition) Stored(key string) (x *RowIndex, ok bool) {
	part.mu.Lock()
	defer part.mu.Unlock()
	if _, written := part.latest[key]; written || !part.lastOK || part.lastKey != key {
		return nil, false
	}
	return part.lastIdx, true
}

// Hint says what key's row in the database is indexed as, for its next
// write: a processor that held the row in memory since it read it (the
// scheduler's unwritten rows) spares the write a read.
func (part *Partition) Hint(key string, x *RowIndex) {
	part.mu.Lock()
	part.lastKey, part.lastIdx, part.lastOK = key, x, true
	part.mu.Unlock()
}

// oldIndex is the index entries of key's row before a write of it is
// made. part.mu is held.
func (part *Partition) oldIndex(key string) (*RowIndex, error) {
	if w, ok := part.latest[key]; ok {
		return IndexOf(w.value), nil
	}
	if part.lastOK && part.lastKey == key {
		return part.lastIdx, nil
	}
	v, err := get(part.db.pdb, rowKey(part.p, key))
	return IndexOf(v), err
}

// reader is a Pebble database or batch.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

func get(r reader, k []byte) ([]byte, error) {
	v, c, err := r.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := bytes.Clone(v)
	return out, c.Close()
}

// Set implements storage.Storage.
func (part *Partition) Set(key string, value []byte) error {
	if value == nil {
		value = []byte{} // nil means a delete here
	}
	return part.write(key, value)
}

// Delete implements storage.Storage.
func (part *Partition) Delete(key string) error { return part.write(key, nil) }

func (part *Partition) write(key string, value []byte) error {
	part.mu.Lock()
	defer part.mu.Unlock()
	if part.closed {
		return errClosed
	}
	if !part.recovered {
		// From the changelog: stored in Kafka already.
		if part.rb == nil {
			part.rb = part.db.pdb.NewIndexedBatch()
		}
		delta := map[string]int64{}
		old, err := get(part.rb, rowKey(part.p, key))
		if err != nil {
			return err
		}
		if err := part.apply(rowEdit{b: part.rb, key: key, delta: delta}, IndexOf(old), value); err != nil {
			return err
		}
		for ns, d := range delta {
			part.live[ns] += d
		}
		part.rbN++
		part.db.replayed.Add(1)
		return nil
	}
	old, err := part.oldIndex(key)
	if err != nil {
		return err
	}
	part.lastOK = false
	w := &write{key: key, value: value, old: old, offset: -1}
	part.pending = append(part.pending, w)
	part.latest[key] = w
	if part.db.opts.AutoConfirm {
		w.offset = 0
		part.confirmed = countConfirmed(part.pending, part.confirmed)
		return nil
	}
	part.waiting[key] = append(part.waiting[key], w)
	return nil
}

// confirm marks the oldest unconfirmed write of key stored at offset, and
// returns how many writes wait at the head to be applied.
func (part *Partition) confirm(key string, offset int64) int {
	part.mu.Lock()
	defer part.mu.Unlock()
	ws := part.waiting[key]
	if len(ws) == 0 {
		return part.confirmed // a write of an earlier storage of the partition
	}
	ws[0].offset = offset
	if len(ws) == 1 {
		delete(part.waiting, key)
	} else {
		part.waiting[key] = ws[1:]
	}
	part.confirmed = countConfirmed(part.pending, part.confirmed)
	return part.confirmed
}

// countConfirmed extends the confirmed head of pending from n.
func countConfirmed(pending []*write, n int) int {
	for n < len(pending) && pending[n].offset >= 0 {
		n++
	}
	return n
}

// GetOffset implements storage.Storage: the offset of the last changelog
// record the partition's rows reflect. A partition stored longer ago than
// MaxCheckpointAge is wiped first (see the package comment).
func (part *Partition) GetOffset(def int64) (int64, error) {
	v, err := get(part.db.pdb, prefix(kindOffset, part.p, 0))
	if err != nil || v == nil {
		return def, err
	}
	if len(v) != 16 {
		return def, part.wipe(fmt.Sprintf("its offset record is %d bytes", len(v)))
	}
	stored := int64(binary.BigEndian.Uint64(v[8:]))
	if age := part.db.opts.Now().UnixNano() - stored; age > int64(part.db.opts.MaxCheckpointAge) {
		return def, part.wipe(fmt.Sprintf("its offset was stored %s ago, longer than %s", time.Duration(age).Round(time.Second), part.db.opts.MaxCheckpointAge))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// wipe removes every key of the partition, which is then recovered from
// the start of the changelog.
func (part *Partition) wipe(why string) error {
	part.db.opts.Logger.Warn("scheduler table store: rebuilding a partition from Kafka", "partition", part.p, "why", why)
	b := part.db.pdb.NewBatch()
	for _, kind := range []byte{kindOffset, kindRow, kindTimer, kindRecover, kindListing, kindCount} {
		lo := prefix(kind, part.p, 0)
		if err := b.DeleteRange(lo, upperBound(lo), nil); err != nil {
			return err
		}
	}
	part.mu.Lock()
	part.live = map[string]int64{}
	part.mu.Unlock()
	return b.Commit(pebble.NoSync)
}

// SetOffset implements storage.Storage. During recovery it is the offset
// of the changelog record just written; after it, goka calls it when Kafka
// stored a row's record, which Confirm already says (with deletes too).
func (part *Partition) SetOffset(offset int64) error {
	part.mu.Lock()
	defer part.mu.Unlock()
	if part.recovered || part.closed || part.rb == nil {
		return nil
	}
	if err := part.rb.Set(prefix(kindOffset, part.p, 0), part.offsetValue(offset), nil); err != nil {
		return err
	}
	if part.rbN >= 4096 {
		return part.commitRecoveryLocked()
	}
	return nil
}

func (part *Partition) offsetValue(offset int64) []byte {
	v := make([]byte, 16)
	binary.BigEndian.PutUint64(v, uint64(offset))
	binary.BigEndian.PutUint64(v[8:], uint64(part.db.opts.Now().UnixNano()))
	return v
}

func (part *Partition) commitRecoveryLocked() error {
	if part.rb == nil {
		return nil
	}
	if err := part.commitLive(part.rb); err != nil {
		return err
	}
	err := part.rb.Commit(pebble.NoSync)
	_ = part.rb.Close()
	part.rb, part.rbN = nil, 0
	return err
}

// MarkRecovered implements storage.Storage: what recovery wrote is applied
// and later writes go through the overlay.
func (part *Partition) MarkRecovered() error {
	part.mu.Lock()
	defer part.mu.Unlock()
	if part.closed {
		return nil
	}
	if err := part.commitRecoveryLocked(); err != nil {
		return err
	}
	part.recovered = true
	return nil
}

// Recovered says the partition's rows are those of the changelog.
func (part *Partition) Recovered() bool {
	part.mu.Lock()
	defer part.mu.Unlock()
	return part.recovered
}

// flush applies the confirmed writes at the head of pending, with their
// index changes and the last one's offset, in one batch.
func (part *Partition) flush() error {
	part.mu.Lock()
	if part.closed || part.confirmed == 0 {
		part.mu.Unlock()
		return nil
	}
	ws := append([]*write(nil), part.pending[:part.confirmed]...)
	part.mu.Unlock()

	b := part.db.pdb.NewBatch()
	defer b.Close()
	last := int64(-1)
	delta := map[string]int64{}
	for _, w := range ws {
		if err := part.apply(rowEdit{b: b, key: w.key, delta: delta}, w.old, w.value); err != nil {
			return err
		}
		last = max(last, w.offset)
	}
	if !part.db.opts.AutoConfirm || last > 0 {
		if err := b.Set(prefix(kindOffset, part.p, 0), part.offsetValue(last), nil); err != nil {
			return err
		}
	}
	part.mu.Lock()
	defer part.mu.Unlock()
	if part.closed {
		return nil
	}
	for ns, d := range delta {
		part.live[ns] += d
		if err := b.Set(countKey(part.p, ns), int64Bytes(part.live[ns]), nil); err != nil {
			return err
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		for ns, d := range delta {
			part.live[ns] -= d
		}
		return err
	}
	for _, w := range ws {
		if part.latest[w.key] == w {
			delete(part.latest, w.key)
		}
	}
	part.pending = part.pending[len(ws):]
	part.confirmed -= len(ws)
	if len(part.pending) == 0 {
		part.pending = nil // let the array go
	}
	return nil
}

// commitLive writes the live counts recovery changed.
func (part *Partition) commitLive(b *pebble.Batch) error {
	for ns, n := range part.live {
		if err := b.Set(countKey(part.p, ns), int64Bytes(n), nil); err != nil {
			return err
		}
	}
	return nil
}

func countKey(p int32, ns string) []byte {
	return append(prefix(kindCount, p, len(ns)), ns...)
}

func int64Bytes(n int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(n))
}

// Storage is what goka sees.
var _ storage.Storage = (*Partition)(nil)
