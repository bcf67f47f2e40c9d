// The client: typed calls for every REST endpoint.

import { ConfigError, NoApiKeyError, BadRequestError, NotFoundError } from "./errors.js";
import { DEFAULT_BASE_URL, ENV_API_KEY, ENV_BASE_URL, parseBaseUrl, resolveConfig, type ConfigSources } from "./config.js";
import { Http, type CallOptions, type RawAnswer, type Request } from "./http.js";
import { InboundMessage } from "./message.js";
import { listen, stream, type ListenOptions, type MessageHandler, type StreamOptions } from "./listen.js";
import type {
  AccountView, AttachmentFile, Binding, ChannelInfo, ConnectRequest, Connection, Conversation, CreditEntry, Domain,
  Event, InjectRequest, Key, Message, MessageEventData, NewKey, Page, PendingReceipt, Project, ReceiptRequest,
  ReplyRequest, Sandbox, SendRequest, TypingState, Webhook, WebhookAttempt,
} from "./types.js";

/** Longest long-poll wait the gateway accepts, in seconds. */
export const MAX_WAIT_SECONDS = 60;

export interface ClientOptions extends ConfigSources {
  /** The API key; else COMM_API_KEY from envFile, the environment or a .env file. */
  apiKey?: string | undefined;
  /** The gateway's address; else COMM_BASE_URL as for the key; else http://127.0.0.1:8080. */
  baseUrl?: string | undefined;
  /** One attempt's timeout in ms (default 30 000); a long poll gets its wait on top. */
  timeoutMs?: number | undefined;
  /** Retries of an idempotent call (default 3; 0 disables). */
  retries?: number | undefined;
  /** Delay before the first retry and cap of the exponential backoff, ms (defaults 250 and 8000). */
  backoff?: { firstMs?: number; limitMs?: number } | undefined;
  /** The largest answer read, bytes (default 64 MiB). */
  maxResponseBytes?: number | undefined;
  /** The fetch function (default globalThis.fetch). */
  fetch?: typeof fetch | undefined;
}

/** Options of the calls that need no key (createSandbox, login). */
export interface KeylessOptions extends ConfigSources, CallOptions {
  baseUrl?: string | undefined;
  fetch?: typeof fetch | undefined;
  timeoutMs?: number | undefined;
}

function settings(o: ClientOptions | KeylessOptions, apiKey: string, baseUrl: string) {
  const c = o as ClientOptions;
  return {
    baseUrl, apiKey,
    timeoutMs: o.timeoutMs && o.timeoutMs > 0 ? o.timeoutMs : 30_000,
    retries: Math.max(c.retries ?? 3, 0),
    backoffFirstMs: c.backoff?.firstMs ?? 250,
    backoffLimitMs: c.backoff?.limitMs ?? 8_000,
    maxResponseBytes: c.maxResponseBytes ?? 64 << 20,
    fetch: o.fetch ?? globalThis.fetch,
  };
}

/** An Http without a key; the base URL resolved as in Client. */
export function keylessHttp(o: KeylessOptions): Http {
  let base = o.baseUrl ?? "";
  if (base === "") base = resolveConfig({ [ENV_BASE_URL]: "" }, o)[ENV_BASE_URL]!;
  return new Http(settings(o, "", parseBaseUrl(base)));
}

/**
 * Creates an anonymous project (POST /v1/projects/sandbox) and returns it
 * with its API key, shown only this once. It needs no key; never retried.
 */
export async function createSandbox(name = "", opts: KeylessOptions = {}): Promise<Sandbox> {
  return keylessHttp(opts).call<Sandbox>({ method: "POST", path: "/v1/projects/sandbox", body: { name }, noAuth: true, signal: opts.signal });
}

const esc = encodeURIComponent;

function page(p: Page | undefined): Record<string, string | number | undefined> {
  return { after: p?.after, limit: p?.limit || undefined };
}

