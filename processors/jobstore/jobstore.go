// Package jobstore owns the scheduler table on disk: every job row of the
// partitions a scheduler process holds, the indexes derived from the rows
// (when each row next needs a tick, which rows hold work of an earlier
// scheduler incarnation, each namespace's jobs newest first and how many
// of them are live), and, per partition, the changelog offset they stand
// at, in one Pebble database (github.com/cockroachdb/pebble/v2).
//
// The model is Kafka Streams' state stores: the changelog topic is the
// truth and the store a cache of it that can prove what it mirrors, and is
// wiped and rebuilt from the changelog when it cannot.
//
//   - What it mirrors (mirror.go): the cluster, the changelog topic (its
//     name and, where the broker has them, its topic ID) and its partition
//     count. A store that was built from anything else, or cannot say, is
//     wiped before a processor uses it.
//   - Where it stands (checkpoint.go): per partition, the offset of the
//     last changelog record its rows reflect, and when this process last
//     held the partition. A partition is rebuilt from the changelog when
//     that offset is not inside the log (at or past its end: the topic was
//     recreated; before its start: records in between are gone), and when
//     it was last held longer ago than MaxCheckpointAge (a compacted
//     changelog may have dropped tombstones since). A partition not held
//     for that long is removed.
//   - Writes after recovery (overlay.go) are held in memory, where reads
//     see them, until Kafka has stored their changelog record; the
//     processor's producer confirms each write with its own record's offset
//     (DB.Emitting). Confirmed writes are applied in the order made, with
//     the offset of the last, in one atomic batch, so the database always
//     holds the table exactly as the changelog is at its stored offset, and
//     a restart (clean, after kill -9, or a partition handed back) reads
//     only the changelog after it. A write that failed, offsets out of
//     order, or a gap (records this process did not write: another
//     scheduler wrote the partition) stop the partition from applying
//     anything after; its next write fails, and the processor recovers it
//     from the changelog.
//   - Recovery (recovery.go) applies the changelog's records directly, in
//     batches, with their offsets.
//
// Reads (reader.go) see the applied rows and the overlay together: the row
// as last written, listings, live counts and timers.
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
	// MaxCheckpointAge: a partition this process last held longer ago is
	// rebuilt from Kafka when it is assigned again, and removed meanwhile
	// (see the package comment). Default DefaultMaxCheckpointAge.
	MaxCheckpointAge time.Duration
	// FlushInterval is how often the flusher produces the dirty rows that
	// are due and applies the stored ones. Default DefaultFlushInterval.
	FlushInterval time.Duration
	// FlushAfter applies stored writes at once when a partition holds
	// this many. Default DefaultFlushAfter.
	FlushAfter int
	// MaxHold is how long a dirty row (a write not produced yet) may wait
	// for later writes of its key to fold into it; a stable row (no
	// timer within it, no fire awaiting an answer) is produced at once
	// (overlay.go). It is also how far the commit of the input can lag.
	// Default DefaultMaxHold.
	MaxHold time.Duration
	// MaxDirtyBytes bounds the dirty rows of a partition; beyond it the
	// oldest are produced. Default DefaultMaxDirtyBytes.
	MaxDirtyBytes int
	// CloseWait bounds how long closing a partition waits for its dirty
	// rows to be stored. Default DefaultCloseWait.
	CloseWait time.Duration
	// MaxHeld bounds the writes a partition holds in memory, confirmed or
	// not, because the database cannot apply them (it fails) or Kafka does
	// not confirm them: beyond it the partition's writes fail, and so does
	// its processor, instead of growing without bound. Default
	// DefaultMaxHeld.
	MaxHeld int
	// AutoConfirm treats every write as confirmed when it is made: for a
	// processor without a Kafka producer (goka's tester).
	AutoConfirm bool
	Now         func() time.Time
	Logger      *slog.Logger
}

