/**
 * Checks a job command before it is published, as chime's Go producer does.
 *
 * A port of Go's schema.ValidateCommand (schema/validate.go): the same
 * fields, limits and error fields. schema/testdata/commands.json holds
 * commands and the field Go names for each; the tests hold this module to
 * it. A schedule's expression (cron syntax, time zone) is left to chime:
 * the scheduler rejects a bad one on the rejections topic, with the
 * command's id. Here a schedule must set exactly one of at, every, cron.
 */

import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import { CatchupPolicy, type HttpCallback, type JobCommand, type KafkaTarget, OverlapPolicy, type RetryPolicy, type Target, type Upsert } from "./gen/chime/v1/job_pb.js";

export const LIMITS = {
  namespaceLen: 63,
  jobIdLen: 128,
  urlLen: 2048,
  headers: 50,
  headerNameLen: 256,
  headerValueLen: 8 << 10,
  headersBytes: 16 << 10,
  kafkaKey: 4 << 10,
  httpBody: 64 << 10,
  httpTimeoutS: 60,
  kafkaValue: 512 << 10,
  kafkaTopicLen: 249,
  retryAttempts: 100,
  retryMultiplier: 10,
  relevancyWindowS: 30 * 24 * 3600,
  labels: 32,
  labelKeyLen: 63,
  labelValueLen: 256,
  batchCommands: 1000,
} as const;

export const RESERVED_JOB_ID_PREFIX = "_chime.";

const NAMESPACE_HELP = "a-z, 0-9, '_' and '-', starting with a letter or digit";
const JOB_ID_HELP = "A-Z, a-z, 0-9 and _ . : @ -";
const TOPIC_HELP = "A-Z, a-z, 0-9 and . _ -";
const LABEL_KEY_HELP = "A-Z, a-z, 0-9 and _ . - /";
const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"];
const URL_BAD = /[^A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]|%(?![0-9A-Fa-f]{2})/;
const enc = new TextEncoder();
const bytes = (s: string) => enc.encode(s).length;

/** Which field of a command is wrong, and why (Go: schema.ValidationError). */
export class ValidationError extends Error {
  constructor(
    public field: string,
    public reason: string,
  ) {
    super(field ? `${field}: ${reason}` : reason);
    this.name = "ValidationError";
  }
}

const invalid = (field: string, reason: string) => new ValidationError(field, reason);
const isAlnum = (c: string) => /^[A-Za-z0-9]$/.test(c);
const byBytes = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

function checkNamespace(field: string, ns: string): ValidationError | undefined {
  if (ns === "") return invalid(field, `is empty; give 1-${LIMITS.namespaceLen} characters of ${NAMESPACE_HELP}`);
  if (bytes(ns) > LIMITS.namespaceLen) return invalid(field, `"${ns}" is ${bytes(ns)} bytes long; the limit is ${LIMITS.namespaceLen}`);
  for (let i = 0; i < ns.length; i++) {
    const c = ns[i];
    const ok = /[a-z0-9]/.test(c) || (i > 0 && (c === "_" || c === "-"));
    if (!ok) return invalid(field, `"${ns}" has '${c}' at byte ${i}; use only ${NAMESPACE_HELP}`);
  }
  return undefined;
}

function checkJobId(field: string, id: string): ValidationError | undefined {
  if (id === "") return invalid(field, `is empty; give 1-${LIMITS.jobIdLen} characters of ${JOB_ID_HELP}`);
  if (bytes(id) > LIMITS.jobIdLen) return invalid(field, `is ${bytes(id)} bytes long; the limit is ${LIMITS.jobIdLen}`);
  for (let i = 0; i < id.length; i++) {
    const c = id[i];
    if (!isAlnum(c) && !"_.:@-".includes(c)) {
      if (c === "/") return invalid(field, `"${id}" contains '/', which separates namespace and job id in keys; use only ${JOB_ID_HELP}`);
      return invalid(field, `"${id}" has '${c}' at byte ${i}; use only ${JOB_ID_HELP}`);
    }
  }
  return undefined;
}

function checkNotReserved(field: string, id: string): ValidationError | undefined {
  if (id.startsWith(RESERVED_JOB_ID_PREFIX)) {
    return invalid(field, `"${id}" starts with "${RESERVED_JOB_ID_PREFIX}", which is reserved for chime's own jobs; choose another id`);
  }
  return undefined;
}

