// Package jobstore owns the scheduler table on disk: every job row of the
// partitions a scheduler process holds, the indexes derived from the rows
// (when each row next needs a tick, which rows hold work of an earlier
// scheduler incarnation, each namespace's jobs newest first and how many
// of them are live), and the changelog offset they stand at, in one Pebble
// database (github.com/cockroachdb/pebble/v2).
//
// A pending job costs disk, not memory: nothing here holds a structure per
// row, so a job due next month costs its row and a few index keys on disk.
// The scheduler keeps in memory only the timers of the next few minutes
// (processors/scheduler, storage.go), which it reads from the time index
// here.
//
// # Rows and the changelog
//
// goka writes a row to its storage (Set) before Kafka has stored the row's
// changelog record and the events emitted with it. Applied at once, the
// local rows would run ahead of Kafka after a kill -9: a row saying "fired"
// whose due event never reached the broker. So a write after recovery is
// held in memory (the overlay: reads see it) until Kafka has stored its
// changelog record (Confirm, called from the processor's producer with the
// record's offset); confirmed writes are applied in the order they were
// made, together with their index changes and the offset of the last of
// them, in one atomic batch. The database therefore always holds the table
// exactly as the changelog is at its stored offset, and a scheduler that
// restarts, after a clean stop or a kill -9, or that is handed back a
// partition it held before, reads only the changelog records after that
// offset (goka's GetOffset). Writes during recovery come from the
// changelog itself and are applied directly, with the offset, in batches.
//
// A database that cannot be opened is wiped and rebuilt from Kafka, and so
// is a partition whose stored offset is older than MaxCheckpointAge: the
// changelog is compacted, and a tombstone older than the topic's
// delete.retention.ms (1 day by default) may be gone, which would leave a
// deleted row behind.
package jobstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/chime-sched/chime/internal/setting"
)

// Options configure a database.
type Options struct {
	// Dir holds the database; empty keeps it in memory (tests, and
	// schedulers that rebuild their table from Kafka at every start).
	Dir string
	// CacheSize bounds Pebble's block cache. Default DefaultCacheSize.
	CacheSize int64
	// MemTableSize is the size of a Pebble memtable. Default
	// DefaultMemTableSize.
	MemTableSize uint64
	// MaxCheckpointAge: a partition whose offset was stored longer ago is
	// rebuilt from Kafka (see the package comment). Default
	// DefaultMaxCheckpointAge.
	MaxCheckpointAge time.Duration
	// FlushInterval is how long confirmed writes may wait to be applied
	// together. Default DefaultFlushInterval.
	FlushInterval time.Duration
	// FlushAfter applies confirmed writes at once when a partition holds
	// this many. Default DefaultFlushAfter.
	FlushAfter int
	// AutoConfirm treats every write as confirmed when it is made: for a
	// processor without a Kafka producer (goka's tester).
	AutoConfirm bool
	Now         func() time.Time
	Logger      *slog.Logger
}

// The defaults of Options' fields; a field left at 0 takes its default, a
// negative one is refused by Open.
const (
	DefaultCacheSize        = 128 << 20
	DefaultMemTableSize     = 32 << 20
	DefaultMaxCheckpointAge = 20 * time.Hour
	DefaultFlushInterval    = 5 * time.Millisecond
	DefaultFlushAfter       = 4096
)

// validate applies the defaults to the options left unset and refuses the
// values the store cannot work with, naming each.
func (o *Options) validate() error {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	const n = "jobstore"
	return errors.Join(
		setting.Positive(n, "CacheSize", &o.CacheSize, DefaultCacheSize),
		setting.Positive(n, "MemTableSize", &o.MemTableSize, DefaultMemTableSize),
		setting.Positive(n, "MaxCheckpointAge", &o.MaxCheckpointAge, DefaultMaxCheckpointAge),
		setting.Positive(n, "FlushInterval", &o.FlushInterval, DefaultFlushInterval),
		setting.Positive(n, "FlushAfter", &o.FlushAfter, DefaultFlushAfter),
	)
}

