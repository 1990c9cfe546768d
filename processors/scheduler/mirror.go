package scheduler

import (
	"context"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/chime-sched/chime/processors/jobstore"
)

// The table's store (processors/jobstore) is a copy of the changelog; this
// is where the scheduler tells it which changelog that is, and where its
// partitions' logs begin and end.

// mirrorTimeout bounds each metadata request.
const mirrorTimeout = 10 * time.Second

// mirror reads what the store must mirror: the cluster, the table topic,
// its ID and partition count.
func mirror(ctx context.Context, adm *kadm.Client, table string) (jobstore.Mirror, error) {
	ctx, cancel := context.WithTimeout(ctx, mirrorTimeout)
	defer cancel()
	md, err := adm.Metadata(ctx, table)
	if err != nil {
		return jobstore.Mirror{}, fmt.Errorf("scheduler: reading the table topic %s's metadata: %w", table, err)
	}
	td, ok := md.Topics[table]
	if !ok || td.Err != nil {
		return jobstore.Mirror{}, fmt.Errorf("scheduler: the table topic %s is not there (%v); create the topics first (chime topics)", table, td.Err)
	}
	m := jobstore.Mirror{Cluster: md.Cluster, Topic: table, Partitions: int32(len(td.Partitions))}
	if td.ID != (kadm.TopicID{}) {
		m.TopicID = hex.EncodeToString(td.ID[:])
	}
	return m, nil
}

// logBounds reads the table topic's start and end offsets, one request
// per topic for every partition asked within a short while (goka sets up
// every partition of an assignment at once).
type logBounds struct {
	adm   *kadm.Client
	table string

	mu         sync.Mutex
	at         time.Time
	start, end kadm.ListedOffsets
}

// boundsFresh is how long one reading serves every partition.
const boundsFresh = 200 * time.Millisecond

func (b *logBounds) get(p int32) (start, end int64, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if time.Since(b.at) > boundsFresh {
		ctx, cancel := context.WithTimeout(context.Background(), mirrorTimeout)
		defer cancel()
		s, err := b.adm.ListStartOffsets(ctx, b.table)
		if err == nil {
			err = s.Error()
		}
		if err != nil {
			return 0, 0, err
		}
		e, err := b.adm.ListEndOffsets(ctx, b.table)
		if err == nil {
			err = e.Error()
		}
		if err != nil {
			return 0, 0, err
		}
		b.start, b.end, b.at = s, e, time.Now()
	}
	so, ok1 := b.start.Lookup(b.table, p)
	eo, ok2 := b.end.Lookup(b.table, p)
	if !ok1 || !ok2 {
		b.at = time.Time{}
		return 0, 0, fmt.Errorf("the table topic %s has no partition %d", b.table, p)
	}
	return so.Offset, eo.Offset, nil
}
