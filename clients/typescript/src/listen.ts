// listen() and stream(): following the project's event stream.

import type { Client } from "./client.js";
import { CommError, HandlerError } from "./errors.js";
import { backoffDelay, sleep } from "./http.js";
import { DEFAULT_CURSOR_FILE, FileCursorStore, type CursorStore } from "./cursor.js";
import type { InboundMessage } from "./message.js";
import type { Event, MessageEventData, Project } from "./types.js";

/** What a handler gets besides its message or event. */
export interface HandlerContext {
  /** Aborted when the shutdown grace period after a stop runs out. */
  signal: AbortSignal;
}

/** Handles one inbound message (message.received). A throw is reported to onError and does not stop listen. */
export type MessageHandler = (m: InboundMessage, ctx: HandlerContext) => unknown;
/** Handles one event of the stream. */
export type EventHandler = (e: Event, ctx: HandlerContext) => unknown;

/** Where a listener without a saved cursor starts: after a seq (0: the whole stream), or "head" (only new events). */
export type StartSeq = number | "head";

interface FollowOptions {
  /** Stops listening: no new event starts; running handlers get the shutdown grace. */
  signal?: AbortSignal | undefined;
  /** The cursor store (default: a FileCursorStore at cursorFile); null keeps the cursor in memory only. */
  cursorStore?: CursorStore | null | undefined;
  /** The cursor file of the default store (default ".comm-cursor" in the working directory). */
  cursorFile?: string | undefined;
  /** Where to start without a saved cursor (default 0, the whole stream). The start is saved at once. */
  startSeq?: StartSeq | undefined;
  /** The least time between two polls that found nothing new, and the first delay after a failed poll, ms (default 1000). */
  pollIntervalMs?: number | undefined;
  /** How long the gateway may hold a poll while nothing is new, s (default 25, at most 60; 0 polls every pollIntervalMs). */
  longPollSeconds?: number | undefined;
  /** Page size of polls (default 100, at most 1000). */
  batchSize?: number | undefined;
  /** Receives failed polls and cursor saves (with no event), and for listen the handlers' failures (HandlerError, with the event). Default: console.error. */
  onError?: ((err: Error, event?: Event) => void) | undefined;
}

export interface ListenOptions extends FollowOptions {
  /** Handlers by event type ("message.sent" ...); "" handles every other type. Without them only message.received is fetched. */
  handlers?: Record<string, EventHandler> | undefined;
  /** Handlers running at once across conversations (default 8); one at a time, in order, within a conversation. */
  concurrency?: number | undefined;
  /** How often the typing indicator is refreshed while the message handler runs, ms (default 5000; 0: no indicator). */
  typingIntervalMs?: number | undefined;
  /** How long running handlers may take to finish after a stop, ms (default 30 000); their signal aborts after it. */
  shutdownGraceMs?: number | undefined;
  /** Stop on SIGINT and SIGTERM while listening (default true). */
  stopOnSignals?: boolean | undefined;
}

export interface StreamOptions extends FollowOptions {
  /** Event types yielded (default ["message.received"]); an empty array yields every type. */
  types?: string[] | undefined;
}

const MAX_SEEN = 4096;
const MAX_PENDING = 1024;

/** Whether repeating a failed request cannot help: an error answer of 4xx other than 408 and 429. */
export function permanent(err: unknown): boolean {
  return err instanceof CommError && err.status >= 400 && err.status < 500 && err.status !== 408 && err.status !== 429;
}

function defaultOnError(err: Error, event?: Event): void {
  if (event) console.error(`comm: event ${event.seq} (${event.type}): ${err.message}`);
  else console.error(err.message);
}

function conversationOf(e: Event): string {
  if (e.type.startsWith("message.")) {
    const id = (e.data as MessageEventData | undefined)?.message?.conversation_id;
    if (id) return "conv:" + id;
  }
  return "";
}

/** Bounded memory of message ids, for deduplication within a run. */
class Seen {
  private set = new Set<string>();
  has(id: string): boolean {
    return this.set.has(id);
  }
  add(id: string): void {
    this.set.add(id);
    if (this.set.size > MAX_SEEN) this.set.delete(this.set.values().next().value as string);
  }
}

