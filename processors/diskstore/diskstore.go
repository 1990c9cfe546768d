// Package diskstore owns the scheduler's on-disk table storage: goka
// storage.Storage for every partition of the table, in one log-structured
// store (the Bitcask design): rows are appended to segment files, an
// in-memory index maps each key to its latest record, a read is one pread.
//
// Why not LevelDB: the scheduler reads a row when its timer or its answer
// comes, in time order, which is random in key order, and rewrites it at
// once. With a million rows, goleveldb spent 35 µs per read and rewrite
// (block reads and compaction, measured on these machines); here a read is
// one pread of the record and a write an append.
//
// Memory: the index holds a 128-bit hash of each key and where its record
// is (about 40 bytes a row, no pointers for the collector to scan); keys
// and values live on disk only.
//
// Writes go to a per-partition buffer that reads consult first, and are
// appended as one write when it holds MaxPending entries, when the store is
// iterated, recovered or closed. Deleted and replaced records are garbage;
// a background pass rewrites the live records of a sealed segment once its
// garbage passes GarbageRatio, then deletes the file.
//
// Durability: the buffer and the index live in memory; Close writes the
// index file, and a database opened without one (the process died) starts
// empty. That is safe only because the scheduler never trusts its local
// state after an unclean stop: processors/scheduler (LocalState) wipes it
// and recovers the table from Kafka.
package diskstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/lovoo/goka/storage"
)

// Options tune the database.
type Options struct {
	// MaxPending is how many buffered writes of a partition trigger an
	// append. Default 1024.
	MaxPending int
	// SegmentSize is the size at which the active segment is sealed and a
	// new one started. Default 64 MiB.
	SegmentSize int64
	// GarbageRatio is the share of a sealed segment's bytes that must be
	// garbage before its live records are rewritten and the file deleted.
	// Default 0.5.
	GarbageRatio float64
}

func (o *Options) defaults() {
	if o.MaxPending <= 0 {
		o.MaxPending = 1024
	}
	if o.SegmentSize <= 0 {
		o.SegmentSize = 64 << 20
	}
	if o.GarbageRatio <= 0 || o.GarbageRatio >= 1 {
		o.GarbageRatio = 0.5
	}
}

// Record layout (little endian):
//
//	crc32c   4  of everything after it
//	store    2  the store (table partition) the record belongs to
//	keyLen   2
//	valueLen 4
//	key, value
const headerLen = 12

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// KeyHash is a key's 128-bit hash, xxHash64 and FNV-1a 64 side by side:
// the index keys on it (at ten million keys the chance of any collision is
// below 10^-24), and a read checks the record's key all the same. It holds
// no pointers, so maps keyed by it cost the garbage collector nothing.
type KeyHash [2]uint64

// hkey is the index's name for it.
type hkey = KeyHash

// HashKey returns key's KeyHash.
func HashKey(key string) KeyHash { return hashKey(key) }

func hashKey(key string) hkey {
	f := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		f ^= uint64(key[i])
		f *= 1099511628211
	}
	return hkey{xxhash.Sum64String(key), f}
}

// loc is where a record is.
type loc struct {
	seg  uint32
	off  uint32
	size uint32 // the whole record
}

type segment struct {
	id   uint32
	f    *os.File
	size int64 // bytes written
	live int64 // bytes of records the index points at
}

// keydir is one store's index.
type keydir struct {
	id     uint16
	name   string
	mu     sync.RWMutex
	m      map[hkey]loc
	offset int64 // the partition's offset as of Close; -1 none
}

// DB is the database of one table (every partition).
type DB struct {
	dir string
	o   Options

	// mu orders appends and guards segs (with segsMu), active and dirs. A
	// keydir's own mu guards its map. Lock order: gcMu, mu, segsMu,
	// keydir.mu.
	mu sync.Mutex
	// segsMu lets readers find a segment without waiting for an append:
	// changing segs takes mu and segsMu.
	segsMu sync.RWMutex
	segs   map[uint32]*segment
	active *segment
	dirs   map[string]*keydir
	byID   map[uint16]*keydir
	closed bool
	buf    []byte // records of one append, reused (mu)

	// gcMu keeps segment files from being deleted under an iterator.
	gcMu   sync.RWMutex
	gcKick chan struct{}
	gcStop chan struct{}
	gcDone chan struct{}
}