// The defaults of Options' fields; a field left at 0 takes its default, a
// negative one is refused by Open.
const (
	DefaultCacheSize    = 128 << 20
	DefaultMemTableSize = 32 << 20
	// DefaultMaxCheckpointAge stays below Kafka's default
	// delete.retention.ms (1 day), how long a compacted topic keeps a
	// tombstone: a store away for longer could keep a row deleted since.
	DefaultMaxCheckpointAge = 20 * time.Hour
	DefaultFlushInterval    = 5 * time.Millisecond
	DefaultFlushAfter       = 4096
	DefaultMaxHeld          = 1 << 20
	// DefaultMaxHold is Kafka Streams' commit interval (at least once).
	DefaultMaxHold       = 30 * time.Second
	DefaultMaxDirtyBytes = 32 << 20
	DefaultCloseWait     = 10 * time.Second
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
		setting.Positive(n, "MaxHeld", &o.MaxHeld, DefaultMaxHeld),
		setting.Positive(n, "MaxHold", &o.MaxHold, DefaultMaxHold),
		setting.Positive(n, "MaxDirtyBytes", &o.MaxDirtyBytes, DefaultMaxDirtyBytes),
		setting.Positive(n, "CloseWait", &o.CloseWait, DefaultCloseWait),
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
	// bounds reads the changelog's offsets (nil: not checked).
	bounds atomic.Pointer[LogBounds]
	// onBroken hears of a partition that stopped applying writes.
	onBroken atomic.Pointer[func(p int32, err error)]
	// produce sends the table's records (SetProducer).
	produce atomic.Pointer[Produce]
	// onDurable hears of a partition whose Hold rose.
	onDurable atomic.Pointer[func(p int32)]

	mu    sync.Mutex
	parts map[int32]*Partition
	// closed: the files are closed (or closing); Stats reads nothing.
	closed bool
	// filters are the partitions' row-key filters (keyfilter.go); scans
	// are their scans running.
	filters   map[int32]*keyFilter
	filterMin uint
	scans     sync.WaitGroup
	kick      chan struct{}
	// idle: the flusher sleeps until kicked, as no partition holds a
	// write (settle).
	idle atomic.Bool
	stop chan struct{}
	done chan struct{}
}