// DB is the database of every partition a process holds.
type DB struct {
	opts  Options
	pdb   *pebble.DB
	cache *pebble.Cache
	lock  *pebble.Lock

	// replayed counts the changelog records applied during recoveries.
	replayed atomic.Int64

	mu    sync.Mutex
	parts map[int32]*Partition
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

// Open opens (or creates) the database. One that does not open (corrupt,
// or written by an incompatible version) is wiped and created again: its
// contents are a cache of Kafka.
func Open(opts Options) (*DB, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	db := &DB{opts: opts, parts: map[int32]*Partition{}, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	pdb, err := db.open()
	var inUse *inUseError
	if err != nil && opts.Dir != "" && !errors.As(err, &inUse) {
		opts.Logger.Warn("scheduler table store does not open; wiping it and rebuilding from Kafka", "dir", opts.Dir, "err", err)
		if rerr := os.RemoveAll(opts.Dir); rerr != nil {
			return nil, fmt.Errorf("jobstore: wiping %s: %w", opts.Dir, rerr)
		}
		pdb, err = db.open()
	}
	if err != nil {
		return nil, fmt.Errorf("jobstore: %w", err)
	}
	db.pdb = pdb
	go db.flusher()
	return db, nil
}

func (db *DB) open() (*pebble.DB, error) {
	if db.cache != nil {
		db.cache.Unref()
	}
	db.cache = pebble.NewCache(db.opts.CacheSize)
	po := &pebble.Options{
		Cache:        db.cache,
		MemTableSize: db.opts.MemTableSize,
		Logger:       quietLogger{db.opts.Logger},
	}
	for i := range po.Levels {
		// A row is read at every tick and answer: a Bloom filter spares
		// the levels that do not hold it a block read.
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		if i < 3 {
			// The upper levels hold what was written lately, which is
			// what fires soon: read often, they are not compressed (snappy
			// decoding was 4 % of a burst's CPU); the lower levels hold
			// the jobs due later, compressed.
			po.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
		}
	}
	if db.opts.Dir == "" {
		po.FS = vfs.NewMem()
		return pebble.Open("", po)
	}
	if err := os.MkdirAll(db.opts.Dir, 0o700); err != nil {
		return nil, err
	}
	// A directory that holds files but no Pebble database (the store of
	// an earlier version) is not a store: its files would stay forever.
	if desc, err := pebble.Peek(db.opts.Dir, vfs.Default); err == nil && !desc.Exists {
		if ents, _ := os.ReadDir(db.opts.Dir); len(ents) > 0 {
			return nil, fmt.Errorf("%s holds no Pebble database but %d other files", db.opts.Dir, len(ents))
		}
	}
	// Locked first, so that a store in use by another process is an
	// error, not a store to wipe.
	lock, err := pebble.LockDirectory(db.opts.Dir, vfs.Default)
	if err != nil {
		return nil, &inUseError{err}
	}
	po.Lock = lock
	pdb, err := pebble.Open(db.opts.Dir, po)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	db.lock = lock
	return pdb, nil
}

// inUseError says another process holds the store.
type inUseError struct{ err error }

func (e *inUseError) Error() string { return "in use by another process: " + e.err.Error() }
func (e *inUseError) Unwrap() error { return e.err }

// Close stops applying writes and closes the database. What is still held
// unconfirmed is dropped: Kafka has it, or it never happened.
func (db *DB) Close() error {
	select {
	case <-db.stop:
		return nil
	default:
	}
	close(db.stop)
	<-db.done
	err := db.pdb.Close()
	db.cache.Unref()
	if db.lock != nil {
		err = errors.Join(err, db.lock.Close())
	}
	return err
}

// Partition returns the goka storage of table partition p. goka builds a
// partition's storage anew for every assignment; the last one built is
// the one confirmations and flushes go to.
func (db *DB) Partition(p int32) *Partition {
	part := newPartition(db, p)
	db.mu.Lock()
	db.parts[p] = part
	db.mu.Unlock()
	return part
}

func (db *DB) forget(part *Partition) {
	db.mu.Lock()
	if db.parts[part.p] == part {
		delete(db.parts, part.p)
	}
	db.mu.Unlock()
}

// Replayed is the number of changelog records the partitions' recoveries
// applied since the database was opened: after a restart, only those
// after each partition's stored offset.
func (db *DB) Replayed() int64 { return db.replayed.Load() }

// Confirm says that the changelog record of the oldest unconfirmed write
// of key in partition p is stored at offset (see the package comment).
func (db *DB) Confirm(p int32, key string, offset int64) {
	db.mu.Lock()
	part := db.parts[p]
	db.mu.Unlock()
	if part != nil && part.confirm(key, offset) >= db.opts.FlushAfter {
		db.wake()
	}
}

func (db *DB) wake() {
	select {
	case db.kick <- struct{}{}:
	default:
	}
}

// flusher applies confirmed writes every FlushInterval, or at once when a
// partition holds FlushAfter of them.
func (db *DB) flusher() {
	defer close(db.done)
	t := time.NewTicker(db.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-t.C:
		case <-db.kick:
		}
		db.mu.Lock()
		parts := make([]*Partition, 0, len(db.parts))
		for _, part := range db.parts {
			parts = append(parts, part)
		}
		db.mu.Unlock()
		for _, part := range parts {
			if err := part.flush(); err != nil {
				db.opts.Logger.Error("scheduler table store: applying confirmed writes failed; they stay in memory and are retried", "partition", part.p, "err", err)
			}
		}
	}
}

// Key layout. Every key starts with its kind and the partition (4 bytes big
// endian), so that a partition's keys of one kind are one range:
//
//	'o' p                              → offset (8) + time it was stored (8, Unix ns)
//	'r' p key                          → the row (goka's value)
//	't' p at(8) key                    → nothing: the row's timer (Unix ns)
//	'v' p key                          → recover_at (8): rows holding work of an earlier incarnation
//	'l' p ns 0x00 ^created(8) ^id 0xff → status (1): the listing, newest first
//	'c' p ns                           → live jobs (8)
const (
	kindOffset  = 'o'
	kindRow     = 'r'
	kindTimer   = 't'
	kindRecover = 'v'
	kindListing = 'l'
	kindCount   = 'c'
)

func prefix(kind byte, p int32, extra int) []byte {
	b := make([]byte, 5, 5+extra)
	b[0] = kind
	binary.BigEndian.PutUint32(b[1:], uint32(p))
	return b
}

// upperBound is the least key greater than every key starting with b.
func upperBound(b []byte) []byte {
	end := append([]byte(nil), b...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

var errClosed = errors.New("jobstore: partition closed")

// quietLogger routes Pebble's own log lines to slog at debug level (its
// info lines are compaction chatter); errors stay errors.
type quietLogger struct{ l *slog.Logger }

func (q quietLogger) Infof(format string, args ...any) {
	q.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}
func (q quietLogger) Errorf(format string, args ...any) {
	q.l.Error("pebble: " + fmt.Sprintf(format, args...))
}
func (q quietLogger) Fatalf(format string, args ...any) {
	q.l.Error("pebble: fatal: " + fmt.Sprintf(format, args...))
	os.Exit(1)
}
