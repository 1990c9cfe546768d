#!/usr/bin/env sh
# generate.sh OUT: the TypeScript SDK's generated code into OUT: the
# protobuf messages (protoc-gen-es, through buf, from schema/proto) and the
# API's types (openapi-typescript, from api/openapi.json). Run in
# sdk/typescript by `make generate-sdk` and `make check-generate-sdk`.
set -eu
out=$(mkdir -p "$1" && cd "$1" && pwd)
here=$(pwd)
root=$(cd ../.. && pwd)
cat > "$out/buf.gen.yaml" <<YAML
version: v2
plugins:
  - local: $here/node_modules/.bin/protoc-gen-es
    out: $out
    opt: [target=ts, import_extension=js]
YAML
(cd "$root/schema" && "$root/.tools/buf" generate --template "$out/buf.gen.yaml")
rm "$out/buf.gen.yaml"
node_modules/.bin/openapi-typescript "$root/api/openapi.json" -o "$out/openapi.ts" >/dev/null 2>&1
