// comm: the TypeScript client of the comm messaging gateway.

export { Client, createSandbox, MAX_WAIT_SECONDS, type ClientOptions, type KeylessOptions } from "./client.js";
export { login, type LoginOptions, type LoginPrompt, type LoginResult } from "./login.js";
export {
  verifyWebhook, signWebhook, webhookKey, webhookHandler, webhookFetchHandler, WEBHOOK_TOLERANCE_SECONDS, MAX_WEBHOOK_BODY,
  type HeaderSource, type VerifyOptions, type WebhookEventHandler,
} from "./webhook.js";
export { InboundMessage } from "./message.js";
export {
  permanent, type ListenOptions, type StreamOptions, type MessageHandler, type EventHandler, type HandlerContext, type StartSeq,
} from "./listen.js";
export { FileCursorStore, MemoryCursorStore, DEFAULT_CURSOR_FILE, type CursorStore } from "./cursor.js";
export {
  CommError, BadRequestError, AuthenticationError, PaymentRequiredError, ForbiddenError, NotFoundError, ConflictError,
  RateLimitError, ServerError, NoApiKeyError, ConfigError, ConnectionError, WebhookVerificationError, LoginDeniedError,
  LoginExpiredError, HandlerError, ErrorCode, type CommErrorInit, type WebhookFailure,
} from "./errors.js";
export { ENV_API_KEY, ENV_BASE_URL, DEFAULT_BASE_URL, parseDotEnv, type ConfigSources } from "./config.js";
export type { CallOptions } from "./http.js";
export * from "./types.js";
