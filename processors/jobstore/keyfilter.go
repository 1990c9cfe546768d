package jobstore

import (
	"errors"
	"sync"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/cockroachdb/pebble/v2"
)

// Most reads of a row that is not in the write cache are of rows that do
// not exist: a create reads its job's row before it writes it, and the
// API reads the rows of jobs it has just created. Pebble answers those
// with a search of its memtables (whose bloom filters cover only the
// sstables), and the memtable's skiplist search was 13 % of the
// scheduler's CPU at 2,000 creates a second (docs/capacity.md). So each
// partition keeps a bloom filter of the row keys its database holds: a key
// the filter has never seen has no row, and is not looked up.
//
// The filter must hold every key whose row the database holds. It is made
// when the process first opens the partition, before the partition's
// first write; every row write then adds its key once Pebble has
// committed it, before the write cache lets the row go (under the
// partition's lock, which reads take). A scan of the rows the database
// held before (from earlier runs of the process) fills it in the
// background; until that ends the filter answers "maybe" for every key.
// Deleted rows stay in the filter (a false positive costs the lookup it
// always cost); when the keys added pass its capacity the filter is built
// again, bigger, the same way, and replaces the old one when the scan
// ends. A filter lives as long as the database: goka's storage of the
// partition is made anew at every rebalance, the rows are not.

// keyFilterMin is the fewest keys a filter is sized for (160 KiB at 1 %);
// a DB's filterMin, which tests lower.
const keyFilterMin = 1 << 17

// keyFilterFP is the false-positive rate a filter is sized for.
const keyFilterFP = 0.01

// keyFilterScanChunk is how many keys a scan adds per lock.
const keyFilterScanChunk = 1024

type keyFilter struct {
	mu sync.Mutex
	// cur answers once ready; n counts the distinct keys added to it
	// (a key taken for one already added is not counted), capacity is
	// what it was sized for.
	cur      *bloom.BloomFilter
	n        uint
	capacity uint
	ready    bool
	// next is a bigger filter being filled by a scan; writes add to it
	// too.
	next     *bloom.BloomFilter
	nextN    uint
	building bool
}

// add records that key's row is in the database.
func (k *keyFilter) add(keys ...string) (grow bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, key := range keys {
		if k.cur != nil && !k.cur.TestOrAddString(key) {
			k.n++
		}
		if k.next != nil && !k.next.TestOrAddString(key) {
			k.nextN++
		}
	}
	return k.growLocked()
}

// growLocked says a bigger filter must be built, and marks it begun.
func (k *keyFilter) growLocked() bool {
	if !k.ready || k.building || k.n <= k.capacity {
		return false
	}
	k.building = true
	return true
}

// mayHold says the database may hold key's row; false: it does not.
func (k *keyFilter) mayHold(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return !k.ready || k.cur.TestString(key)
}

// keyFilter returns partition p's filter, made (and its scan begun) at
// the first call, which must come before the partition's first write.
func (db *DB) keyFilter(p int32) *keyFilter {
	db.mu.Lock()
	defer db.mu.Unlock()
	if k := db.filters[p]; k != nil {
		return k
	}
	k := &keyFilter{building: true}
	db.filters[p] = k
	db.scanKeysLocked(p, k, 0)
	return k
}

// addKeys adds keys to p's filter, and starts a bigger one if it is full.
// It may be called with a partition's lock held.
func (db *DB) addKeys(p int32, k *keyFilter, keys ...string) {
	if k.add(keys...) {
		go db.growKeys(p, k)
	}
}

// growKeys builds a filter for four times the keys p's has now.
func (db *DB) growKeys(p int32, k *keyFilter) {
	k.mu.Lock()
	n := k.n
	k.mu.Unlock()
	db.mu.Lock()
	defer db.mu.Unlock()
	db.scanKeysLocked(p, k, 4*n)
}

// scanKeysLocked builds a filter for capacity keys from partition p's
// rows, in the background; it replaces k's when the scan ends. db.mu is
// held, so that Close does not wait before the scan is counted.
func (db *DB) scanKeysLocked(p int32, k *keyFilter, capacity uint) {
	select {
	case <-db.stop:
		return // closing: the filter is not needed
	default:
	}
	capacity = max(capacity, db.filterMin)
	f := bloom.NewWithEstimates(capacity, keyFilterFP)
	k.mu.Lock()
	first := k.cur == nil
	if first {
		k.cur, k.capacity = f, capacity
	} else {
		k.next, k.nextN = f, 0
	}
	k.mu.Unlock()
	db.scans.Add(1)
	go func() {
		defer db.scans.Done()
		// The iterator is made after the filter is in place: a row
		// committed before it is in the scan, one committed after it is
		// added by its write.
		n, err := db.scanKeys(p, k, f)
		k.mu.Lock()
		defer k.mu.Unlock()
		k.building = false
		if errors.Is(err, errClosed) {
			return
		}
		if err != nil {
			if first {
				k.cur = nil // never ready: every key is looked up
			} else {
				// Tried again when the keys pass twice as many.
				k.next, k.capacity = nil, 2*k.n
			}
			db.opts.Logger.Warn("scheduler table store: the scan of a partition's row keys failed; reads of rows it does not hold look them up (slower, not wrong)", "partition", p, "err", err)
			return
		}
		if first {
			k.n += n
			k.ready = true
		} else {
			k.cur, k.n, k.capacity, k.next = f, k.nextN+n, capacity, nil
		}
		if k.growLocked() {
			go db.growKeys(p, k) // takes db.mu, which comes before k.mu
		}
	}()
}

// scanKeys adds the key of every row of partition p to f, and counts
// those it had not seen; errClosed if the database closes first.
func (db *DB) scanKeys(p int32, k *keyFilter, f *bloom.BloomFilter) (uint, error) {
	lo := prefix(kindRow, p, 0)
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	if err != nil {
		return 0, err
	}
	var n uint
	chunk := make([]string, 0, keyFilterScanChunk)
	add := func() {
		k.mu.Lock()
		for _, key := range chunk {
			if !f.TestOrAddString(key) {
				n++
			}
		}
		k.mu.Unlock()
		chunk = chunk[:0]
	}
	for it.First(); it.Valid(); it.Next() {
		chunk = append(chunk, string(it.Key()[len(lo):]))
		if len(chunk) < keyFilterScanChunk {
			continue
		}
		add()
		select {
		case <-db.stop:
			_ = it.Close()
			return n, errClosed
		default:
		}
	}
	add()
	if err := it.Error(); err != nil {
		_ = it.Close()
		return n, err
	}
	return n, it.Close()
}
