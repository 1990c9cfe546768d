// Package diskstore owns the scheduler's on-disk table storage: goka
// storage.Storage on LevelDB that keeps the rows on disk (so millions of
// pending jobs cost disk, not memory) and applies writes in batches. One
// database holds every partition, each under its own key prefix.
//
// goka's own LevelDB storage writes every Set, and every SetOffset after
// it, as a LevelDB write of its own: a journal write(2) each, two per table
// update. Here writes go to an in-memory buffer that every read consults
// first, and the buffer is written to LevelDB as one batch when it holds
// MaxPending entries, when the storage is iterated, recovered or closed.
// The offset is kept in memory and written with each batch.
//
// The buffer is lost in a crash. That is safe only because the scheduler
// never trusts its local state after an unclean stop: processors/scheduler
// (LocalState) wipes it and recovers the table from Kafka. A clean Close
// writes everything.
package diskstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/lovoo/goka/storage"
	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/filter"
	ldbiter "github.com/syndtr/goleveldb/leveldb/iterator"
	"github.com/syndtr/goleveldb/leveldb/opt"
	"github.com/syndtr/goleveldb/leveldb/util"
)

// offsetKey is where goka's LevelDB storage keeps the partition's offset;
// the same key keeps state directories written by either readable.
const offsetKey = "__offset"

// Options tune the database.
type Options struct {
	// MaxPending is how many buffered writes of a partition trigger a
	// batch. Default 1024.
	MaxPending int
	// WriteBuffer is LevelDB's memtable size. Default 8 MiB.
	WriteBuffer int
	// BlockCache is LevelDB's block cache. Default 8 MiB: the scheduler
	// reads a row when its command or timer comes, mostly rows written
	// recently (still in the memtable or the newest tables).
	BlockCache int
}

func (o *Options) defaults() {
	if o.MaxPending <= 0 {
		o.MaxPending = 1024
	}
	if o.WriteBuffer <= 0 {
		o.WriteBuffer = 8 << 20
	}
	if o.BlockCache <= 0 {
		o.BlockCache = 8 << 20
	}
}

// DB is one LevelDB database holding every partition of a table, each
// under its own key prefix: one memtable, block cache and journal for the
// process instead of one per partition (twelve partitions cost twelve
// memtables before).
type DB struct {
	db  *leveldb.DB
	max int
}

// OpenDB opens (or creates) the database in path.
func OpenDB(path string, o Options) (*DB, error) {
	o.defaults()
	db, err := leveldb.OpenFile(path, &opt.Options{
		WriteBuffer:            o.WriteBuffer,
		BlockCacheCapacity:     o.BlockCache,
		OpenFilesCacheCapacity: 64,
		// Most reads are for a row of the newest tables (a job fires or
		// is answered soon after it was written); a bloom filter lets a
		// read skip the tables that cannot hold its key.
		Filter: filter.NewBloomFilter(10),
	})
	if err != nil {
		return nil, fmt.Errorf("diskstore: open %s: %w", path, err)
	}
	return &DB{db: db, max: o.MaxPending}, nil
}

// Close closes the database; every Store of it must be closed first.
func (d *DB) Close() error { return d.db.Close() }

// Builder returns goka's storage builder: a Store per table partition.
func (d *DB) Builder() storage.Builder {
	return func(topic string, partition int32) (storage.Storage, error) {
		return d.Store(topic, partition), nil
	}
}

// Store returns the store of one table partition.
func (d *DB) Store(topic string, partition int32) *Store {
	prefix := make([]byte, 0, len(topic)+6)
	prefix = append(prefix, topic...)
	prefix = append(prefix, 0)
	prefix = binary.BigEndian.AppendUint32(prefix, uint32(partition))
	prefix = append(prefix, 0)
	return &Store{db: d.db, prefix: prefix, max: d.max, pending: map[string]entry{}, offset: -1}
}

// Store is one table partition. One writer (goka's partition goroutine),
// any number of readers, SetOffset from goka's producer callbacks.
type Store struct {
	db     *leveldb.DB
	prefix []byte
	max    int

	mu      sync.RWMutex
	pending map[string]entry
	// offset is the last SetOffset, -1 when none since open; written with
	// every batch.
	offset int64
	dirty  bool // offset changed since the last batch
	closed bool
	batch  leveldb.Batch
}

// dbKey is key under the partition's prefix.
func (s *Store) dbKey(key string) []byte {
	b := make([]byte, 0, len(s.prefix)+len(key))
	return append(append(b, s.prefix...), key...)
}

// entry is a buffered write; del marks a delete.
type entry struct {
	value []byte
	del   bool
}

