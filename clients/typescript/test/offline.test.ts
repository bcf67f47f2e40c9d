// Without the gateway: Standard Webhooks reference vectors, retries against a
// local stub, .env precedence.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  Client, createSandbox, verifyWebhook, signWebhook, webhookFetchHandler, WebhookVerificationError, ServerError,
  NoApiKeyError, ConfigError, ConnectionError, parseDotEnv, login, type Event,
} from "../src/index.js";
import { startStub, tempDir } from "./helpers.js";

// The Standard Webhooks specification's example (also the reference libraries' test vector).
const SPEC = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  ts: 1614265330,
  body: '{"test": 2432232314}',
  sig: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
};

test("webhook: the Standard Webhooks reference vector", () => {
  assert.equal(signWebhook(SPEC.secret, SPEC.id, SPEC.ts, SPEC.body), SPEC.sig);
  assert.equal(signWebhook(SPEC.secret, SPEC.id, SPEC.ts, Buffer.from(SPEC.body)), SPEC.sig);
  const h = { "webhook-id": SPEC.id, "webhook-timestamp": String(SPEC.ts), "webhook-signature": SPEC.sig };
  // The vector's body is no event of comm: the signature verifies, the payload check says so.
  assert.throws(() => verifyWebhook(h, SPEC.body, SPEC.secret, { now: SPEC.ts }),
    (e: unknown) => e instanceof WebhookVerificationError && e.reason === "payload");
  const wrong = (headers: Record<string, string>, reason: string, now = SPEC.ts, secret = SPEC.secret) =>
    assert.throws(() => verifyWebhook(headers, SPEC.body, secret, { now }),
      (e: unknown) => e instanceof WebhookVerificationError && e.reason === reason, reason);
  // Several signatures, one of them good, other versions ignored.
  const body = '{"seq":3,"type":"message.received","data":{"message":{"id":"msg_1"}}}';
  const good = signWebhook(SPEC.secret, SPEC.id, SPEC.ts, body);
  const multi = { ...h, "webhook-signature": `v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,${good.slice(3)} ${good}` };
  assert.equal(verifyWebhook(multi, body, SPEC.secret, { now: SPEC.ts }).seq, 3);
  assert.equal(verifyWebhook(new Headers(multi), body, SPEC.secret, { now: SPEC.ts + 299 }).type, "message.received");
  wrong({ ...h, "webhook-signature": `v2,${SPEC.sig.slice(3)}` }, "mismatch");
  wrong({ ...h, "webhook-signature": "v1,dGhpcyBpcyBub3QgaXQ=" }, "mismatch");
  wrong({ ...h, "webhook-id": "msg_other" }, "mismatch");
  wrong(h, "mismatch", SPEC.ts, "whsec_" + Buffer.from("another").toString("base64"));
  wrong(h, "timestamp", SPEC.ts + 301);
  wrong(h, "timestamp", SPEC.ts - 301);
  wrong({ ...h, "webhook-timestamp": "yesterday" }, "timestamp");
  wrong({ "webhook-timestamp": h["webhook-timestamp"], "webhook-signature": SPEC.sig }, "missing_headers");
  wrong({ "webhook-id": SPEC.id, "webhook-signature": SPEC.sig }, "missing_headers");
  wrong({ "webhook-id": SPEC.id, "webhook-timestamp": String(SPEC.ts) }, "missing_headers");
  wrong(h, "secret", SPEC.ts, "whsec_!!!");
  wrong(h, "secret", SPEC.ts, "");
  // A plain (non-whsec_) secret is used as its bytes, as the gateway does.
  const plain = signWebhook("plain secret", "id1", SPEC.ts, body);
  assert.equal(verifyWebhook({ "webhook-id": "id1", "webhook-timestamp": String(SPEC.ts), "webhook-signature": plain },
    body, "plain secret", { now: SPEC.ts }).seq, 3);
});

test("webhookFetchHandler: 204 when the handler resolves, 401, 400, 405, 500", async () => {
  const now = Math.floor(Date.now() / 1000);
  const body = '{"seq":9,"type":"message.sent","data":{}}';
  const headers = { "webhook-id": "e9", "webhook-timestamp": String(now), "webhook-signature": signWebhook(SPEC.secret, "e9", now, body) };
  const got: Event[] = [];
  const h = webhookFetchHandler(SPEC.secret, (e) => {
    got.push(e);
  });
  assert.equal((await h(new Request("http://x/hook", { method: "POST", headers, body }))).status, 204);
  assert.equal(got[0]?.seq, 9);
  assert.equal((await h(new Request("http://x/hook", { method: "POST", headers, body: body + " " }))).status, 401);
  const notEvent = '{"hello":1}';
  const h2 = { ...headers, "webhook-signature": signWebhook(SPEC.secret, "e9", now, notEvent) };
  assert.equal((await h(new Request("http://x/hook", { method: "POST", headers: h2, body: notEvent }))).status, 400);
  assert.equal((await h(new Request("http://x/hook"))).status, 405);
  const failing = webhookFetchHandler(SPEC.secret, () => {
    throw new Error("not now");
  });
  assert.equal((await failing(new Request("http://x/hook", { method: "POST", headers, body }))).status, 500);
});

