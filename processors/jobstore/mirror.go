package jobstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Mirror is what the store is a copy of: one changelog topic of one
// cluster. Kafka Streams keys its state directories the same way; a store
// that cannot show it was built from this changelog serves rows the log
// may not hold (a topic deleted and created again, CHIME_BROKERS pointed
// at another cluster with the same state dir, another topic prefix or
// partition count).
type Mirror struct {
	// Cluster is the cluster's ID.
	Cluster string `json:"cluster"`
	// Topic is the changelog topic's name.
	Topic string `json:"topic"`
	// TopicID is the topic's ID (KIP-516; a topic created again under the
	// same name has a new one), hex; empty where the broker has none.
	TopicID string `json:"topic_id,omitempty"`
	// Partitions is the topic's partition count.
	Partitions int32 `json:"partitions"`
	// Layout is the store's key layout (jobstore.Layout; 0 before it was
	// recorded): an index added since is built by rebuilding the store.
	Layout int `json:"layout,omitempty"`
}

func (m Mirror) differences(o Mirror) []string {
	var d []string
	if m.Cluster != o.Cluster {
		d = append(d, fmt.Sprintf("cluster %q, now %q", m.Cluster, o.Cluster))
	}
	if m.Topic != o.Topic {
		d = append(d, fmt.Sprintf("topic %q, now %q", m.Topic, o.Topic))
	}
	if m.TopicID != o.TopicID {
		d = append(d, fmt.Sprintf("topic ID %s, now %s (the topic was created again)", orNone(m.TopicID), orNone(o.TopicID)))
	}
	if m.Partitions != o.Partitions {
		d = append(d, fmt.Sprintf("%d partitions, now %d", m.Partitions, o.Partitions))
	}

	return d
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// LogBounds returns the changelog partition p's log start and end offsets
// (the next offset to be written).
type LogBounds func(p int32) (start, end int64, err error)

// Verify makes the store a copy of m: a store built from anything else, or
// that does not say what it was built from while it holds partitions, is
// wiped (logged at WARN with the reason), and m recorded. bounds, if set,
// is asked for the changelog's offsets whenever a partition's stored
// offset is read (GetOffset) and when a partition has recovered. Call it
// before any partition is opened: when a processor starts.
func (db *DB) Verify(m Mirror, bounds LogBounds) error {
	m.Layout = Layout
	if bounds != nil {
		db.bounds.Store(&bounds)
	}
	if len(db.openParts()) > 0 {
		return errors.New("jobstore: Verify called while partitions are open")
	}
	raw, err := get(db.pdb, []byte{kindMirror})
	if err != nil {
		return fmt.Errorf("jobstore: reading what the store mirrors: %w", err)
	}
	var why string
	switch {
	case raw == nil:
		has, err := db.holdsPartitions()
		if err != nil {
			return err
		}
		if has {
			why = "it does not say which changelog it was built from (written by an earlier version)"
		}
	default:
		var was Mirror
		if err := json.Unmarshal(raw, &was); err != nil {
			why = fmt.Sprintf("its record of what it mirrors does not decode: %v", err)
		} else if d := was.differences(m); len(d) > 0 {
			why = "it was built from another changelog: " + strings.Join(d, "; ")
		} else if was.Layout != m.Layout {
			why = fmt.Sprintf("its keys are in layout %d and this version writes layout %d (it indexes more)", was.Layout, m.Layout)
		} else {
			return nil
		}
	}
	b := db.pdb.NewBatch()
	defer b.Close()
	if why != "" {
		db.opts.Logger.Warn("scheduler table store: rebuilding every partition from Kafka", "why", why)
		for _, kind := range partitionKinds {
			if err := b.DeleteRange([]byte{kind}, []byte{kind + 1}, nil); err != nil {
				return err
			}
		}
	}
	enc, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := b.Set([]byte{kindMirror}, enc, nil); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

// holdsPartitions says whether any partition has a stored offset.
func (db *DB) holdsPartitions() (bool, error) {
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{kindOffset}, UpperBound: []byte{kindOffset + 1}})
	if err != nil {
		return false, err
	}
	has := it.First()
	return has, errors.Join(it.Error(), it.Close())
}

func (db *DB) logBounds() LogBounds {
	if b := db.bounds.Load(); b != nil {
		return *b
	}
	return nil
}

// isFormatError says an error from opening a store means the files are
// not a store this version reads.
func isFormatError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "format") || strings.Contains(s, "MANIFEST") || strings.Contains(s, "corrupt")
}
