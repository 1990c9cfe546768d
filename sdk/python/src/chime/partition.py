"""Where chime puts a job's commands: the partition goka reads its key from.

chime's scheduler is a goka processor; goka's producer (sarama's hash
partitioner with FNV-1a 32) puts a key on ``int32(fnv1a(key)) % n``, made
positive when negative. A publisher that used Kafka's default partitioner
(murmur2 in librdkafka and the Java client) would put a job's commands on a
partition the scheduler does not read the job's row from: they would be
applied to the wrong row, or to none. :class:`chime.kafka.Publisher`
computes the partition here and names it on every record.

``schema/testdata/partitions.json`` holds vectors that the Go, Python and
TypeScript tests all check.
"""

from __future__ import annotations

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def fnv1a32(data: bytes) -> int:
    """FNV-1a, 32 bits (Go's hash/fnv New32a)."""
    h = _FNV_OFFSET
    for b in data:
        h ^= b
        h = (h * _FNV_PRIME) & 0xFFFFFFFF
    return h


def job_key(namespace: str, job_id: str) -> str:
    """The record key of a job's commands: ``namespace/job_id``."""
    return f"{namespace}/{job_id}"


def partition_of(key: str | bytes, partitions: int) -> int:
    """The partition goka reads ``key`` from in a topic of ``partitions``."""
    if partitions <= 0:
        return 0
    raw = key.encode() if isinstance(key, str) else key
    h = fnv1a32(raw)
    signed = h - (1 << 32) if h >= 1 << 31 else h
    # Go's % truncates toward zero; Python's floors.
    p = abs(signed) % partitions
    return p
