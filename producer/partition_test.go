package producer

import (
	"encoding/hex"
	"testing"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// gokaPartition is where goka v1.1.17 puts key among n partitions: its
// producer (builders.go) uses sarama.NewCustomHashPartitioner(hasher) with
// goka.DefaultHasher, FNV-1a 32. goka's View.hash computes abs before the
// modulo, which differs only for a hash of math.MinInt32, where it is not
// usable either.
func gokaPartition(t testing.TB, key string, n int32) int32 {
	t.Helper()
	part := sarama.NewCustomHashPartitioner(goka.DefaultHasher())("chime.job-commands")
	p, err := part.Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(key)}, n)
	require.NoError(t, err)
	return p
}

// The hasher the producer configures must put every key where goka does,
// including keys whose FNV-1a hash is negative as an int32.
func TestPartitionerMatchesGoka(t *testing.T) {
	t.Parallel()

	hasher := kgo.SaramaCompatHasher(fnv32a)
	for _, n := range []int32{1, 3, 8, 12, 64} {
		negatives := 0
		for i := range 20_000 {
			key := "ns" + string(rune('a'+i%26)) + "/job-" + hex.EncodeToString([]byte{byte(i), byte(i >> 8)})
			if int32(fnv32a([]byte(key))) < 0 {
				negatives++
			}
			require.Equal(t, gokaPartition(t, key, n), int32(hasher([]byte(key), int(n))), "key %q, %d partitions", key, n)
		}
		require.Positive(t, negatives, "the keys must exercise negative hashes")
	}
}
