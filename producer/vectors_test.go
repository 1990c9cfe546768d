package producer

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/chime-sched/chime/schema"
)

var updateVectors = flag.Bool("update-vectors", false, "rewrite schema/testdata/partitions.json from goka's partitioner")

// partitionVector is one line of schema/testdata/partitions.json: where a
// job key goes among n partitions. The Python and TypeScript SDKs' tests
// read the same file (sdk/python, sdk/typescript): a publisher in any
// language must put a key where goka reads it.
type partitionVector struct {
	Key        string `json:"key"`
	Partitions int32  `json:"partitions"`
	Partition  int32  `json:"partition"`
}

const vectorsFile = "../schema/testdata/partitions.json"

// vectorKeys are job keys ("namespace/id") of every kind a client sends:
// short and long, ASCII and UTF-8, and keys whose FNV-1a hash is negative
// as an int32 (where sarama negates the remainder).
func vectorKeys() []string {
	keys := []string{"a/b", "peerbench/job-0", "peerbench/job-1", "billing/invoice-2026-11", "team.billing/reminder:42",
		"ns/ünïcödé", "ns/日本語のジョブ", "ns/emoji-🎉", "x/y"}
	for i := range 40 {
		keys = append(keys, "ns"+string(rune('a'+i%26))+"/job-"+string(rune('0'+i%10))+string(rune('a'+i/10)))
	}
	long := "ns/"
	for len(long) < 250 {
		long += "long-id-"
	}
	return append(keys, long)
}

// TestPartitionVectors: the shared vectors are goka's placement (sarama's
// partitioner, TestPartitionerMatchesGoka), schema.PartitionOf's and the
// producer's; -update-vectors writes them.
func TestPartitionVectors(t *testing.T) {
	t.Parallel()
	path := filepath.FromSlash(vectorsFile)
	if *updateVectors {
		var vs []partitionVector
		for _, k := range vectorKeys() {
			for _, n := range []int32{1, 3, 6, 12, 24, 64} {
				vs = append(vs, partitionVector{Key: k, Partitions: n, Partition: gokaPartition(t, k, n)})
			}
		}
		raw, err := json.MarshalIndent(vs, "", " ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, append(raw, '\n'), 0o644))
	}
	raw, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./producer -run TestPartitionVectors -update-vectors")
	var vs []partitionVector
	require.NoError(t, json.Unmarshal(raw, &vs))
	require.Greater(t, len(vs), 200)
	hasher := kgo.SaramaCompatHasher(fnv32a)
	negatives := 0
	for _, v := range vs {
		if int32(fnv32a([]byte(v.Key))) < 0 {
			negatives++
		}
		require.Equal(t, gokaPartition(t, v.Key, v.Partitions), v.Partition, "goka: %q among %d", v.Key, v.Partitions)
		require.Equal(t, v.Partition, schema.PartitionOf(v.Key, v.Partitions), "schema.PartitionOf: %q among %d", v.Key, v.Partitions)
		require.Equal(t, v.Partition, int32(hasher([]byte(v.Key), int(v.Partitions))), "the producer: %q among %d", v.Key, v.Partitions)
	}
	require.Positive(t, negatives, "the vectors must hold keys whose hash is negative as an int32")
}
