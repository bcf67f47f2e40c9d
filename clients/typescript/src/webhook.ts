// Push deliveries: Standard Webhooks verification and receivers.

import { createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { WebhookVerificationError } from "./errors.js";
import type { Event } from "./types.js";

/** How far a delivery's timestamp may be from the receiver's clock, seconds. */
export const WEBHOOK_TOLERANCE_SECONDS = 5 * 60;
/** The largest body the receivers read, bytes. */
export const MAX_WEBHOOK_BODY = 1 << 20;

/** Headers as Node's http gives them, a fetch Headers, or a plain object. */
export type HeaderSource = Headers | Record<string, string | string[] | undefined>;

function header(h: HeaderSource, name: string): string {
  if (typeof (h as Headers).get === "function") return (h as Headers).get(name) ?? "";
  const rec = h as Record<string, string | string[] | undefined>;
  let v = rec[name];
  if (v === undefined) {
    const k = Object.keys(rec).find((k) => k.toLowerCase() === name);
    if (k !== undefined) v = rec[k];
  }
  return Array.isArray(v) ? v.join(" ") : v ?? "";
}

/** The HMAC key of a secret: "whsec_" + base64, or the secret's own bytes. */
export function webhookKey(secret: string): Buffer {
  if (secret.startsWith("whsec_")) {
    const rest = secret.slice(6);
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(rest) || rest.length % 4 === 1) {
      throw new WebhookVerificationError("secret", "a whsec_ secret must be base64 after the prefix");
    }
    const key = Buffer.from(rest, "base64");
    if (key.length === 0) throw new WebhookVerificationError("secret", "empty whsec_ secret");
    return key;
  }
  if (secret === "") throw new WebhookVerificationError("secret", "empty secret");
  return Buffer.from(secret, "utf8");
}

/** The webhook-signature value of one delivery ("v1,<base64 HMAC-SHA256 of id.timestamp.body>"). */
export function signWebhook(secret: string, id: string, timestamp: number, body: string | Uint8Array): string {
  const m = createHmac("sha256", webhookKey(secret));
  m.update(`${id}.${timestamp}.`);
  m.update(body);
  return "v1," + m.digest("base64");
}

export interface VerifyOptions {
  /** The receiver's clock, Unix seconds (default now). */
  now?: number;
  /** Tolerance of the timestamp, seconds (default 300). */
  toleranceSeconds?: number;
}

/**
 * Checks a push delivery's Standard Webhooks signature (headers webhook-id,
 * webhook-timestamp, webhook-signature) against its raw body and the secret
 * given to setWebhook, and returns the event. Pass the body exactly as
 * received. Throws WebhookVerificationError (reason says why). A delivery may
 * arrive more than once: event.seq tells them apart.
 */
export function verifyWebhook(headers: HeaderSource, body: string | Uint8Array, secret: string, o: VerifyOptions = {}): Event {
  const key = webhookKey(secret);
  const id = header(headers, "webhook-id");
  const ts = header(headers, "webhook-timestamp");
  const sigs = header(headers, "webhook-signature");
  if (!id || !ts || !sigs) {
    throw new WebhookVerificationError("missing_headers", "missing webhook-id, webhook-timestamp or webhook-signature");
  }
  const now = o.now ?? Math.floor(Date.now() / 1000);
  const tol = o.toleranceSeconds ?? WEBHOOK_TOLERANCE_SECONDS;
  if (!/^\d{1,15}$/.test(ts) || Math.abs(Number(ts) - now) > tol) {
    throw new WebhookVerificationError("timestamp", "timestamp outside the tolerance");
  }
  const m = createHmac("sha256", key);
  m.update(`${id}.${ts}.`);
  m.update(body);
  const want = m.digest();
  let ok = false;
  for (const s of sigs.split(/\s+/)) {
    const [version, b64] = [s.slice(0, s.indexOf(",")), s.slice(s.indexOf(",") + 1)];
    if (version !== "v1" || !b64) continue;
    const got = Buffer.from(b64, "base64");
    if (got.length === want.length && timingSafeEqual(got, want)) ok = true;
  }
  if (!ok) throw new WebhookVerificationError("mismatch", "no signature matches");
  let e: unknown;
  try {
    e = JSON.parse(typeof body === "string" ? body : new TextDecoder().decode(body));
  } catch (err) {
    throw new WebhookVerificationError("payload", `body is not JSON: ${(err as Error).message}`);
  }
  const ev = e as Partial<Event> | null;
  if (!ev || typeof ev !== "object" || typeof ev.seq !== "number" || ev.seq <= 0 || typeof ev.type !== "string" ||
    ev.type === "" || ev.data === undefined || ev.data === null) {
    throw new WebhookVerificationError("payload", "body is not an event: want {seq, type, data}");
  }
  return ev as Event;
}

