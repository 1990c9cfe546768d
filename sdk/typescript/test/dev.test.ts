/** The SDK against a whole chime dev: HTTP and Kafka, callbacks verified, controls, dead letters, errors. */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";

import { Client, httpJob, jobKey, partitionOf, ProblemError, Publisher, ValidationError, verify } from "../src/index.js";
import { type ChimeDev, Receiver, startChimeDev, waitFor } from "./helpers.js";

const NS = "tssdk";
let dev: ChimeDev;
let receiver: Receiver;
let admin: Client;
let client: Client;
let publisher: Publisher;
let secret: string;

const soon = (ms = 1000) => new Date(Date.now() + ms);
const stateOf = async (id: string) => (await client.getJob(NS, id)).state;

before(async () => {
  dev = await startChimeDev();
  receiver = await new Receiver().start();
  admin = new Client({ baseUrl: dev.baseUrl, token: dev.adminToken });
  await admin.putNamespace(NS, { retry: { max_attempts: 1 } });
  const key = await admin.createKey(NS);
  secret = (await admin.rotateSigningSecret(NS)).signing_secret;
  client = new Client({ baseUrl: dev.baseUrl, token: key.key });
  publisher = Publisher.fromStateDir(dev.stateDir);
});

after(async () => {
  await publisher?.close();
  await receiver?.stop();
  await dev?.stop();
});

test("schedules over HTTP and through Kafka, and verifies the callbacks", async () => {
  const req = { id: "http-1", schedule: { at: soon().toISOString() }, callback: { url: receiver.url + "/http-1", body: { via: "http" } }, labels: { team: "billing" } };
  const idempotencyKey = randomUUID();
  const first = await client.createJob(NS, req, { idempotencyKey });
  assert.deepEqual(await client.createJob(NS, req, { idempotencyKey }), first, "the retry answers as the first did");

  const spec = httpJob(NS, "kafka-1", { url: receiver.url + "/kafka-1", at: soon(), body: '{"via":"kafka"}', headers: { "Content-Type": "application/json" }, labels: { team: "billing" } });
  const receipt = await publisher.schedule(spec);
  assert.equal(receipt.partition, partitionOf(jobKey(NS, "kafka-1"), await publisher.partitions()));
  assert.ok(receipt.offset >= 0n);

  for (const [id, body] of [["http-1", { via: "http" }], ["kafka-1", { via: "kafka" }]] as const) {
    const calls = await waitFor(`${id}'s callback`, () => receiver.callsTo("/" + id).length > 0 && receiver.callsTo("/" + id));
    const cb = verify(secret, calls[0].body, calls[0].headers);
    assert.equal(cb.idempotencyKey, `${NS}/${id}/1`);
    assert.deepEqual([cb.namespace, cb.jobId], [NS, id]);
    assert.deepEqual(JSON.parse(cb.body.toString()), body);
  }
  await waitFor("both completed", async () => (await stateOf("http-1")) === "completed" && (await stateOf("kafka-1")) === "completed");
  const h = await client.getJob(NS, "http-1");
  const k = await client.getJob(NS, "kafka-1");
  assert.deepEqual(Object.keys(k).sort(), Object.keys(h).sort(), "a job published from TypeScript reads as one created over HTTP");
  assert.deepEqual(k.labels, { team: "billing" });
  const ids = [];
  for await (const j of client.listJobs(NS, { limit: 1 })) ids.push(j.id);
  assert.ok(ids.includes("http-1") && ids.includes("kafka-1"), "the listing pages through every job");
  const billing = [];
  for await (const j of client.listJobs(NS, { labels: { team: "billing" }, limit: 1 })) billing.push(j);
  assert.ok(billing.some((j) => j.id === "http-1") && billing.some((j) => j.id === "kafka-1"), "found by label, over both ways in");
  assert.ok(billing.every((j) => j.labels?.team === "billing"));
  const none = [];
  for await (const j of client.listJobs(NS, { labels: { team: "billing", tier: "none" } })) none.push(j);
  assert.deepEqual(none, [], "every label must match");
});

