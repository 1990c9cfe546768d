import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";

import { receiver } from "../examples/receiver-express.js";
import { type ChimeDev, Receiver, REPO, SECRET, signed, startChimeDev, waitFor } from "./helpers.js";

test("the Express receiver verifies each call and processes each fire once", async () => {
  const { app, work } = receiver(SECRET);
  const server = app.listen(0, "127.0.0.1");
  await new Promise((ok) => server.once("listening", ok));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  try {
    const body = '{"hello":"chime"}';
    const headers = signed(body, { id: "acme/job/7" });
    const post = async (b: string) => fetch(url, { method: "POST", body: b, headers });
    assert.equal((await (await post(body)).json()).status, "processed");
    assert.equal((await (await post(body)).json()).status, "already processed");
    assert.deepEqual(work.map(String), [body]);
    assert.equal((await post("tampered")).status, 401);
  } finally {
    server.close();
  }
});

let dev: ChimeDev;
let hooks: Receiver;
before(async () => {
  dev = await startChimeDev();
  hooks = await new Receiver().start();
});
after(async () => {
  await hooks?.stop();
  await dev?.stop();
});

test("the README's TypeScript quick start is examples/quickstart.ts, and it runs", async () => {
  const code = readFileSync(join(REPO, "sdk/typescript/examples/quickstart.ts"), "utf8");
  const blocks = [...readFileSync(join(REPO, "README.md"), "utf8").matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  assert.ok(blocks.includes(code), "README.md's TypeScript quick start must be sdk/typescript/examples/quickstart.ts, verbatim");
  const env = { ...process.env, CHIME_URL: dev.baseUrl, CHIME_TOKEN: dev.adminToken, CHIME_STATE_DIR: dev.stateDir, CHIME_HOOK: hooks.url + "/quickstart" };
  const { stdout } = await promisify(execFile)(process.execPath, [join(REPO, "sdk/typescript/dist/examples/quickstart.js")], { env, timeout: 120_000 });
  assert.match(stdout, /published/);
  await waitFor("both quick start callbacks", () => hooks.callsTo("/quickstart").length >= 2);
});
