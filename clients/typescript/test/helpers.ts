// Test helpers: the real `comm serve` on SQLite in a temp dir, and a tiny HTTP stub.

import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { AddressInfo } from "node:net";

const repoRoot = resolve(fileURLToPath(import.meta.url), "../../../../..");

let built: string | undefined;

/** The comm binary: $COMM_BIN, else built once into a temp dir. */
export function commBinary(): string {
  if (process.env["COMM_BIN"]) return process.env["COMM_BIN"];
  if (built) return built;
  const dir = mkdtempSync(join(tmpdir(), "comm-ts-bin-"));
  built = join(dir, "comm");
  execFileSync("go", ["build", "-o", built, "./cmd/comm"], { cwd: repoRoot, stdio: "inherit" });
  return built;
}

export interface Gateway {
  base: string;
  dir: string;
  output(): string;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.on("exit", () => {
  for (const p of running) p.kill("SIGKILL");
});

/** Starts `comm serve` in a new temp dir (SQLite), on a loopback port, and waits for its start line. */
export async function startGateway(env: Record<string, string> = {}): Promise<Gateway> {
  const dir = mkdtempSync(join(tmpdir(), "comm-ts-gw-"));
  const bin = commBinary();
  if (!existsSync(bin)) throw new Error(`no comm binary at ${bin}`);
  const p = spawn(bin, ["serve", "--listen", "127.0.0.1:0", "--smtp-listen", "127.0.0.1:0"], {
    cwd: dir, env: { ...process.env, COMM_API_KEY: "", COMM_BASE_URL: "", ...env }, stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(p);
  let out = "";
  p.stderr!.on("data", (b: Buffer) => {
    out += b.toString();
    if (out.length > 1 << 20) out = out.slice(-(1 << 19));
  });
  const lines = createInterface({ input: p.stdout! });
  const base = await new Promise<string>((res, rej) => {
    const t = setTimeout(() => rej(new Error("comm serve did not start in 60 s:\n" + out)), 60_000);
    lines.once("line", (l) => {
      clearTimeout(t);
      const m = /^comm: listening on (http:\/\/\S+) /.exec(l);
      if (m) res(m[1]!);
      else rej(new Error(`start line ${JSON.stringify(l)}:\n${out}`));
    });
    p.once("exit", (code) => rej(new Error(`comm serve exited (${code}):\n${out}`)));
  });
  lines.on("line", () => {});
  return {
    base, dir, output: () => out,
    stop: () => new Promise<void>((res) => {
      if (p.exitCode !== null) return res();
      p.once("exit", () => {
        running.delete(p);
        rmSync(dir, { recursive: true, force: true });
        res();
      });
      p.kill("SIGTERM");
    }),
  };
}

export interface Stub {
  url: string;
  requests: { method: string; url: string; headers: IncomingMessage["headers"]; body: string }[];
  close(): Promise<void>;
}

/** A local HTTP server answering with handler. */
export async function startStub(handler: (req: IncomingMessage, body: string, res: ServerResponse, n: number) => void): Promise<Stub> {
  const requests: Stub["requests"] = [];
  const srv: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      requests.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      handler(req, body, res, requests.length);
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`, requests,
    close: () => new Promise<void>((r) => {
      srv.closeAllConnections();
      srv.close(() => r());
    }),
  };
}

/** Polls fn until it returns a truthy value, or fails after ms. */
export async function eventually<T>(what: string, fn: () => Promise<T | undefined | false>, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A temp dir for a test, removed by the caller. */
export function tempDir(): string {
  return mkdtempSync(join(tmpdir(), "comm-ts-"));
}
