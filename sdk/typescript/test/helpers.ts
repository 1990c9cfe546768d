/** A chime dev for the SDK's tests, and a callback receiver, both on 127.0.0.1. */

import { type ChildProcess, spawn } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { createWriteStream, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { type AddressInfo, createServer as netServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");

export async function freePort(): Promise<number> {
  return new Promise((ok) => {
    const s = netServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as AddressInfo).port;
      s.close(() => ok(port));
    });
  });
}

/** Polls cond until it returns something truthy, or fails after timeoutMs. */
type Falsy = false | null | undefined | 0 | "";

export async function waitFor<T>(what: string, cond: () => Promise<T | Falsy> | T | Falsy, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await cond();
      if (v) return v as T;
      last = v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what}: not within ${timeoutMs} ms (last: ${String(last)})`);
}

export interface ChimeDev {
  stateDir: string;
  baseUrl: string;
  adminToken: string;
  stop(): Promise<void>;
}

export async function startChimeDev(): Promise<ChimeDev> {
  const binary = process.env.CHIME_BIN ?? join(REPO, "bin", "chime");
  if (!existsSync(binary)) throw new Error(`no chime binary at ${binary}: run make build, or make test-sdk`);
  const stateDir = mkdtempSync(join(tmpdir(), "chime-ts-sdk-"));
  const port = await freePort();
  const adminToken = randomBytes(16).toString("hex");
  const log = createWriteStream(join(stateDir, "chime.log"));
  const proc: ChildProcess = spawn(binary, ["dev", "-state-dir", stateDir, "-addr", `127.0.0.1:${port}`], {
    env: { ...process.env, CHIME_ADMIN_TOKEN: adminToken, CHIME_PARTITIONS: "6", CHIME_LOG_LEVEL: "warn", CHIME_QUOTA_PENDING: "-1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  proc.stdout?.pipe(log);
  proc.stderr?.pipe(log);
  const baseUrl = `http://127.0.0.1:${port}`;
  try {
    await waitFor("chime dev ready", async () => proc.exitCode === null && (await fetch(baseUrl + "/readyz")).status === 200, 180_000);
  } catch (e) {
    proc.kill("SIGKILL");
    throw new Error(`chime dev did not start: ${String(e)}\n${readFileSync(join(stateDir, "chime.log"), "utf8").slice(-4000)}`);
  }
  return {
    stateDir,
    baseUrl,
    adminToken,
    stop: () =>
      new Promise<void>((ok) => {
        const t = setTimeout(() => proc.kill("SIGKILL"), 30_000);
        proc.once("exit", () => {
          clearTimeout(t);
          // The state dir holds a broker's and ClickHouse's data (tens of MB):
          // a test run must not leave it behind on a shared disk.
          rmSync(stateDir, { recursive: true, force: true });
          ok();
        });
        proc.kill("SIGTERM");
      }),
  };
}

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: Buffer;
}

/** Records every request; answers the status set for its path (200 by default). */
export class Receiver {
  calls: Received[] = [];
  status = new Map<string, number>();
  url = "";
  private server?: Server;

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers[k] = v;
        this.calls.push({ path: req.url ?? "", headers, body: Buffer.concat(chunks) });
        res.writeHead(this.status.get(req.url ?? "") ?? 200, { "Content-Length": "0" });
        res.end();
      });
    });
    await new Promise<void>((ok) => this.server!.listen(0, "127.0.0.1", ok));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  callsTo(path: string): Received[] {
    return this.calls.filter((c) => c.path === path);
  }

  stop(): Promise<void> {
    this.server?.closeAllConnections();
    return new Promise((ok) => this.server?.close(() => ok()) ?? ok());
  }
}

/** A signing secret, and the headers chime signs a callback with (dispatcher/sign.go). */
export const SECRET = "whsec_" + Buffer.from("0123456789abcdef0123456789abcdef").toString("base64");
export const OTHER_SECRET = "whsec_" + Buffer.from("another key of 32 bytes........").toString("base64");

export function signed(body: string, o: { secret?: string; ts?: number; id?: string } = {}): Record<string, string> {
  const ts = o.ts ?? Math.floor(Date.now() / 1000);
  const id = o.id ?? "acme/job/1";
  const key = Buffer.from((o.secret ?? SECRET).slice("whsec_".length), "base64");
  const sig = createHmac("sha256", key).update(`${id}.${ts}.${body}`).digest("base64");
  return {
    "webhook-id": id, "webhook-timestamp": String(ts), "webhook-signature": `v1,${sig}`,
    "Idempotency-Key": id, "X-Chime-Namespace": "acme", "X-Chime-Job-Id": "job", "X-Chime-Attempt": "2",
    "X-Chime-Scheduled-At": "2026-11-29T01:00:00Z",
  };
}