/**
 * Calls one gateway with one API key (one project). Every method returns a
 * promise and takes an optional { signal } last. Idempotent calls (GET, PUT,
 * DELETE) and the POSTs that create or send (they carry an Idempotency-Key)
 * are retried after 429, 5xx and connection errors; other POSTs
 * (createSandbox, verifyDomain, sign-in) never are.
 */
export class Client {
  /** The gateway's address, without a trailing slash. */
  readonly baseUrl: string;
  /** @internal */
  readonly http: Http;

  /**
   * The API key and the base URL are each taken from, in order: the options;
   * the files of envFile; the environment (COMM_API_KEY, COMM_BASE_URL); a
   * .env in the working directory; a .env beside the main script. Without a
   * key anywhere it throws NoApiKeyError.
   */
  constructor(opts: ClientOptions = {}) {
    const cfg = resolveConfig({ [ENV_API_KEY]: opts.apiKey, [ENV_BASE_URL]: opts.baseUrl }, opts);
    const key = cfg[ENV_API_KEY]!;
    if (key === "") throw new NoApiKeyError();
    if (/\s/.test(key)) throw new ConfigError(`comm: ${ENV_API_KEY} holds white space`);
    this.baseUrl = parseBaseUrl(cfg[ENV_BASE_URL] || DEFAULT_BASE_URL);
    this.http = new Http(settings(opts, key, this.baseUrl));
  }

  private call<T>(r: Request): Promise<T> {
    return this.http.call<T>(r);
  }

  /** The key's project and its stream head (GET /v1/project). */
  project(o: CallOptions = {}): Promise<Project> {
    return this.call({ method: "GET", path: "/v1/project", signal: o.signal });
  }

  /**
   * Up to limit events with seq greater than afterSeq, in seq order
   * (GET /v1/events). limit 0 is the gateway's default (100; at most 1000);
   * type keeps one event type. With waitSeconds the call is a long poll: the
   * gateway holds it (at most 60 s) until an event commits. A page may hold
   * fewer than limit events even when more follow: only an empty page means
   * the end of the stream.
   */
  async events(afterSeq = 0, limit = 0, type = "", o: CallOptions & { waitSeconds?: number } = {}): Promise<Event[]> {
    const wait = Math.min(Math.max(Math.ceil(o.waitSeconds ?? 0), 0), MAX_WAIT_SECONDS);
    const evs = await this.call<Event[]>({
      method: "GET", path: "/v1/events", signal: o.signal, waitMs: wait * 1000,
      query: { after_seq: afterSeq, limit: limit || undefined, type: type || undefined, wait: wait || undefined },
    });
    return evs ?? [];
  }

  /**
   * Registers (or replaces) the push endpoint (PUT /v1/webhook). Deliveries
   * are signed with secret (Standard Webhooks; "whsec_" + base64); without
   * one the gateway generates it and returns it in secret, once. fromSeq sets
   * the endpoint's cursor.
   */
  setWebhook(url: string, secret = "", o: CallOptions & { fromSeq?: number } = {}): Promise<Webhook> {
    const body: Record<string, unknown> = { url };
    if (secret) body["secret"] = secret;
    if (o.fromSeq !== undefined) body["from_seq"] = o.fromSeq;
    return this.call({ method: "PUT", path: "/v1/webhook", body, signal: o.signal });
  }

  /** The push endpoint, its status and cursor, never its secret (GET /v1/webhook); NotFoundError when none. */
  getWebhook(o: CallOptions = {}): Promise<Webhook> {
    return this.call({ method: "GET", path: "/v1/webhook", signal: o.signal });
  }

  /** Removes the push endpoint (DELETE /v1/webhook). */
  async deleteWebhook(o: CallOptions = {}): Promise<void> {
    await this.call({ method: "DELETE", path: "/v1/webhook", signal: o.signal });
  }

  /** Moves the push endpoint's cursor: deliveries resume after fromSeq (POST /v1/webhook/replay). */
  replayWebhook(fromSeq: number, o: CallOptions = {}): Promise<Webhook> {
    return this.call({ method: "POST", keyed: true, path: "/v1/webhook/replay", body: { from_seq: fromSeq }, signal: o.signal });
  }