function durationSeconds(field: string, d: Duration): [number, ValidationError | undefined] {
  const s = Number(d.seconds);
  if ((s > 0 && d.nanos < 0) || (s < 0 && d.nanos > 0) || Math.abs(d.nanos) >= 1e9) {
    return [0, invalid(field, "invalid duration; seconds and nanos must share a sign")];
  }
  if (Math.abs(s) > 9_223_372_035) return [0, invalid(field, `${s}s is out of range`)];
  return [s + d.nanos / 1e9, undefined];
}

function checkTimestamp(field: string, ts: Timestamp): ValidationError | undefined {
  const s = Number(ts.seconds);
  if (s < -62135596800 || s > 253402300799 || ts.nanos < 0 || ts.nanos >= 1e9) {
    return invalid(field, "invalid timestamp; it must lie between 0001-01-01 and 9999-12-31 with nanos in [0, 1e9)");
  }
  return undefined;
}

/** Throws ValidationError if Go's producer would refuse cmd. */
export function validateCommand(cmd: JobCommand | undefined): void {
  const err = validate(cmd);
  if (err) throw err;
}

/** Checks a batch and each of its commands (the first error names it). */
export function validateBatch(cmd: JobCommand): void {
  validateCommand(cmd);
  if (cmd.command.case !== "batch") return;
  cmd.command.value.commands.forEach((sub, i) => {
    const err = validate(sub);
    if (err) throw invalid(`batch.commands[${i}].${err.field}`, err.reason);
  });
}

function validate(cmd: JobCommand | undefined): ValidationError | undefined {
  if (!cmd) return invalid("", "command is nil");
  if (cmd.commandId === "") {
    return invalid("command_id", "is empty; give every command a unique id (a UUID, say), so rejections and events can echo it");
  }
  const e = checkNamespace("namespace", cmd.namespace) ?? checkNotReserved("job_id", cmd.jobId) ?? checkJobId("job_id", cmd.jobId);
  if (e) return e;
  if (cmd.issuedAt) {
    const te = checkTimestamp("issued_at", cmd.issuedAt);
    if (te) return te;
  }
  const c = cmd.command;
  switch (c.case) {
    case "upsert":
      return validateUpsert(cmd, c.value);
    case "cancel":
    case "pause":
    case "resume":
    case "trigger":
      return undefined;
    case "backfill": {
      const b = c.value;
      for (const [name, ts] of [["from", b.from], ["to", b.to]] as const) {
        if (!ts) return invalid(`backfill.${name}`, "is not set; a backfill covers [from, to)");
        const te = checkTimestamp(`backfill.${name}`, ts);
        if (te) return te;
      }
      const ns = (t: Timestamp) => t.seconds * 1_000_000_000n + BigInt(t.nanos);
      if (ns(b.to!) <= ns(b.from!)) return invalid("backfill.to", "is not after from; a backfill covers [from, to)");
      return undefined;
    }
    case "batch": {
      const cmds = c.value.commands;
      if (cmds.length === 0) return invalid("batch.commands", `is empty; a batch carries 1 to ${LIMITS.batchCommands} commands`);
      if (cmds.length > LIMITS.batchCommands) {
        return invalid("batch.commands", `has ${cmds.length} commands; a batch carries at most ${LIMITS.batchCommands}`);
      }
      if (cmds[0].namespace !== cmd.namespace || cmds[0].jobId !== cmd.jobId) {
        return invalid("batch.commands[0]", `is for ${cmds[0].namespace}/${cmds[0].jobId}, not the batch's own ${cmd.namespace}/${cmd.jobId}: a batch is keyed by its first command`);
      }
      const nested = cmds.findIndex((s) => s.command.case === "batch");
      return nested >= 0 ? invalid(`batch.commands[${nested}]`, "is a batch; batches do not nest") : undefined;
    }
    case "retry":
    case "defer":
    case "ack": {
      const v = c.value;
      if (v.fireSeq === 0n) return invalid(`${c.case}.fire_seq`, "is 0; occurrences are numbered from 1, echo the fire_seq of the due event");
      if (c.case === "retry" && c.value.attempt < 2) {
        return invalid("retry.attempt", `is ${c.value.attempt}; a retry is attempt 2 or later (attempt 1 is the first call)`);
      }
      if (c.case === "retry" || c.case === "defer") {
        const nb = c.value.notBefore;
        if (!nb) return invalid(`${c.case}.not_before`, "is not set; give the earliest time the occurrence may go out again");
        return checkTimestamp(`${c.case}.not_before`, nb);
      }
      if (c.value.result === 0) {
        return invalid("ack.result", "is unspecified; say how the occurrence ended (SUCCEEDED, FAILED, DEAD or EXPIRED)");
      }
      return undefined;
    }
    default:
      return invalid("command", "none is set; set exactly one of upsert, cancel, pause, resume, retry, defer, ack, trigger, batch, backfill");
  }
}