/** Shared start of listen and stream: the project, the store, the starting cursor. */
async function open(client: Client, o: FollowOptions, report: (err: Error) => void, interval: number) {
  let proj: Project | undefined;
  for (let n = 0; !proj; n++) {
    try {
      proj = await client.project({ signal: o.signal });
    } catch (err) {
      if (o.signal?.aborted) return undefined;
      if (permanent(err)) throw err;
      report(err as Error);
      if (!(await sleep(backoffDelay(n, interval, Math.max(30_000, interval)), o.signal))) return undefined;
    }
  }
  const store: CursorStore | undefined = o.cursorStore === null ? undefined
    : o.cursorStore ?? new FileCursorStore(o.cursorFile ?? DEFAULT_CURSOR_FILE, proj.id);
  let cursor = store ? await store.load() : 0;
  const start = o.startSeq ?? 0;
  const fresh = cursor === 0 && start !== 0;
  if (fresh) cursor = start === "head" ? proj.last_seq : Math.max(start, 0);
  if (cursor > proj.last_seq) {
    throw new Error(`comm: listen: cursor ${cursor} is ahead of project ${proj.id}'s stream, whose last seq is ` +
      `${proj.last_seq}: the cursor belongs to another project or database`);
  }
  if (fresh && store && cursor > 0) await store.save(cursor);
  return { proj, store, cursor };
}

interface Item {
  ev: Event;
  key: string;
  msg: InboundMessage | undefined;
  done: boolean;
}

class Listener {
  private readonly interval: number;
  private readonly wait: number;
  private readonly batch: number;
  private readonly concurrency: number;
  private readonly typingEvery: number;
  private readonly grace: number;
  private readonly handlers: Record<string, EventHandler>;
  private readonly typeFilter: string;
  private readonly report: (err: Error, event?: Event) => void;

  private store: CursorStore | undefined;
  private pending: Item[] = [];
  private accepted = 0;
  private cursor = 0;
  private saved = 0;
  private inFlight = 0;
  private lanes = new Map<string, Item[]>();
  private laneRuns = new Set<Promise<void>>();
  private active = 0;
  private started = 0;
  private stopping = false;
  private frozen = 0;
  private graceOver = false;
  private graceTimer: NodeJS.Timeout | undefined;
  private seen = new Seen();
  private waiters: (() => void)[] = [];
  private readonly stopCtl = new AbortController();
  private readonly handlerCtl = new AbortController();
  private saving: Promise<void> | undefined;

  constructor(private readonly client: Client, private readonly handler: MessageHandler | null, private readonly o: ListenOptions) {
    this.interval = o.pollIntervalMs && o.pollIntervalMs > 0 ? o.pollIntervalMs : 1000;
    this.wait = Math.min(Math.max(o.longPollSeconds ?? 25, 0), 60);
    this.batch = Math.min(o.batchSize && o.batchSize > 0 ? o.batchSize : 100, 1000);
    this.concurrency = Math.max(o.concurrency ?? 8, 1);
    this.typingEvery = Math.max(o.typingIntervalMs ?? 5000, 0);
    this.grace = Math.max(o.shutdownGraceMs ?? 30_000, 0);
    this.handlers = o.handlers ?? {};
    this.typeFilter = Object.keys(this.handlers).length === 0 ? "message.received" : "";
    this.report = o.onError ?? defaultOnError;
  }

  async run(): Promise<void> {
    const sig = this.o.signal;
    const onStop = () => this.stop();
    sig?.addEventListener("abort", onStop, { once: true });
    const signals: NodeJS.Signals[] = this.o.stopOnSignals === false ? [] : ["SIGINT", "SIGTERM"];
    for (const s of signals) process.once(s, onStop);
    try {
      if (sig?.aborted) return;
      const start = await open(this.client, { ...this.o, signal: this.stopCtl.signal }, (e) => this.report(e), this.interval);
      if (!start) return;
      this.store = start.store;
      this.cursor = this.accepted = this.saved = start.cursor;
      let failure: unknown;
      try {
        await this.follow();
      } catch (err) {
        failure = err;
      }
      this.stop();
      while (this.laneRuns.size > 0) await Promise.all([...this.laneRuns]);
      clearTimeout(this.graceTimer);
      await this.flush();
      if (failure !== undefined) throw failure;
    } finally {
      sig?.removeEventListener("abort", onStop);
      for (const s of signals) process.removeListener(s, onStop);
      clearTimeout(this.graceTimer);
    }
  }

