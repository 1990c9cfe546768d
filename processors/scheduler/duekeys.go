package scheduler

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/schema/chimev1"
)

// dueKeys picks the key of each due event. A namespace that is not spread
// keys its dues by its name: one partition, one dispatcher. A spread
// namespace (schema/spread.go) sends shard i to partition (p0 + i) mod P,
// p0 being the namespace's own partition and P the due topic's partition
// count, so its shards land on distinct partitions and, with as many
// dispatchers, on distinct dispatchers. Kafka places a record by its key's
// hash, so the key of partition p0+i is the first of "ns#1", "ns#2", …
// that goka's partitioner sends there ('#' never appears in a namespace).
// Until P is known (or if the search fails) a shard's key is "ns#shard":
// spread still, only not guaranteed onto distinct partitions.
type dueKeys struct {
	partitions atomic.Int32

	mu   sync.Mutex
	byNS map[string]nsKeys
}

type nsKeys struct {
	partitions int32
	keys       []string // by partition offset from the namespace's own
}

func (k *dueKeys) key(due *chimev1.Due) string {
	ns := due.GetNamespace()
	if due.GetSpread() <= 1 || due.GetShard() == 0 {
		return ns
	}
	n := k.partitions.Load()
	if n <= 1 {
		return ns + "#" + strconv.FormatUint(uint64(due.GetShard()), 10)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.byNS[ns]
	if !ok || e.partitions != n {
		e = nsKeys{partitions: n, keys: searchKeys(ns, n)}
		if k.byNS == nil {
			k.byNS = map[string]nsKeys{}
		}
		k.byNS[ns] = e
	}
	if key := e.keys[int32(due.GetShard())%n]; key != "" {
		return key
	}
	return ns + "#" + strconv.FormatUint(uint64(due.GetShard()), 10)
}

// searchKeys finds, for each offset i in [0, n), a key that goka writes
// to partition (p0 + i) mod n. About n·ln n tries fill all of them; the
// search is bounded and leaves "" where it gave up.
func searchKeys(ns string, n int32) []string {
	keys := make([]string, n)
	p0 := processors.PartitionOf(ns, n)
	keys[0] = ns
	left := n - 1
	for k := 1; left > 0 && k <= 64*int(n)+64; k++ {
		key := ns + "#" + strconv.Itoa(k)
		off := (processors.PartitionOf(key, n) - p0 + n) % n
		if keys[off] == "" {
			keys[off] = key
			left--
		}
	}
	return keys
}

// watchPartitions keeps the partition counts of topics current: read at
// once, then every minute (partitions can be added to a live topic).
func watchPartitions(ctx context.Context, cl *kgo.Client, counts map[string]*atomic.Int32) {
	adm := kadm.NewClient(cl)
	names := make([]string, 0, len(counts))
	for t := range counts {
		names = append(names, t)
	}
	wait := 100 * time.Millisecond
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		td, err := adm.ListTopics(rctx, names...)
		cancel()
		known := 0
		for t, n := range counts {
			if d, ok := td[t]; err == nil && ok && d.Err == nil && len(d.Partitions) > 0 {
				n.Store(int32(len(d.Partitions)))
				known++
			}
		}
		if known == len(counts) {
			wait = time.Minute
		} else {
			wait = min(2*wait, 10*time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
