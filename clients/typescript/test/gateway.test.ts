// Against the real `comm serve` on SQLite: the quickstart loop, typed
// errors, listen's cursor and error handling, the async iterator and push
// deliveries.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { readFileSync, rmSync } from "node:fs";
import {
  Client, createSandbox, CommError, AuthenticationError, PaymentRequiredError, NotFoundError, BadRequestError,
  HandlerError, FileCursorStore, webhookHandler, verifyWebhook, WebhookVerificationError, type Event, type Connection,
  type MessageEventData,
} from "../src/index.js";
import { startGateway, eventually, tempDir, type Gateway } from "./helpers.js";

let gw: Gateway;

before(async () => {
  gw = await startGateway({ COMM_WEBHOOK_ALLOW_PRIVATE: "true" });
});
after(async () => {
  await gw?.stop();
});

/** A new sandbox project with a test connection. */
async function project(name: string): Promise<{ c: Client; conn: Connection; key: string }> {
  const sb = await createSandbox(name, { baseUrl: gw.base });
  const c = new Client({ apiKey: sb.api_key, baseUrl: gw.base, dotenvDirs: [] });
  const conn = await c.connect({ channel: "test" });
  return { c, conn, key: sb.api_key };
}

test("quickstart: sandbox, connect test, inject, listen replies, events show message.sent", async () => {
  const { c, conn } = await project("quickstart");
  assert.equal(conn.channel, "test");
  assert.equal(conn.status, "active");
  const dir = tempDir();
  try {
    const ctl = new AbortController();
    const typingSeen: boolean[] = [];
    const listening = c.listen(async (m) => {
      // The indicator is shown while the handler runs.
      typingSeen.push(await eventually("typing", async () => (await c.conversation(m.conversationId)).typing, 5000));
      await m.reply(`You said: ${m.text}`);
    }, { signal: ctl.signal, cursorFile: join(dir, ".comm-cursor"), stopOnSignals: false, longPollSeconds: 2 });
    const inbound = await c.inject(conn.id, { sender: "ada@example.com", text: "hello" });
    assert.equal(inbound.direction, "inbound");
    const sent = await eventually("message.sent", async () => {
      const evs = await c.events(0, 100, "message.sent");
      return evs.length > 0 ? evs : undefined;
    });
    ctl.abort();
    await listening;
    const d = sent[0]!.data as MessageEventData;
    assert.equal(d.message.text, "You said: hello");
    assert.equal(d.message.in_reply_to, inbound.id);
    assert.deepEqual(typingSeen, [true]);
    const all = await c.events();
    assert.deepEqual(all.map((e) => e.type).filter((t) => t.startsWith("message.")), ["message.received", "message.sent"]);
    const msgs = await c.messages(inbound.conversation_id);
    assert.deepEqual(msgs.map((m) => [m.direction, m.text]), [["inbound", "hello"], ["outbound", "You said: hello"]]);
    const saved = JSON.parse(readFileSync(join(dir, ".comm-cursor"), "utf8")) as { project_id: string; seq: number };
    assert.equal(saved.project_id, (await c.project()).id);
    assert.ok(saved.seq >= all.find((e) => e.type === "message.received")!.seq);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("typed errors: 401, 402 on connectIMessage with a sandbox key, 404, 400 with param", async () => {
  const { c } = await project("errors");
  const bad = new Client({ apiKey: "comm_sk_nope", baseUrl: gw.base, dotenvDirs: [] });
  await assert.rejects(bad.project(), (e: unknown) => {
    assert.ok(e instanceof AuthenticationError && e instanceof CommError);
    assert.equal(e.status, 401);
    assert.equal(e.code, "unauthenticated");
    assert.ok(e.requestId, "request id");
    return true;
  });
  await assert.rejects(c.connectIMessage(), (e: unknown) => {
    assert.ok(e instanceof PaymentRequiredError, String(e));
    assert.equal(e.status, 402);
    assert.equal(e.code, "payment_required");
    assert.match(e.message, /sign in|login/i);
    return true;
  });
  await assert.rejects(c.message("msg_doesnotexist"), (e: unknown) => {
    assert.ok(e instanceof NotFoundError);
    assert.equal(e.status, 404);
    assert.equal(e.code, "not_found");
    return true;
  });
  await assert.rejects(c.events(0, 5000), (e: unknown) => {
    assert.ok(e instanceof BadRequestError);
    assert.equal(e.status, 400);
    assert.equal(e.code, "invalid_parameter");
    assert.equal(e.param, "limit");
    return true;
  });
  await assert.rejects(c.getWebhook(), NotFoundError);
});

test("listen: a handler exception does not stop it; reported with its event", async () => {
  const { c, conn } = await project("exceptions");
  const ctl = new AbortController();
  const errors: [Error, Event | undefined][] = [];
  const handled: string[] = [];
  const listening = c.listen(async (m) => {
    handled.push(m.text);
    if (m.text === "boom") throw new Error("handler blew up");
    await m.reply("ok " + m.text);
  }, { signal: ctl.signal, cursorStore: null, stopOnSignals: false, longPollSeconds: 2, onError: (e, ev) => errors.push([e, ev]) });
  await c.inject(conn.id, { sender: "bob", text: "boom" });
  await c.inject(conn.id, { sender: "bob", text: "after" });
  await eventually("the reply after the exception", async () => (await c.events(0, 100, "message.sent")).length === 1);
  ctl.abort();
  await listening;
  assert.deepEqual(handled, ["boom", "after"]);
  assert.equal(errors.length, 1);
  assert.ok(errors[0]![0] instanceof HandlerError);
  assert.match(errors[0]![0].message, /handler blew up/);
  assert.equal(errors[0]![1]?.type, "message.received");
});

test("listen: the cursor survives a restart; each event is handled once", async () => {
  const { c, conn } = await project("cursor");
  const dir = tempDir();
  const file = join(dir, ".comm-cursor");
  const handled: string[] = [];
  const run = async (until: number) => {
    const ctl = new AbortController();
    const p = c.listen(async (m) => {
      handled.push(m.text);
      if (handled.length >= until) ctl.abort();
    }, { signal: ctl.signal, cursorFile: file, stopOnSignals: false, longPollSeconds: 1, typingIntervalMs: 0 });
    return { ctl, p };
  };
  try {
    for (const t of ["one", "two", "three"]) await c.inject(conn.id, { sender: "cy", text: t });
    let r = await run(3);
    await r.p;
    assert.deepEqual(handled, ["one", "two", "three"]);
    const first = await new FileCursorStore(file).load();
    // Restart: nothing is handled again; new events are.
    for (const t of ["four", "five"]) await c.inject(conn.id, { sender: "cy", text: t });
    r = await run(5);
    await r.p;
    assert.deepEqual(handled, ["one", "two", "three", "four", "five"]);
    assert.ok((await new FileCursorStore(file).load()) > first);
    // A third run with nothing new handles nothing.
    const ctl = new AbortController();
    const p = c.listen(async (m) => {
      handled.push(m.text);
    }, { signal: ctl.signal, cursorFile: file, stopOnSignals: false, longPollSeconds: 1 });
    await new Promise((res) => setTimeout(res, 1500));
    ctl.abort();
    await p;
    assert.equal(handled.length, 5);
    // A cursor file of another project is refused.
    const other = await project("other");
    await assert.rejects(other.c.listen(() => {}, { cursorFile: file, stopOnSignals: false }), /belongs to project/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("inbound(): async iterator, the cursor moves past what the loop finished", async () => {
  const { c, conn } = await project("iterator");
  const dir = tempDir();
  const file = join(dir, "cursor.json");
  try {
    for (const t of ["a", "b", "c"]) await c.inject(conn.id, { sender: "dee", text: t });
    const got: string[] = [];
    for await (const m of c.inbound({ cursorFile: file, longPollSeconds: 1 })) {
      if (m.text === "c") break; // left unfinished: the next run gets it again
      got.push(m.text);
      await m.reply("re " + m.text);
    }
    assert.deepEqual(got, ["a", "b"]);
    const again: string[] = [];
    for await (const m of c.inbound({ cursorFile: file, longPollSeconds: 1 })) {
      again.push(m.text);
      break;
    }
    assert.deepEqual(again, ["c"]);
    // stream() with every type, stopped by a signal.
    const ctl = new AbortController();
    const types: string[] = [];
    await eventually("two replies sent", async () => (await c.events(0, 10, "message.sent")).length === 2);
    for await (const e of c.stream({ types: [], cursorStore: null, signal: ctl.signal, longPollSeconds: 1 })) {
      types.push(e.type);
      if (types.filter((t) => t === "message.sent").length === 2) ctl.abort();
    }
    assert.ok(types.includes("connection.active") || types.includes("message.received"), types.join(","));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("webhook: deliveries from the gateway verify with webhookHandler and verifyWebhook", async () => {
  const { c, conn } = await project("webhook");
  const got: Event[] = [];
  const raw: { headers: Record<string, string | string[] | undefined>; body: Buffer }[] = [];
  const secret = "whsec_" + Buffer.from("a secret of this test, 32 bytes!").toString("base64");
  const handle = webhookHandler(secret, (e) => {
    got.push(e);
  });
  const srv = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (b: Buffer) => chunks.push(b));
    req.on("end", () => raw.push({ headers: req.headers, body: Buffer.concat(chunks) }));
    handle(req, res);
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  try {
    const url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}/hook`;
    const wh = await c.setWebhook(url, secret, { fromSeq: 0 });
    assert.equal(wh.url, url);
    assert.equal((await c.getWebhook()).url, url);
    const m = await c.inject(conn.id, { sender: "eve", text: "push me" });
    await eventually("the push delivery", async () =>
      got.some((e) => e.type === "message.received" && (e.data as MessageEventData).message.id === m.id));
    const attempts = await c.webhookAttempts();
    assert.ok(attempts.some((a) => a.ok && a.status_code === 204), JSON.stringify(attempts));
    // The raw delivery verifies on its own, and fails with another secret or a changed body.
    const d = raw.find((r) => r.body.includes(m.id))!;
    assert.ok(d.headers["webhook-id"] && d.headers["webhook-signature"]);
    assert.equal(verifyWebhook(d.headers, d.body, secret).type, "message.received");
    assert.throws(() => verifyWebhook(d.headers, d.body, "whsec_" + Buffer.from("another key").toString("base64")),
      (e: unknown) => e instanceof WebhookVerificationError && e.reason === "mismatch");
    const changed = Buffer.from(d.body.toString().replace("push me", "push you"));
    assert.throws(() => verifyWebhook(d.headers, changed, secret), WebhookVerificationError);
    // Replay: the events after seq 0 are pushed again.
    const before = got.filter((e) => e.seq === 1).length;
    const replayed = await c.replayWebhook(0);
    assert.equal(replayed.cursor, 0);
    await eventually("the replayed delivery", async () => got.filter((e) => e.seq === 1).length > before);
    await c.deleteWebhook();
    await assert.rejects(c.getWebhook(), NotFoundError);
  } finally {
    await new Promise<void>((r) => {
      srv.closeAllConnections();
      srv.close(() => r());
    });
  }
});

test("REST calls: project, channels, connections, conversations, messages, keys, send, typing", async () => {
  const { c, conn, key } = await project("rest");
  const p = await c.project();
  assert.match(p.id, /^proj_/);
  const chans = await c.channels();
  assert.ok(chans.some((ch) => ch.channel === "test" && ch.available));
  assert.deepEqual((await c.connections()).map((x) => x.id), [conn.id]);
  assert.equal((await c.connection(conn.id)).id, conn.id);
  const m = await c.inject(conn.id, { sender: "fay", text: "hi" });
  const conv = await c.conversation(m.conversation_id);
  assert.equal(conv.participant, "fay");
  assert.equal((await c.conversations({ connectionId: conn.id })).length, 1);
  const t = await c.typing(m.id);
  assert.equal(t.conversation_id, conv.id);
  const out = await c.send({ connection_id: conn.id, to: "fay", text: "proactive" });
  assert.equal(out.direction, "outbound");
  assert.equal((await c.message(out.id)).text, "proactive");
  const keys = await c.keys();
  assert.equal(keys.filter((k) => k.current).length, 1);
  const nk = await c.createKey("second");
  assert.ok(nk.api_key && nk.api_key !== key);
  const revoked = await c.revokeKey(nk.id);
  assert.ok(revoked.revoked_at);
  await eventually("the send recorded", async () => (await c.message(out.id)).status === "sent");
  const rc = await c.injectReceipt(conn.id, { message_id: out.id, state: "delivered" });
  assert.equal(rc.message?.delivery?.state, "delivered", JSON.stringify(rc));
  // Custom domains need a public --spf-include; this test gateway has none (and must not look up DNS).
  assert.deepEqual(await c.domains(), []);
  await assert.rejects(c.addDomain("agents.example.com"), (e: unknown) =>
    e instanceof CommError && e.status === 501 && e.code === "not_implemented" && /spf-include/.test(e.message));
  await assert.rejects(c.domain("dom_nope"), NotFoundError);
  await c.deleteConnection(conn.id);
  assert.deepEqual(await c.connections(), []);
});

test("listen: in order within a conversation, concurrently across conversations; typing ends with the reply", async () => {
  const { c, conn } = await project("ordering");
  const ctl = new AbortController();
  const log: string[] = [];
  let releaseA!: () => void;
  const aBlocked = new Promise<void>((r) => (releaseA = r));
  const listening = c.listen(async (m) => {
    log.push(`start ${m.sender} ${m.text}`);
    // A's first message waits until B's has been handled: only possible if
    // conversations run concurrently.
    if (m.text === "a1") await aBlocked;
    if (m.sender === "b") releaseA();
    await m.reply("re " + m.text);
    log.push(`end ${m.sender} ${m.text}`);
  }, { signal: ctl.signal, cursorStore: null, stopOnSignals: false, longPollSeconds: 1 });
  await c.inject(conn.id, { sender: "a", text: "a1" });
  await c.inject(conn.id, { sender: "a", text: "a2" });
  const b = await c.inject(conn.id, { sender: "b", text: "b1" });
  await eventually("three replies", async () => (await c.events(0, 100, "message.sent")).length === 3);
  ctl.abort();
  await listening;
  const a = log.filter((l) => l.includes(" a "));
  assert.deepEqual(a, ["start a a1", "end a a1", "start a a2", "end a a2"]);
  assert.ok(log.indexOf("start b b1") < log.indexOf("end a a1"), log.join(", "));
  assert.equal((await c.conversation(b.conversation_id)).typing, false, "the reply ended the typing indicator");
});

test("examples/echo.mjs runs as a user would, and stops cleanly on SIGINT with its cursor saved", async () => {
  const { c, conn, key } = await project("echo example");
  const dir = tempDir();
  try {
    const { spawn } = await import("node:child_process");
    const { fileURLToPath } = await import("node:url");
    const script = fileURLToPath(new URL("../../examples/echo.mjs", import.meta.url));
    const p = spawn(process.execPath, [script], {
      cwd: dir, env: { ...process.env, COMM_API_KEY: key, COMM_BASE_URL: gw.base }, stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    p.stdout!.on("data", (b: Buffer) => (out += b.toString()));
    p.stderr!.on("data", (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((r) => p.once("exit", (code) => r(code)));
    await eventually("the agent's start line", async () => out.includes("Ctrl-C stops"));
    await c.inject(conn.id, { sender: "gus", text: "echo this" });
    const sent = await eventually("the echo", async () => (await c.events(0, 10, "message.sent"))[0]);
    assert.equal((sent.data as MessageEventData).message.text, "You said: echo this");
    p.kill("SIGINT");
    assert.equal(await exited, 0, out);
    assert.match(out, /test gus: echo this\n/);
    assert.match(out, /stopped; the cursor is in \.comm-cursor/);
    const cur = JSON.parse(readFileSync(join(dir, ".comm-cursor"), "utf8")) as { seq: number };
    const received = (await c.events(0, 10, "message.received"))[0]!;
    assert.equal(cur.seq >= received.seq, true);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