  /** The latest push attempts, newest first (GET /v1/webhook/attempts). */
  webhookAttempts(p: Page & CallOptions = {}): Promise<WebhookAttempt[]> {
    return this.call({ method: "GET", path: "/v1/webhook/attempts", query: page(p), signal: p.signal });
  }

  /** The gateway's channels with their connect forms and availability for this key (GET /v1/channels). */
  channels(o: CallOptions = {}): Promise<ChannelInfo[]> {
    return this.call({ method: "GET", path: "/v1/channels", signal: o.signal });
  }

  /**
   * Connects a channel (POST /v1/connections). A paid channel with a sandbox
   * key throws PaymentRequiredError; one this gateway lacks, a 501 CommError.
   */
  connect(req: ConnectRequest, o: CallOptions = {}): Promise<Connection> {
    return this.call({ method: "POST", keyed: true, path: "/v1/connections", body: req, signal: o.signal });
  }

  /**
   * Connects iMessage, a paid channel: with a sandbox key it throws
   * PaymentRequiredError, whose message says how to sign in. line picks the
   * relay; dedicated asks for a relay of the connection's own.
   */
  connectIMessage(o: CallOptions & { line?: string; dedicated?: boolean } = {}): Promise<Connection> {
    const config: Record<string, unknown> = {};
    if (o.line) config["line"] = o.line;
    if (o.dedicated) config["dedicated"] = true;
    const req: ConnectRequest = { channel: "imessage" };
    if (Object.keys(config).length > 0) req.config = config;
    return this.connect(req, o);
  }

  /** The live connections, oldest first (GET /v1/connections). */
  connections(p: Page & CallOptions = {}): Promise<Connection[]> {
    return this.call({ method: "GET", path: "/v1/connections", query: page(p), signal: p.signal });
  }

  /** One connection (GET /v1/connections/{id}). */
  connection(id: string, o: CallOptions = {}): Promise<Connection> {
    return this.call({ method: "GET", path: `/v1/connections/${esc(id)}`, signal: o.signal });
  }

  /** Removes a connection; its conversations stay readable (DELETE /v1/connections/{id}). */
  async deleteConnection(id: string, o: CallOptions = {}): Promise<void> {
    await this.call({ method: "DELETE", path: `/v1/connections/${esc(id)}`, signal: o.signal });
  }

  /** The people who joined a shared-line connection (GET /v1/connections/{id}/bindings). */
  bindings(connectionId: string, p: Page & CallOptions = {}): Promise<Binding[]> {
    return this.call({ method: "GET", path: `/v1/connections/${esc(connectionId)}/bindings`, query: page(p), signal: p.signal });
  }

  /** Removes a person's binding (DELETE /v1/connections/{id}/bindings/{person}). */
  async unbind(connectionId: string, person: string, o: CallOptions = {}): Promise<void> {
    await this.call({ method: "DELETE", path: `/v1/connections/${esc(connectionId)}/bindings/${esc(person)}`, signal: o.signal });
  }

  /** Conversations, oldest first, of one connection or all (GET /v1/conversations). */
  conversations(p: Page & CallOptions & { connectionId?: string } = {}): Promise<Conversation[]> {
    return this.call({ method: "GET", path: "/v1/conversations", query: { connection_id: p.connectionId, ...page(p) }, signal: p.signal });
  }

  /** One conversation with its typing state (GET /v1/conversations/{id}). */
  conversation(id: string, o: CallOptions = {}): Promise<Conversation> {
    return this.call({ method: "GET", path: `/v1/conversations/${esc(id)}`, signal: o.signal });
  }

  /** A conversation's messages, oldest first (GET /v1/conversations/{id}/messages). */
  messages(conversationId: string, p: Page & CallOptions = {}): Promise<Message[]> {
    return this.call({ method: "GET", path: `/v1/conversations/${esc(conversationId)}/messages`, query: page(p), signal: p.signal });
  }

