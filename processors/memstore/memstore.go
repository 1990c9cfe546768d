// Package memstore is an in-memory goka storage that stays fast with
// millions of keys.
//
// goka's own storage.NewMemory keeps a sorted slice of keys and re-sorts
// it on every insert (and scans it on every delete), so loading a
// partition with n rows costs O(n²): at 100k jobs the scheduler spent half
// its CPU sorting. Here the key order lives in a B-tree beside the map.
package memstore

import (
	"errors"
	"sort"
	"sync"

	"github.com/google/btree"
	"github.com/lovoo/goka/storage"
)

// Builder builds a fresh in-memory storage per topic partition.
func Builder() storage.Builder {
	return func(string, int32) (storage.Storage, error) { return New(), nil }
}

// Store implements goka's storage.Storage.
type Store struct {
	mu        sync.RWMutex
	values    map[string][]byte
	keys      *btree.BTreeG[string]
	offset    int64
	hasOffset bool
}

// New returns an empty store.
func New() *Store {
	return &Store{
		values: make(map[string][]byte),
		keys:   btree.NewG(32, func(a, b string) bool { return a < b }),
	}
}

// Open implements storage.Storage.
func (s *Store) Open() error { return nil }

// Close implements storage.Storage.
func (s *Store) Close() error { return nil }

// MarkRecovered implements storage.Storage.
func (s *Store) MarkRecovered() error { return nil }

// Has implements storage.Storage.
func (s *Store) Has(key string) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.values[key]
	return ok, nil
}

// Get implements storage.Storage.
func (s *Store) Get(key string) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.values[key], nil
}

// Set implements storage.Storage.
func (s *Store) Set(key string, value []byte) error {
	if value == nil {
		return errors.New("memstore: cannot write nil value")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.values[key]; !ok {
		s.keys.ReplaceOrInsert(key)
	}
	s.values[key] = value
	return nil
}

// Delete implements storage.Storage.
func (s *Store) Delete(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.values[key]; ok {
		delete(s.values, key)
		s.keys.Delete(key)
	}
	return nil
}

// GetOffset implements storage.Storage.
func (s *Store) GetOffset(def int64) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.hasOffset {
		return def, nil
	}
	return s.offset, nil
}

// SetOffset implements storage.Storage.
func (s *Store) SetOffset(offset int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset, s.hasOffset = offset, true
	return nil
}

// Len is the number of keys.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.values)
}

// Iterator implements storage.Storage: it iterates a snapshot of the keys
// taken now, reading each value when it is reached.
func (s *Store) Iterator() (storage.Iterator, error) {
	return s.IteratorWithRange(nil, nil)
}

// IteratorWithRange implements storage.Storage: keys in [start, limit);
// nil or empty bounds are open.
func (s *Store) IteratorWithRange(start, limit []byte) (storage.Iterator, error) {
	s.mu.RLock()
	keys := make([]string, 0, s.keys.Len())
	visit := func(k string) bool {
		if len(limit) > 0 && k >= string(limit) {
			return false
		}
		keys = append(keys, k)
		return true
	}
	if len(start) > 0 {
		s.keys.AscendGreaterOrEqual(string(start), visit)
	} else {
		s.keys.Ascend(visit)
	}
	s.mu.RUnlock()
	return &iterator{s: s, keys: keys, i: -1}, nil
}

type iterator struct {
	s    *Store
	keys []string
	i    int
}

func (it *iterator) Next() bool {
	it.i++
	return it.i < len(it.keys)
}

func (it *iterator) Err() error { return nil }

func (it *iterator) Key() []byte {
	if it.i < 0 || it.i >= len(it.keys) {
		return nil
	}
	return []byte(it.keys[it.i])
}

func (it *iterator) Value() ([]byte, error) {
	if it.i < 0 || it.i >= len(it.keys) {
		return nil, nil
	}
	v, _ := it.s.Get(it.keys[it.i])
	return v, nil
}

func (it *iterator) Release() { it.keys = nil }

// Seek moves to the first key >= key, like LevelDB's iterator: Key and
// Value then return that pair.
func (it *iterator) Seek(key []byte) bool {
	it.i = sort.SearchStrings(it.keys, string(key))
	return it.i < len(it.keys)
}
