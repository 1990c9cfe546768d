package jobstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/lovoo/goka/storage"
)

// Partition is one table partition's goka storage (storage.Storage): the
// glue between goka and the concerns in the files beside this one. goka
// calls Set, Delete and Get from the partition's goroutine; confirmations
// come from the producer's, flushes from the database's, index reads from
// the scheduler's pump and from queries (which read through Read and
// View, never Get: Get keeps a cache that only the partition's goroutine
// may fill).
//
// Lock order: DB.mu, then Partition.mu.
type Partition struct {
	db *DB
	p  int32

	mu sync.Mutex
	// sendMu makes each pass of sending records, and each application of
	// stored ones, one step: the flusher and Close both run them, and
	// records must be sent in the order they are listed in flight.
	sendMu sync.Mutex
	ov     overlay
	// applied counts each namespace's live jobs as applied (the database's
	// count keys); Live adds the overlay's change.
	applied   map[string]int64
	recovered bool
	closed    bool
	// next is the changelog offset this process's next write must get (a
	// gap means another writer); -1: not known, not checked.
	next int64
	// input is the offset of the input record the writes come from now
	// (SetInput; -1: none).
	input int64
	rec   recovery
	// lastKey and lastRaw are the last row the partition's writer read
	// from the database: its write of the same key (the processor reads a
	// row, then writes it) takes the old index entries from here instead
	// of reading again.
	lastKey string
	lastRaw []byte
	lastOK  bool
	// keys says which rows the database may hold (keyfilter.go).
	keys *keyFilter
}

func newPartition(db *DB, p int32) *Partition {
	return &Partition{db: db, p: p, ov: newOverlay(), applied: map[string]int64{}, next: -1, input: -1, keys: db.keyFilter(p)}
}

// Open implements storage.Storage: it loads the live counts.
func (part *Partition) Open() error {
	counts, err := readCounts(part.db.pdb, part.p)
	if err != nil {
		return err
	}
	part.mu.Lock()
	part.applied = counts
	part.mu.Unlock()
	return nil
}

func readCounts(r iterable, p int32) (map[string]int64, error) {
	lo := prefix(kindCount, p, 0)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	if err != nil {
		return nil, err
	}
	counts := map[string]int64{}
	for it.First(); it.Valid(); it.Next() {
		if v := it.Value(); len(v) == 8 {
			counts[string(it.Key()[5:])] = int64(binary.BigEndian.Uint64(v))
		}
	}
	return counts, errors.Join(it.Error(), it.Close())
}

// Close implements storage.Storage. goka closes a storage once its
// partition stopped: the dirty rows are produced and stored first (for at
// most CloseWait), so that the input below them can be committed and the
// next owner finds them in the changelog, then applied; the partition is
// recorded as held until now. What is left (a broker that did not answer)
// is dropped: its input is not committed, and is read again.
func (part *Partition) Close() error {
	part.mu.Lock()
	recovered := part.recovered
	part.ov.closing = true
	part.mu.Unlock()
	var err error
	if recovered {
		part.produceDue()
		deadline := time.Now().Add(part.db.opts.CloseWait)
		for !part.settled() && time.Now().Before(deadline) {
			time.Sleep(closePoll)
		}
		err = part.flush()
		err = errors.Join(err, part.touch())
	}
	part.mu.Lock()
	part.closed = true
	rb := part.rec.batch
	part.rec.batch = nil
	part.ov = newOverlay()
	part.mu.Unlock()
	part.db.forget(part)
	if rb != nil {
		err = errors.Join(err, rb.Close())
	}
	return err
}

// closePoll is how often Close looks whether its rows are stored.
const closePoll = 2 * time.Millisecond

func rowKey(p int32, key string) []byte {
	return append(prefix(kindRow, p, len(key)), key...)
}

// Has implements storage.Storage.
func (part *Partition) Has(key string) (bool, error) {
	v, err := part.Get(key)
	return v != nil, err
}

