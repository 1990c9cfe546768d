/**
 * Verify the callbacks chime sends, with the official Standard Webhooks library.
 *
 * chime signs a callback when its namespace has a signing secret
 * (whsec_..., from POST /v1/namespaces/{ns}/signing-secret:rotate):
 * webhook-id is the fire's idempotency key, webhook-timestamp the send
 * time, webhook-signature "v1,<base64 HMAC-SHA256>" per key in use (two
 * during a rotation's overlap). verify checks them, refuses a timestamp
 * more than five minutes off, and returns what a receiver needs to
 * process the call exactly once.
 */

import { Webhook, WebhookVerificationError } from "standardwebhooks";

export { WebhookVerificationError };

export interface Callback {
  /** The fire's key (namespace/job/fire): the same on every retry of a fire; process it once. */
  idempotencyKey: string;
  namespace: string;
  jobId: string;
  attempt: number;
  scheduledAt?: Date;
  body: Buffer;
}

/** Checks a callback's signature against the namespace's secret (or any of several). */
export function verify(secret: string | string[], body: Buffer | string, headers: Record<string, string | string[] | undefined>): Callback {
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) h[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : v;
  const raw = typeof body === "string" ? Buffer.from(body) : body;
  let last: unknown = new WebhookVerificationError("no signing secret given");
  let ok = false;
  for (const s of Array.isArray(secret) ? secret : [secret]) {
    try {
      // jsonParse off: a callback body is whatever the job sends, JSON or not.
      new Webhook(s).verify(raw, h, { jsonParse: false });
      ok = true;
      break;
    } catch (e) {
      last = e;
    }
  }
  if (!ok) throw last;
  const scheduled = h["x-chime-scheduled-at"];
  return {
    idempotencyKey: h["idempotency-key"] ?? h["webhook-id"] ?? "",
    namespace: h["x-chime-namespace"] ?? "",
    jobId: h["x-chime-job-id"] ?? "",
    attempt: Number(h["x-chime-attempt"] ?? "1"),
    scheduledAt: scheduled ? new Date(scheduled) : undefined,
    body: raw,
  };
}