  private stop(): void {
    if (this.stopping) return;
    this.stopping = true;
    this.frozen = this.started;
    this.stopCtl.abort();
    this.graceTimer = setTimeout(() => {
      this.graceOver = true;
      this.handlerCtl.abort();
      this.broadcast();
    }, this.grace);
    this.broadcast();
  }

  private broadcast(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  private change(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private async follow(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      const began = Date.now();
      let evs: Event[];
      try {
        evs = await this.client.events(this.accepted, this.batch, this.typeFilter, { waitSeconds: this.wait, signal: this.stopCtl.signal });
      } catch (err) {
        if (this.stopping) return;
        if (permanent(err)) throw err;
        this.report(err as Error);
        await sleep(backoffDelay(failures++, this.interval, Math.max(30_000, this.interval)), this.stopCtl.signal);
        continue;
      }
      failures = 0;
      let fresh = 0;
      for (const ev of evs) {
        const r = await this.accept(ev);
        if (!r.ok) return;
        if (r.fresh) fresh++;
      }
      if (fresh === 0 || (this.wait <= 0 && evs.length < this.batch)) {
        await sleep(this.interval - (Date.now() - began), this.stopCtl.signal);
      }
    }
  }

  private handlerFor(type: string): EventHandler | undefined {
    if (type === "message.received" && this.handler) return undefined;
    return this.handlers[type] ?? this.handlers[""];
  }

  private async accept(ev: Event): Promise<{ fresh: boolean; ok: boolean }> {
    const it: Item = { ev, key: conversationOf(ev), msg: undefined, done: false };
    const wantsMessage = ev.type === "message.received" && this.handler !== null;
    if (!wantsMessage && !this.handlerFor(ev.type)) it.done = true;
    if (wantsMessage) {
      try {
        it.msg = this.client.messageOf(ev);
      } catch (err) {
        this.report(err as Error, ev);
        it.done = true;
      }
    }
    if (ev.seq <= this.accepted) return { fresh: false, ok: !this.stopping };
    while ((this.inFlight >= Math.max(4 * this.concurrency, 16) || this.pending.length >= MAX_PENDING) && !this.stopping) {
      await this.change();
    }
    if (this.stopping) return { fresh: false, ok: false };
    if (it.msg) {
      if (this.seen.has(it.msg.id)) {
        it.done = true;
        it.msg = undefined;
      } else {
        this.seen.add(it.msg.id);
      }
    }
    this.accepted = ev.seq;
    this.pending.push(it);
    if (it.done) {
      this.advance();
      return { fresh: true, ok: true };
    }
    this.inFlight++;
    const lane = this.lanes.get(it.key);
    if (lane) {
      lane.push(it);
    } else {
      const items = [it];
      this.lanes.set(it.key, items);
      const run: Promise<void> = this.runLane(it.key, items).finally(() => this.laneRuns.delete(run));
      this.laneRuns.add(run);
    }
    return { fresh: true, ok: true };
  }

  /** Runs a conversation's events one after another, holding one of the concurrency slots. */
  private async runLane(key: string, items: Item[]): Promise<void> {
    if (!(await this.acquire(items))) {
      this.lanes.delete(key);
      return;
    }
    try {
      for (;;) {
        const next = items[0];
        if (!next || (this.stopping && (next.ev.seq > this.frozen || this.graceOver))) {
          this.lanes.delete(key);
          return;
        }
        items.shift();
        this.started = Math.max(this.started, next.ev.seq);
        const ok = await this.handle(next);
        next.done = ok;
        this.inFlight--;
        this.advance();
        this.broadcast();
      }
    } finally {
      this.active--;
      this.broadcast();
    }
  }

  private async acquire(items: Item[]): Promise<boolean> {
    for (;;) {
      if (this.stopping && (items.length === 0 || items[0]!.ev.seq > this.frozen || this.graceOver)) return false;
      if (this.active < this.concurrency) {
        this.active++;
        return true;
      }
      await this.change();
    }
  }

  /** Runs the event's handler; false when interrupted by the end of the grace period (not handled). */
  private async handle(it: Item): Promise<boolean> {
    const ctx: HandlerContext = { signal: this.handlerCtl.signal };
    try {
      if (it.msg && this.handler) {
        const m = it.msg;
        if (this.typingEvery > 0) m.typingLoop = this.startTyping(m.id);
        try {
          await this.handler(m, ctx);
        } finally {
          await m.typingLoop?.stop();
          m.typingLoop = undefined;
        }
      } else {
        const h = this.handlerFor(it.ev.type);
        if (h) await h(it.ev, ctx);
      }
      return true;
    } catch (err) {
      this.report(new HandlerError(it.ev.seq, it.ev.type, err), it.ev);
      return !this.handlerCtl.signal.aborted;
    }
  }

  private startTyping(messageId: string): { stop(): Promise<void> } {
    let stopped = false;
    let inflight: Promise<void> | undefined;
    let timer: NodeJS.Timeout | undefined;
    const tick = () => {
      if (stopped) return;
      inflight = this.client.typing(messageId, { signal: this.handlerCtl.signal }).then(
        () => undefined,
        (err: unknown) => {
          if (permanent(err)) stopped = true;
        },
      ).finally(() => {
        inflight = undefined;
        if (!stopped) timer = setTimeout(tick, this.typingEvery);
      });
    };
    tick();
    return {
      stop: async () => {
        stopped = true;
        clearTimeout(timer);
        if (inflight) await inflight;
      },
    };
  }

  /** Moves the cursor over the finished prefix and saves it. */
  private advance(): void {
    let moved = false;
    while (this.pending.length > 0 && this.pending[0]!.done) {
      this.cursor = this.pending.shift()!.ev.seq;
      moved = true;
    }
    if (moved && !this.saving) {
      this.saving = this.saveLoop().finally(() => (this.saving = undefined));
    }
  }

  /** Saves until the saved cursor catches up; saves coalesce. */
  private async saveLoop(): Promise<void> {
    while (this.store && this.saved !== this.cursor) {
      const cur = this.cursor;
      try {
        await this.store.save(cur);
        this.saved = cur;
      } catch (err) {
        this.report(new Error(`comm: listen: save cursor: ${(err as Error).message}`, { cause: err }));
        return;
      }
    }
  }

  private async flush(): Promise<void> {
    if (this.saving) await this.saving;
    await this.saveLoop();
  }
}

/** listen(): see Client.listen. */
export async function listen(client: Client, handler: MessageHandler | null, o: ListenOptions = {}): Promise<void> {
  if (!handler && Object.keys(o.handlers ?? {}).length === 0) throw new TypeError("comm: listen: no handler");
  await new Listener(client, handler, o).run();
}

/** stream(): see Client.stream. */
export async function* stream(client: Client, o: StreamOptions = {}): AsyncGenerator<Event, void, undefined> {
  const interval = o.pollIntervalMs && o.pollIntervalMs > 0 ? o.pollIntervalMs : 1000;
  const wait = Math.min(Math.max(o.longPollSeconds ?? 25, 0), 60);
  const batch = Math.min(o.batchSize && o.batchSize > 0 ? o.batchSize : 100, 1000);
  const report = o.onError ?? defaultOnError;
  const types = o.types ?? ["message.received"];
  const filter = types.length === 1 ? types[0]! : "";
  const start = await open(client, o, report, interval);
  if (!start) return;
  const { store } = start;
  let after = start.cursor;
  let saved = after;
  const seen = new Seen();
  const save = async () => {
    if (!store || saved === after) return;
    try {
      await store.save(after);
      saved = after;
    } catch (err) {
      report(new Error(`comm: stream: save cursor: ${(err as Error).message}`, { cause: err }));
    }
  };
  let failures = 0;
  while (!o.signal?.aborted) {
    const began = Date.now();
    let evs: Event[];
    try {
      evs = await client.events(after, batch, filter, { waitSeconds: wait, signal: o.signal });
    } catch (err) {
      if (o.signal?.aborted) break;
      if (permanent(err)) throw err;
      report(err as Error);
      await sleep(backoffDelay(failures++, interval, Math.max(30_000, interval)), o.signal);
      continue;
    }
    failures = 0;
    let fresh = 0;
    for (const ev of evs) {
      if (ev.seq <= after) continue;
      fresh++;
      const id = ev.type === "message.received" ? (ev.data as MessageEventData | undefined)?.message?.id : undefined;
      const dup = id !== undefined && seen.has(id);
      if (id !== undefined) seen.add(id);
      if ((types.length === 0 || types.includes(ev.type)) && !dup) {
        await save();
        yield ev;
      }
      after = ev.seq;
    }
    await save();
    if (fresh === 0 || (wait <= 0 && evs.length < batch)) await sleep(interval - (Date.now() - began), o.signal);
  }
}