test("pauses, resumes, triggers and cancels over HTTP and through Kafka", async () => {
  for (const id of ["ctl-http", "ctl-kafka"]) {
    await client.createJob(NS, { id, schedule: { every: "1h" }, callback: { url: `${receiver.url}/${id}` } });
  }
  assert.equal((await client.pauseJob(NS, "ctl-http")).state, "paused");
  assert.equal((await client.resumeJob(NS, "ctl-http")).state, "scheduled");
  await client.triggerJob(NS, "ctl-http");
  await waitFor("the triggered fire", () => receiver.callsTo("/ctl-http").length > 0);
  assert.equal((await client.cancelJob(NS, "ctl-http")).state, "cancelled");

  await publisher.pause(NS, "ctl-kafka");
  await waitFor("paused through Kafka", async () => (await stateOf("ctl-kafka")) === "paused");
  await publisher.resume(NS, "ctl-kafka");
  await waitFor("resumed through Kafka", async () => (await stateOf("ctl-kafka")) === "scheduled");
  await publisher.trigger(NS, "ctl-kafka");
  const calls = await waitFor("the fire triggered through Kafka", () => receiver.callsTo("/ctl-kafka").length > 0 && receiver.callsTo("/ctl-kafka"));
  verify(secret, calls[0].body, calls[0].headers);
  await publisher.cancel(NS, "ctl-kafka", "done");
  await waitFor("cancelled through Kafka", async () => (await stateOf("ctl-kafka")) === "cancelled");
});

test("replays a dead letter", async () => {
  receiver.status.set("/dead-1", 500);
  await client.createJob(NS, { id: "dead-1", schedule: { at: soon().toISOString() }, callback: { url: receiver.url + "/dead-1" }, retry: { max_attempts: 1 } });
  const dl = await waitFor("the dead letter", async () => {
    const all = [];
    for await (const d of client.listDeadLetters(NS, { job_id_prefix: "dead-1" })) all.push(d);
    return all.length > 0 && all;
  }, 90_000);
  receiver.status.set("/dead-1", 200);
  const before = receiver.callsTo("/dead-1").length;
  const replay = await client.replayDeadLetter(NS, dl[0].id);
  assert.ok(replay.id);
  await waitFor("the replayed call", () => receiver.callsTo("/dead-1").length > before);
});

test("reads problem+json as a typed exception", async () => {
  await assert.rejects(client.createJob(NS, { id: "bad/id", schedule: { every: "1h" }, callback: { url: "ftp://x" } }), (e: unknown) => {
    assert.ok(e instanceof ProblemError);
    assert.ok(e.status >= 400 && e.status < 500);
    assert.ok(e.type && e.title);
    assert.ok(e.errors.length > 0 && e.errors.every((x) => x.field !== undefined));
    return true;
  });
  await assert.rejects(client.getJob(NS, "no-such-job"), (e: unknown) => e instanceof ProblemError && e.status === 404);
});

test("the publisher refuses an invalid command before Kafka", () => {
  assert.throws(() => publisher.schedule(httpJob(NS, "bad", { url: "ftp://example.com/x", at: soon() })), (e: unknown) => e instanceof ValidationError && e.field === "upsert.spec.target.http.url");
});

test("scheduleMany publishes nothing when one command is invalid", async () => {
  const good = httpJob(NS, "many-1", { url: receiver.url + "/many", everyMs: 3600_000 });
  const bad = httpJob(NS, "many-2", { url: "ftp://example.com/x", everyMs: 3600_000 });
  assert.throws(() => publisher.scheduleMany([good, bad]), (e: unknown) => e instanceof ValidationError && e.field === "specs[1].upsert.spec.target.http.url");
  const receipts = await Promise.all(publisher.scheduleMany([good, httpJob(NS, "many-3", { url: receiver.url + "/many", everyMs: 3600_000 })]));
  assert.equal(new Set(receipts.map((r) => r.commandId)).size, 2);
  await waitFor("both scheduled", async () => (await stateOf("many-3")) === "scheduled");
  await assert.rejects(client.getJob(NS, "many-2"), (e: unknown) => e instanceof ProblemError && e.status === 404);
});

test("previews a schedule and shows a job's next fires", async () => {
  const schedule = { every: "1h", jitter: "5m" };
  const preview = await client.previewSchedule({ schedule, count: 3, namespace: NS, id: "preview-1" });
  assert.deepEqual(preview.fires.map((f) => f.fire_seq), [1, 2, 3]);
  await client.createJob(NS, { id: "preview-1", schedule, callback: { url: "http://127.0.0.1:9/x" } });
  const job = await waitFor("the job's row", async () => {
    const j = await client.getJob(NS, "preview-1");
    return j.next_fires && j;
  });
  assert.deepEqual(job.next_fires!.slice(0, 3).map((f) => f.fire_seq), [1, 2, 3]);
  await assert.rejects(client.previewSchedule({ schedule }), (e: unknown) => e instanceof ProblemError && e.status === 422 && e.errors[0].field === "id");
});
