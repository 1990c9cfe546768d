import json

from conftest import REPO

from chime.partition import fnv1a32, partition_of


def test_partition_vectors_shared_with_go():
    """schema/testdata/partitions.json: goka's placement, which Go's tests check too."""
    vectors = json.loads((REPO / "schema" / "testdata" / "partitions.json").read_text())
    assert len(vectors) > 200
    negatives = 0
    for v in vectors:
        if fnv1a32(v["key"].encode()) >= 1 << 31:
            negatives += 1
        assert partition_of(v["key"], v["partitions"]) == v["partition"], v
    assert negatives > 0, "the vectors must hold keys whose hash is negative as an int32"


def test_fnv1a32_known_values():
    # Go: hash/fnv New32a.
    assert fnv1a32(b"") == 0x811C9DC5
    assert fnv1a32(b"a") == 0xE40C292C