const indexFile = "index"

// OpenDB opens the database in dir, from the index the last Close wrote.
// Without one (the last process did not close it) the directory's files
// are removed and the database starts empty.
func OpenDB(dir string, o Options) (*DB, error) {
	o.defaults()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("diskstore: %w", err)
	}
	d := &DB{dir: dir, o: o, segs: map[uint32]*segment{}, dirs: map[string]*keydir{}, byID: map[uint16]*keydir{},
		gcKick: make(chan struct{}, 1), gcStop: make(chan struct{}), gcDone: make(chan struct{})}
	next, err := d.load()
	if err != nil {
		d.closeFiles()
		return nil, err
	}
	if err := d.newSegment(next); err != nil {
		d.closeFiles()
		return nil, err
	}
	go d.gcLoop()
	return d, nil
}

// load reads and removes the index, opens the segments it names and removes
// every other file; it returns the next segment id.
func (d *DB) load() (uint32, error) {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return 0, fmt.Errorf("diskstore: %w", err)
	}
	keep := map[string]bool{}
	var next uint32 = 1
	raw, err := os.ReadFile(filepath.Join(d.dir, indexFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return 0, fmt.Errorf("diskstore: %w", err)
	default:
		if next, err = d.decodeIndex(raw); err != nil {
			return 0, fmt.Errorf("diskstore: index of %s: %w", d.dir, err)
		}
		for id := range d.segs {
			keep[segName(id)] = true
		}
	}
	// The index describes the files as they are now; once anything is
	// written it is stale, so it goes (Close writes a new one).
	for _, e := range entries {
		if !keep[e.Name()] {
			if err := os.RemoveAll(filepath.Join(d.dir, e.Name())); err != nil {
				return 0, fmt.Errorf("diskstore: %w", err)
			}
		}
	}
	return next, nil
}

func segName(id uint32) string { return fmt.Sprintf("seg-%08d.log", id) }

func (d *DB) newSegment(id uint32) error {
	f, err := os.OpenFile(filepath.Join(d.dir, segName(id)), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("diskstore: %w", err)
	}
	s := &segment{id: id, f: f}
	d.segsMu.Lock()
	d.segs[id] = s
	d.segsMu.Unlock()
	d.active = s
	return nil
}

// Builder returns goka's storage builder: a Store per table partition.
func (d *DB) Builder() storage.Builder {
	return func(topic string, partition int32) (storage.Storage, error) {
		return d.Store(topic, partition)
	}
}

// Store returns the store of one table partition. Its index outlives the
// Store (a partition closed at a rebalance and opened again finds its rows
// and offset).
func (d *DB) Store(topic string, partition int32) (*Store, error) {
	name := topic + "/" + strconv.Itoa(int(partition))
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosed
	}
	kd := d.dirs[name]
	if kd == nil {
		if len(d.byID) >= 1<<16 {
			return nil, errors.New("diskstore: too many partitions")
		}
		kd = &keydir{id: uint16(len(d.byID)), name: name, m: map[hkey]loc{}, offset: -1}
		d.dirs[name], d.byID[kd.id] = kd, kd
	}
	return &Store{db: d, kd: kd, max: d.o.MaxPending, pending: map[string]entry{}, offset: kd.offset}, nil
}

