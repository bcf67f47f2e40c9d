// Errors of the gateway and of the client.

/** Error codes of the gateway (docs/api.md). */
export const ErrorCode = {
  InvalidParameter: "invalid_parameter",
  MalformedJSON: "malformed_json",
  Unauthenticated: "unauthenticated",
  PaymentRequired: "payment_required",
  Forbidden: "forbidden",
  NotFound: "not_found",
  RouteNotFound: "route_not_found",
  MethodNotAllowed: "method_not_allowed",
  Conflict: "conflict",
  PayloadTooLarge: "payload_too_large",
  UnsupportedMediaType: "unsupported_media_type",
  IdempotencyKeyReused: "idempotency_key_reused",
  RateLimited: "rate_limited",
  Internal: "internal_error",
  NotImplemented: "not_implemented",
  Unavailable: "unavailable",
} as const;

/** Fields of an error answer. */
export interface CommErrorInit {
  status: number;
  code: string;
  message: string;
  param?: string | undefined;
  requestId?: string | undefined;
  retryAfterMs?: number | undefined;
}

/**
 * An error answer of the gateway: its HTTP status and its JSON error body
 * ({"error":{"code","message","param","request_id"}}). Subclasses by status
 * (PaymentRequiredError, NotFoundError ...) allow `instanceof`; `code` is the
 * machine-readable code (ErrorCode).
 */
export class CommError extends Error {
  /** HTTP status (402, 404 ...). */
  readonly status: number;
  /** Machine-readable code ("payment_required", "not_found" ...). */
  readonly code: string;
  /** The offending request parameter or field, if any. */
  readonly param: string | undefined;
  /** The request's id in the gateway's log. */
  readonly requestId: string | undefined;
  /** The delay the gateway asked for in Retry-After (429, 503), in ms; 0 if none. */
  readonly retryAfterMs: number;
  /** The gateway's explanation (also in message, after status and code). */
  readonly detail: string;

  constructor(init: CommErrorInit) {
    let text = `comm: ${init.status ? init.status + " " : ""}${init.code}`;
    if (init.param) text += `: ${init.param}`;
    if (init.message) text += `: ${init.message}`;
    if (init.requestId) text += ` (request ${init.requestId})`;
    super(text);
    this.name = new.target.name;
    this.status = init.status;
    this.code = init.code;
    this.param = init.param || undefined;
    this.requestId = init.requestId || undefined;
    this.retryAfterMs = init.retryAfterMs ?? 0;
    this.detail = init.message;
  }
}

/** 400: invalid_parameter (param names it) or malformed_json. */
export class BadRequestError extends CommError {}
/** 401: missing, malformed, unknown or revoked API key. */
export class AuthenticationError extends CommError {}
/** 402: a paid channel with an anonymous (sandbox) key; sign in (login()) and repeat with the signed-in key. */
export class PaymentRequiredError extends CommError {}
/** 403. */
export class ForbiddenError extends CommError {}
/** 404: not_found (an unknown id, or another project's) or route_not_found (usually a wrong base URL). */
export class NotFoundError extends CommError {}
/** 409. */
export class ConflictError extends CommError {}
/** 429. */
export class RateLimitError extends CommError {}
/** 5xx. */
export class ServerError extends CommError {}

/** The code given to an error answer without the gateway's JSON body (from a proxy, say). */
export function codeOfStatus(status: number): string {
  switch (status) {
    case 400: return ErrorCode.InvalidParameter;
    case 401: return ErrorCode.Unauthenticated;
    case 402: return ErrorCode.PaymentRequired;
    case 403: return ErrorCode.Forbidden;
    case 404: return ErrorCode.RouteNotFound;
    case 405: return ErrorCode.MethodNotAllowed;
    case 409: return ErrorCode.Conflict;
    case 413: return ErrorCode.PayloadTooLarge;
    case 415: return ErrorCode.UnsupportedMediaType;
    case 429: return ErrorCode.RateLimited;
    case 501: return ErrorCode.NotImplemented;
    case 502: case 503: case 504: return ErrorCode.Unavailable;
  }
  return status >= 500 ? ErrorCode.Internal : `http_${status}`;
}

/** Builds the typed error of a status. */
export function errorOf(init: CommErrorInit): CommError {
  switch (true) {
    case init.status === 400: return new BadRequestError(init);
    case init.status === 401: return new AuthenticationError(init);
    case init.status === 402: return new PaymentRequiredError(init);
    case init.status === 403: return new ForbiddenError(init);
    case init.status === 404: return new NotFoundError(init);
    case init.status === 409: return new ConflictError(init);
    case init.status === 429: return new RateLimitError(init);
    case init.status >= 500: return new ServerError(init);
  }
  return new CommError(init);
}

/** No API key was found: not in the options, COMM_API_KEY of the environment, nor a .env file. */
export class NoApiKeyError extends Error {
  constructor() {
    super("comm: no API key: set COMM_API_KEY in the environment or in a .env file " +
      "(in the working directory or beside your code), or pass { apiKey }");
    this.name = "NoApiKeyError";
  }
}

/** A configuration problem: a bad base URL, an unreadable .env file. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

/** The HTTP request failed before an answer (connection refused, timeout ...). */
export class ConnectionError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ConnectionError";
  }
}

/** Why a push delivery was rejected. */
export type WebhookFailure = "secret" | "missing_headers" | "timestamp" | "mismatch" | "payload";

/**
 * A push delivery that does not verify: `reason` says why ("mismatch": no
 * signature matches; "timestamp": more than the tolerance from now;
 * "missing_headers"; "payload": the signed body is not an event; "secret":
 * the receiver's secret is unusable).
 */
export class WebhookVerificationError extends Error {
  readonly reason: WebhookFailure;
  constructor(reason: WebhookFailure, message: string) {
    super(`comm: webhook: ${message}`);
    this.name = "WebhookVerificationError";
    this.reason = reason;
  }
}

/** The user denied the sign-in request. */
export class LoginDeniedError extends Error {
  constructor() {
    super("comm: sign-in was denied");
    this.name = "LoginDeniedError";
  }
}

/** The sign-in code expired before the user approved it. */
export class LoginExpiredError extends Error {
  constructor() {
    super("comm: sign-in code expired; start again");
    this.name = "LoginExpiredError";
  }
}

/** A listen handler's failure: the event it failed on, and the error it threw. */
export class HandlerError extends Error {
  readonly seq: number;
  readonly type: string;
  constructor(seq: number, type: string, cause: unknown) {
    super(`comm: handler of event ${seq} (${type}) failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "HandlerError";
    this.seq = seq;
    this.type = type;
  }
}
