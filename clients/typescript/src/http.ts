// The HTTP layer: one call with retries, backoff, Retry-After and
// Idempotency-Key.

import { randomBytes } from "node:crypto";
import { codeOfStatus, CommError, ConnectionError, errorOf } from "./errors.js";

export const USER_AGENT = "comm-typescript-client/0.1";
/** Longest Retry-After waited for: a longer one ends the retries. */
export const MAX_RETRY_AFTER_MS = 60_000;
/** Bytes of an error answer read. */
const MAX_ERROR_BYTES = 64 << 10;

export interface HttpSettings {
  baseUrl: string;
  apiKey: string;
  timeoutMs: number;
  retries: number;
  backoffFirstMs: number;
  backoffLimitMs: number;
  maxResponseBytes: number;
  fetch: typeof fetch;
}

export interface CallOptions {
  /** Cancels the call (and its retries). */
  signal?: AbortSignal | undefined;
}

export interface Request {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  query?: Record<string, string | number | undefined> | undefined;
  body?: unknown;
  /** Send an Idempotency-Key, the same on every attempt, so a POST may be retried. */
  keyed?: boolean;
  noAuth?: boolean;
  /** Extra time for this attempt (long polls), ms. */
  waitMs?: number;
  /** Return the raw answer (downloads). */
  raw?: boolean;
  signal?: AbortSignal | undefined;
}

export interface RawAnswer {
  headers: Headers;
  body: Uint8Array;
}

/** Delay before retry n (0-based): between half and all of first*2^n, capped at limit. */
export function backoffDelay(n: number, firstMs: number, limitMs: number): number {
  let d = firstMs;
  for (let i = 0; i < n && d < limitMs; i++) d *= 2;
  d = Math.min(d, limitMs);
  if (d <= 1) return d;
  return d / 2 + Math.random() * (d / 2);
}

/** Parses Retry-After: delay seconds or an HTTP date; 0 if none. */
export function parseRetryAfter(v: string | null, now = Date.now()): number {
  if (!v) return 0;
  v = v.trim();
  if (/^\d+$/.test(v)) return Math.min(Number(v), 24 * 3600) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) || t <= now ? 0 : t - now;
}

function idempotent(method: string): boolean {
  return method === "GET" || method === "PUT" || method === "DELETE";
}

export function newIdempotencyKey(): string {
  return "ts_" + randomBytes(16).toString("hex");
}

/** Sleeps ms; false when the signal aborted first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const onAbort = () => {
      clearTimeout(t);
      resolve(false);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, Math.max(ms, 0));
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Reads a body up to max bytes; throws past it. */
async function readBounded(resp: Response, max: number, what: string): Promise<Uint8Array> {
  const len = Number(resp.headers.get("content-length") ?? "");
  if (len > max) {
    await resp.body?.cancel();
    throw new ConnectionError(`comm: ${what}: answer of ${len} bytes is larger than the limit of ${max}`);
  }
  if (!resp.body) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = resp.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      throw new ConnectionError(`comm: ${what}: answer larger than the limit of ${max} bytes`);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.byteLength;
  }
  return out;
}

/** The result of one attempt. */
type Attempt = { ok: true; value: unknown } | { ok: false; retry: boolean; error: Error };

export class Http {
  constructor(readonly s: HttpSettings) {}

  /**
   * Runs a call, retrying idempotent ones (GET, PUT, DELETE) and keyed POSTs
   * after 429, 5xx (not 501, 505) and connection errors, with exponential
   * backoff and jitter, honouring Retry-After; a keyed POST also after the
   * 409 (with Retry-After) that says its first attempt is still running. A
   * DELETE whose earlier attempt may have gone through and that now answers
   * not_found counts as done.
   */
  async call<T>(r: Request): Promise<T> {
    const idemKey = r.keyed ? newIdempotencyKey() : "";
    const payload = r.body === undefined ? undefined : JSON.stringify(r.body);
    let uncertain = false;
    for (let attempt = 0; ; attempt++) {
      const a = await this.once(r, payload, idemKey);
      if (a.ok) return a.value as T;
      const err = a.error;
      if (r.method === "DELETE" && uncertain && err instanceof CommError && err.code === "not_found") {
        return undefined as T;
      }
      if (!a.retry || !(idempotent(r.method) || idemKey !== "") || attempt >= this.s.retries || r.signal?.aborted) {
        throw err;
      }
      let wait = backoffDelay(attempt, this.s.backoffFirstMs, this.s.backoffLimitMs);
      if (err instanceof CommError) {
        if (err.retryAfterMs > MAX_RETRY_AFTER_MS) throw err;
        if (err.retryAfterMs > 0) wait = err.retryAfterMs;
        if (err.status !== 429) uncertain = true;
      } else {
        uncertain = true;
      }
      if (!(await sleep(wait, r.signal))) throw err;
    }
  }

