/**
 * Publish job commands straight to chime's Kafka topic, as the Go producer does.
 *
 * Each command is validated (validate.ts), stamped, encoded as the protobuf
 * chime.v1.JobCommand, keyed `namespace/job_id`, given the chime-command
 * header, and put on the partition goka reads that key from (partition.ts;
 * never a Kafka client's default partitioner). Records wait up to
 * lingerMs to share a produce request; the producer is idempotent with
 * acks from every in-sync replica. Every publish returns a promise of a
 * Receipt, resolved once Kafka acknowledged the command.
 *
 * The Kafka client is @platformatic/kafka (pure TypeScript). The
 * @confluentinc/kafka-javascript client the issue named needs its native
 * binding, which it downloads from GitHub or builds from sources it
 * downloads from zlib.net, openssl and curl's sites: neither is reachable
 * from this project's build machines, which reach package registries only
 * (docs: sdk/typescript/README.md).
 */

import { readFileSync } from "node:fs";
import { join } from "node:path";

import { toBinary } from "@bufbuild/protobuf";
import { Producer } from "@platformatic/kafka";

import * as commands from "./commands.js";
import { type JobCommand, JobCommandSchema, type JobSpec } from "./gen/chime/v1/job_pb.js";
import { jobKey, partitionOf } from "./partition.js";
import { HEADER_COMMAND, jobCommandsTopic } from "./topics.js";
import { ValidationError, validateBatch, validateCommand } from "./validate.js";

/** How long records wait for others to share their produce request (Go: producer's defaultLinger). */
export const DEFAULT_LINGER_MS = 5;
/** The most records in one produce request. */
export const MAX_BATCH = 10_000;

/** A published command: its id, and where Kafka stored it. */
export interface Receipt {
  commandId: string;
  partition: number;
  offset: bigint;
}

