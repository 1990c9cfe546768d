/**
 * A typed client for chime's HTTP API, on openapi-fetch with the types
 * openapi-typescript generates from api/openapi.json (src/gen/openapi.ts).
 *
 * Every route has a method. An error answer (RFC 9457 problem+json)
 * throws ProblemError with its type, title, detail, errors[] (the fields
 * at fault) and Retry-After. Listings are async iterators that fetch the
 * next page as they go. Creates take an idempotencyKey: the same key and
 * body answer as the first request did.
 */

import createClient, { type Client as FetchClient } from "openapi-fetch";

import type { components, paths } from "./gen/openapi.js";

export type Schemas = components["schemas"];
export type Job = Schemas["Job"];
export type JobRequest = Schemas["JobRequest"];
export type Namespace = Schemas["Namespace"];
export type NamespaceConfig = Schemas["NamespaceConfig"];
export type DeadLetter = Schemas["DeadLetter"];
export type Problem = Schemas["Problem"];

export const DEFAULT_BASE_URL = "http://127.0.0.1:8080";

/** An RFC 9457 problem answer from chime's API. */
/** Which of a namespace's jobs a listing shows. */
export type JobsQuery = { state?: Schemas["Job"]["state"]; labels?: Record<string, string>; limit?: number };

export class ProblemError extends Error {
  readonly type: string;
  readonly title: string;
  readonly detail: string;
  readonly errors: { field?: string; reason?: string }[];
  constructor(
    readonly status: number,
    readonly problem: Partial<Problem>,
    readonly retryAfter: number | undefined,
  ) {
    const errors = problem.errors ?? [];
    const fields = errors.map((e) => `${e.field ?? ""}: ${e.reason ?? ""}`).join("; ");
    super(`${status} ${problem.title ?? ""}: ${problem.detail ?? ""}${fields ? ` (${fields})` : ""}`);
    this.name = "ProblemError";
    this.type = problem.type ?? "about:blank";
    this.title = problem.title ?? "";
    this.detail = problem.detail ?? "";
    this.errors = errors;
  }
}

function unwrap<T>(r: { data?: T; error?: unknown; response: Response }): T {
  if (!r.response.ok) {
    const ra = r.response.headers.get("retry-after");
    const problem = (typeof r.error === "object" && r.error !== null ? r.error : { title: r.response.statusText, detail: String(r.error ?? "") }) as Partial<Problem>;
    throw new ProblemError(r.response.status, problem, ra === null ? undefined : Number(ra));
  }
  return r.data as T;
}

export interface ClientOptions {
  baseUrl?: string;
  /** The admin token (`<state dir>/admin-token` of chime dev) or a namespace key. */
  token?: string;
  fetch?: typeof globalThis.fetch;
}

/** chime's API. */
export class Client {
  readonly raw: FetchClient<paths>;

  constructor(o: ClientOptions = {}) {
    this.raw = createClient<paths>({
      baseUrl: o.baseUrl ?? DEFAULT_BASE_URL,
      headers: o.token ? { Authorization: `Bearer ${o.token}` } : {},
      fetch: o.fetch,
    });
  }

  // Namespaces (admin token).
  async putNamespace(ns: string, config: NamespaceConfig = {}): Promise<Namespace> {
    return unwrap(await this.raw.PUT("/v1/namespaces/{ns}", { params: { path: { ns } }, body: config }));
  }
  async getNamespace(ns: string): Promise<Namespace> {
    return unwrap(await this.raw.GET("/v1/namespaces/{ns}", { params: { path: { ns } } }));
  }
  async listNamespacesPage(query: { limit?: number; cursor?: string } = {}): Promise<Schemas["NamespaceList"]> {
    return unwrap(await this.raw.GET("/v1/namespaces", { params: { query } }));
  }
  async *listNamespaces(limit?: number): AsyncGenerator<Schemas["NamespaceList"]["namespaces"][number]> {
    let cursor: string | undefined;
    do {
      const page = await this.listNamespacesPage({ limit, cursor });
      yield* page.namespaces;
      cursor = page.next_cursor || undefined;
    } while (cursor);
  }
  async createKey(ns: string): Promise<Schemas["Key"]> {
    return unwrap(await this.raw.POST("/v1/namespaces/{ns}/keys", { params: { path: { ns } } }));
  }
  async listKeys(ns: string): Promise<Schemas["KeyList"]> {
    return unwrap(await this.raw.GET("/v1/namespaces/{ns}/keys", { params: { path: { ns } } }));
  }
  async revokeKey(ns: string, id: string): Promise<void> {
    unwrap(await this.raw.DELETE("/v1/namespaces/{ns}/keys/{id}", { params: { path: { ns, id } } }));
  }
  async rotateSigningSecret(ns: string, body: Schemas["Rotate"] = {}): Promise<Schemas["SigningSecret"]> {
    return unwrap(await this.raw.POST("/v1/namespaces/{ns}/signing-secret:rotate", { params: { path: { ns } }, body }));
  }

  // Schedules (any token).
  /** The next fires of a schedule, creating nothing (namespace and id are needed when it has jitter). */
  async previewSchedule(body: Schemas["PreviewRequest"]): Promise<Schemas["Preview"]> {
    return unwrap(await this.raw.POST("/v1/schedules:preview", { body }));
  }