// append writes the records of entries as one write to the active segment
// and points kd's index at them; a deleted entry only leaves the index.
func (d *DB) append(kd *keydir, entries map[string]entry) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errClosed
	}
	type placed struct {
		h   hkey
		l   loc
		del bool
	}
	buf := d.buf[:0]
	defer func() {
		if cap(buf) <= 4<<20 {
			d.buf = buf[:0] // keep it for the next append, unless a huge one
		}
	}()
	var out []placed
	for k, e := range entries {
		h := hashKey(k)
		if e.del {
			out = append(out, placed{h: h, del: true})
			continue
		}
		if len(k) > 1<<16-1 || len(e.value) > 1<<31 {
			return fmt.Errorf("diskstore: record too large (key %d bytes, value %d)", len(k), len(e.value))
		}
		start := len(buf)
		buf = appendRecord(buf, kd.id, k, e.value)
		out = append(out, placed{h: h, l: loc{seg: d.active.id, off: uint32(d.active.size) + uint32(start), size: uint32(len(buf) - start)}})
	}
	if len(buf) > 0 {
		if d.active.size+int64(len(buf)) > 1<<32-1 {
			return errors.New("diskstore: segment over 4 GiB")
		}
		if _, err := d.active.f.WriteAt(buf, d.active.size); err != nil {
			return fmt.Errorf("diskstore: append: %w", err)
		}
		d.active.size += int64(len(buf))
		d.active.live += int64(len(buf))
	}
	kd.mu.Lock()
	for _, p := range out {
		if old, ok := kd.m[p.h]; ok {
			if s := d.segs[old.seg]; s != nil {
				s.live -= int64(old.size)
			}
		}
		if p.del {
			delete(kd.m, p.h)
		} else {
			kd.m[p.h] = p.l
		}
	}
	kd.mu.Unlock()
	if d.active.size >= d.o.SegmentSize {
		if err := d.newSegment(d.active.id + 1); err != nil {
			return err
		}
	}
	d.kickGC()
	return nil
}

func appendRecord(buf []byte, store uint16, key string, value []byte) []byte {
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0)
	buf = binary.LittleEndian.AppendUint16(buf, store)
	buf = binary.LittleEndian.AppendUint16(buf, uint16(len(key)))
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(value)))
	buf = append(buf, key...)
	buf = append(buf, value...)
	binary.LittleEndian.PutUint32(buf[start:], crc32.Checksum(buf[start+4:], crcTable))
	return buf
}

// parseRecord splits a record read from disk.
func parseRecord(rec []byte) (store uint16, key, value []byte, err error) {
	if len(rec) < headerLen {
		return 0, nil, nil, errors.New("diskstore: short record")
	}
	if crc32.Checksum(rec[4:], crcTable) != binary.LittleEndian.Uint32(rec) {
		return 0, nil, nil, errors.New("diskstore: record checksum mismatch")
	}
	store = binary.LittleEndian.Uint16(rec[4:])
	kl := int(binary.LittleEndian.Uint16(rec[6:]))
	vl := int(binary.LittleEndian.Uint32(rec[8:]))
	if headerLen+kl+vl != len(rec) {
		return 0, nil, nil, errors.New("diskstore: record length mismatch")
	}
	return store, rec[headerLen : headerLen+kl], rec[headerLen+kl:], nil
}

// read returns the value of the record at l, checking it holds key. The
// caller holds gcMu (read) since it looked l up.
func (d *DB) read(l loc, key string) ([]byte, error) {
	d.segsMu.RLock()
	s := d.segs[l.seg]
	d.segsMu.RUnlock()
	if s == nil {
		return nil, fmt.Errorf("diskstore: segment %d is gone", l.seg)
	}
	rec := make([]byte, l.size)
	if _, err := s.f.ReadAt(rec, int64(l.off)); err != nil {
		return nil, fmt.Errorf("diskstore: read: %w", err)
	}
	_, k, v, err := parseRecord(rec)
	if err != nil {
		return nil, err
	}
	if string(k) != key {
		return nil, fmt.Errorf("diskstore: key %q found %q (hash collision)", key, k)
	}
	return v, nil
}

// lookup returns where key's record is.
func (kd *keydir) lookup(key string) (loc, bool) {
	kd.mu.RLock()
	defer kd.mu.RUnlock()
	l, ok := kd.m[hashKey(key)]
	return l, ok
}

func (d *DB) kickGC() {
	select {
	case d.gcKick <- struct{}{}:
	default:
	}
}

// gcLoop rewrites the live records of sealed segments whose garbage passed
// GarbageRatio, one segment at a time, after appends.
func (d *DB) gcLoop() {
	defer close(d.gcDone)
	for {
		select {
		case <-d.gcStop:
			return
		case <-d.gcKick:
		}
		for {
			s := d.garbageSegment()
			if s == nil {
				break
			}
			if err := d.rewrite(s); err != nil {
				// A failed pass leaves the segment as it is: nothing is
				// lost, only space; the next append tries again.
				break
			}
			select {
			case <-d.gcStop:
				return
			default:
			}
		}
	}
}

