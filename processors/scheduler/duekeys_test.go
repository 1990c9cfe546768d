package scheduler

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/processors"
	"github.com/chime-sched/chime/schema/chimev1"
)

// Each shard of a spread namespace is keyed onto a partition of its own.
func TestDueKeysPutShardsOnDistinctPartitions(t *testing.T) {
	t.Parallel()
	for _, n := range []int32{2, 3, 4, 6, 12, 48, 256} {
		var k dueKeys
		k.partitions.Store(n)
		for _, ns := range []string{"acme", "hot", "a", "tenant-42"} {
			seen := map[int32]bool{}
			p0 := processors.PartitionOf(ns, n)
			for shard := range uint32(n) {
				key := k.key(&chimev1.Due{Namespace: ns, Shard: shard, Spread: uint32(n)})
				p := processors.PartitionOf(key, n)
				require.False(t, seen[p], "n=%d ns=%s shard=%d: partition %d taken twice", n, ns, shard, p)
				seen[p] = true
				require.Equal(t, (p0+int32(shard))%n, p)
			}
		}
	}
	var k dueKeys
	require.Equal(t, "acme", k.key(&chimev1.Due{Namespace: "acme"}), "not spread: the namespace")
	require.Equal(t, "acme", k.key(&chimev1.Due{Namespace: "acme", Shard: 0, Spread: 4}), "shard 0: the namespace's own partition")
	require.Equal(t, "acme#3", k.key(&chimev1.Due{Namespace: "acme", Shard: 3, Spread: 4}), "partition count unknown")
}
