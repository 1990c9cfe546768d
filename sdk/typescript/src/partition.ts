/**
 * Where chime puts a job's commands: the partition goka reads its key from.
 *
 * goka's producer (sarama's hash partitioner, FNV-1a 32) puts a key on
 * int32(fnv1a(key)) % n, made positive when negative. Kafka clients'
 * default partitioners (murmur2) would put a job's commands where the
 * scheduler does not read the job's row. schema/testdata/partitions.json
 * holds vectors the Go, Python and TypeScript tests all check.
 */

const encoder = new TextEncoder();

/** FNV-1a, 32 bits (Go's hash/fnv New32a). */
export function fnv1a32(data: Uint8Array): number {
  let h = 0x811c9dc5;
  for (const b of data) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** The record key of a job's commands: `namespace/job_id`. */
export function jobKey(namespace: string, jobId: string): string {
  return `${namespace}/${jobId}`;
}

/** The partition goka reads `key` from in a topic of `partitions`. */
export function partitionOf(key: string | Uint8Array, partitions: number): number {
  if (partitions <= 0) return 0;
  const raw = typeof key === "string" ? encoder.encode(key) : key;
  const signed = fnv1a32(raw) | 0; // as Go's int32
  return Math.abs(signed % partitions);
}
