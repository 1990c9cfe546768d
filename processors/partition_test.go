package processors

import (
	"testing"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
)

// PartitionOf agrees with where goka's producer (sarama's hash partitioner
// with Hasher) puts a key.
func TestPartitionOfMatchesSarama(t *testing.T) {
	t.Parallel()
	part := sarama.NewCustomHashPartitioner(Hasher)("due")
	for _, key := range []string{"acme", "hot#1", "tenant-42#17", "z"} {
		for _, n := range []int32{1, 3, 12, 64} {
			want, err := part.Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(key)}, n)
			require.NoError(t, err)
			require.Equal(t, want, PartitionOf(key, n), "%s in %d", key, n)
		}
	}
}
