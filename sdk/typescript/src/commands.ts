/** Job commands as chime's Go producer builds them (schema/command). */

import { create } from "@bufbuild/protobuf";
import { durationFromMs, timestampFromDate, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { randomFillSync } from "node:crypto";

import {
  type JobCommand,
  JobCommandSchema,
  type JobSpec,
  JobSpecSchema,
} from "./gen/chime/v1/job_pb.js";

// Random bytes drawn a page at a time: one call per id cost more than the rest of a publish.
const pool = Buffer.alloc(4096);
let poolAt = pool.length;

function randomBytes(n: number): Buffer {
  if (poolAt + n > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  poolAt += n;
  return pool.subarray(poolAt - n, poolAt);
}

/** A command id: a UUIDv7 (time-ordered), as Go's command.NewID makes. */
export function newId(): string {
  const b = Buffer.alloc(16);
  b.writeUIntBE(Date.now(), 0, 6);
  randomBytes(10).copy(b, 6);
  b[6] = 0x70 | (b[6] & 0x0f);
  b[8] = 0x80 | (b[8] & 0x3f);
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Fills in command_id and issued_at where unset (a republished command keeps its id). */
export function stamp(cmd: JobCommand, now?: Date): void {
  if (!cmd.commandId) cmd.commandId = newId();
  if (!cmd.issuedAt) cmd.issuedAt = now ? timestampFromDate(now) : timestampFromMs(Date.now());
}

/** The command's kind, as the chime-command header carries it ("upsert", ...). */
export function kind(cmd: JobCommand): string {
  return cmd.command.case ?? "";
}

/** Create the job, or replace its spec and reschedule it. */
export function upsert(spec: JobSpec): JobCommand {
  return create(JobCommandSchema, { namespace: spec.namespace, jobId: spec.id, command: { case: "upsert", value: { spec } } });
}

export function cancel(namespace: string, jobId: string, reason = ""): JobCommand {
  return create(JobCommandSchema, { namespace, jobId, command: { case: "cancel", value: { reason } } });
}

export function pause(namespace: string, jobId: string): JobCommand {
  return create(JobCommandSchema, { namespace, jobId, command: { case: "pause", value: {} } });
}

export function resume(namespace: string, jobId: string): JobCommand {
  return create(JobCommandSchema, { namespace, jobId, command: { case: "resume", value: {} } });
}

/** Fire the job once now, beside its schedule (its own fire number and idempotency key). */
export function trigger(namespace: string, jobId: string): JobCommand {
  return create(JobCommandSchema, { namespace, jobId, command: { case: "trigger", value: {} } });
}

export interface HttpJob {
  url: string;
  /** One of at, everyMs, cron. */
  at?: Date;
  everyMs?: number;
  cron?: string;
  timezone?: string;
  method?: string;
  headers?: Record<string, string>;
  body?: Uint8Array | string;
  labels?: Record<string, string>;
  /** Ends a recurring job after its schedule fired this many times (0: no limit). */
  maxFires?: number;
}

/** A job spec with an HTTP callback and one of at, everyMs or cron. */
export function httpJob(namespace: string, id: string, j: HttpJob): JobSpec {
  const body = typeof j.body === "string" ? new TextEncoder().encode(j.body) : (j.body ?? new Uint8Array());
  const schedule = j.at
    ? { kind: { case: "at" as const, value: timestampFromDate(j.at) } }
    : j.everyMs !== undefined
      ? { kind: { case: "every" as const, value: { interval: durationFromMs(j.everyMs) } } }
      : j.cron !== undefined
        ? { kind: { case: "cron" as const, value: { expr: j.cron, timezone: j.timezone ?? "" } } }
        : undefined;
  return create(JobSpecSchema, {
    namespace,
    id,
    schedule,
    labels: j.labels ?? {},
    maxFires: j.maxFires ?? 0,
    target: { kind: { case: "http", value: { url: j.url, method: j.method ?? "", headers: j.headers ?? {}, body } } },
  });
}
