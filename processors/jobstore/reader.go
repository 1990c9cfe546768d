package jobstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/lovoo/goka/storage"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Reads: the rows as last written (the applied ones with the overlay on
// top), the time index, listings and live counts, for the scheduler's pump
// and for job reads. Each holds the partition's lock while it reads both
// the database and the overlay, so that no write moves from one to the
// other in between.

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
// particular order; not those written with SetHeld). It returns where the
// next call should start: to, or the first timer it did not pass.
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
		if _, written := part.ov.latest[t.Key]; written {
			continue // written since it was applied: the overlay has it
		}
		fn(t)
		n++
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return from, err
	}
	part.ov.timers.AscendRange(from, end, func(t Timer) bool {
		fn(t)
		return true
	})
	if far := &part.ov.far; far.n > 0 && (Timer{At: far.min}).Less(end) {
		far.min = math.MaxInt64
		for _, w := range part.ov.latest {
			if w.placed != farOff {
				continue
			}
			far.min = min(far.min, w.placedAt)
			if t := (Timer{At: w.placedAt, Key: w.key}); !t.Less(from) && t.Less(end) {
				fn(t)
			}
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
// out), as last written.
func (part *Partition) Live(ns string) int64 {
	part.mu.Lock()
	defer part.mu.Unlock()
	return part.applied[ns] + part.ov.delta[ns]
}

// TimerCount is the partition's rows with a timer, as last written.
func (part *Partition) TimerCount() int64 { return part.Live(timersName) }

// StoredTimerCount is the partition's rows with a timer that the database
// holds (applied): what a restart finds without reading the changelog.
func (part *Partition) StoredTimerCount() int64 {
	part.mu.Lock()
	defer part.mu.Unlock()
	return part.applied[timersName]
}

// Listed is a job as listings show it.
type Listed struct {
	ID      string
	Created int64 // Unix nanoseconds
	Status  chimev1.JobStatus
}

// newer orders listings: newest first, equal times by id descending.
func (l Listed) newer(m Listed) bool {
	if l.Created != m.Created {
		return l.Created > m.Created
	}
	return l.ID > m.ID
}

// List calls fn with the namespace's jobs, newest first (equal times by
// id, descending), as last written, starting after the job (afterCreated,
// afterID) when afterID is set; with labels, only the jobs that have every
// one of them. fn returning false stops.
func (part *Partition) List(ns string, labels []schema.Label, afterCreated int64, afterID string, fn func(Listed) bool) error {
	part.mu.Lock()
	defer part.mu.Unlock()
	// The overlay's rows of the namespace: those it lists, in order, and
	// every key it has (its version hides the database's). Their labels
	// are read only for those the listing reaches.
	type pending struct {
		Listed
		value []byte
	}
	var ov []pending
	hidden := map[string]bool{}
	after := Listed{ID: afterID, Created: afterCreated}
	pre := ns + "/"
	for k, w := range part.ov.latest {
		id, ok := strings.CutPrefix(k, pre)
		if !ok {
			continue
		}
		hidden[id] = true
		if x := indexOf(w.value, false); x != nil && x.Listed {
			l := Listed{ID: id, Created: x.Created, Status: x.Status}
			if afterID == "" || after.newer(l) {
				ov = append(ov, pending{l, w.value})
			}
		}
	}
	slices.SortFunc(ov, func(a, b pending) int {
		if a.newer(b.Listed) {
			return -1
		}
		return 1
	})
	more := true
	// emit lists an overlay row if it has the labels.
	emit := func(o pending) bool {
		if len(labels) > 0 && !IndexOf(o.value).hasLabels(labels) {
			return true
		}
		more = fn(o.Listed)
		return more
	}
	err := listApplied(part.db.pdb, part.p, ns, labels, afterCreated, afterID, func(l Listed) bool {
		if hidden[l.ID] {
			return true
		}
		for len(ov) > 0 && ov[0].newer(l) {
			if !emit(ov[0]) {
				return false
			}
			ov = ov[1:]
		}
		more = fn(l)
		return more
	})
	for _, o := range ov {
		if !more || !emit(o) {
			break
		}
	}
	return err
}

// hasLabels says whether x has every one of labels.
func (x *RowIndex) hasLabels(labels []schema.Label) bool {
	for _, l := range labels {
		if !x.hasLabel(l) {
			return false
		}
	}
	return true
}

// listApplied calls fn with the namespace's jobs in partition p as the
// database holds them (see List). With labels it intersects the labels'
// indexes, which share the listing's order: each iterator in turn seeks to
// the furthest position any has reached (a leapfrog join), so a page costs
// seeks in proportion to the rarest label's entries, whatever the order
// the labels were given in.
func listApplied(r iterable, p int32, ns string, labels []schema.Label, afterCreated int64, afterID string, fn func(Listed) bool) error {
	pres := [][]byte{listingPrefix(p, ns)}
	if len(labels) > 0 {
		pres = pres[:0]
		for _, l := range labels {
			pres = append(pres, labelPrefix(p, ns, l))
		}
	}
	its := make([]*pebble.Iterator, len(pres))
	defer func() {
		for _, it := range its {
			if it != nil {
				_ = it.Close()
			}
		}
	}()
	for i, pre := range pres {
		lo := pre
		if afterID != "" {
			lo = upperBound(appendListed(bytes.Clone(pre), afterCreated, afterID))
		}
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(pre)})
		if err != nil {
			return err
		}
		its[i] = it
		if !it.First() {
			return it.Error()
		}
	}
	// suffix is an iterator's position in listing order: its key past its
	// prefix.
	suffix := func(i int) []byte { return its[i].Key()[len(pres[i]):] }
	seek := make([]byte, 0, 128)
	ahead, driver := make([]int, len(its)), 0
	for {
		// The furthest position, and whether every iterator is at it.
		far, same := 0, true
		for i := 1; i < len(its); i++ {
			switch c := bytes.Compare(suffix(i), suffix(far)); {
			case c > 0:
				far, same = i, false
			case c < 0:
				same = false
			}
		}
		if same {
			k, v := suffix(0), its[0].Value()
			if len(k) >= 10 && len(v) == 1 {
				id := make([]byte, len(k)-9)
				for i := range id {
					id[i] = ^k[8+i]
				}
				if !fn(Listed{ID: string(id), Created: int64(^binary.BigEndian.Uint64(k)), Status: chimev1.JobStatus(v[0])}) {
					return nil
				}
			}
			// One iterator steps past the job, the one that has most often
			// been furthest ahead: the rarest label's, as far as the walk
			// has seen. The others only ever seek, forward, which Pebble
			// does by stepping where it can (its try-seek-using-next);
			// so a page costs about a seek per job of the rarest label,
			// whatever the order the labels were given in.
			for i := range its {
				if ahead[i] > ahead[driver] {
					driver = i
				}
			}
			if !its[driver].Next() {
				return its[driver].Error()
			}
			continue
		}
		ahead[far]++
		target := bytes.Clone(suffix(far))
		for i, it := range its {
			if i == far || bytes.Equal(suffix(i), target) {
				continue
			}
			seek = append(append(seek[:0], pres[i]...), target...)
			if !it.SeekGE(seek) {
				return it.Error()
			}
		}
	}
}

