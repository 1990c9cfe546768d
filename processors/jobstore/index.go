package jobstore

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

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
	// Labels are a listed row's labels, sorted by key: each is an entry
	// of the label index beside the listing's.
	Labels []schema.Label
}

// hasLabel says whether x has label l.
func (x *RowIndex) hasLabel(l schema.Label) bool {
	i, ok := slices.BinarySearchFunc(x.Labels, l.Key, func(m schema.Label, k string) int { return strings.Compare(m.Key, k) })
	return ok && x.Labels[i].Value == l.Value
}

// IndexOf reads a row's index entries from its bytes (nil: no row).
func IndexOf(value []byte) *RowIndex { return indexOf(value, true) }

// indexOf is IndexOf, without the labels unless asked: the counts and a
// listing by status need none, and reading them allocates.
func indexOf(value []byte, labels bool) *RowIndex {
	if value == nil {
		return nil
	}
	x := new(RowIndex)
	x.read(value, labels)
	return x
}

// transientIndex is indexOf into x, for an index only looked at (hold,
// on every write): x lives on the caller's stack, where indexOf's result
// is an allocation.
func transientIndex(x *RowIndex, value []byte) *RowIndex {
	if value == nil {
		return nil
	}
	x.read(value, false)
	return x
}

// read fills x from a row's encoding.
func (x *RowIndex) read(value []byte, labels bool) {
	*x = RowIndex{RecoverAt: schema.JobStateRecoverAt(value)}
	x.Timer, _ = schema.JobStateTimer(value)
	if sum, ok := schema.JobStateSummary(value); ok && sum.Status != chimev1.JobStatus_JOB_STATUS_UNSPECIFIED {
		x.Listed, x.Status, x.Created = true, sum.Status, sum.Created
		if labels {
			x.Labels = schema.JobStateLabels(value)
		}
	}
}

// rowEdit is one row's change as it is written: into batch b (its index
// entries into index, when set), for the row of key, collecting the change
// of each namespace's live count in delta.
type rowEdit struct {
	b     *pebble.Batch
	index *indexBatches
	key   string
	delta map[string]int64
}

// batch is where an entry of kind goes.
func (e rowEdit) batch(kind byte) *pebble.Batch {
	if e.index == nil {
		return e.b
	}
	if sub := e.index.of(kind); sub != nil {
		return sub
	}
	return e.b
}

// indexBatches keeps a flush's index entries apart by kind, each kind in
// the order written, until they join its batch (into). A memtable inserts
// a batch's keys in the batch's order, and its skiplist finds a key fast
// when it follows the one inserted before it (the inserter keeps where
// that one went): a flush's timers (fire or retention times) and listings
// (creation times) mostly come in ascending order within their kind, but
// interleaved row by row each insert jumped to another part of the key
// space and searched the memtable from its top.
type indexBatches struct {
	db   *pebble.DB
	subs [len(indexKinds)]*pebble.Batch
}

// indexKinds are the kinds of index entries, in the order they join.
var indexKinds = [...]byte{kindLabel, kindListing, kindTimer, kindRecover}

// of is the batch of kind's entries (nil: not an index kind).
func (x *indexBatches) of(kind byte) *pebble.Batch {
	i := bytes.IndexByte(indexKinds[:], kind)
	if i < 0 {
		return nil
	}
	if x.subs[i] == nil {
		x.subs[i] = x.db.NewBatch()
	}
	return x.subs[i]
}

// into appends the entries to b, kind after kind.
func (x *indexBatches) into(b *pebble.Batch) error {
	for _, sub := range x.subs {
		if sub != nil {
			if err := b.Apply(sub, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// close gives the batches back.
func (x *indexBatches) close() {
	for i, sub := range x.subs {
		if sub != nil {
			_ = sub.Close()
			x.subs[i] = nil
		}
	}
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
	key, delta := e.key, e.delta
	if other == nil {
		other = &RowIndex{}
	}
	set := func(k, v []byte) error {
		b := e.batch(k[0])
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
	// The listing's key and each label's are (namespace[, label], created,
	// id) with the status as value: a version that shares the key (same
	// created_at) leaves it as it is when the status is the same, and
	// writes its own status over it when removing the old version.
	sameKey := other.Listed && other.Created == x.Created
	sameStatus := sameKey && other.Status == x.Status
	keep := func(shared bool) bool { return shared && (sameStatus || sign < 0) }
	status := []byte{byte(x.Status)}
	if !keep(sameKey) {
		if err := set(listingKey(part.p, ns, x.Created, id), status); err != nil {
			return err
		}
	}
	for _, l := range x.Labels {
		if !keep(sameKey && other.hasLabel(l)) {
			if err := set(labelKey(part.p, ns, l, x.Created, id), status); err != nil {
				return err
			}
		}
	}
	if !sameStatus && !schema.JobEnded(x.Status) && !Internal(id) {
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
	return appendListed(listingPrefix(p, ns), created, id)
}

// appendListed appends a listing's order (created, id) to a listing's or
// a label's prefix.
func appendListed(b []byte, created int64, id string) []byte {
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

// labelKey is listingKey under one of the job's labels: a label's jobs
// newest first.
func labelKey(p int32, ns string, l schema.Label, created int64, id string) []byte {
	return appendListed(labelPrefix(p, ns, l), created, id)
}

// labelPrefix closes the key with a 0 (a label key holds none) and the
// value with its length, so that no label's prefix is another's.
func labelPrefix(p int32, ns string, l schema.Label) []byte {
	b := append(prefix(kindLabel, p, len(ns)+len(l.Key)+len(l.Value)+4+8+64), ns...)
	b = append(append(append(b, 0), l.Key...), 0)
	b = binary.AppendUvarint(b, uint64(len(l.Value)))
	return append(b, l.Value...)
}

func countKey(p int32, ns string) []byte {
	return append(prefix(kindCount, p, len(ns)), ns...)
}

func int64Bytes(n int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(n))
}