// Get implements storage.Storage for the partition's goroutine: the row
// as last written, confirmed or not. The caller must not change the
// slice.
func (part *Partition) Get(key string) ([]byte, error) {
	part.mu.Lock()
	if w, ok := part.ov.latest[key]; ok {
		v := w.value // a fold replaces it under the lock
		part.mu.Unlock()
		return v, nil
	}
	rb := part.rec.batch
	part.mu.Unlock()
	if rb != nil {
		// Recovery reads what it wrote (goka does not; kept for
		// completeness).
		return get(rb, rowKey(part.p, key))
	}
	v, err := part.stored(key)
	if err == nil {
		// Its index entries are read when the row is written: most reads
		// (a tick that finds nothing to do) are not followed by a write.
		part.mu.Lock()
		part.lastKey, part.lastRaw, part.lastOK = key, v, true
		part.mu.Unlock()
	}
	return v, err
}

// Read is Get for any goroutine: the row as last written.
func (part *Partition) Read(key string) ([]byte, error) {
	part.mu.Lock()
	if w, ok := part.ov.latest[key]; ok {
		v := w.value // a fold replaces it under the lock
		part.mu.Unlock()
		return v, nil
	}
	part.mu.Unlock()
	return part.stored(key)
}

// stored reads key's row from the database, unless its filter says there
// is none. A row leaves the write cache only once the filter has its key,
// so a key missing from both has no row.
func (part *Partition) stored(key string) ([]byte, error) {
	if !part.keys.mayHold(key) {
		return nil, nil
	}
	return get(part.db.pdb, rowKey(part.p, key))
}

// oldIndex is the index entries of key's row before a write of it is
// made. part.mu is held.
func (part *Partition) oldIndex(key string) (*RowIndex, error) {
	if w, ok := part.ov.latest[key]; ok {
		return IndexOf(w.value), nil
	}
	if part.lastOK && part.lastKey == key {
		return IndexOf(part.lastRaw), nil
	}
	v, err := part.stored(key)
	return IndexOf(v), err
}

// reader is a Pebble database or batch.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

// iterable is a Pebble database or batch.
type iterable interface {
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
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
	return part.write(key, value, false)
}

// SetHeld is Set for a row whose timer the caller holds in memory until
// the row's next write (the scheduler's window): while the write is
// unapplied, Timers does not return the row at all, and the store keeps
// no order of its timer, which was two tree operations a write on the
// hot path. Once applied, the row's timer is read from the database like
// any other. Before recovery ends it is Set.
func (part *Partition) SetHeld(key string, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	return part.write(key, value, true)
}

// Delete implements storage.Storage.
func (part *Partition) Delete(key string) error { return part.write(key, nil, false) }

func (part *Partition) write(key string, value []byte, held bool) error {
	part.mu.Lock()
	defer part.mu.Unlock()
	if part.closed {
		return errClosed
	}
	if !part.recovered {
		return part.recoverWrite(key, value)
	}
	return part.hold(key, value, held)
}

// SetOffset implements storage.Storage. During recovery it is the offset
// of the changelog record just written; after it, goka calls it when Kafka
// stored a row's record, which the write's confirmation already says.
func (part *Partition) SetOffset(offset int64) error {
	part.mu.Lock()
	defer part.mu.Unlock()
	if part.recovered || part.closed {
		return nil
	}
	return part.recoverOffset(offset)
}

// MarkRecovered implements storage.Storage: what recovery wrote is applied
// and later writes go through the overlay.
func (part *Partition) MarkRecovered() error {
	part.mu.Lock()
	defer part.mu.Unlock()
	if part.closed {
		return nil
	}
	return part.endRecovery()
}

// Recovered says the partition's rows are those of the changelog.
func (part *Partition) Recovered() bool {
	part.mu.Lock()
	defer part.mu.Unlock()
	return part.recovered
}

// Storage is what goka sees.
var _ storage.Storage = (*Partition)(nil)
