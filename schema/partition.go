package schema

import "hash/fnv"

// PartitionOf is the partition goka's producer (sarama's hash partitioner
// with FNV-1a 32, in its default, non-reference absolute-value mode)
// writes key to in a topic of n partitions: where a job's commands and
// row live. Everything that writes into a topic goka reads must agree
// with it (producer.GokaPartitioner does).
func PartitionOf(key string, n int32) int32 {
	if n <= 0 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	p := int32(h.Sum32()) % n
	if p < 0 {
		p = -p
	}
	return p
}