function validateUpsert(cmd: JobCommand, u: Upsert): ValidationError | undefined {
  const spec = u.spec;
  if (!spec) return invalid("upsert.spec", "is not set; an upsert carries the job's full spec");
  if (spec.namespace !== cmd.namespace) {
    return invalid("upsert.spec.namespace", `is "${spec.namespace}" but the command's namespace is "${cmd.namespace}"; they must be equal`);
  }
  if (spec.id !== cmd.jobId) {
    return invalid("upsert.spec.id", `is "${spec.id}" but the command's job_id is "${cmd.jobId}"; they must be equal`);
  }
  if (!spec.schedule || spec.schedule.kind.case === undefined) {
    return invalid("upsert.spec.schedule", "is not set; set exactly one of at, every, cron");
  }
  const te = validateTarget("upsert.spec.target", spec.target);
  if (te) return te;
  if (spec.retry) {
    const re = validateRetry("upsert.spec.retry", spec.retry);
    if (re) return re;
  }
  if (spec.relevancyWindow) {
    const field = "upsert.spec.relevancy_window";
    const [w, de] = durationSeconds(field, spec.relevancyWindow);
    if (de) return de;
    if (w <= 0) return invalid(field, `is ${w}s; it must be positive (leave it unset for the namespace's window)`);
    if (w > LIMITS.relevancyWindowS) return invalid(field, `is ${w}s; it must be at most 720h0m0s (30 days)`);
  }
  if (CatchupPolicy[spec.catchup] === undefined) {
    return invalid("upsert.spec.catchup", `${spec.catchup} is not a known catch-up policy; use LATEST, NONE or ALL`);
  }
  if (spec.catchupWindow) {
    const [w, we] = durationSeconds("upsert.spec.catchup_window", spec.catchupWindow);
    if (we) return we;
    if (w <= 0 || w > LIMITS.relevancyWindowS) return invalid("upsert.spec.catchup_window", `is ${w}s; it must be positive and at most 720h0m0s (30 days)`);
  }
  if (OverlapPolicy[spec.overlap] === undefined) {
    return invalid("upsert.spec.overlap", `${spec.overlap} is not a known overlap policy; use ALLOW_ALL, SKIP, BUFFER_ONE or CANCEL_OTHER`);
  }
  return validateLabels("upsert.spec.labels", spec.labels);
}

function validateTarget(field: string, t: Target | undefined): ValidationError | undefined {
  switch (t?.kind.case) {
    case "http":
      return validateHttp(field + ".http", t.kind.value);
    case "kafka":
      return validateKafka(field + ".kafka", t.kind.value);
    default:
      return invalid(field, "none is set; set exactly one of http, kafka");
  }
}

function validateHttp(field: string, h: HttpCallback): ValidationError | undefined {
  const ue = checkUrl(field + ".url", h.url);
  if (ue) return ue;
  if (h.method !== "" && !METHODS.includes(h.method)) {
    const hint = METHODS.includes(h.method.toUpperCase()) ? ` (methods are case-sensitive: write "${h.method.toUpperCase()}")` : "";
    return invalid(field + ".method", `"${h.method}" is not supported${hint}; use GET, POST, PUT, PATCH or DELETE, or leave it empty for POST`);
  }
  const he = validateHeaders(field + ".headers", h.headers);
  if (he) return he;
  if (h.body.length > LIMITS.httpBody) {
    return invalid(field + ".body", `is ${h.body.length} bytes; the limit is ${LIMITS.httpBody} (64 KiB): send a reference to the payload instead`);
  }
  if (h.timeout) {
    const [d, de] = durationSeconds(field + ".timeout", h.timeout);
    if (de) return de;
    if (d <= 0 || d > LIMITS.httpTimeoutS) return invalid(field + ".timeout", `is ${d}s; it must be in (0, 1m0s], or unset for the default (10s)`);
  }
  return undefined;
}

