#!/usr/bin/env bash
# generate.sh PYTHON OUT: the Python SDK's generated code into OUT (laid out
# as src/): chime/v1 from schema/proto with the protoc grpcio-tools
# bundles, chime/models.py from api/openapi.json with datamodel-code-generator.
# Run from the repository's root by `make generate-sdk` and `make check-generate-sdk`.
set -euo pipefail
py=$1 out=$2
bin=$(dirname "$py")
include=$("$py" -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))')
mkdir -p "$out/chime"
"$py" -m grpc_tools.protoc -I schema/proto -I "$include" --python_out="$out" --pyi_out="$out" schema/proto/chime/v1/*.proto
touch "$out/chime/v1/__init__.py"
"$bin/datamodel-codegen" --input api/openapi.json --input-file-type openapi --output "$out/chime/models.py" \
  --output-model-type typing.TypedDict --target-python-version 3.10 --use-standard-collections \
  --use-union-operator --disable-timestamp 2>/dev/null
