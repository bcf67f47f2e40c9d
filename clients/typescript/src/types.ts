// Types of the gateway's JSON objects (docs/api.md, api/openapi.yaml). Times
// are RFC 3339 strings as the gateway sends them; nullable fields are null
// when unset.

/** Event types of the stream (docs/events.md). */
export const EventType = {
  MessageReceived: "message.received",
  MessageSent: "message.sent",
  MessageFailed: "message.failed",
  ConnectionActive: "connection.active",
  ConnectionAuthorized: "connection.authorized",
  ConnectionDegraded: "connection.degraded",
  ConnectionRevoked: "connection.revoked",
  DomainVerified: "domain.verified",
  DomainUnverified: "domain.unverified",
  WebhookDisabled: "webhook.disabled",
  WebhookEnabled: "webhook.enabled",
  AccountBalanceLow: "account.balance_low",
} as const;

/** A new anonymous project and its key (shown once). */
export interface Sandbox {
  project_id: string;
  api_key: string;
  customer_id: string;
  agent_id: string;
}

/** The key's project and the head of its event stream. */
export interface Project {
  id: string;
  name: string;
  customer_id: string;
  agent_id: string;
  last_seq: number;
  created_at: string;
}

/** One entry of the project's stream: GET /v1/events, the GraphQL subscription and push deliveries carry it. */
export interface Event<D = unknown> {
  seq: number;
  type: string;
  data: D;
}

export interface AttachmentInfo {
  id: string;
  filename: string;
  content_type: string;
  size: number;
  inline: boolean;
  content_id: string | null;
}

export interface Delivery {
  state: "sent" | "delivered" | "read" | "failed" | string;
  code: string | null;
  reason: string | null;
  delivered_at: string | null;
  read_at: string | null;
}

/** The message object of message.received, message.sent and message.failed. */
export interface EventMessage {
  id: string;
  conversation_id: string;
  connection_id: string;
  channel: string;
  sender: string;
  subject: string | null;
  text: string;
  html: string | null;
  attachments?: AttachmentInfo[];
  details?: unknown;
  truncated?: boolean;
  unbilled?: boolean;
  recipient?: string | null;
  in_reply_to?: string | null;
  status?: string;
  sent_at?: string | null;
  error?: string | null;
  attempts?: number;
  delivery?: Delivery | null;
}

/** The data of message.received, message.sent and message.failed. */
export interface MessageEventData {
  customer_id: string;
  agent_id: string;
  message: EventMessage;
}

export interface Connection {
  id: string;
  channel: string;
  provider: string | null;
  status: string;
  customer_id: string;
  agent_id: string;
  name: string | null;
  address: string | null;
  line: string | null;
  join_code: string | null;
  join_link: string | null;
  webhook_url: string | null;
  authorize_url: string | null;
  created_at: string;
}

export interface ChannelField {
  name: string;
  label: string;
  help: string;
  secret: boolean;
  required: boolean;
  kind: string;
  example: string;
}

export interface ChannelInfo {
  channel: string;
  provider: string | null;
  tier: string;
  available: boolean;
  reason: string | null;
  oauth: boolean;
  summary: string;
  fields: ChannelField[];
}

export interface Binding {
  id: string;
  person: string;
  created_at: string;
}

export interface Conversation {
  id: string;
  connection_id: string;
  participant: string;
  subject: string | null;
  typing: boolean;
  typing_until: string | null;
  last_message_at: string;
  created_at: string;
}

export interface Message {
  id: string;
  conversation_id: string;
  connection_id: string;
  channel: string;
  direction: "inbound" | "outbound" | string;
  status: "received" | "queued" | "sending" | "sent" | "failed" | string;
  sender: string;
  recipient: string | null;
  subject: string | null;
  text: string;
  html: string | null;
  in_reply_to: string | null;
  error: string | null;
  attempts: number;
  created_at: string;
  sent_at: string | null;
  delivery: Delivery | null;
  attachments?: AttachmentInfo[];
  details?: unknown;
  truncated?: boolean;
  unbilled?: boolean;
}

export interface PendingReceipt {
  status: string;
  message_id: string;
  expires_at: string;
}

export interface TypingState {
  conversation_id: string;
  typing_until: string;
}

export interface Webhook {
  id: string;
  url: string;
  status: string;
  cursor: number;
  last_error: string | null;
  failing_since: string | null;
  next_attempt_at: string | null;
  disabled_reason: string | null;
  created_at: string;
  updated_at: string;
  /** Only in the answer of setWebhook when the gateway generated the secret. */
  secret?: string;
}

export interface WebhookAttempt {
  id: string;
  url: string;
  seq: number;
  ok: boolean;
  status_code: number;
  latency_ms: number;
  error: string | null;
  at: string;
}

export interface DomainRecord {
  kind: string;
  type: string;
  name: string;
  value: string;
  priority?: number;
  required: boolean;
  purpose: string;
  state: string;
  seen?: string[];
  detail?: string;
  zone: string;
}

export interface Domain {
  id: string;
  domain: string;
  inbound_domain: string | null;
  status: string;
  records: DomainRecord[];
  last_error: string | null;
  checked_at: string | null;
  verified_at: string | null;
  created_at: string;
}

export interface Account {
  id: string;
  issuer: string;
  subject: string;
  email: string;
  name: string;
  created_at: string;
}

export interface CreditEntry {
  id: string;
  kind: string;
  amount_micros: number;
  amount: string;
  description: string;
  project_id: string | null;
  created_at: string;
}

export interface ProjectSummary {
  id: string;
  name: string;
  connections: number;
  last_seq: number;
  created_at: string;
}

export interface AccountView {
  account: Account;
  currency: string;
  balance_micros: number;
  balance: string;
  ledger: CreditEntry[];
  ledger_more: boolean;
  projects: ProjectSummary[];
}

export interface Key {
  id: string;
  kind: string;
  display: string;
  name: string | null;
  current: boolean;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

export interface NewKey extends Key {
  api_key: string;
}

/** A provider-approved message template (WhatsApp). */
export interface Template {
  content_sid?: string;
  name?: string;
  language?: string;
  variables?: Record<string, string>;
}

export interface ConnectRequest {
  channel: string;
  provider?: string;
  customer_id?: string;
  agent_id?: string;
  name?: string;
  config?: Record<string, unknown>;
}

export interface ReplyRequest {
  text?: string;
  html?: string;
  subject?: string;
  template?: Template;
}

export interface SendRequest extends ReplyRequest {
  connection_id: string;
  to: string;
}

export interface InjectRequest {
  sender: string;
  text?: string;
  subject?: string;
  html?: string;
  id?: string;
}

export interface ReceiptRequest {
  message_id: string;
  state: "sent" | "delivered" | "read" | "failed";
  code?: string;
  reason?: string;
  at?: string;
}

/** A downloaded attachment. */
export interface AttachmentFile {
  filename: string;
  contentType: string;
  data: Uint8Array;
}

/** Paging of list endpoints: after is the last id received; limit 0 or unset is the gateway's default. */
export interface Page {
  after?: string;
  limit?: number;
}
