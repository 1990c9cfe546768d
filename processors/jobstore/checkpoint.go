package jobstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// A partition's checkpoint: the offset of the last changelog record its
// rows reflect, and when this process last held the partition (written
// with every applied batch, every touchEvery while the partition is open,
// and when it is closed). The age that makes a partition stale counts
// from when it was last held, not from its last write: a quiet partition
// held for days is as fresh as the changelog.

func checkpointValue(offset int64, heldAt time.Time) []byte {
	v := make([]byte, 16)
	binary.BigEndian.PutUint64(v, uint64(offset))
	binary.BigEndian.PutUint64(v[8:], uint64(heldAt.UnixNano()))
	return v
}

func parseCheckpoint(v []byte) (offset int64, heldAt time.Time, ok bool) {
	if len(v) != 16 {
		return 0, time.Time{}, false
	}
	return int64(binary.BigEndian.Uint64(v)), time.Unix(0, int64(binary.BigEndian.Uint64(v[8:]))), true
}

// GetOffset implements storage.Storage: the offset of the last changelog
// record the partition's rows reflect. A partition that cannot prove it
// mirrors the changelog from there is wiped first and recovered from the
// start (see the package comment).
func (part *Partition) GetOffset(def int64) (int64, error) {
	v, err := get(part.db.pdb, prefix(kindOffset, part.p, 0))
	if err != nil || v == nil {
		return def, err
	}
	offset, heldAt, ok := parseCheckpoint(v)
	if !ok {
		return def, part.wipe(fmt.Sprintf("its checkpoint record is %d bytes", len(v)))
	}
	if age := part.db.opts.Now().Sub(heldAt); age > part.db.opts.MaxCheckpointAge {
		return def, part.wipe(fmt.Sprintf("it was last held %s ago, longer than %s (tombstones may have been compacted away since)", age.Round(time.Second), part.db.opts.MaxCheckpointAge))
	}
	if bounds := part.db.logBounds(); bounds != nil {
		start, end, err := bounds(part.p)
		if err != nil {
			return def, fmt.Errorf("jobstore: reading the changelog's offsets of partition %d: %w", part.p, err)
		}
		switch {
		case offset >= end:
			return def, part.wipe(fmt.Sprintf("its offset %d is not below the changelog's end offset %d: the topic was created again, or is another one", offset, end))
		case offset+1 < start:
			return def, part.wipe(fmt.Sprintf("the changelog starts at offset %d, after its offset %d: the records in between are gone", start, offset))
		}
	}
	return offset, nil
}

// wipe removes every key of the partition, which is then recovered from
// the start of the changelog. It is logged at WARN: it costs a full read
// of the partition's changelog.
func (part *Partition) wipe(why string) error {
	part.db.opts.Logger.Warn("scheduler table store: rebuilding a partition from Kafka", "partition", part.p, "why", why)
	if err := wipePartition(part.db.pdb, part.p); err != nil {
		return err
	}
	part.mu.Lock()
	part.applied = map[string]int64{}
	part.mu.Unlock()
	return nil
}

func wipePartition(pdb *pebble.DB, p int32) error {
	b := pdb.NewBatch()
	defer b.Close()
	for _, kind := range partitionKinds {
		lo := prefix(kind, p, 0)
		if err := b.DeleteRange(lo, upperBound(lo), nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.NoSync)
}

// touch records that the partition is held now, at the offset it stands
// at.
func (part *Partition) touch() error {
	part.mu.Lock()
	defer part.mu.Unlock()
	if part.closed || !part.recovered {
		return nil
	}
	k := prefix(kindOffset, part.p, 0)
	v, err := get(part.db.pdb, k)
	if err != nil || v == nil {
		return err
	}
	offset, _, ok := parseCheckpoint(v)
	if !ok {
		return nil
	}
	return part.db.pdb.Set(k, checkpointValue(offset, part.db.opts.Now()), pebble.NoSync)
}

// removeAbandoned removes the partitions that no open storage holds and
// that were last held longer ago than MaxCheckpointAge: they would be
// rebuilt from Kafka if assigned again, and meanwhile take disk.
func (db *DB) removeAbandoned() error {
	lo := []byte{kindOffset}
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: []byte{kindOffset + 1}})
	if err != nil {
		return err
	}
	var stale []int32
	now := db.opts.Now()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != 5 {
			continue
		}
		p := int32(binary.BigEndian.Uint32(k[1:]))
		if _, heldAt, ok := parseCheckpoint(it.Value()); ok && now.Sub(heldAt) > db.opts.MaxCheckpointAge {
			stale = append(stale, p)
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	for _, p := range stale {
		// Under db.mu: a storage of p cannot be built meanwhile (Partition
		// registers it under the same lock) and recover into what is wiped.
		db.mu.Lock()
		var err error
		if db.parts[p] == nil {
			db.opts.Logger.Info("scheduler table store: removing a partition not held for longer than its maximum age", "partition", p, "max_age", db.opts.MaxCheckpointAge)
			err = wipePartition(db.pdb, p)
		}
		db.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}
