import json

import pytest
from conftest import REPO
from google.protobuf import json_format

from chime.v1 import job_pb2
from chime.validate import ValidationError, validate_command

VECTORS = json.loads((REPO / "schema" / "testdata" / "commands.json").read_text())


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_validation_matches_go(vector):
    """schema/testdata/commands.json: the field Go's ValidateCommand names, or none."""
    cmd = json_format.Parse(json.dumps(vector["command"]), job_pb2.JobCommand())
    if vector["field"] == "":
        validate_command(cmd)
        return
    with pytest.raises(ValidationError) as e:
        validate_command(cmd)
    assert e.value.field == vector["field"]