/** A delivery handler: resolve to acknowledge, throw to have the gateway deliver the event again later. */
export type WebhookEventHandler = (e: Event) => unknown;

function statusOf(err: unknown): [number, string] {
  if (err instanceof WebhookVerificationError) {
    if (err.reason === "payload") return [400, "body is not an event"];
    if (err.reason === "secret") return [500, "receiver misconfigured"];
    return [401, "signature does not verify"];
  }
  return [500, "handler failed"];
}

/**
 * A receiver for Node's http server: (req, res) => void. It reads the body
 * (at most 1 MiB: 413 beyond), verifies it (401 when the signature does not
 * verify, 400 when the body is not an event) and calls fn; it answers 204
 * when fn resolves, acknowledging the event, and 500 when fn throws, so the
 * gateway delivers it again. Methods other than POST get 405.
 */
export function webhookHandler(secret: string, fn: WebhookEventHandler): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const answer = (status: number, text = "") => {
      if (status === 405) res.setHeader("Allow", "POST");
      res.statusCode = status;
      if (text) res.setHeader("Content-Type", "text/plain; charset=utf-8");
      res.end(text);
    };
    if (req.method !== "POST") return answer(405, "method not allowed");
    const chunks: Buffer[] = [];
    let size = 0;
    let tooBig = false;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_WEBHOOK_BODY) {
        if (!tooBig) {
          tooBig = true;
          answer(413, "body too large");
          req.resume();
        }
        return;
      }
      chunks.push(c);
    });
    req.on("error", () => {
      if (!res.headersSent) answer(400, "reading the body failed");
    });
    req.on("end", () => {
      if (tooBig) return;
      let ev: Event;
      try {
        ev = verifyWebhook(req.headers, Buffer.concat(chunks), secret);
      } catch (err) {
        const [s, t] = statusOf(err);
        return answer(s, t);
      }
      Promise.resolve()
        .then(() => fn(ev))
        .then(() => answer(204), () => answer(500, "handler failed"));
    });
  };
}

/**
 * A receiver in the fetch style (Request => Response), for Deno, Bun,
 * Cloudflare Workers, Next.js route handlers and such; the same answers as
 * webhookHandler.
 */
export function webhookFetchHandler(secret: string, fn: WebhookEventHandler): (req: Request) => Promise<Response> {
  return async (req) => {
    if (req.method !== "POST") return new Response("method not allowed", { status: 405, headers: { Allow: "POST" } });
    const len = Number(req.headers.get("content-length") ?? "");
    if (len > MAX_WEBHOOK_BODY) return new Response("body too large", { status: 413 });
    let body: Uint8Array;
    try {
      body = new Uint8Array(await req.arrayBuffer());
    } catch {
      return new Response("reading the body failed", { status: 400 });
    }
    if (body.byteLength > MAX_WEBHOOK_BODY) return new Response("body too large", { status: 413 });
    let ev: Event;
    try {
      ev = verifyWebhook(req.headers, body, secret);
    } catch (err) {
      const [s, t] = statusOf(err);
      return new Response(t, { status: s });
    }
    try {
      await fn(ev);
    } catch {
      return new Response("handler failed", { status: 500 });
    }
    return new Response(null, { status: 204 });
  };
}