test("retries: GET and keyed POST retried after 503 (same Idempotency-Key); unkeyed POST never", async () => {
  const stub = await startStub((req, _body, res, n) => {
    if (n % 3 !== 0) {
      res.writeHead(503, { "Content-Type": "application/json", "Retry-After": "0" });
      res.end('{"error":{"code":"unavailable","message":"try later","request_id":"req_' + n + '"}}');
      return;
    }
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(req.url === "/v1/project" ? '{"id":"proj_1","last_seq":0}' : '{"id":"msg_2","text":"ok"}');
  });
  try {
    const c = new Client({ apiKey: "k", baseUrl: stub.url, backoff: { firstMs: 1, limitMs: 5 }, dotenvDirs: [] });
    assert.equal((await c.project()).id, "proj_1");
    assert.equal(stub.requests.length, 3);
    assert.ok(stub.requests.every((r) => r.method === "GET" && r.headers["idempotency-key"] === undefined));

    const m = await c.reply("msg_1", "hello");
    assert.equal(m.id, "msg_2");
    const posts = stub.requests.slice(3);
    assert.equal(posts.length, 3);
    const keys = new Set(posts.map((r) => r.headers["idempotency-key"]));
    assert.equal(keys.size, 1);
    assert.match([...keys][0] as string, /^ts_[0-9a-f]{32}$/);
    assert.ok(posts.every((r) => r.body === '{"text":"hello"}'));

    // POST without an Idempotency-Key: one attempt, the 503 is the error.
    const before = stub.requests.length;
    await assert.rejects(createSandbox("x", { baseUrl: stub.url }), (e: unknown) =>
      e instanceof ServerError && e.status === 503 && e.code === "unavailable" && e.requestId === `req_${before + 1}`);
    assert.equal(stub.requests.length, before + 1);
    const before2 = stub.requests.length;
    await assert.rejects(c.verifyDomain("dom_1"), ServerError);
    assert.equal(stub.requests.length, before2 + 1);

    // retries: 0 turns retries off.
    const once = new Client({ apiKey: "k", baseUrl: stub.url, retries: 0, dotenvDirs: [] });
    const before3 = stub.requests.length;
    await once.project().catch(() => undefined);
    assert.equal(stub.requests.length, before3 + 1);
  } finally {
    await stub.close();
  }
});

test("retries: Retry-After is honoured; 501 and 4xx are not retried; a long Retry-After ends the retries", async () => {
  let mode = "";
  const stub = await startStub((_req, _body, res, n) => {
    if (mode === "429" && n % 2 === 1) {
      res.writeHead(429, { "Retry-After": "1" });
      res.end();
      return;
    }
    if (mode === "501") {
      res.writeHead(501);
      res.end("no");
      return;
    }
    if (mode === "404") {
      res.writeHead(404, { "Content-Type": "application/json" });
      res.end('{"error":{"code":"not_found","message":"no such message"}}');
      return;
    }
    if (mode === "long") {
      res.writeHead(503, { "Retry-After": "3600" });
      res.end();
      return;
    }
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end("{}");
  });
  try {
    const c = new Client({ apiKey: "k", baseUrl: stub.url, backoff: { firstMs: 1, limitMs: 5 }, dotenvDirs: [] });
    mode = "429";
    const t0 = Date.now();
    await c.project();
    assert.ok(Date.now() - t0 >= 900, "waited for Retry-After");
    mode = "501";
    let n = stub.requests.length;
    await assert.rejects(c.project(), (e: unknown) => e instanceof ServerError && e.code === "not_implemented" && e.detail === "no");
    assert.equal(stub.requests.length, n + 1);
    mode = "404";
    n = stub.requests.length;
    await assert.rejects(c.message("m"), /not_found/);
    assert.equal(stub.requests.length, n + 1);
    mode = "long";
    n = stub.requests.length;
    await assert.rejects(c.project(), (e: unknown) => e instanceof ServerError && e.retryAfterMs === 3600_000);
    assert.equal(stub.requests.length, n + 1);
  } finally {
    await stub.close();
  }
  // A refused connection is a ConnectionError, after the retries.
  const c = new Client({ apiKey: "k", baseUrl: stub.url, backoff: { firstMs: 1, limitMs: 2 }, dotenvDirs: [] });
  await assert.rejects(c.project(), ConnectionError);
});