  // Jobs.
  async createJob(ns: string, job: JobRequest, o: { idempotencyKey?: string } = {}): Promise<Schemas["JobCreated"]> {
    return unwrap(await this.raw.POST("/v1/namespaces/{ns}/jobs", { params: { path: { ns }, header: idem(o) }, body: job }));
  }
  async createJobs(ns: string, jobs: JobRequest[], o: { idempotencyKey?: string } = {}): Promise<Schemas["BatchCreated"]> {
    return unwrap(await this.raw.POST("/v1/namespaces/{ns}/jobs:batch", { params: { path: { ns }, header: idem(o) }, body: { jobs } }));
  }
  async getJob(ns: string, id: string): Promise<Job> {
    return unwrap(await this.raw.GET("/v1/namespaces/{ns}/jobs/{id}", { params: { path: { ns, id } } }));
  }
  /** A page of ns's jobs, newest first; only those in state, and with every one of labels, if given. */
  async listJobsPage(ns: string, query: JobsQuery & { cursor?: string } = {}): Promise<Schemas["JobList"]> {
    const { labels, ...rest } = query;
    const label = labels ? Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => `${k}:${v}`) : undefined;
    return unwrap(await this.raw.GET("/v1/namespaces/{ns}/jobs", { params: { path: { ns }, query: { ...rest, label } } }));
  }
  /** Every job of ns (in a state, with every one of labels, if given), page after page. */
  async *listJobs(ns: string, query: JobsQuery = {}): AsyncGenerator<Job> {
    let cursor: string | undefined;
    do {
      const page = await this.listJobsPage(ns, { ...query, cursor });
      yield* page.jobs;
      cursor = page.next_cursor || undefined;
    } while (cursor);
  }
  async cancelJob(ns: string, id: string): Promise<Job> {
    return unwrap(await this.raw.DELETE("/v1/namespaces/{ns}/jobs/{id}", { params: { path: { ns, id } } }));
  }
  async pauseJob(ns: string, id: string): Promise<Job> {
    return unwrap(await this.raw.POST("/v1/namespaces/{ns}/jobs/{id}/pause", { params: { path: { ns, id } } }));
  }
  async resumeJob(ns: string, id: string): Promise<Job> {
    return unwrap(await this.raw.POST("/v1/namespaces/{ns}/jobs/{id}/resume", { params: { path: { ns, id } } }));
  }
  async triggerJob(ns: string, id: string): Promise<{ id: string; namespace: string; command_id: string; state: string }> {
    return unwrap(await this.raw.POST("/v1/namespaces/{ns}/jobs/{id}/trigger", { params: { path: { ns, id } } }));
  }
  /** Fires now the occurrences of the job's schedule in [from, to) (in the past; at most 100). */
  async backfillJob(ns: string, id: string, body: Schemas["BackfillRequest"]): Promise<Schemas["Backfill"]> {
    return unwrap(await this.raw.POST("/v1/namespaces/{ns}/jobs/{id}/backfill", { params: { path: { ns, id } }, body }));
  }
  async getAttempts(ns: string, id: string, query: { limit?: number; cursor?: string } = {}): Promise<Schemas["Attempts"]> {
    return unwrap(await this.raw.GET("/v1/namespaces/{ns}/jobs/{id}/attempts", { params: { path: { ns, id }, query } }));
  }

  // Breaker and stats.
  async getBreaker(ns: string): Promise<Schemas["Breaker"]> {
    return unwrap(await this.raw.GET("/v1/namespaces/{ns}/breaker", { params: { path: { ns } } }));
  }
  async putBreaker(ns: string, mode: Schemas["BreakerMode"]): Promise<Schemas["BreakerAccepted"]> {
    return unwrap(await this.raw.PUT("/v1/namespaces/{ns}/breaker", { params: { path: { ns } }, body: mode }));
  }
  async resetBreaker(ns: string, body: Schemas["BreakerReset"] = {}): Promise<Schemas["BreakerAccepted"]> {
    return unwrap(await this.raw.POST("/v1/namespaces/{ns}/breaker/reset", { params: { path: { ns } }, body }));
  }
  async getBreakerHistory(ns: string, query: { from?: string; to?: string } = {}): Promise<Schemas["BreakerHistory"]> {
    return unwrap(await this.raw.GET("/v1/namespaces/{ns}/breaker/history", { params: { path: { ns }, query } }));
  }
  async getStats(ns: string, query: { from?: string; to?: string; step?: string } = {}): Promise<Schemas["Stats"]> {
    return unwrap(await this.raw.GET("/v1/namespaces/{ns}/stats", { params: { path: { ns }, query } }));
  }

  // Dead letters.
  async listDeadLettersPage(ns: string, query: { limit?: number; before?: string; job_id_prefix?: string; replayed?: boolean } = {}): Promise<Schemas["DeadLetters"]> {
    return unwrap(await this.raw.GET("/v1/namespaces/{ns}/dead-letters", { params: { path: { ns }, query } }));
  }
  async *listDeadLetters(ns: string, query: { limit?: number; job_id_prefix?: string; replayed?: boolean } = {}): AsyncGenerator<DeadLetter> {
    let before: string | undefined;
    do {
      const page = await this.listDeadLettersPage(ns, { ...query, before });
      yield* page.dead_letters;
      before = page.next_before ?? undefined;
    } while (before);
  }
  async replayDeadLetter(ns: string, id: string): Promise<Schemas["Replay"]> {
    return unwrap(await this.raw.POST("/v1/namespaces/{ns}/dead-letters/{id}/replay", { params: { path: { ns, id } } }));
  }
  async replayDeadLetters(ns: string, body: Schemas["BulkReplayRequest"]): Promise<Schemas["BulkReplay"]> {
    return unwrap(await this.raw.POST("/v1/namespaces/{ns}/dead-letters:replay", { params: { path: { ns } }, body }));
  }
}

function idem(o: { idempotencyKey?: string }): { "Idempotency-Key"?: string } {
  return o.idempotencyKey ? { "Idempotency-Key": o.idempotencyKey } : {};
}
