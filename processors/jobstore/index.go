package jobstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/lovoo/goka/storage"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// The indexes are derived from a row's bytes alone (the codec's header
// and two fields, schema.JobStateTimer and friends), so applying a write
// decodes nothing.

// RowIndex is what a row's index entries are made of.
type RowIndex struct {
	Timer, RecoverAt int64 // Unix ns; 0: none
	// Listed: the row is a job (not a create held for its namespace),
	// with its status and created_at.
	Listed  bool
	Status  chimev1.JobStatus
	Created int64
}

// IndexOf reads a row's index entries from its bytes (nil: no row).
func IndexOf(value []byte) *RowIndex {
	if value == nil {
		return nil
	}
	x := &RowIndex{RecoverAt: schema.JobStateRecoverAt(value)}
	x.Timer, _ = schema.JobStateTimer(value)
	if sum, ok := schema.JobStateSummary(value); ok && sum.Status != chimev1.JobStatus_JOB_STATUS_UNSPECIFIED {
		x.Listed, x.Status, x.Created = true, sum.Status, sum.Created
	}
	return x
}

// rowEdit is one row's change as it is written: into batch b, for the
// row of key, collecting the change of each namespace's live count in
// delta.
type rowEdit struct {
	b     *pebble.Batch
	key   string
	delta map[string]int64
}

// apply writes a row (nil: deletes it) over one whose index entries were
// old (nil: no row), with its index changes.
func (part *Partition) apply(e rowEdit, old *RowIndex, value []byte) error {
	b, key := e.b, e.key
	rk := rowKey(part.p, key)
	var next *RowIndex
	if value != nil {
		next = IndexOf(value)
	}
	// Only the entries that change are written: most writes of a row
	// move its timer and leave its listing as it was, and every key
	// written is a key the store compacts.
	if old != nil {
		if err := part.index(e, old, next, -1); err != nil {
			return err
		}
	}
	if value == nil {
		return b.Delete(rk, nil)
	}
	if err := b.Set(rk, value, nil); err != nil {
		return err
	}
	return part.index(e, next, old, +1)
}

// index adds (sign +1) or removes (-1) the index entries of a row, but
// those it shares with other (the row's other version; nil: none).
func (part *Partition) index(e rowEdit, x, other *RowIndex, sign int64) error {
	b, key, delta := e.b, e.key, e.delta
	if other == nil {
		other = &RowIndex{}
	}
	set := func(k, v []byte) error {
		if sign > 0 {
			return b.Set(k, v, nil)
		}
		return b.Delete(k, nil)
	}
	if x.Timer != 0 && x.Timer != other.Timer {
		if err := set(timerKey(part.p, x.Timer, key), nil); err != nil {
			return err
		}
		delta[timersName] += sign
	}
	if x.RecoverAt != 0 && (other.RecoverAt == 0 || sign > 0 && x.RecoverAt != other.RecoverAt) {
		// One key per row, whatever its value: removed only when the new
		// version has none, rewritten when the value changes.
		if err := set(recoverKey(part.p, key), int64Bytes(x.RecoverAt)); err != nil {
			return err
		}
	}
	ns, id, ok := schema.SplitJobKey(key)
	if !x.Listed || !ok {
		return nil // a create held for its namespace is not a job yet
	}
	sameKey := other.Listed && other.Created == x.Created
	switch {
	case sameKey && other.Status == x.Status:
		return nil // what listings show is unchanged
	case sameKey && sign < 0:
		// The key stays; the new version writes its status over it.
	default:
		if err := set(listingKey(part.p, ns, x.Created, id), []byte{byte(x.Status)}); err != nil {
			return err
		}
	}
	if !schema.JobEnded(x.Status) && !Internal(id) {
		delta[ns] += sign
	}
	return nil
}

// timersName is the live-count entry that counts the partition's timers
// instead of a namespace's jobs (no namespace is empty).
const timersName = ""

// Internal says whether id is one of chime's own jobs: listed only when
// asked, never counted as the namespace's.
func Internal(id string) bool { return strings.HasPrefix(id, schema.ReservedJobIDPrefix) }