function checkUrl(field: string, raw: string): ValidationError | undefined {
  if (raw === "") return invalid(field, "is empty; give the absolute http or https URL to call");
  if (bytes(raw) > LIMITS.urlLen) return invalid(field, `is ${bytes(raw)} bytes long; the limit is ${LIMITS.urlLen}`);
  if (URL_BAD.test(raw)) {
    for (let i = 0; i < raw.length; i++) {
      const c = raw[i];
      if (c === "%") {
        if (!/^[0-9A-Fa-f]{2}$/.test(raw.slice(i + 1, i + 3))) {
          return invalid(field, `"${raw}" has '%' at byte ${i} not followed by two hex digits; write %25 for a literal '%'`);
        }
      } else if (c === " ") {
        return invalid(field, `"${raw}" has a space at byte ${i}; percent-encode it as %20`);
      } else if (URL_BAD.test(c)) {
        return invalid(field, `"${raw}" has '${c}' at byte ${i}, which URLs do not allow unencoded; percent-encode it`);
      }
    }
  }
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):(\/\/([^/?#]*))?/.exec(raw);
  const scheme = m?.[1] ?? "";
  if (scheme !== "http" && scheme !== "https") return invalid(field, `"${raw}" has scheme "${scheme}"; give an absolute http or https URL`);
  const authority = m?.[3] ?? "";
  if (authority.includes("@")) return invalid(field, `"${raw}" contains credentials; remove them from the URL and send them in a header`);
  const host = authority.replace(/:\d*$/, "").replace(/^\[|\]$/g, "");
  if (host === "") return invalid(field, `"${raw}" has no host; give an absolute URL such as https://example.com/hook`);
  return undefined;
}

const isToken = (s: string) => s !== "" && /^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$/.test(s);

function isReservedHeader(name: string): boolean {
  const l = name.toLowerCase();
  return ["idempotency-key", "host", "content-length", "transfer-encoding", "connection"].includes(l) ||
    l.startsWith("x-chime-") || l.startsWith("webhook-");
}

function validateHeaders(field: string, headers: Record<string, string>): ValidationError | undefined {
  const names = Object.keys(headers).sort(byBytes);
  if (names.length > LIMITS.headers) return invalid(field, `has ${names.length} entries; the limit is ${LIMITS.headers}`);
  let total = 0;
  for (const name of names) {
    const value = headers[name];
    const f = `${field}["${name}"]`;
    if (bytes(name) > LIMITS.headerNameLen) return invalid(field, `a header name is ${bytes(name)} bytes long; the limit is ${LIMITS.headerNameLen}`);
    if (bytes(value) > LIMITS.headerValueLen) return invalid(f, `value is ${bytes(value)} bytes long; the limit is ${LIMITS.headerValueLen} (8 KiB)`);
    total += bytes(name) + bytes(value);
    if (total > LIMITS.headersBytes) return invalid(field, `names and values add up to more than ${LIMITS.headersBytes} bytes (16 KiB); send large data in the body`);
    if (!isToken(name)) return invalid(f, `"${name}" is not a valid header name; use letters, digits and !#$%&'*+-.^_\`|~`);
    if (isReservedHeader(name)) {
      return invalid(f, `"${name}" is set by chime on every call (reserved: Idempotency-Key, Host, Content-Length, Transfer-Encoding, Connection, X-Chime-*, Webhook-*); remove it`);
    }
    // eslint-disable-next-line no-control-regex
    const ctl = value.search(/[\x00-\x08\x0a-\x1f\x7f]/);
    if (ctl >= 0) return invalid(f, `value has a control character at byte ${ctl} (CR, LF, NUL and other controls except tab would break or smuggle headers); remove it`);
  }
  return undefined;
}

function validateKafka(field: string, k: KafkaTarget): ValidationError | undefined {
  const topic = k.topic;
  if (topic === "") return invalid(field + ".topic", "is empty; give the topic to write to");
  if (bytes(topic) > LIMITS.kafkaTopicLen) return invalid(field + ".topic", `is ${bytes(topic)} bytes long; Kafka allows at most ${LIMITS.kafkaTopicLen}`);
  if (topic === "." || topic === "..") return invalid(field + ".topic", `"${topic}" is not a valid Kafka topic name`);
  const bad = topic.search(/[^A-Za-z0-9._-]/);
  if (bad >= 0) return invalid(field + ".topic", `"${topic}" has '${topic[bad]}' at byte ${bad}; Kafka topic names use only ${TOPIC_HELP}`);
  if (k.value.length > LIMITS.kafkaValue) return invalid(field + ".value", `is ${k.value.length} bytes; the limit is ${LIMITS.kafkaValue} (512 KiB)`);
  if (k.key.length > LIMITS.kafkaKey) return invalid(field + ".key", `is ${k.key.length} bytes; the limit is ${LIMITS.kafkaKey} (4 KiB)`);
  const names = Object.keys(k.headers);
  if (names.length > LIMITS.headers) return invalid(field + ".headers", `has ${names.length} entries; the limit is ${LIMITS.headers}`);
  const total = names.reduce((n, h) => n + bytes(h) + bytes(k.headers[h]), 0);
  if (total > LIMITS.headersBytes) return invalid(field + ".headers", `names and values add up to ${total} bytes; the limit is ${LIMITS.headersBytes} (16 KiB)`);
  return undefined;
}

function validateRetry(field: string, r: RetryPolicy): ValidationError | undefined {
  if (r.maxAttempts > LIMITS.retryAttempts) return invalid(field + ".max_attempts", `is ${r.maxAttempts}; the limit is ${LIMITS.retryAttempts}`);
  const values: Record<string, number> = {};
  for (const [name, d] of [["initial_interval", r.initialInterval], ["max_interval", r.maxInterval], ["max_elapsed", r.maxElapsed]] as const) {
    if (!d) continue;
    const [v, de] = durationSeconds(`${field}.${name}`, d);
    if (de) return de;
    if (v < 0) return invalid(`${field}.${name}`, `is ${v}s; it must not be negative (0 takes the namespace's value)`);
    values[name] = v;
  }
  const initial = values.initial_interval ?? 0;
  const max = values.max_interval ?? 0;
  if (initial > 0 && max > 0 && max < initial) {
    return invalid(field + ".max_interval", `is ${max}s, shorter than initial_interval (${initial}s); raise it or lower initial_interval`);
  }
  if (r.multiplier !== 0 && !(r.multiplier >= 1 && r.multiplier <= LIMITS.retryMultiplier)) {
    return invalid(field + ".multiplier", `is ${r.multiplier}; it must be 0 (the namespace's value) or between 1 and ${LIMITS.retryMultiplier}`);
  }
  if (!(r.jitter >= 0 && r.jitter <= 1)) return invalid(field + ".jitter", `is ${r.jitter}; it is a randomization factor in [0, 1]`);
  return undefined;
}

function validateLabels(field: string, labels: Record<string, string>): ValidationError | undefined {
  const keys = Object.keys(labels).sort(byBytes);
  if (keys.length > LIMITS.labels) return invalid(field, `has ${keys.length} entries; the limit is ${LIMITS.labels}`);
  for (const k of keys) {
    const f = `${field}["${k}"]`;
    if (k === "" || bytes(k) > LIMITS.labelKeyLen) return invalid(f, `key is ${bytes(k)} bytes long; give 1-${LIMITS.labelKeyLen} characters of ${LABEL_KEY_HELP}`);
    const bad = k.search(/[^A-Za-z0-9_.\-/]/);
    if (bad >= 0) return invalid(f, `key has '${k[bad]}' at byte ${bad}; use only ${LABEL_KEY_HELP}`);
    if ([...labels[k]].length > LIMITS.labelValueLen) {
      return invalid(f, `value is ${[...labels[k]].length} characters long; the limit is ${LIMITS.labelValueLen}`);
    }
  }
  return undefined;
}