// View reads partition p as this process last wrote it: through its open
// storage when it has one, else (between a rebalance's close of the
// storage and the next one's recovery) from the database, which then holds
// every write of the partition that Kafka stored. The caller decides that
// p is one it may answer for.
type View struct {
	db *DB
	p  int32
}

// View returns partition p's view.
func (db *DB) View(p int32) View { return View{db: db, p: p} }

// open is the partition's storage if it is open and recovered.
func (v View) open() *Partition {
	if part := v.db.open1(v.p); part != nil && part.Recovered() {
		return part
	}
	return nil
}

// Get returns key's row (nil: none).
func (v View) Get(key string) ([]byte, error) {
	if part := v.open(); part != nil {
		return part.Read(key)
	}
	return get(v.db.pdb, rowKey(v.p, key))
}

// List is Partition.List.
func (v View) List(ns string, labels []schema.Label, afterCreated int64, afterID string, fn func(Listed) bool) error {
	if part := v.open(); part != nil {
		return part.List(ns, labels, afterCreated, afterID, fn)
	}
	return listApplied(v.db.pdb, v.p, ns, labels, afterCreated, afterID, fn)
}

// Live is Partition.Live.
func (v View) Live(ns string) (int64, error) {
	if part := v.open(); part != nil {
		return part.Live(ns), nil
	}
	raw, err := get(v.db.pdb, countKey(v.p, ns))
	if err != nil || len(raw) != 8 {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(raw)), nil
}

// Iterator implements storage.Storage: every applied row, in key order.
func (part *Partition) Iterator() (storage.Iterator, error) {
	lo := prefix(kindRow, part.p, 0)
	return part.iter(lo, upperBound(lo), len(lo))
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

// Rows calls fn with partition p's rows as the database holds them
// (applied), in key order, until fn returns false: for tests and tools
// that compare the store with the changelog.
func (db *DB) Rows(p int32, fn func(key string, value []byte) bool) error {
	lo := prefix(kindRow, p, 0)
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: upperBound(lo)})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		if !fn(string(it.Key()[len(lo):]), bytes.Clone(it.Value())) {
			break
		}
	}
	return errors.Join(it.Error(), it.Close())
}
