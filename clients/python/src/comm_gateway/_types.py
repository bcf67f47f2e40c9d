"""Shapes of the gateway's JSON answers (docs/api.md, api/openapi.yaml), as TypedDicts.

Answers are the decoded JSON objects themselves: fields a newer gateway adds are kept. Times are
RFC 3339 strings, as the gateway sends them. Fields marked optional in the TypedDicts below are left
out of some answers (``_Opt`` bases, ``total=False``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

# Event types of the stream.
MESSAGE_RECEIVED = "message.received"
MESSAGE_SENT = "message.sent"
MESSAGE_FAILED = "message.failed"
CONNECTION_ACTIVE = "connection.active"
CONNECTION_AUTHORIZED = "connection.authorized"
CONNECTION_DEGRADED = "connection.degraded"
CONNECTION_REVOKED = "connection.revoked"
DOMAIN_VERIFIED = "domain.verified"
DOMAIN_UNVERIFIED = "domain.unverified"
WEBHOOK_DISABLED = "webhook.disabled"
WEBHOOK_ENABLED = "webhook.enabled"
ACCOUNT_BALANCE_LOW = "account.balance_low"


class Event(TypedDict):
    """One entry of the project's stream (GET /v1/events, push deliveries)."""

    seq: int
    type: str
    data: dict[str, Any]


class Sandbox(TypedDict):
    project_id: str
    api_key: str
    customer_id: str
    agent_id: str


class Project(TypedDict):
    id: str
    name: str
    customer_id: str
    agent_id: str
    last_seq: int
    created_at: str


class AttachmentInfo(TypedDict):
    id: str
    filename: str
    content_type: str
    size: int
    inline: bool
    content_id: str | None


class Delivery(TypedDict):
    state: str
    code: str | None
    reason: str | None
    delivered_at: str | None
    read_at: str | None


class _MessageOpt(TypedDict, total=False):
    attachments: list[AttachmentInfo]
    details: dict[str, Any]
    truncated: bool
    unbilled: bool


class Message(_MessageOpt):
    """A stored message, inbound or outbound."""

    id: str
    conversation_id: str
    connection_id: str
    channel: str
    direction: str
    status: str
    sender: str
    recipient: str | None
    subject: str | None
    text: str
    html: str | None
    in_reply_to: str | None
    error: str | None
    attempts: int
    created_at: str
    sent_at: str | None
    delivery: Delivery | None


class PendingReceipt(TypedDict):
    status: str
    message_id: str
    expires_at: str


class TypingState(TypedDict):
    conversation_id: str
    typing_until: str


class Connection(TypedDict):
    id: str
    channel: str
    provider: str | None
    status: str
    customer_id: str
    agent_id: str
    name: str | None
    address: str | None
    line: str | None
    join_code: str | None
    join_link: str | None
    webhook_url: str | None
    authorize_url: str | None
    created_at: str


class ChannelField(TypedDict):
    name: str
    label: str
    help: str
    secret: bool
    required: bool
    kind: str
    example: str


class ChannelInfo(TypedDict):
    channel: str
    provider: str | None
    tier: str
    available: bool
    reason: str | None
    oauth: bool
    summary: str
    fields: list[ChannelField]


class Binding(TypedDict):
    id: str
    person: str
    created_at: str


class Conversation(TypedDict):
    id: str
    connection_id: str
    participant: str
    subject: str | None
    typing: bool
    typing_until: str | None
    last_message_at: str
    created_at: str


class _WebhookOpt(TypedDict, total=False):
    secret: str


class Webhook(_WebhookOpt):
    """The project's push endpoint; ``secret`` only in the answer that generated it."""

    id: str
    url: str
    status: str
    cursor: int
    last_error: str | None
    failing_since: str | None
    next_attempt_at: str | None
    disabled_reason: str | None
    created_at: str
    updated_at: str


class WebhookAttempt(TypedDict):
    id: str
    url: str
    seq: int
    ok: bool
    status_code: int
    latency_ms: int
    error: str | None
    at: str


class _DomainRecordOpt(TypedDict, total=False):
    priority: int
    seen: list[str]
    detail: str


class DomainRecord(_DomainRecordOpt):
    kind: str
    type: str
    name: str
    value: str
    required: bool
    purpose: str
    state: str
    zone: str


class Domain(TypedDict):
    id: str
    domain: str
    inbound_domain: str | None
    status: str
    records: list[DomainRecord]
    last_error: str | None
    checked_at: str | None
    verified_at: str | None
    created_at: str


class Account(TypedDict):
    id: str
    issuer: str
    subject: str
    email: str
    name: str
    created_at: str


class CreditEntry(TypedDict):
    id: str
    kind: str
    amount_micros: int
    amount: str
    description: str
    project_id: str | None
    created_at: str


class ProjectSummary(TypedDict):
    id: str
    name: str
    connections: int
    last_seq: int
    created_at: str


class AccountView(TypedDict):
    account: Account
    currency: str
    balance_micros: int
    balance: str
    ledger: list[CreditEntry]
    ledger_more: bool
    projects: list[ProjectSummary]


class Key(TypedDict):
    """An API key as listings show it: never the key itself."""

    id: str
    kind: str
    display: str
    name: str | None
    current: bool
    created_at: str
    last_used_at: str | None
    revoked_at: str | None


class NewKey(Key):
    """A key just made; ``api_key`` is shown only this once."""

    api_key: str


class Template(TypedDict, total=False):
    """A provider-approved message template (WhatsApp): ``content_sid`` (Twilio) or ``name`` and
    ``language`` (hosted), with ``variables``."""

    content_sid: str
    name: str
    language: str
    variables: dict[str, str]


@dataclass(frozen=True)
class AttachmentFile:
    """An attachment's bytes, as Client.attachment downloads them."""

    filename: str
    content_type: str
    data: bytes


@dataclass(frozen=True)
class LoginPrompt:
    """What the person must see to sign in: open ``url`` (it carries the code) and check that the page
    shows ``code``."""

    code: str
    url: str
    interval: float


@dataclass(frozen=True)
class LoginResult:
    """The signed-in key, delivered once."""

    api_key: str
    base_url: str
