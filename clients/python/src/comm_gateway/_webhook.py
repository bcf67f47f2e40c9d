"""Verifying push deliveries (Standard Webhooks) and a framework-agnostic receiver."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from ._errors import ConfigError, WebhookPayloadError, WebhookVerificationError
from ._types import Event

TOLERANCE = 300.0
"""How far (seconds) a delivery's timestamp may be from the receiver's clock."""

MAX_WEBHOOK_BODY = 1 << 20
"""The largest body handle_webhook accepts."""

Headers = Mapping[str, str] | Iterable[tuple[str, str]]


def webhook_key(secret: str) -> bytes:
    """The HMAC key of a secret: a ``whsec_`` secret is base64 after the prefix, any other is its bytes."""
    if secret.startswith("whsec_"):
        try:
            key = base64.b64decode(secret[len("whsec_") :], validate=True)
        except (binascii.Error, ValueError) as e:
            raise ConfigError(f"comm: webhook secret: a whsec_ secret must be base64 after the prefix: {e}") from None
        if not key:
            raise ConfigError("comm: webhook secret: empty whsec_ secret")
        return key
    if not secret:
        raise ConfigError("comm: webhook secret: empty secret")
    return secret.encode()


def sign_webhook(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The webhook-signature value of one delivery: ``v1,<base64 HMAC-SHA256 of id.timestamp.body>``."""
    mac = hmac.new(webhook_key(secret), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def _header(headers: Headers, name: str) -> str:
    environ_name = "HTTP_" + name.upper().replace("-", "_")
    pairs: Iterable[tuple[str, str]] = (
        cast(Mapping[str, str], headers).items() if isinstance(headers, Mapping) else headers
    )
    for k, v in pairs:
        if k.lower() == name or k == environ_name:
            return v
    return ""


def verify_webhook(
    headers: Headers, body: bytes | str, secret: str, *, now: float | None = None, tolerance: float = TOLERANCE
) -> Event:
    """Checks a push delivery's Standard Webhooks signature (headers webhook-id, webhook-timestamp,
    webhook-signature; any case, or a WSGI environ's HTTP_WEBHOOK_ID ...) against its raw body and the
    secret given to set_webhook, and returns the event. Pass the body exactly as received.

    Raises WebhookVerificationError when the signature does not verify (missing headers, no matching
    ``v1`` signature, timestamp more than 5 minutes from now), WebhookPayloadError when the body is not
    an event, ConfigError when the secret is unusable. A delivery may come more than once (a retry, a
    replay): ``event["seq"]`` tells them apart."""
    raw = body.encode() if isinstance(body, str) else bytes(body)
    webhook_key(secret)  # an unusable secret is ConfigError, before anything else
    msg_id, ts_raw, sigs = (_header(headers, h) for h in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not msg_id or not ts_raw or not sigs:
        raise WebhookVerificationError("comm: webhook: missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        ts = int(ts_raw.strip())
    except ValueError:
        raise WebhookVerificationError("comm: webhook: malformed webhook-timestamp") from None
    t = time.time() if now is None else now
    if abs(t - ts) > tolerance:
        raise WebhookVerificationError("comm: webhook: timestamp outside the tolerance")
    want = sign_webhook(secret, msg_id, ts, raw).encode()
    if not any(hmac.compare_digest(s.encode(), want) for s in sigs.split()):
        raise WebhookVerificationError("comm: webhook: no signature matches")
    try:
        doc: Any = json.loads(raw)
    except ValueError as e:
        raise WebhookPayloadError(f"comm: webhook body is not an event: {e}") from None
    d = cast(dict[str, Any], doc) if isinstance(doc, dict) else {}
    seq = d.get("seq")
    if not isinstance(seq, int) or seq <= 0 or not d.get("type") or not isinstance(d.get("data"), dict):
        raise WebhookPayloadError("comm: webhook body is not an event: want {seq, type, data}")
    return cast(Event, doc)


def handle_webhook(
    secret: str,
    method: str,
    headers: Headers,
    body: bytes,
    handler: Callable[[Event], object],
) -> tuple[int, str]:
    """A receiver for any framework: give it the request's method, headers and raw body; it verifies the
    delivery, calls ``handler`` and returns the (status, text) to answer. 204 acknowledges the event
    (the handler returned); 500 when the handler raised, so that the gateway delivers it again (later
    events wait: deliveries are in seq order); 401 when the signature does not verify; 400 when the body
    is not an event; 413 beyond MAX_WEBHOOK_BODY; 405 for methods other than POST."""
    if method.upper() != "POST":
        return 405, "method not allowed"
    if len(body) > MAX_WEBHOOK_BODY:
        return 413, "body too large"
    try:
        ev = verify_webhook(headers, body, secret)
    except WebhookVerificationError:
        return 401, "signature does not verify"
    except WebhookPayloadError:
        return 400, "body is not an event"
    except ConfigError:
        return 500, "receiver misconfigured"
    try:
        handler(ev)
    except Exception:
        return 500, "handler failed"
    return 204, ""