// garbageSegment picks the sealed segment with the most garbage past the
// ratio, nil if none.
func (d *DB) garbageSegment() *segment {
	d.mu.Lock()
	defer d.mu.Unlock()
	var best *segment
	for _, s := range d.segs {
		if s == d.active || s.size == 0 || float64(s.size-s.live) < d.o.GarbageRatio*float64(s.size) {
			continue
		}
		if best == nil || s.size-s.live > best.size-best.live {
			best = s
		}
	}
	return best
}

// rewrite appends the live records of s again and deletes it. A record is
// moved only if the index still points at it when the copy is placed, so a
// write that lands meanwhile wins.
func (d *DB) rewrite(s *segment) error {
	type move struct {
		kd  *keydir
		h   hkey
		old loc
	}
	var moves []move
	// The live records, copied in order: usually a small share of the
	// segment (it is mostly garbage by now).
	var buf []byte
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, s.size), 1<<20)
	var hdr [headerLen]byte
	rec := make([]byte, 0, 4<<10)
	for off := int64(0); off < s.size; {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return err
		}
		kl := int(binary.LittleEndian.Uint16(hdr[6:]))
		vl := int(binary.LittleEndian.Uint32(hdr[8:]))
		n := headerLen + kl + vl
		if cap(rec) < n {
			rec = make([]byte, n)
		}
		rec = rec[:n]
		copy(rec, hdr[:])
		if _, err := io.ReadFull(r, rec[headerLen:]); err != nil {
			return err
		}
		store, key, _, err := parseRecord(rec)
		if err != nil {
			return err
		}
		d.mu.Lock()
		kd := d.byID[store]
		d.mu.Unlock()
		if kd != nil {
			h := hashKey(string(key))
			l := loc{seg: s.id, off: uint32(off), size: uint32(n)}
			kd.mu.RLock()
			cur, ok := kd.m[h]
			kd.mu.RUnlock()
			if ok && cur == l {
				moves = append(moves, move{kd: kd, h: h, old: l})
				buf = append(buf, rec...)
			}
		}
		off += int64(n)
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return errClosed
	}
	at := d.active.size
	if at+int64(len(buf)) > 1<<32-1 {
		d.mu.Unlock()
		return errors.New("diskstore: segment over 4 GiB")
	}
	if len(buf) > 0 {
		if _, err := d.active.f.WriteAt(buf, at); err != nil {
			d.mu.Unlock()
			return err
		}
		d.active.size += int64(len(buf))
	}
	for _, m := range moves {
		nl := loc{seg: d.active.id, off: uint32(at), size: m.old.size}
		at += int64(m.old.size)
		m.kd.mu.Lock()
		if cur, ok := m.kd.m[m.h]; ok && cur == m.old {
			m.kd.m[m.h] = nl
			d.active.live += int64(m.old.size)
		}
		m.kd.mu.Unlock()
	}
	if d.active.size >= d.o.SegmentSize {
		if err := d.newSegment(d.active.id + 1); err != nil {
			d.mu.Unlock()
			return err
		}
	}
	d.mu.Unlock()
	// No reader or iterator that looked a location of s up may still
	// read it when it goes.
	d.gcMu.Lock()
	defer d.gcMu.Unlock()
	d.mu.Lock()
	d.segsMu.Lock()
	delete(d.segs, s.id)
	d.segsMu.Unlock()
	d.mu.Unlock()
	_ = s.f.Close()
	return os.Remove(filepath.Join(d.dir, segName(s.id)))
}

// Close writes the index (after every Store was closed) and closes the
// files. Without a Close, the next OpenDB starts empty.
func (d *DB) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	close(d.gcStop)
	<-d.gcDone
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, s := range d.segs {
		errs = append(errs, s.f.Sync())
	}
	errs = append(errs, d.writeIndex())
	d.closeFiles()
	return errors.Join(errs...)
}

func (d *DB) closeFiles() {
	for _, s := range d.segs {
		_ = s.f.Close()
	}
}

// Index file: "CHIMEDS1", next segment id, the segments (id, size, live),
// then each store (id, name, offset, entry count, entries of hash and loc).
const indexMagic = "CHIMEDS1"