  private async once(r: Request, payload: string | undefined, idemKey: string): Promise<Attempt> {
    let url = this.s.baseUrl + r.path;
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(r.query ?? {})) {
      if (v !== undefined && v !== "") q.set(k, String(v));
    }
    if ([...q.keys()].length > 0) url += "?" + q.toString();
    const headers: Record<string, string> = {
      Accept: r.raw ? "*/*" : "application/json",
      "User-Agent": USER_AGENT,
    };
    if (payload !== undefined) headers["Content-Type"] = "application/json";
    if (!r.noAuth) headers["Authorization"] = "Bearer " + this.s.apiKey;
    if (idemKey) headers["Idempotency-Key"] = idemKey;
    const what = `${r.method} ${r.path}`;

    // One attempt's timeout, and the caller's signal.
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(new Error("timeout")), this.s.timeoutMs + (r.waitMs ?? 0));
    const onAbort = () => ctl.abort(r.signal?.reason);
    r.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      if (r.signal?.aborted) throw r.signal.reason ?? new Error("aborted");
      let resp: Response;
      try {
        resp = await this.s.fetch(url, { method: r.method, headers, body: payload ?? null, signal: ctl.signal });
      } catch (err) {
        if (r.signal?.aborted) throw err;
        const cause = (err as { cause?: { code?: string; message?: string } }).cause;
        const why = ctl.signal.aborted ? "timed out" : cause?.code ?? cause?.message ?? (err as Error).message;
        return { ok: false, retry: true, error: new ConnectionError(`comm: ${what}: ${why}`, { cause: err }) };
      }
      if (resp.status < 200 || resp.status > 299) {
        let text = "";
        try {
          text = new TextDecoder().decode(await readBounded(resp, MAX_ERROR_BYTES, what));
        } catch {
          // the status says enough
        }
        const e = errorFromAnswer(resp, text);
        const s = resp.status;
        const running = s === 409 && idemKey !== "" && resp.headers.get("retry-after") !== null;
        return { ok: false, retry: running || s === 429 || (s >= 500 && s !== 501 && s !== 505), error: e };
      }
      let body: Uint8Array;
      try {
        body = await readBounded(resp, this.s.maxResponseBytes, what);
      } catch (err) {
        if (r.signal?.aborted) throw err;
        if (err instanceof ConnectionError) return { ok: false, retry: false, error: err };
        return { ok: false, retry: true, error: new ConnectionError(`comm: ${what}: read answer: ${(err as Error).message}`, { cause: err }) };
      }
      if (r.raw) return { ok: true, value: { headers: resp.headers, body } satisfies RawAnswer };
      if (resp.status === 204 || body.byteLength === 0) return { ok: true, value: undefined };
      try {
        return { ok: true, value: JSON.parse(new TextDecoder().decode(body)) };
      } catch (err) {
        return { ok: false, retry: false, error: new ConnectionError(`comm: ${what}: decode answer: ${(err as Error).message}`) };
      }
    } finally {
      clearTimeout(timer);
      r.signal?.removeEventListener("abort", onAbort);
    }
  }
}

/** The typed error of a non-2xx answer. */
function errorFromAnswer(resp: Response, text: string): CommError {
  const retryAfterMs = parseRetryAfter(resp.headers.get("retry-after"));
  const requestId = resp.headers.get("x-request-id") ?? undefined;
  try {
    const b = JSON.parse(text) as { error?: { code?: unknown; message?: unknown; param?: unknown; request_id?: unknown } };
    const e = b?.error;
    if (e && typeof e.code === "string" && e.code !== "") {
      return errorOf({
        status: resp.status, code: e.code, message: typeof e.message === "string" ? e.message : "",
        param: typeof e.param === "string" ? e.param : undefined,
        requestId: typeof e.request_id === "string" && e.request_id ? e.request_id : requestId, retryAfterMs,
      });
    }
  } catch {
    // not the gateway's error body
  }
  let msg = text.trim();
  if (msg.length > 200) msg = msg.slice(0, 200) + "...";
  return errorOf({ status: resp.status, code: codeOfStatus(resp.status), message: msg || resp.statusText, requestId, retryAfterMs });
}
