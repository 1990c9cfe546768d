/**
 * An Express receiver for chime's callbacks: checks each signature, processes each fire once.
 *
 *   CHIME_SIGNING_SECRET=whsec_... node dist/examples/receiver-express.js   # listens on 127.0.0.1:9999
 *
 * chime sends a fire again when it is not sure the first call landed (a
 * timeout, a restart), with the same Idempotency-Key: the receiver records
 * the keys it processed and answers a repeat 200 without doing the work
 * twice. A real service keeps the keys where its work is stored (a unique
 * index in its database, in the same transaction as the work).
 */

import express from "express";

import { verify, WebhookVerificationError } from "../src/index.js";

export function receiver(secret: string) {
  const done = new Set<string>();
  const work: Buffer[] = [];
  const app = express();
  // The raw body: the signature is over the bytes chime sent.
  app.post("/hook", express.raw({ type: () => true }), (req, res) => {
    let cb;
    try {
      cb = verify(secret, req.body as Buffer, req.headers as Record<string, string>);
    } catch (e) {
      if (e instanceof WebhookVerificationError) return res.status(401).json({ error: `signature: ${e.message}` });
      throw e;
    }
    if (done.has(cb.idempotencyKey)) return res.json({ status: "already processed" });
    done.add(cb.idempotencyKey);
    work.push(cb.body); // the job's work, once per fire
    return res.json({ status: "processed", key: cb.idempotencyKey });
  });
  return { app, work };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  receiver(process.env.CHIME_SIGNING_SECRET ?? "").app.listen(9999, "127.0.0.1");
}