  /** One message with its delivery status (GET /v1/messages/{id}). */
  message(id: string, o: CallOptions = {}): Promise<Message> {
    return this.call({ method: "GET", path: `/v1/messages/${esc(id)}`, signal: o.signal });
  }

  /**
   * Answers a message in its conversation (POST /v1/messages/{id}/reply): a
   * text, or a full reply request. The reply is queued; message.sent (or
   * message.failed) follows in the stream. It ends the typing indicator.
   */
  reply(messageId: string, reply: string | ReplyRequest, o: CallOptions = {}): Promise<Message> {
    const body = typeof reply === "string" ? { text: reply } : reply;
    return this.call({ method: "POST", keyed: true, path: `/v1/messages/${esc(messageId)}/reply`, body, signal: o.signal });
  }

  /** Shows a typing indicator for about 10 s, or until a reply (POST /v1/messages/{id}/typing). */
  typing(messageId: string, o: CallOptions = {}): Promise<TypingState> {
    return this.call({ method: "POST", keyed: true, path: `/v1/messages/${esc(messageId)}/typing`, signal: o.signal });
  }

  /** Sends a proactive message (POST /v1/messages). */
  send(req: SendRequest, o: CallOptions = {}): Promise<Message> {
    return this.call({ method: "POST", keyed: true, path: "/v1/messages", body: req, signal: o.signal });
  }

  /**
   * Delivers a message into a test connection as if a person wrote it
   * (POST /v1/connections/{id}/inbound); a repeated id appends nothing.
   */
  inject(connectionId: string, req: InjectRequest, o: CallOptions = {}): Promise<Message> {
    return this.call({ method: "POST", keyed: true, path: `/v1/connections/${esc(connectionId)}/inbound`, body: req, signal: o.signal });
  }

  /**
   * Reports on a message sent on a test connection as its provider would.
   * Returns the message, or while its send is still out, the pending report.
   */
  async injectReceipt(connectionId: string, req: ReceiptRequest, o: CallOptions = {}): Promise<{ message?: Message; pending?: PendingReceipt }> {
    const out = await this.call<Record<string, unknown>>({
      method: "POST", keyed: true, path: `/v1/connections/${esc(connectionId)}/inbound`, body: { receipt: req }, signal: o.signal,
    });
    return out && typeof out["expires_at"] === "string" ? { pending: out as unknown as PendingReceipt } : { message: out as unknown as Message };
  }