test(".env precedence: options, envFile, environment, .env in the working directory, .env beside the code", () => {
  const dir = tempDir();
  try {
    const cwd = join(dir, "cwd");
    const code = join(dir, "code");
    mkdirSync(cwd);
    mkdirSync(code);
    writeFileSync(join(cwd, ".env"), "COMM_API_KEY=from-cwd\n");
    writeFileSync(join(code, ".env"), "# beside the code\nexport COMM_API_KEY='from-code'\nCOMM_BASE_URL=\"http://code.example:1/\"\n");
    writeFileSync(join(dir, "given.env"), "COMM_API_KEY=from-file # comment\n");
    const env = { COMM_API_KEY: "from-env", COMM_BASE_URL: "http://env.example:2" };
    const dirs = [cwd, code];
    const key = (c: Client) => c.http.s.apiKey;

    let c = new Client({ apiKey: "from-option", envFiles: [join(dir, "given.env")], env, dotenvDirs: dirs });
    assert.equal(key(c), "from-option");
    assert.equal(c.baseUrl, "http://env.example:2");
    c = new Client({ envFiles: [join(dir, "given.env")], env, dotenvDirs: dirs });
    assert.equal(key(c), "from-file");
    c = new Client({ env, dotenvDirs: dirs });
    assert.equal(key(c), "from-env");
    c = new Client({ env: {}, dotenvDirs: dirs });
    assert.equal(key(c), "from-cwd");
    assert.equal(c.baseUrl, "http://code.example:1", "the base URL from the next file when the first lacks it");
    c = new Client({ env: {}, dotenvDirs: [code] });
    assert.equal(key(c), "from-code");
    c = new Client({ env: { COMM_API_KEY: "k" }, dotenvDirs: [] });
    assert.equal(c.baseUrl, "http://127.0.0.1:8080");

    assert.throws(() => new Client({ env: {}, dotenvDirs: [] }), (e: unknown) => e instanceof NoApiKeyError && /COMM_API_KEY/.test(e.message));
    assert.throws(() => new Client({ envFiles: [join(dir, "missing.env")], env: {}, dotenvDirs: [] }), ConfigError);
    assert.throws(() => new Client({ apiKey: "k", baseUrl: "ftp://x", dotenvDirs: [] }), /base URL/);
    writeFileSync(join(dir, "bad.env"), "COMM_API_KEY=ok\nthis line is wrong\n");
    assert.throws(() => new Client({ envFiles: [join(dir, "bad.env")], dotenvDirs: [] }), /line 2/);
    assert.deepEqual(parseDotEnv('A=1\nB="two\\nlines"\n  # c\nexport C=3 # x\nD=\'#not\'\n'), { A: "1", B: "two\nlines", C: "3", D: "#not" });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("login(): honours interval and slow_down (stub of the device endpoints)", async () => {
  const times: number[] = [];
  const stub = await startStub((req, body, res) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    if (req.url === "/v1/auth/device/start") {
      assert.equal(body, '{"api_key":"comm_sk_sandbox"}');
      res.end('{"user_code":"BCDF-GHJK","device_code":"dc","verification_uri":"u","verification_uri_complete":"u?code=BCDF-GHJK","interval":1,"expires_in":900}');
      return;
    }
    times.push(Date.now());
    const n = times.length;
    res.end(n === 1 ? '{"status":"slow_down","interval":6}' : n === 2 ? '{"status":"pending","interval":6}' : '{"status":"approved","api_key":"comm_sk_signed","base_url":"https://comm.example"}');
  });
  const dir = tempDir();
  try {
    const t0 = Date.now();
    let shown = "";
    const r = await login({ baseUrl: stub.url, apiKey: "comm_sk_sandbox", envFile: join(dir, ".env"), show: (p) => (shown = p.code) });
    assert.equal(shown, "BCDF-GHJK");
    assert.deepEqual(r, { apiKey: "comm_sk_signed", baseUrl: "https://comm.example", envFile: join(dir, ".env") });
    assert.ok(times[0]! - t0 >= 950, `first poll after the interval (${times[0]! - t0} ms)`);
    assert.ok(times[1]! - times[0]! >= 5950, `after slow_down the interval grows to 6 s (${times[1]! - times[0]!} ms)`);
    assert.equal(readFileSync(join(dir, ".env"), "utf8"), "COMM_API_KEY=comm_sk_signed\nCOMM_BASE_URL=https://comm.example\n");
  } finally {
    await stub.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
