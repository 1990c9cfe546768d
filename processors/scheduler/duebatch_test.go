package scheduler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// TestDueBatcherKeepsEachPartitionsOrder: a flush writes a record per due
// partition, keyed so that it lands there, holding that partition's dues
// in the order they were decided (a recall after its due); a partition
// whose dues outgrow maxDueBatchBytes gets several records, in order; a
// lone due is written as itself.
func TestDueBatcherKeepsEachPartitionsOrder(t *testing.T) {
	const n = 4
	type sent struct {
		key string
		due *chimev1.Due
	}
	flush := func(b *dueBatcher, parts int32) []sent {
		var out []sent
		b.flush(parts, func(key string, due *chimev1.Due) { out = append(out, sent{key, due}) })
		require.Empty(t, b.held, "a flush forgets what it sent")
		return out
	}

	var b dueBatcher
	body := strings.Repeat("x", 1000)
	var want []string // the dues in the order decided
	for i := range 2000 {
		ns := fmt.Sprintf("ns%d", i%7)
		d := &chimev1.Due{Namespace: ns, JobId: fmt.Sprintf("j%d", i), Recall: i%5 == 4,
			Callback: &chimev1.HttpCallback{Url: "http://x/" + body}}
		b.add(ns, d)
		want = append(want, d.JobId)
	}
	recs := flush(&b, n)
	got := map[int32][]string{}
	var all int
	for _, r := range recs {
		p := schema.PartitionOf(r.key, n)
		require.LessOrEqual(t, schema.Size(r.due), maxDueBatchBytes, "a batch stays within its byte bound")
		dues := schema.DuesOf(r.due)
		require.Greater(t, len(dues), 1)
		for _, d := range dues {
			require.Equal(t, p, schema.PartitionOf(d.Namespace, n), "every due of a record belongs to its partition")
			got[p] = append(got[p], d.JobId)
			all++
		}
	}
	require.Equal(t, len(want), all)
	require.Greater(t, len(recs), len(got), "the byte bound split a partition's dues")
	for p, ids := range got {
		var exp []string
		for i, id := range want {
			if schema.PartitionOf(fmt.Sprintf("ns%d", i%7), n) == p {
				exp = append(exp, id)
			}
		}
		require.Equal(t, exp, ids, "partition %d in the order decided", p)
	}

	// A lone due, and dues while the partitions are not known, go alone.
	one := &chimev1.Due{Namespace: "a", JobId: "j"}
	b.add("a", one)
	require.Equal(t, []sent{{"a", one}}, flush(&b, n))
	two := &chimev1.Due{Namespace: "b", JobId: "k"}
	b.add("a", one)
	b.add("b", two)
	require.Equal(t, []sent{{"a", one}, {"b", two}}, flush(&b, 0))
	require.Empty(t, flush(&b, n))
}