/** Kafka did not acknowledge a command; it may or may not be published. */
export class PublishError extends Error {
  constructor(
    public commandId: string,
    public key: string,
    public cause: unknown,
  ) {
    super(`chime: publish command ${commandId} for ${key}: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = "PublishError";
  }
}

export interface PublisherOptions {
  brokers: string[];
  topicPrefix?: string;
  saslUser?: string;
  saslPassword?: string;
  clientId?: string;
  lingerMs?: number;
}

interface Pending {
  key: string;
  commandId: string;
  partition: number;
  value: Buffer;
  kind: string;
  resolve: (r: Receipt) => void;
  reject: (e: unknown) => void;
}

/** Publishes job commands to `<prefix>job-commands`. Share one per process. */
export class Publisher {
  readonly topic: string;
  private producer: Producer<Buffer, Buffer, string, string>;
  private lingerMs: number;
  private partitionCount = 0;
  private partitionsLoading?: Promise<number>;
  private queue: Pending[] = [];
  private timer?: NodeJS.Timeout;
  private sending: Promise<void> = Promise.resolve();

  constructor(o: PublisherOptions) {
    if ((o.saslUser ?? "") === "" !== ((o.saslPassword ?? "") === "")) {
      throw new Error("chime: give both the SASL user and its password, or neither");
    }
    this.topic = jobCommandsTopic(o.topicPrefix);
    this.lingerMs = o.lingerMs ?? DEFAULT_LINGER_MS;
    this.producer = new Producer({
      clientId: o.clientId ?? "chime-producer-ts",
      bootstrapBrokers: o.brokers,
      // Every in-sync replica has a command before it counts as
      // published, and retries never write one twice.
      idempotent: true,
      ...(o.saslUser ? { sasl: { mechanism: "PLAIN" as const, username: o.saslUser, password: o.saslPassword } } : {}),
      serializers: {
        key: (k?: Buffer) => k,
        value: (v?: Buffer) => v,
        headerKey: (k?: string) => (k === undefined ? undefined : Buffer.from(k)),
        headerValue: (v?: string) => (v === undefined ? undefined : Buffer.from(v)),
      },
    });
  }

  /** A publisher for the embedded broker of a `chime dev` that keeps its state in stateDir. */
  static fromStateDir(stateDir: string, o: Partial<PublisherOptions> = {}): Publisher {
    const brokers = readFileSync(join(stateDir, "kafka-brokers"), "utf8").trim().split(",");
    const cred = readFileSync(join(stateDir, "kafka-credential"), "utf8").trim();
    const i = cred.indexOf(":");
    return new Publisher({ brokers, saslUser: cred.slice(0, i), saslPassword: cred.slice(i + 1), ...o });
  }

  /** The job-commands topic's partition count (read once from the brokers). */
  async partitions(): Promise<number> {
    if (this.partitionCount > 0) return this.partitionCount;
    this.partitionsLoading ??= this.producer.metadata({ topics: [this.topic] }).then((md) => {
      const t = md.topics.get(this.topic);
      if (!t || t.partitionsCount === 0) {
        throw new PublishError("", this.topic, `topic ${this.topic} is not there: chime creates it; is chime running, and is this its broker and topic prefix?`);
      }
      this.partitionCount = t.partitionsCount;
      return this.partitionCount;
    });
    try {
      return await this.partitionsLoading;
    } catch (e) {
      this.partitionsLoading = undefined;
      throw e;
    }
  }

  /**
   * Validates, stamps and publishes cmd; resolves once Kafka acknowledged it.
   * A command that fails validation throws ValidationError at once and publishes nothing.
   */
  publish(cmd: JobCommand): Promise<Receipt> {
    commands.stamp(cmd);
    if (cmd.command.case === "batch") {
      cmd.command.value.commands.forEach((sub) => commands.stamp(sub));
      validateBatch(cmd);
    } else {
      validateCommand(cmd);
    }
    const key = jobKey(cmd.namespace, cmd.jobId);
    const value = Buffer.from(toBinary(JobCommandSchema, cmd));
    const kind = commands.kind(cmd);
    return new Promise<Receipt>((resolve, reject) => {
      const enqueue = (n: number) => {
        this.queue.push({ key, commandId: cmd.commandId, partition: partitionOf(key, n), value, kind, resolve, reject });
        if (this.queue.length >= MAX_BATCH) this.send();
        else this.timer ??= setTimeout(() => this.send(), this.lingerMs);
      };
      if (this.partitionCount > 0) enqueue(this.partitionCount);
      else this.partitions().then(enqueue, (e) => reject(new PublishError(cmd.commandId, key, e)));
    });
  }

  /** Sends what is queued as one produce request, after the one before it (idempotence keeps one in flight). */
  private send(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.queue;
    if (batch.length === 0) return;
    this.queue = [];
    this.sending = this.sending.then(async () => {
      try {
        const res = await this.producer.send({
          messages: batch.map((p) => ({ topic: this.topic, partition: p.partition, key: Buffer.from(p.key), value: p.value, headers: { [HEADER_COMMAND]: p.kind } })),
        });
        // Kafka answers each partition's first offset; the records of a
        // partition follow it in the order sent.
        const next = new Map<number, bigint>();
        for (const o of res.offsets ?? []) next.set(o.partition, o.offset);
        for (const p of batch) {
          const off = next.get(p.partition) ?? -1n;
          if (off >= 0n) next.set(p.partition, off + 1n);
          p.resolve({ commandId: p.commandId, partition: p.partition, offset: off });
        }
      } catch (e) {
        for (const p of batch) p.reject(new PublishError(p.commandId, p.key, e));
      }
    });
  }

  schedule(spec: JobSpec): Promise<Receipt> {
    return this.publish(commands.upsert(spec));
  }

  /**
   * An upsert per spec; each promise answers for its own job. Every command
   * is validated before any is published (as Go's ScheduleMany): if one is
   * invalid, nothing is published and the ValidationError's field names its
   * index (`specs[i].<field>`).
   */
  scheduleMany(specs: JobSpec[]): Promise<Receipt>[] {
    const cmds = specs.map((s) => commands.upsert(s));
    cmds.forEach((cmd, i) => {
      commands.stamp(cmd);
      try {
        validateCommand(cmd);
      } catch (e) {
        if (e instanceof ValidationError) throw new ValidationError(`specs[${i}].${e.field}`, e.reason);
        throw e;
      }
    });
    return cmds.map((c) => this.publish(c));
  }

  cancel(namespace: string, jobId: string, reason = ""): Promise<Receipt> {
    return this.publish(commands.cancel(namespace, jobId, reason));
  }

  pause(namespace: string, jobId: string): Promise<Receipt> {
    return this.publish(commands.pause(namespace, jobId));
  }

  resume(namespace: string, jobId: string): Promise<Receipt> {
    return this.publish(commands.resume(namespace, jobId));
  }

  trigger(namespace: string, jobId: string): Promise<Receipt> {
    return this.publish(commands.trigger(namespace, jobId));
  }

  /** Waits until every command published so far is acknowledged (or failed). */
  async flush(): Promise<void> {
    // Commands published before the partition count was known join the queue once it is.
    await this.partitionsLoading?.catch(() => undefined);
    while (this.queue.length > 0 || this.timer !== undefined) {
      this.send();
      await this.sending;
    }
    await this.sending;
  }

  /** Flushes, then closes the connections. */
  async close(): Promise<void> {
    try {
      await this.flush();
    } finally {
      await this.producer.close();
    }
  }
}