// Open opens (or creates) the database. One that is corrupt, or not a
// database of this format, is wiped and created again: its contents are a
// cache of Kafka. Any other failure (the directory cannot be read, too
// many open files, a full disk) is returned: wiping would not help, and
// would throw away a store that is fine.
func Open(opts Options) (*DB, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	db := &DB{opts: opts, parts: map[int32]*Partition{}, filters: map[int32]*keyFilter{}, filterMin: keyFilterMin, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	pdb, err := db.open()
	if err != nil && opts.Dir != "" && unreadable(err) {
		opts.Logger.Warn("scheduler table store is unreadable; wiping it and rebuilding from Kafka", "dir", opts.Dir, "err", err)
		if rerr := os.RemoveAll(opts.Dir); rerr != nil {
			return nil, fmt.Errorf("jobstore: wiping %s: %w", opts.Dir, rerr)
		}
		pdb, err = db.open()
	}
	if err != nil {
		return nil, fmt.Errorf("jobstore: %w", err)
	}
	db.pdb = pdb
	if err := db.removeAbandoned(); err != nil {
		_ = db.closeFiles()
		return nil, fmt.Errorf("jobstore: %w", err)
	}
	go db.flusher()
	return db, nil
}

// notAStore says a directory holds files but no Pebble database (the store
// of an earlier version): its files would stay forever.
type notAStore struct{ dir string }

func (e *notAStore) Error() string { return e.dir + " holds files but no Pebble database" }

// unreadable says an error from opening the store means its contents
// cannot be used: corrupt, or not a store of this format.
func unreadable(err error) bool {
	var nas *notAStore
	return pebble.IsCorruptionError(err) || errors.As(err, &nas) ||
		errors.Is(err, pebble.ErrDBDoesNotExist) || isFormatError(err)
}

// l0CompactionThreshold is how many sublevels of flushed memtables Pebble
// lets gather in L0 before it compacts them into the level below. Rows
// are keyed by job, in no time order, so every flushed memtable spans the
// whole key range and each compaction out of L0 rewrites all of the level
// below that it overlaps: the fewer the compactions, the fewer times a
// row's bytes are rewritten. The price is on reads: a row's read checks
// each L0 sublevel's bloom filter, this many as a rule (writes stop at
// three times as many, should the compactions fall that far behind).
//
// Measured in chime dev at 11,000 jobs/s sustained, each job written
// about a minute before it fires, alternated runs (1 December 2026): with
// Pebble's default of 4, 1,988–2,225 B compacted a job and 0.60–0.66
// blocks read from disk; with 8, 1,635–1,777 B and 0.54–0.56; with 16,
// 1,166–1,348 B and 0.44–0.47. Chime's CPU a job moved within the runs'
// spread (3.03–3.40 times the receiver's with 4, 2.91–3.31 with 16), and
// make bench's burst did not slow (24,948–25,053/s against 21,799–23,470/s).
// The constant itself, beside the build before it: 1,288 against 2,189 B
// compacted, 0.48 against 0.65 blocks read, 124 against 123 µs a job. So
// it spares the disk, not the CPU: under sustained load the compactions
// were 12 % of chime's CPU, but the extra L0 sublevels' reads and the
// larger compactions took back what the fewer ones saved.
const l0CompactionThreshold = 16

func (db *DB) open() (*pebble.DB, error) {
	if db.cache != nil {
		db.cache.Unref()
	}
	db.cache = pebble.NewCache(db.opts.CacheSize)
	po := &pebble.Options{
		Cache:        db.cache,
		MemTableSize: db.opts.MemTableSize,
		Logger:       quietLogger{db.opts.Logger},
		// Compact L0 later than Pebble's default (4 sublevels, writes
		// stopped at 12): see l0CompactionThreshold.
		L0CompactionThreshold: l0CompactionThreshold,
		L0StopWritesThreshold: 3 * l0CompactionThreshold,
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
	desc, err := pebble.Peek(db.opts.Dir, vfs.Default)
	if err != nil {
		return nil, err
	}
	if !desc.Exists {
		if ents, _ := os.ReadDir(db.opts.Dir); len(ents) > 0 {
			return nil, &notAStore{dir: db.opts.Dir}
		}
	}
	// Locked first, so that a store in use by another process is an
	// error, not a store to wipe.
	lock, err := pebble.LockDirectory(db.opts.Dir, vfs.Default)
	if err != nil {
		return nil, fmt.Errorf("in use by another process: %w", err)
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

// Stats is what the store's Pebble database did since it was opened.
type Stats struct {
	// FlushedBytes is what its flushes wrote: the rows and index entries
	// that reached disk. CompactedBytes is what its compactions rewrote
	// of them: over FlushedBytes, the store's write amplification, work
	// that grows with the rows kept on disk (docs/operations.md, "what
	// saturates first").
	FlushedBytes, CompactedBytes uint64
	// Compactions counts its compactions.
	Compactions int64
	// CacheHits and CacheMisses count the block cache's lookups: a miss
	// reads and checks a block of the files, the row reads' main cost
	// once the rows outgrow CacheSize.
	CacheHits, CacheMisses int64
}

// Stats says what the database did since it was opened (zero once it is
// closed).
func (db *DB) Stats() Stats {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return Stats{}
	}
	m := db.pdb.Metrics()
	t := m.Total()
	return Stats{
		FlushedBytes:   t.TableBytesFlushed,
		CompactedBytes: t.TableBytesCompacted,
		Compactions:    m.Compact.Count,
		CacheHits:      m.BlockCache.Hits,
		CacheMisses:    m.BlockCache.Misses,
	}
}

// Close stops applying writes and closes the database. What is still held
// unconfirmed is dropped: Kafka has it, or it never happened.
func (db *DB) Close() error {
	select {
	case <-db.stop:
		return nil
	default:
	}
	db.mu.Lock()
	close(db.stop) // under db.mu: no scan starts after it
	db.mu.Unlock()
	<-db.done
	db.scans.Wait()
	return db.closeFiles()
}

func (db *DB) closeFiles() error {
	db.mu.Lock() // Stats reads the database under it
	db.closed = true
	db.mu.Unlock()
	err := db.pdb.Close()
	db.cache.Unref()
	if db.lock != nil {
		err = errors.Join(err, db.lock.Close())
	}
	return err
}

// Partition returns the goka storage of table partition p. goka builds a
// partition's storage anew for every assignment; the last one built is
// the one confirmations, flushes and reads go to.
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

func (db *DB) open1(p int32) *Partition {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.parts[p]
}

func (db *DB) openParts() []*Partition {
	db.mu.Lock()
	defer db.mu.Unlock()
	parts := make([]*Partition, 0, len(db.parts))
	for _, part := range db.parts {
		parts = append(parts, part)
	}
	return parts
}

// OnBroken sets what is told when a partition stops applying its writes
// (a failed changelog record, a gap, too many writes held): its processor
// must recover it from the changelog, and a partition that is not written
// to again would not fail by itself.
func (db *DB) OnBroken(fn func(p int32, err error)) { db.onBroken.Store(&fn) }

func (db *DB) broke(p int32, err error) {
	if fn := db.onBroken.Load(); fn != nil {
		(*fn)(p, err)
	}
}

// SetProducer sets how the table's records are sent: the processor's
// producer for the changelog topic.
func (db *DB) SetProducer(fn Produce) { db.produce.Store(&fn) }

func (db *DB) producer() Produce {
	if p := db.produce.Load(); p != nil {
		return *p
	}
	return nil
}

// OnDurable sets what is told when a partition's Hold rises: more of its
// input may be committed.
func (db *DB) OnDurable(fn func(p int32)) { db.onDurable.Store(&fn) }

func (db *DB) durable(p int32) {
	if fn := db.onDurable.Load(); fn != nil {
		(*fn)(p)
	}
}

// Hold is Partition.Hold of partition p's open storage; ok is false when
// none is open (nothing of it may be committed then).
func (db *DB) Hold(p int32) (offset int64, ok bool) {
	part := db.open1(p)
	if part == nil {
		return 0, false
	}
	return part.Hold(), true
}

// Dirty is the rows of the open partitions in the write cache, not sent
// to Kafka yet.
func (db *DB) Dirty() int {
	n := 0
	for _, part := range db.openParts() {
		part.mu.Lock()
		n += part.ov.dirtyN
		part.mu.Unlock()
	}
	return n
}

// Replayed is the number of changelog records the partitions' recoveries
// applied since the database was opened: after a restart, only those
// after each partition's stored offset.
func (db *DB) Replayed() int64 { return db.replayed.Load() }

// Health is nil while every open partition can apply its writes, or says
// why one cannot (a failed changelog write, a gap, a database that
// refuses writes).
func (db *DB) Health() error {
	var errs []error
	for _, part := range db.openParts() {
		if err := part.broken(); err != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", part.p, err))
		}
	}
	return errors.Join(errs...)
}

func (db *DB) wake() {
	select {
	case db.kick <- struct{}{}:
	default:
	}
}

// settle lets the flusher sleep when no partition holds a write. The flag
// is set before the partitions are looked at again: a write made after
// that look finds it set and wakes the flusher (hold), one made before
// it is seen by the look.
func (db *DB) settle() {
	if db.holding() {
		return
	}
	db.idle.Store(true)
	if db.holding() {
		db.idle.Store(false)
	}
}

// holding says some open partition holds a write not applied yet.
func (db *DB) holding() bool {
	for _, part := range db.openParts() {
		if part.holding() {
			return true
		}
	}
	return false
}

// touchEvery is how often the flusher records that the open partitions
// are still held (checkpoint.go).
const touchEvery = time.Minute

// flusher applies confirmed writes every FlushInterval, or at once when a
// partition holds FlushAfter of them; it records that the partitions are
// held, and removes those not held for MaxCheckpointAge.
//
// While no partition holds a write (nothing dirty, nothing on its way to
// the database) it does not tick: it sleeps until a write wakes it
// (hold), or until the touch or the sweep is due. Ticking every 5 ms with
// nothing to do was 200 wake-ups a second of an idle chime, most of its
// idle CPU with the consumers' fetches.
func (db *DB) flusher() {
	defer close(db.done)
	t := time.NewTicker(db.opts.FlushInterval)
	defer t.Stop()
	slowEvery := max(db.opts.FlushInterval, min(touchEvery, db.opts.MaxCheckpointAge/8))
	slow := time.NewTimer(slowEvery)
	defer slow.Stop()
	lastTouch, lastSweep := db.opts.Now(), db.opts.Now()
	for {
		tick := t.C
		if db.idle.Load() {
			tick = nil
		}
		select {
		case <-db.stop:
			return
		case <-tick:
		case <-db.kick:
		case <-slow.C:
			slow.Reset(slowEvery)
		}
		db.idle.Store(false)
		for _, part := range db.openParts() {
			part.produceDue()
			if err := part.flush(); err != nil {
				part.applyFailed(err)
			}
		}
		db.settle()
		now := db.opts.Now()
		if now.Sub(lastTouch) >= touchEvery {
			lastTouch = now
			for _, part := range db.openParts() {
				if err := part.touch(); err != nil {
					db.opts.Logger.Warn("scheduler table store: recording that a partition is held failed", "partition", part.p, "err", err)
				}
			}
		}
		if now.Sub(lastSweep) >= db.opts.MaxCheckpointAge/8 {
			lastSweep = now
			if err := db.removeAbandoned(); err != nil {
				db.opts.Logger.Warn("scheduler table store: removing partitions no longer held failed", "err", err)
			}
		}
	}
}

// Key layout. Every key starts with its kind; a partition's keys then have
// the partition (4 bytes big endian), so that a partition's keys of one
// kind are one range:
//
//	'm'                                → what the store mirrors (mirror.go)
//	'o' p                              → offset (8) + when last held (8, Unix ns)
//	'r' p key                          → the row (goka's value)
//	't' p at(8) key                    → nothing: the row's timer (Unix ns)
//	'v' p key                          → recover_at (8): rows holding work of an earlier incarnation
//	'l' p ns 0x00 ^created(8) ^id 0xff → status (1): the listing, newest first
//	'b' p ns 0x00 key 0x00 len(value) value ^created(8) ^id 0xff
//	                                   → status (1): a label's listing
//	'c' p ns                           → live jobs (8)
//
// A change to this layout raises Layout: a store written in another is
// rebuilt from the changelog (Verify).
const (
	kindMirror  = 'm'
	kindOffset  = 'o'
	kindRow     = 'r'
	kindTimer   = 't'
	kindRecover = 'v'
	kindListing = 'l'
	kindCount   = 'c'
	kindLabel   = 'b'
)

// Layout is the version of the keys above a store is written in; 2 added
// the label index.
const Layout = 2

// partitionKinds are the kinds of key a partition has.
var partitionKinds = []byte{kindOffset, kindRow, kindTimer, kindRecover, kindListing, kindCount, kindLabel}

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