func timerKey(p int32, at int64, key string) []byte {
	b := prefix(kindTimer, p, 8+len(key))
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	return append(b, key...)
}

func recoverKey(p int32, key string) []byte {
	return append(prefix(kindRecover, p, len(key)), key...)
}

// listingKey orders a namespace's jobs newest first, equal times by id
// descending: the time and each byte of the id inverted, the id closed by
// 0xff (above every inverted byte of a valid id), so that an id sorts
// after the longer ids it is a prefix of.
func listingKey(p int32, ns string, created int64, id string) []byte {
	b := listingPrefix(p, ns)
	b = binary.BigEndian.AppendUint64(b, ^uint64(created))
	for i := range len(id) {
		b = append(b, ^id[i])
	}
	return append(b, 0xff)
}

func listingPrefix(p int32, ns string) []byte {
	b := append(prefix(kindListing, p, len(ns)+1+8+64), ns...)
	return append(b, 0)
}

// Timer is an entry of the time index.
type Timer struct {
	At  int64 // Unix nanoseconds
	Key string
}

// Less orders timers by time, then key.
func (t Timer) Less(u Timer) bool {
	if t.At != u.At {
		return t.At < u.At
	}
	return t.Key < u.Key
}

// Timers calls fn with the timers of the rows as they are now, in (time,
// key) order, from from (inclusive) up to to (exclusive) or until fn has
// had max of them: the applied rows' from the time index, and the rows
// written but not applied yet from the overlay (after the others, in no
// particular order). It returns where the next call should start: to, or
// the first timer it did not pass. It holds the partition's lock
// throughout, so that no write moves from the overlay to the database
// while it reads both.
func (part *Partition) Timers(from, to Timer, max int, fn func(Timer)) (end Timer, err error) {
	part.mu.Lock()
	defer part.mu.Unlock()
	lo := timerKey(part.p, from.At, from.Key)
	it, err := part.db.pdb.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(prefix(kindTimer, part.p, 0))})
	if err != nil {
		return from, err
	}
	end = to
	n := 0
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		t := Timer{At: int64(binary.BigEndian.Uint64(k[5:13])), Key: string(k[13:])}
		if !t.Less(to) {
			break
		}
		if n == max {
			end = t
			break
		}
		if _, written := part.latest[t.Key]; written {
			continue // written since it was applied: the overlay has it
		}
		fn(t)
		n++
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return from, err
	}
	for k, w := range part.latest {
		at, _ := schema.JobStateTimer(w.value)
		if t := (Timer{At: at, Key: k}); at != 0 && !t.Less(from) && t.Less(end) {
			fn(t)
		}
	}
	return end, nil
}

// Recovering calls fn with every row that holds a fire or a Kafka write of
// an earlier scheduler incarnation (recover_at), at the earlier of its
// timer and recover_at: a recovering scheduler ticks them at once
// (chimev1.JobState.recover_at).
func (part *Partition) Recovering(fn func(Timer)) error {
	lo := prefix(kindRecover, part.p, 0)
	it, err := part.db.pdb.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if v := it.Value(); len(v) == 8 {
			fn(Timer{At: int64(binary.BigEndian.Uint64(v)), Key: string(it.Key()[5:])})
		}
	}
	return it.Error()
}

// Live returns the namespace's live jobs (not ended; chime's own left
// out) as applied.
func (part *Partition) Live(ns string) int64 {
	part.mu.Lock()
	defer part.mu.Unlock()
	return part.live[ns]
}

// TimerCount is the partition's rows with a timer, as applied.
func (part *Partition) TimerCount() int64 { return part.Live(timersName) }

// Listed is a job as listings show it.
type Listed struct {
	ID      string
	Created int64 // Unix nanoseconds
	Status  chimev1.JobStatus
}

