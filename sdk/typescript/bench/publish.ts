/**
 * Publishing benchmark: one Node process schedules N jobs through Publisher.
 *
 *   make bench-sdk      # or: CHIME_BIN=bin/chime node sdk/typescript/dist/bench/publish.js 100000
 *
 * Starts a chime dev (embedded broker, fresh state dir), creates a
 * namespace, publishes N one-shot jobs due in an hour (every promise
 * kept), waits for Kafka's acknowledgement of all and prints schedules/s
 * from the first publish to the last acknowledgement; then reads the jobs
 * back over HTTP until all N are there: an acknowledged command is never lost.
 */

import { Client, httpJob, Publisher } from "../src/index.js";
import { startChimeDev, waitFor } from "../test/helpers.js";

const n = Number(process.argv[2] ?? 100_000);
const dev = await startChimeDev();
try {
  const admin = new Client({ baseUrl: dev.baseUrl, token: dev.adminToken });
  await admin.putNamespace("bench");
  const at = new Date(Date.now() + 3600_000);
  const specs = Array.from({ length: n }, (_, i) => httpJob("bench", `job-${i}`, { url: "http://127.0.0.1:9/hook", at, body: `{"i":${i}}` }));
  const pub = Publisher.fromStateDir(dev.stateDir);
  await pub.partitions(); // metadata, outside the timing
  const t0 = performance.now();
  const results = await Promise.allSettled(specs.map((s) => pub.schedule(s)));
  const elapsed = (performance.now() - t0) / 1000;
  await pub.close();
  const failed = results.filter((r) => r.status === "rejected").length;
  console.log(`typescript publisher: ${n} schedules in ${elapsed.toFixed(2)} s: ${Math.round(n / elapsed).toLocaleString("en")} schedules/s from one process; ${failed} failed`);
  const seen = await waitFor("every acknowledged job readable over HTTP", async () => {
    let c = 0;
    for await (const _ of admin.listJobs("bench", { limit: 500 })) c++;
    return c >= n - failed && c;
  }, 300_000);
  console.log(`typescript publisher: ${seen} of ${n} jobs in chime (lost: ${n - failed - seen})`);
} finally {
  await dev.stop();
}
