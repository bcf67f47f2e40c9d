"""Errors of the client: the gateway's error answers as typed exceptions."""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any, cast


class CommError(Exception):
    """Base of every error this package raises."""


class ConfigError(CommError):
    """The client cannot be configured: no API key, a bad base URL, an unreadable .env file."""


class ConnectionFailed(CommError):
    """The gateway could not be reached, or the connection broke (after the retries, if any)."""


class APIError(CommError):
    """An error answer of the gateway.

    Carries the HTTP status, the machine-readable code (``not_found``, ``payment_required`` ...),
    the message, the offending parameter (``param``, if any), the request id of the gateway's log
    and the delay asked for in a Retry-After header (seconds, 0 if none). The subclasses below are
    chosen by status, so ``except PaymentRequired`` catches every 402.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str = "",
        param: str = "",
        request_id: str = "",
        retry_after: float = 0.0,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.param = param
        self.request_id = request_id
        self.retry_after = retry_after
        super().__init__(self._text())

    def _text(self) -> str:
        s = "comm: "
        if self.status:
            s += f"{self.status} "
        s += self.code
        if self.param:
            s += f": {self.param}"
        if self.message:
            s += f": {self.message}"
        if self.request_id:
            s += f" (request {self.request_id})"
        return s


class BadRequest(APIError):
    """400: ``invalid_parameter`` (``param`` names the parameter) or ``malformed_json``."""


class Unauthenticated(APIError):
    """401: missing, malformed, unknown or revoked API key."""


class PaymentRequired(APIError):
    """402: a paid channel with a sandbox key (sign in: ``comm_gateway.login()`` or ``comm login``),
    or ``insufficient_credit``."""


class Forbidden(APIError):
    """403."""


class NotFound(APIError):
    """404: ``not_found`` (an unknown id, or another project's) or ``route_not_found`` (no such endpoint,
    usually a wrong base URL)."""


class MethodNotAllowed(APIError):
    """405."""


class Conflict(APIError):
    """409."""


class PayloadTooLarge(APIError):
    """413."""


class UnsupportedMediaType(APIError):
    """415."""


class IdempotencyKeyReused(APIError):
    """422: an Idempotency-Key sent again with another request."""


class RateLimited(APIError):
    """429: ``retry_after`` says when to try again."""


class ServerError(APIError):
    """5xx."""


class NotImplementedByGateway(ServerError):
    """501: e.g. a channel this gateway has no adapter for."""


class Unavailable(ServerError):
    """502, 503, 504."""


class LoginDenied(CommError):
    """The person denied the sign-in request."""


class LoginExpired(CommError):
    """The sign-in code expired before it was approved; start again."""


class WebhookVerificationError(CommError):
    """A push delivery does not verify: missing headers, no matching signature, or a timestamp too far
    from now."""


class WebhookPayloadError(CommError):
    """A push delivery's signed body is not an event ``{seq, type, data}``."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequest,
    401: Unauthenticated,
    402: PaymentRequired,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    422: IdempotencyKeyReused,
    429: RateLimited,
    501: NotImplementedByGateway,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}

_CODE_OF_STATUS: dict[int, str] = {
    400: "invalid_parameter",
    401: "unauthenticated",
    402: "payment_required",
    403: "forbidden",
    404: "route_not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
    501: "not_implemented",
    502: "unavailable",
    503: "unavailable",
    504: "unavailable",
}


def parse_retry_after(value: str | None, now: float | None = None) -> float:
    """Reads a Retry-After header: delay seconds or an HTTP date; 0 when absent or past."""
    v = (value or "").strip()
    if not v:
        return 0.0
    if v.isdigit():
        return float(min(int(v), 24 * 3600))
    try:
        when = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return 0.0
    d = when.timestamp() - (time.time() if now is None else now)
    return d if d > 0 else 0.0


def error_of(status: int, body: bytes, request_id: str = "", retry_after: str | None = None) -> APIError:
    """Builds the exception of a non-2xx answer from its status, body and headers."""
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else APIError)
    ra = parse_retry_after(retry_after)
    try:
        doc: Any = json.loads(body)
    except ValueError:
        doc = None
    err: Any = cast(dict[str, Any], doc).get("error") if isinstance(doc, dict) else None
    if isinstance(err, dict):
        e = cast(dict[str, Any], err)
        if isinstance(e.get("code"), str) and e["code"]:
            return cls(
                status,
                str(e["code"]),
                str(e.get("message") or ""),
                str(e.get("param") or ""),
                str(e.get("request_id") or request_id),
                ra,
            )
    code = _CODE_OF_STATUS.get(status) or ("internal_error" if status >= 500 else f"http_{status}")
    msg = body.decode("utf-8", "replace").strip()
    if len(msg) > 200:
        msg = msg[:200] + "..."
    return cls(status, code, msg or f"HTTP {status}", "", request_id, ra)