// List calls fn with the namespace's jobs, newest first (equal times by
// id, descending), as applied, starting after the job (afterCreated,
// afterID) when afterID is set. fn returning false stops.
func (part *Partition) List(ns string, afterCreated int64, afterID string, fn func(Listed) bool) error {
	pre := listingPrefix(part.p, ns)
	lo := pre
	if afterID != "" {
		lo = upperBound(listingKey(part.p, ns, afterCreated, afterID))
	}
	it, err := part.db.pdb.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(pre)})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()[len(pre):]
		if len(k) < 10 || len(it.Value()) != 1 {
			continue
		}
		id := make([]byte, len(k)-9)
		for i := range id {
			id[i] = ^k[8+i]
		}
		if !fn(Listed{ID: string(id), Created: int64(^binary.BigEndian.Uint64(k)), Status: chimev1.JobStatus(it.Value()[0])}) {
			return nil
		}
	}
	return it.Error()
}

// SetIterateBefore bounds Iterator to the rows whose applied timer is
// before bound() (Unix ns): the scheduler's sweep visits them through
// goka (Processor.VisitAll iterates the storage), and must not read every
// row of a table of millions.
func (part *Partition) SetIterateBefore(bound func() int64) {
	part.mu.Lock()
	part.iterateBefore = bound
	part.mu.Unlock()
}

// Iterator implements storage.Storage: every applied row, or with
// SetIterateBefore the rows whose timer is before the bound, in timer
// order.
func (part *Partition) Iterator() (storage.Iterator, error) {
	part.mu.Lock()
	bound := part.iterateBefore
	part.mu.Unlock()
	if bound == nil {
		lo := prefix(kindRow, part.p, 0)
		return part.iter(lo, upperBound(lo), len(lo))
	}
	var keys [][]byte
	_, err := part.Timers(Timer{}, Timer{At: bound()}, math.MaxInt, func(t Timer) { keys = append(keys, []byte(t.Key)) })
	return &keysIterator{part: part, keys: keys, i: -1}, err
}

// IteratorWithRange implements storage.Storage over row keys.
func (part *Partition) IteratorWithRange(start, limit []byte) (storage.Iterator, error) {
	pre := prefix(kindRow, part.p, 0)
	lo := append(bytes.Clone(pre), start...)
	hi := upperBound(pre)
	if len(limit) > 0 {
		hi = append(bytes.Clone(pre), limit...)
	}
	return part.iter(lo, hi, len(pre))
}

func (part *Partition) iter(lo, hi []byte, strip int) (storage.Iterator, error) {
	it, err := part.db.pdb.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	return &rowIterator{it: it, pre: lo[:strip], strip: strip}, nil
}

// rowIterator adapts a Pebble iterator over row keys to goka's.
type rowIterator struct {
	it      *pebble.Iterator
	pre     []byte
	strip   int
	started bool
}

func (r *rowIterator) Next() bool {
	if !r.started {
		r.started = true
		return r.it.First()
	}
	return r.it.Next()
}
func (r *rowIterator) Err() error             { return r.it.Error() }
func (r *rowIterator) Key() []byte            { return bytes.Clone(r.it.Key()[r.strip:]) }
func (r *rowIterator) Value() ([]byte, error) { return bytes.Clone(r.it.Value()), nil }
func (r *rowIterator) Release()               { _ = r.it.Close() }
func (r *rowIterator) Seek(key []byte) bool {
	r.started = true
	return r.it.SeekGE(append(bytes.Clone(r.pre), key...))
}

// keysIterator iterates given keys, reading each row when asked.
type keysIterator struct {
	part *Partition
	keys [][]byte
	i    int
}

func (k *keysIterator) Next() bool { k.i++; return k.i < len(k.keys) }
func (k *keysIterator) Err() error { return nil }
func (k *keysIterator) Key() []byte {
	return k.keys[k.i]
}
func (k *keysIterator) Value() ([]byte, error) { return k.part.Get(string(k.keys[k.i])) }
func (k *keysIterator) Release()               {}
func (k *keysIterator) Seek(key []byte) bool {
	for k.i = 0; k.i < len(k.keys); k.i++ {
		if bytes.Compare(k.keys[k.i], key) >= 0 {
			return true
		}
	}
	return false
}
