package jobstore

import (
	"github.com/cockroachdb/pebble/v2"
)

// Recovery: before MarkRecovered, goka replays the changelog after the
// stored offset into the storage. Those records are stored in Kafka
// already, so they are applied directly, in batches, each batch with the
// offset of its last record.

// recovery is a partition's recovery batch.
type recovery struct {
	batch *pebble.Batch
	n     int
	// keys are the rows the batch writes (not deletes), for the key
	// filter once it is committed.
	keys []string
}

// recoveryBatch bounds the records one recovery batch holds.
const recoveryBatch = 4096

// recoverWrite applies a changelog record's row to the recovery batch.
// part.mu is held.
func (part *Partition) recoverWrite(key string, value []byte) error {
	if part.rec.batch == nil {
		part.rec.batch = part.db.pdb.NewIndexedBatch()
	}
	delta := map[string]int64{}
	old, err := get(part.rec.batch, rowKey(part.p, key))
	if err != nil {
		return err
	}
	if err := part.apply(rowEdit{b: part.rec.batch, key: key, delta: delta}, IndexOf(old), value); err != nil {
		return err
	}
	for ns, d := range delta {
		part.applied[ns] += d
	}
	if value != nil {
		part.rec.keys = append(part.rec.keys, key)
	}
	part.rec.n++
	part.db.replayed.Add(1)
	return nil
}

// recoverOffset records the offset of the changelog record just applied.
// part.mu is held.
func (part *Partition) recoverOffset(offset int64) error {
	if part.rec.batch == nil {
		return nil
	}
	if err := part.rec.batch.Set(prefix(kindOffset, part.p, 0), checkpointValue(offset, part.db.opts.Now()), nil); err != nil {
		return err
	}
	if part.rec.n >= recoveryBatch {
		return part.commitRecovery()
	}
	return nil
}

// commitRecovery commits the recovery batch with the live counts it
// changed. part.mu is held.
func (part *Partition) commitRecovery() error {
	b := part.rec.batch
	if b == nil {
		return nil
	}
	for ns, n := range part.applied {
		if err := b.Set(countKey(part.p, ns), int64Bytes(n), nil); err != nil {
			return err
		}
	}
	err := b.Commit(pebble.NoSync)
	_ = b.Close()
	if err == nil {
		part.db.addKeys(part.p, part.keys, part.rec.keys...)
	}
	part.rec = recovery{}
	return err
}

// endRecovery applies what recovery wrote; the partition's writes go
// through the overlay from now on. part.mu is held; it is released while
// the changelog's end offset is read.
func (part *Partition) endRecovery() error {
	if err := part.commitRecovery(); err != nil {
		return err
	}
	part.recovered = true
	part.next = -1
	if bounds := part.db.logBounds(); bounds != nil {
		// The next record of this process's must be the changelog's next:
		// a record between them is another writer's (checked as writes
		// are applied, overlay.go). The end read now, not the last
		// offset replayed: compaction may have removed the log's last
		// records (expired tombstones).
		part.mu.Unlock()
		_, end, err := bounds(part.p)
		part.mu.Lock()
		if err != nil {
			part.db.opts.Logger.Warn("scheduler table store: cannot read the changelog's end offset; the partition's first write is not checked for a gap", "partition", part.p, "err", err)
		} else {
			part.next = end
		}
	}
	return nil
}
