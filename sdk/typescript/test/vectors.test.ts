import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { fromJson } from "@bufbuild/protobuf";

import { JobCommandSchema } from "../src/gen/chime/v1/job_pb.js";
import { fnv1a32, partitionOf } from "../src/partition.js";
import { ValidationError, validateCommand } from "../src/validate.js";
import { REPO } from "./helpers.js";

test("partition vectors shared with Go (schema/testdata/partitions.json)", () => {
  const vectors: { key: string; partitions: number; partition: number }[] = JSON.parse(readFileSync(join(REPO, "schema/testdata/partitions.json"), "utf8"));
  assert.ok(vectors.length > 200);
  let negatives = 0;
  for (const v of vectors) {
    if (fnv1a32(new TextEncoder().encode(v.key)) >= 2 ** 31) negatives++;
    assert.equal(partitionOf(v.key, v.partitions), v.partition, JSON.stringify(v));
  }
  assert.ok(negatives > 0, "the vectors must hold keys whose hash is negative as an int32");
  assert.equal(fnv1a32(new Uint8Array()), 0x811c9dc5);
  assert.equal(fnv1a32(new TextEncoder().encode("a")), 0xe40c292c);
});

test("validation answers as Go's (schema/testdata/commands.json)", () => {
  const vectors: { name: string; command: unknown; field: string }[] = JSON.parse(readFileSync(join(REPO, "schema/testdata/commands.json"), "utf8"));
  for (const v of vectors) {
    const cmd = fromJson(JobCommandSchema, v.command as never);
    let field = "";
    try {
      validateCommand(cmd);
    } catch (e) {
      assert.ok(e instanceof ValidationError, `${v.name}: ${String(e)}`);
      field = e.field;
    }
    assert.equal(field, v.field, v.name);
  }
});