func (d *DB) writeIndex() error {
	tmp := filepath.Join(d.dir, indexFile+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var b [24]byte
	_, _ = w.WriteString(indexMagic)
	put32 := func(v uint32) { binary.LittleEndian.PutUint32(b[:4], v); _, _ = w.Write(b[:4]) }
	put64 := func(v uint64) { binary.LittleEndian.PutUint64(b[:8], v); _, _ = w.Write(b[:8]) }
	put32(d.active.id + 1)
	put32(uint32(len(d.segs)))
	for _, s := range d.segs {
		put32(s.id)
		put64(uint64(s.size))
		put64(uint64(s.live))
	}
	put32(uint32(len(d.dirs)))
	for _, kd := range d.dirs {
		kd.mu.RLock()
		put32(uint32(kd.id))
		put32(uint32(len(kd.name)))
		_, _ = w.WriteString(kd.name)
		put64(uint64(kd.offset))
		put64(uint64(len(kd.m)))
		for h, l := range kd.m {
			put64(h[0])
			put64(h[1])
			put32(l.seg)
			put32(l.off)
			put32(l.size)
		}
		kd.mu.RUnlock()
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(d.dir, indexFile))
}

func (d *DB) decodeIndex(raw []byte) (uint32, error) {
	r := &reader{b: raw}
	if string(r.next(len(indexMagic))) != indexMagic {
		return 0, errors.New("not a diskstore index")
	}
	next := r.u32()
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		id, size, live := r.u32(), int64(r.u64()), int64(r.u64())
		if r.err != nil {
			break
		}
		f, err := os.OpenFile(filepath.Join(d.dir, segName(id)), os.O_RDWR, 0)
		if err != nil {
			return 0, err
		}
		d.segs[id] = &segment{id: id, f: f, size: size, live: live}
	}
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		id := uint16(r.u32())
		name := string(r.next(int(r.u32())))
		offset := int64(r.u64())
		count := r.u64()
		if r.err != nil || count > uint64(len(raw)) {
			return 0, errors.New("truncated")
		}
		kd := &keydir{id: id, name: name, m: make(map[hkey]loc, count), offset: offset}
		for ; count > 0 && r.err == nil; count-- {
			h := hkey{r.u64(), r.u64()}
			kd.m[h] = loc{seg: r.u32(), off: r.u32(), size: r.u32()}
		}
		d.dirs[name], d.byID[id] = kd, kd
	}
	if r.err != nil {
		return 0, r.err
	}
	return next, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) next(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.err = errors.New("truncated")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u32() uint32 {
	if b := r.next(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.next(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// Store is one table partition. One writer (goka's partition goroutine),
// any number of readers, SetOffset from goka's producer callbacks.
type Store struct {
	db  *DB
	kd  *keydir
	max int

	mu      sync.RWMutex
	pending map[string]entry
	// offset is the last SetOffset, -1 when none; it reaches the keydir
	// (and so the index file) at flush.
	offset int64
	closed bool
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
	if s.closed {
		s.mu.RUnlock()
		return nil, errClosed
	}
	if e, ok := s.pending[key]; ok {
		s.mu.RUnlock()
		if e.del {
			return nil, nil
		}
		return e.value, nil
	}
	s.mu.RUnlock()
	// The segment l names must not be rewritten away before the read.
	s.db.gcMu.RLock()
	defer s.db.gcMu.RUnlock()
	l, ok := s.kd.lookup(key)
	if !ok {
		return nil, nil
	}
	return s.db.read(l, key)
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
	defer s.mu.RUnlock()
	if s.offset >= 0 {
		return s.offset, nil
	}
	return def, nil
}

// SetOffset implements storage.Storage.
func (s *Store) SetOffset(offset int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset = offset
	return nil
}

// MarkRecovered implements storage.Storage: the recovered rows are
// appended, so an iterator sees them all.
func (s *Store) MarkRecovered() error { return s.Flush() }

// Flush appends the buffered writes.
func (s *Store) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	return s.flushLocked()
}

func (s *Store) flushLocked() error {
	if len(s.pending) > 0 {
		if err := s.db.append(s.kd, s.pending); err != nil {
			return err
		}
		clear(s.pending)
	}
	s.kd.mu.Lock()
	s.kd.offset = s.offset
	s.kd.mu.Unlock()
	return nil
}

// Close implements storage.Storage: everything buffered is appended (the
// database stays open for the other partitions, and keeps this one's
// index).
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

// Iterator implements storage.Storage: it appends the buffer first and
// walks the partition's rows in the order they lie on disk (not in key
// order), reading the segments sequentially.
func (s *Store) Iterator() (storage.Iterator, error) {
	return s.IteratorWithRange(nil, nil)
}

// IteratorWithRange implements storage.Storage: the rows with keys in
// [start, limit), or with prefix start when limit is empty, in disk order.
func (s *Store) IteratorWithRange(start, limit []byte) (storage.Iterator, error) {
	if err := s.Flush(); err != nil {
		return nil, err
	}
	s.kd.mu.RLock()
	locs := make([]loc, 0, len(s.kd.m))
	for _, l := range s.kd.m {
		locs = append(locs, l)
	}
	s.kd.mu.RUnlock()
	slices.SortFunc(locs, func(a, b loc) int {
		if a.seg != b.seg {
			return int(a.seg) - int(b.seg)
		}
		return int(int64(a.off) - int64(b.off))
	})
	s.db.gcMu.RLock()
	it := &iterator{db: s.db, locs: locs, start: string(start), limit: string(limit), prefix: len(limit) == 0}
	return it, nil
}

// iterator reads records through a chunk buffer: sorted locations make it
// one sequential pass over each segment.
type iterator struct {
	db           *DB
	locs         []loc
	i            int
	start, limit string
	prefix       bool
	key, value   []byte
	err          error
	chunk        []byte
	chunkSeg     uint32
	chunkOff     int64
	released     bool
	readBuf      []byte
}

const iterChunk = 1 << 20

func (it *iterator) Next() bool {
	for it.err == nil && it.i < len(it.locs) {
		l := it.locs[it.i]
		it.i++
		rec, err := it.record(l)
		if err != nil {
			it.err = err
			return false
		}
		_, k, v, err := parseRecord(rec)
		if err != nil {
			it.err = err
			return false
		}
		if !it.inRange(string(k)) {
			continue
		}
		it.key, it.value = k, v
		return true
	}
	return false
}

func (it *iterator) inRange(k string) bool {
	if it.prefix {
		return strings.HasPrefix(k, it.start)
	}
	return k >= it.start && k < it.limit
}

// record returns the bytes of the record at l from the current chunk,
// reading a new chunk when it is not in it.
func (it *iterator) record(l loc) ([]byte, error) {
	end := int64(l.off) + int64(l.size)
	if it.chunk == nil || l.seg != it.chunkSeg || int64(l.off) < it.chunkOff || end > it.chunkOff+int64(len(it.chunk)) {
		it.db.segsMu.RLock()
		s := it.db.segs[l.seg]
		it.db.segsMu.RUnlock()
		if s == nil {
			return nil, fmt.Errorf("diskstore: segment %d is gone", l.seg)
		}
		n := max(iterChunk, int(l.size))
		if cap(it.readBuf) < n {
			it.readBuf = make([]byte, n)
		}
		buf := it.readBuf[:n]
		m, err := s.f.ReadAt(buf, int64(l.off))
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if m < int(l.size) {
			return nil, fmt.Errorf("diskstore: segment %d ends at %d, record at %d+%d", l.seg, int64(l.off)+int64(m), l.off, l.size)
		}
		it.chunk, it.chunkSeg, it.chunkOff = buf[:m], l.seg, int64(l.off)
	}
	from := int64(l.off) - it.chunkOff
	return it.chunk[from : from+int64(l.size)], nil
}

func (it *iterator) Err() error             { return it.err }
func (it *iterator) Key() []byte            { return it.key }
func (it *iterator) Value() ([]byte, error) { return it.value, nil }

// Release implements storage.Iterator.
func (it *iterator) Release() {
	if !it.released {
		it.released = true
		it.db.gcMu.RUnlock()
	}
}

// Seek implements storage.Iterator. Rows are not kept in key order, so
// Seek is not supported: it reports false. (goka does not seek in a
// processor's own table; the scheduler only iterates whole partitions.)
func (it *iterator) Seek([]byte) bool { return false }
