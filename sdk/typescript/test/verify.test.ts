import assert from "node:assert/strict";
import { test } from "node:test";

import { verify, WebhookVerificationError } from "../src/verify.js";
import { OTHER_SECRET as OTHER, SECRET, signed } from "./helpers.js";

test("verify accepts chime's signature", () => {
  const cb = verify(SECRET, '{"a":1}', signed('{"a":1}'));
  assert.equal(cb.idempotencyKey, "acme/job/1");
  assert.deepEqual([cb.namespace, cb.jobId, cb.attempt], ["acme", "job", 2]);
  assert.equal(cb.scheduledAt?.toISOString(), "2026-11-29T01:00:00.000Z");
});

test("verify refuses a tampered body, a wrong secret, an old timestamp", () => {
  assert.throws(() => verify(SECRET, '{"a":2}', signed('{"a":1}')), WebhookVerificationError);
  assert.throws(() => verify(OTHER, '{"a":1}', signed('{"a":1}')), WebhookVerificationError);
  assert.throws(() => verify(SECRET, "x", signed("x", { ts: Math.floor(Date.now() / 1000) - 3600 })), WebhookVerificationError);
});

test("verify during a rotation takes either secret", () => {
  verify([OTHER, SECRET], "x", signed("x"));
});