  /** Downloads an attachment's bytes (GET /v1/messages/{id}/attachments/{attachment_id}). */
  async attachment(messageId: string, attachmentId: string, o: CallOptions = {}): Promise<AttachmentFile> {
    const raw = await this.call<RawAnswer>({
      method: "GET", raw: true, path: `/v1/messages/${esc(messageId)}/attachments/${esc(attachmentId)}`, signal: o.signal,
    });
    const cd = raw.headers.get("content-disposition") ?? "";
    const m = /filename\*=UTF-8''([^;]+)/i.exec(cd) ?? /filename="((?:[^"\\]|\\.)*)"/i.exec(cd) ?? /filename=([^;]+)/i.exec(cd);
    let filename = attachmentId;
    if (m?.[1]) {
      try {
        filename = m[0].includes("*=") ? decodeURIComponent(m[1]) : m[1].replace(/\\(.)/g, "$1").trim();
      } catch {
        filename = m[1];
      }
    }
    return { filename, contentType: raw.headers.get("content-type") ?? "application/octet-stream", data: raw.body };
  }

  /** Adds a custom email domain with the DNS records to publish (POST /v1/domains). */
  addDomain(domain: string, o: CallOptions = {}): Promise<Domain> {
    return this.call({ method: "POST", keyed: true, path: "/v1/domains", body: { domain }, signal: o.signal });
  }

  /** The project's custom domains, oldest first (GET /v1/domains). */
  domains(p: Page & CallOptions = {}): Promise<Domain[]> {
    return this.call({ method: "GET", path: "/v1/domains", query: page(p), signal: p.signal });
  }

  /** One custom domain (GET /v1/domains/{id}). */
  domain(id: string, o: CallOptions = {}): Promise<Domain> {
    return this.call({ method: "GET", path: `/v1/domains/${esc(id)}`, signal: o.signal });
  }

  /** Looks the domain's records up now (POST /v1/domains/{id}/verify); never retried. */
  verifyDomain(id: string, o: CallOptions = {}): Promise<Domain> {
    return this.call({ method: "POST", path: `/v1/domains/${esc(id)}/verify`, signal: o.signal });
  }

  /** Removes a custom domain (DELETE /v1/domains/{id}). */
  async deleteDomain(id: string, o: CallOptions = {}): Promise<void> {
    await this.call({ method: "DELETE", path: `/v1/domains/${esc(id)}`, signal: o.signal });
  }

  /** The account owning the key's project, with balance, ledger and projects (GET /v1/account); a sandbox key gets ForbiddenError. */
  account(o: CallOptions = {}): Promise<AccountView> {
    return this.call({ method: "GET", path: "/v1/account", signal: o.signal });
  }

  /** The account's credit ledger, oldest first (GET /v1/account/ledger). */
  ledger(p: Page & CallOptions = {}): Promise<CreditEntry[]> {
    return this.call({ method: "GET", path: "/v1/account/ledger", query: page(p), signal: p.signal });
  }

  /** The project's API keys, revoked ones included, never the keys themselves (GET /v1/keys). */
  keys(o: CallOptions = {}): Promise<Key[]> {
    return this.call({ method: "GET", path: "/v1/keys", signal: o.signal });
  }

  /** Makes another API key of the client's key's kind (POST /v1/keys); the key is in api_key, once. */
  createKey(name = "", o: CallOptions = {}): Promise<NewKey> {
    return this.call({ method: "POST", keyed: true, path: "/v1/keys", body: name ? { name } : {}, signal: o.signal });
  }

  /** Revokes one of the project's keys (DELETE /v1/keys/{id}). */
  async revokeKey(id: string, o: CallOptions = {}): Promise<Key> {
    if (!id) throw new BadRequestError({ status: 0, code: "invalid_parameter", param: "id", message: "a key id is required" });
    const k = await this.call<Key | undefined>({ method: "DELETE", path: `/v1/keys/${esc(id)}`, signal: o.signal });
    if (!k) throw new NotFoundError({ status: 404, code: "not_found", message: `no key ${id}` });
    return k;
  }

  /**
   * The inbound message of a message.received event (from events() or a push
   * delivery), bound to this client so that its reply() works.
   */
  messageOf(e: Event): InboundMessage {
    if (e.type !== "message.received") {
      throw new TypeError(`comm: event ${e.seq} is ${e.type}, not message.received`);
    }
    const d = e.data as MessageEventData | undefined;
    if (!d?.message?.id) throw new TypeError(`comm: event ${e.seq}: message without an id`);
    return new InboundMessage(this, e as Event<MessageEventData>);
  }

  /**
   * Follows the project's event stream and calls handler for every inbound
   * message until opts.signal aborts (or SIGINT/SIGTERM, unless
   * stopOnSignals is false), or a permanent error (a revoked key, say)
   * rejects it. See ListenOptions and the README for ordering and cursor
   * guarantees.
   */
  listen(handler: MessageHandler | null, opts: ListenOptions = {}): Promise<void> {
    return listen(this, handler, opts);
  }

  /**
   * The stream as an async iterator of events (message.received only unless
   * opts.types is given). An event counts as handled, and the cursor moves
   * past it, when the loop asks for the next one: leaving the loop (break,
   * throw) leaves the current event for the next run.
   */
  stream(opts: StreamOptions = {}): AsyncGenerator<Event, void, undefined> {
    return stream(this, opts);
  }

  /** Inbound messages as an async iterator (stream() of message.received, bound to this client). */
  async *inbound(opts: Omit<StreamOptions, "types"> = {}): AsyncGenerator<InboundMessage, void, undefined> {
    for await (const e of stream(this, { ...opts, types: ["message.received"] })) {
      yield this.messageOf(e);
    }
  }
}