var errClosed = errors.New("diskstore: closed")

// Open implements storage.Storage.
func (s *Store) Open() error { return nil }

// Has implements storage.Storage.
func (s *Store) Has(key string) (bool, error) {
	v, err := s.Get(key)
	return v != nil, err
}

// Get implements storage.Storage. The returned slice must not be changed.
func (s *Store) Get(key string) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, errClosed
	}
	if e, ok := s.pending[key]; ok {
		if e.del {
			return nil, nil
		}
		return e.value, nil
	}
	v, err := s.db.Get(s.dbKey(key), nil)
	if errors.Is(err, leveldb.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("diskstore: get %q: %w", key, err)
	}
	return v, nil
}

// Set implements storage.Storage. value is kept, not copied: goka hands
// over a freshly encoded value (or a record's) and never changes it.
func (s *Store) Set(key string, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	return s.put(key, entry{value: value})
}

// Delete implements storage.Storage.
func (s *Store) Delete(key string) error { return s.put(key, entry{del: true}) }

func (s *Store) put(key string, e entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	s.pending[key] = e
	if len(s.pending) >= s.max {
		return s.flushLocked()
	}
	return nil
}

// GetOffset implements storage.Storage.
func (s *Store) GetOffset(def int64) (int64, error) {
	s.mu.RLock()
	o := s.offset
	s.mu.RUnlock()
	if o >= 0 {
		return o, nil
	}
	v, err := s.Get(offsetKey)
	if err != nil {
		return 0, err
	}
	if v == nil {
		return def, nil
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("diskstore: stored offset %q: %w", v, err)
	}
	return n, nil
}

// SetOffset implements storage.Storage: kept in memory, written with the
// next batch.
func (s *Store) SetOffset(offset int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset, s.dirty = offset, true
	return nil
}

// MarkRecovered implements storage.Storage: the recovered rows and offset
// are written, so an iterator sees them all.
func (s *Store) MarkRecovered() error { return s.Flush() }

// Flush writes the buffered writes and the offset as one batch.
func (s *Store) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	return s.flushLocked()
}

func (s *Store) flushLocked() error {
	if len(s.pending) == 0 && !s.dirty {
		return nil
	}
	b := &s.batch
	b.Reset()
	var key []byte
	for k, e := range s.pending {
		key = append(append(key[:0], s.prefix...), k...)
		if e.del {
			b.Delete(key)
		} else {
			b.Put(key, e.value)
		}
	}
	if s.dirty {
		key = append(append(key[:0], s.prefix...), offsetKey...)
		b.Put(key, strconv.AppendInt(nil, s.offset, 10))
	}
	if err := s.db.Write(b, nil); err != nil {
		return fmt.Errorf("diskstore: write batch: %w", err)
	}
	clear(s.pending)
	s.dirty = false
	return nil
}

// Iterator implements storage.Storage: it writes the buffer first and
// iterates a snapshot, without the offset.
func (s *Store) Iterator() (storage.Iterator, error) {
	return s.IteratorWithRange(nil, nil)
}

// IteratorWithRange implements storage.Storage: [start, limit), or the keys
// with prefix start when limit is empty (goka's LevelDB storage does the
// same).
func (s *Store) IteratorWithRange(start, limit []byte) (storage.Iterator, error) {
	if err := s.Flush(); err != nil {
		return nil, err
	}
	var r *util.Range
	switch {
	case len(limit) > 0:
		r = &util.Range{Start: s.dbKey(string(start)), Limit: s.dbKey(string(limit))}
	default:
		r = util.BytesPrefix(s.dbKey(string(start)))
	}
	return &iterator{it: s.db.NewIterator(r, &opt.ReadOptions{DontFillCache: true}), prefix: s.prefix}, nil
}

// Close implements storage.Storage: everything buffered is written (the
// database stays open for the other partitions).
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	err := s.flushLocked()
	s.closed = true
	return err
}

// iterator strips the partition's prefix and skips the offset key.
type iterator struct {
	it     ldbiter.Iterator
	prefix []byte
}

func (i *iterator) Next() bool {
	for i.it.Next() {
		if string(i.Key()) != offsetKey {
			return true
		}
	}
	return false
}

func (i *iterator) Err() error             { return i.it.Error() }
func (i *iterator) Key() []byte            { return i.it.Key()[len(i.prefix):] }
func (i *iterator) Value() ([]byte, error) { return i.it.Value(), nil }
func (i *iterator) Release()               { i.it.Release() }
func (i *iterator) Seek(key []byte) bool {
	k := make([]byte, 0, len(i.prefix)+len(key))
	return i.it.Seek(append(append(k, i.prefix...), key...))
}
