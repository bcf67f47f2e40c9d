"""The synchronous client: one typed method per REST endpoint."""

from __future__ import annotations

import email.message
import os
import ssl
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote

from ._config import ENV_API_KEY, ENV_BASE_URL, NO_KEY_MESSAGE, parse_base_url, resolve
from ._errors import CommError, ConfigError, NotFound
from ._http import DEFAULT_RETRIES, DEFAULT_TIMEOUT, Backoff, Cancel, Transport, decode_json
from ._types import (
    MESSAGE_RECEIVED,
    AccountView,
    AttachmentFile,
    AttachmentInfo,
    Binding,
    ChannelInfo,
    Connection,
    Conversation,
    CreditEntry,
    Domain,
    Event,
    Key,
    Message,
    NewKey,
    PendingReceipt,
    Project,
    Sandbox,
    Template,
    TypingState,
    Webhook,
    WebhookAttempt,
)

if TYPE_CHECKING:
    from ._cursor import CursorStore
    from ._listen import EventHandler, EventStream, MessageHandler

MAX_WAIT = 60
"""The longest long-poll wait the gateway accepts, in seconds."""


def _p(segment: str) -> str:
    if not segment:
        raise CommError("comm: an id is required")
    return quote(segment, safe="")


def _page(after: str | None, limit: int | None, **extra: str | None) -> dict[str, str | int]:
    q: dict[str, str | int] = {k: v for k, v in extra.items() if v}
    if after:
        q["after"] = after
    if limit:
        q["limit"] = limit
    return q


def _keyless(base_url: str | None, timeout: float = DEFAULT_TIMEOUT) -> Transport:
    if not base_url:
        base_url = resolve({ENV_BASE_URL: None})[ENV_BASE_URL]
    return Transport(parse_base_url(base_url), "", timeout=timeout, retries=0)


def create_sandbox(name: str = "", *, base_url: str | None = None) -> Sandbox:
    """Creates an anonymous project (POST /v1/projects/sandbox) and returns it with its API key, shown
    only this once. Needs no key; without ``base_url``, COMM_BASE_URL is read as Client does. Never
    retried (a retry could make a second project)."""
    t = _keyless(base_url)
    body = {"name": name} if name else {}
    ans = t.call("POST", "/v1/projects/sandbox", body=body, auth=False)
    return cast(Sandbox, decode_json(ans, "create sandbox"))


@dataclass
class InboundMessage:
    """A message a person sent to the agent (the message of a message.received event), bound to the
    client so that ``reply`` works."""

    id: str
    conversation_id: str
    connection_id: str
    channel: str
    sender: str
    text: str
    subject: str
    html: str
    attachments: list[AttachmentInfo]
    details: dict[str, Any] | None
    customer_id: str
    agent_id: str
    event: Event
    client: Client = field(repr=False)
    _stop_typing: Callable[[], None] | None = field(default=None, repr=False)

    def reply(self, text: str = "", *, html: str = "", subject: str = "", template: Template | None = None) -> Message:
        """Answers the message in its conversation and returns the queued reply. Within listen() it first
        stops the typing indicator, so that the indicator cannot reappear after the reply."""
        if self._stop_typing is not None:
            self._stop_typing()
        return self.client.reply(self.id, text, html=html, subject=subject, template=template)

    def typing(self) -> TypingState:
        """Shows the typing indicator in the message's conversation for about 10 seconds."""
        return self.client.typing(self.id)


class Client:
    """Calls one gateway with one API key (one project). Safe to share between threads.

    The key and the base URL are each taken from, in order: the arguments; the ``dotenv`` files given;
    the environment (COMM_API_KEY, COMM_BASE_URL); a .env file in the working directory; a .env file
    beside the main script. The base URL defaults to http://127.0.0.1:8080. Without a key anywhere,
    ConfigError names COMM_API_KEY.

    Idempotent calls (GET, PUT, DELETE) are retried after 429, 5xx and connection errors, with backoff
    and Retry-After; so are the POSTs that create or send (send, reply, typing, connect, inject,
    create_key, add_domain, replay_webhook), each with an Idempotency-Key that is the same on every
    attempt, so the gateway runs it once. Other POSTs (create_sandbox, sign-in, verify_domain) are never
    retried.
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        dotenv: Sequence[str | os.PathLike[str]] = (),
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        backoff: tuple[float, float] = (0.25, 8.0),
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        cfg = resolve({ENV_API_KEY: api_key, ENV_BASE_URL: base_url}, dotenv)
        if not cfg[ENV_API_KEY]:
            raise ConfigError(NO_KEY_MESSAGE)
        self._t = Transport(
            parse_base_url(cfg[ENV_BASE_URL]),
            cfg[ENV_API_KEY],
            timeout=timeout,
            retries=retries,
            backoff=Backoff(*backoff),
            ssl_context=ssl_context,
        )

    @property
    def base_url(self) -> str:
        """The gateway's address, without a trailing slash."""
        return self._t.base_url

    @property
    def api_key(self) -> str:
        return self._t.api_key

    def _json(self, method: str, path: str, what: str, **kw: Any) -> Any:
        return decode_json(self._t.call(method, path, **kw), what)

    # Project and events.

    def project(self) -> Project:
        """The key's project and the head of its stream (GET /v1/project)."""
        return cast(Project, self._json("GET", "/v1/project", "project"))

    def events(
        self,
        after_seq: int = 0,
        limit: int = 0,
        type: str | None = None,
        *,
        wait: float = 0,
        cancel: Cancel | None = None,
    ) -> list[Event]:
        """Up to ``limit`` events with seq greater than ``after_seq``, in seq order (GET /v1/events);
        limit 0 is the gateway's default (100, at most 1000); ``type`` keeps one event type. With
        ``wait`` (seconds, at most 60) it is a long poll: the gateway holds the request until an event
        commits or the wait runs out (an empty page). A page may hold fewer than ``limit`` events even
        when more follow: only an empty page means the stream is read to its end."""
        q: dict[str, str | int] = {"after_seq": after_seq}
        if limit:
            q["limit"] = limit
        if type:
            q["type"] = type
        secs = 0
        if wait > 0:
            secs = min(int(-(-wait // 1)), MAX_WAIT)
            q["wait"] = secs
        out = self._json("GET", "/v1/events", "events", query=q, wait=float(secs), cancel=cancel)
        return cast(list[Event], out or [])

    # Webhook.

    def set_webhook(self, url: str, secret: str = "", *, from_seq: int | None = None) -> Webhook:
        """Registers (or replaces) the push endpoint (PUT /v1/webhook). Deliveries are signed with
        ``secret`` (Standard Webhooks; a ``whsec_`` secret is base64 after the prefix); with an empty
        secret the gateway generates one and returns it in ``secret``, once. ``from_seq`` sets the
        endpoint's cursor (deliveries resume after it); by default a new endpoint starts at the head."""
        body: dict[str, Any] = {"url": url}
        if secret:
            body["secret"] = secret
        if from_seq is not None:
            body["from_seq"] = from_seq
        return cast(Webhook, self._json("PUT", "/v1/webhook", "set webhook", body=body))

    def get_webhook(self) -> Webhook:
        """The push endpoint, its status and cursor, never its secret (GET /v1/webhook); NotFound when
        none is registered."""
        return cast(Webhook, self._json("GET", "/v1/webhook", "get webhook"))

    def delete_webhook(self) -> None:
        """Removes the push endpoint and its attempt history (DELETE /v1/webhook)."""
        self._t.call("DELETE", "/v1/webhook")

    def replay_webhook(self, from_seq: int) -> Webhook:
        """Moves the endpoint's cursor: deliveries resume after ``from_seq`` (POST /v1/webhook/replay)."""
        return cast(
            Webhook,
            self._json("POST", "/v1/webhook/replay", "replay webhook", body={"from_seq": from_seq}, keyed=True),
        )

    def webhook_attempts(self, after: str | None = None, limit: int = 0) -> list[WebhookAttempt]:
        """The latest push attempts, newest first (GET /v1/webhook/attempts)."""
        q = _page(after, limit)
        return cast(list[WebhookAttempt], self._json("GET", "/v1/webhook/attempts", "attempts", query=q))

    # Channels and connections.

    def channels(self) -> list[ChannelInfo]:
        """The gateway's channels with their connect forms and availability (GET /v1/channels)."""
        return cast(list[ChannelInfo], self._json("GET", "/v1/channels", "channels"))

    def connect(
        self,
        channel: str,
        config: dict[str, Any] | None = None,
        *,
        provider: str = "",
        name: str = "",
        customer_id: str = "",
        agent_id: str = "",
    ) -> Connection:
        """Connects a channel (POST /v1/connections). A paid channel with a sandbox key raises
        PaymentRequired; a channel this gateway has no adapter for NotImplementedByGateway."""
        body: dict[str, Any] = {"channel": channel}
        for k, v in (("provider", provider), ("name", name), ("customer_id", customer_id), ("agent_id", agent_id)):
            if v:
                body[k] = v
        if config:
            body["config"] = config
        return cast(Connection, self._json("POST", "/v1/connections", "connect", body=body, keyed=True))

    def connect_imessage(self, *, line: str = "", dedicated: bool = False) -> Connection:
        """Connects iMessage, a paid channel: with a sandbox key it raises PaymentRequired, whose message
        says how to sign in; the same call with the signed-in key then succeeds. ``line`` picks the
        relay by address; ``dedicated`` asks for a relay of the connection's own."""
        cfg: dict[str, Any] = {}
        if line:
            cfg["line"] = line
        if dedicated:
            cfg["dedicated"] = True
        return self.connect("imessage", cfg or None)

    def connections(self, after: str | None = None, limit: int = 0) -> list[Connection]:
        """Live connections, oldest first (GET /v1/connections)."""
        return cast(list[Connection], self._json("GET", "/v1/connections", "connections", query=_page(after, limit)))

    def connection(self, connection_id: str) -> Connection:
        """One connection (GET /v1/connections/{id})."""
        return cast(Connection, self._json("GET", f"/v1/connections/{_p(connection_id)}", "connection"))

    def delete_connection(self, connection_id: str) -> None:
        """Removes a connection; its conversations and messages stay readable."""
        self._t.call("DELETE", f"/v1/connections/{_p(connection_id)}")

    def bindings(self, connection_id: str, after: str | None = None, limit: int = 0) -> list[Binding]:
        """People who joined a connection on its shared line (GET /v1/connections/{id}/bindings)."""
        path = f"/v1/connections/{_p(connection_id)}/bindings"
        return cast(list[Binding], self._json("GET", path, "bindings", query=_page(after, limit)))

    def unbind(self, connection_id: str, person: str) -> None:
        """Removes a person's binding (DELETE /v1/connections/{id}/bindings/{person})."""
        self._t.call("DELETE", f"/v1/connections/{_p(connection_id)}/bindings/{_p(person)}")

    def inject(
        self, connection_id: str, sender: str, text: str = "", *, subject: str = "", html: str = "", id: str = ""
    ) -> Message:
        """Delivers a message into a test connection as if ``sender`` had written it
        (POST /v1/connections/{id}/inbound): message.received follows. A repeated ``id`` returns the
        message stored the first time and appends nothing."""
        body: dict[str, Any] = {"sender": sender}
        for k, v in (("text", text), ("subject", subject), ("html", html), ("id", id)):
            if v:
                body[k] = v
        path = f"/v1/connections/{_p(connection_id)}/inbound"
        return cast(Message, self._json("POST", path, "inject", body=body, keyed=True))

    def inject_receipt(
        self, connection_id: str, message_id: str, state: str, *, code: str = "", reason: str = "", at: str = ""
    ) -> Message | PendingReceipt:
        """Reports on a message sent on a test connection as its provider would; returns the message, or
        the pending report (it has ``expires_at``) while the send is still out."""
        r: dict[str, Any] = {"message_id": message_id, "state": state}
        for k, v in (("code", code), ("reason", reason), ("at", at)):
            if v:
                r[k] = v
        path = f"/v1/connections/{_p(connection_id)}/inbound"
        return cast("Message | PendingReceipt", self._json("POST", path, "receipt", body={"receipt": r}, keyed=True))

    # Conversations and messages.

    def conversations(
        self, connection_id: str | None = None, after: str | None = None, limit: int = 0
    ) -> list[Conversation]:
        """Conversations, oldest first, of one connection or all (GET /v1/conversations)."""
        q = _page(after, limit, connection_id=connection_id)
        return cast(list[Conversation], self._json("GET", "/v1/conversations", "conversations", query=q))

    def conversation(self, conversation_id: str) -> Conversation:
        """One conversation with its typing state (GET /v1/conversations/{id})."""
        return cast(Conversation, self._json("GET", f"/v1/conversations/{_p(conversation_id)}", "conversation"))

    def messages(self, conversation_id: str, after: str | None = None, limit: int = 0) -> list[Message]:
        """A conversation's messages, oldest first (GET /v1/conversations/{id}/messages)."""
        path = f"/v1/conversations/{_p(conversation_id)}/messages"
        return cast(list[Message], self._json("GET", path, "messages", query=_page(after, limit)))

    def message(self, message_id: str) -> Message:
        """One message with its delivery status (GET /v1/messages/{id})."""
        return cast(Message, self._json("GET", f"/v1/messages/{_p(message_id)}", "message"))

    def reply(
        self, message_id: str, text: str = "", *, html: str = "", subject: str = "", template: Template | None = None
    ) -> Message:
        """Answers a message in its conversation (POST /v1/messages/{id}/reply); the reply is queued and
        message.sent (or message.failed) follows. It also ends the typing indicator."""
        body: dict[str, Any] = {}
        for k, v in (("text", text), ("html", html), ("subject", subject)):
            if v:
                body[k] = v
        if template:
            body["template"] = template
        path = f"/v1/messages/{_p(message_id)}/reply"
        return cast(Message, self._json("POST", path, "reply", body=body, keyed=True))

    def typing(self, message_id: str) -> TypingState:
        """Shows a typing indicator in a message's conversation for about 10 seconds, or until a reply is
        sent (POST /v1/messages/{id}/typing)."""
        path = f"/v1/messages/{_p(message_id)}/typing"
        return cast(TypingState, self._json("POST", path, "typing", keyed=True))

    def send(
        self,
        connection_id: str,
        to: str,
        text: str = "",
        *,
        html: str = "",
        subject: str = "",
        template: Template | None = None,
    ) -> Message:
        """Sends a proactive message to ``to`` on a connection (POST /v1/messages)."""
        body: dict[str, Any] = {"connection_id": connection_id, "to": to}
        for k, v in (("text", text), ("html", html), ("subject", subject)):
            if v:
                body[k] = v
        if template:
            body["template"] = template
        return cast(Message, self._json("POST", "/v1/messages", "send", body=body, keyed=True))

    def attachment(self, message_id: str, attachment_id: str) -> AttachmentFile:
        """Downloads an attachment's bytes (GET /v1/messages/{id}/attachments/{attachment_id})."""
        ans = self._t.call("GET", f"/v1/messages/{_p(message_id)}/attachments/{_p(attachment_id)}", raw=True)
        m = email.message.Message()
        m["content-disposition"] = ans.headers.get("content-disposition", "")
        filename = m.get_param("filename", header="content-disposition")
        return AttachmentFile(
            filename=filename if isinstance(filename, str) and filename else attachment_id,
            content_type=ans.headers.get("content-type", ""),
            data=ans.body,
        )

    # Domains.

    def add_domain(self, domain: str) -> Domain:
        """Adds a custom email domain (POST /v1/domains), with the DNS records to publish."""
        return cast(Domain, self._json("POST", "/v1/domains", "add domain", body={"domain": domain}, keyed=True))

    def domains(self, after: str | None = None, limit: int = 0) -> list[Domain]:
        """The project's custom domains, oldest first (GET /v1/domains)."""
        return cast(list[Domain], self._json("GET", "/v1/domains", "domains", query=_page(after, limit)))

    def domain(self, domain_id: str) -> Domain:
        """One custom domain with the state of each record (GET /v1/domains/{id})."""
        return cast(Domain, self._json("GET", f"/v1/domains/{_p(domain_id)}", "domain"))

    def verify_domain(self, domain_id: str) -> Domain:
        """Looks the domain's records up now (POST /v1/domains/{id}/verify). Not retried."""
        return cast(Domain, self._json("POST", f"/v1/domains/{_p(domain_id)}/verify", "verify domain"))

    def delete_domain(self, domain_id: str) -> None:
        """Removes a custom domain (DELETE /v1/domains/{id})."""
        self._t.call("DELETE", f"/v1/domains/{_p(domain_id)}")

    # Account and keys.

    def account(self) -> AccountView:
        """The account owning the key's project, its credit and projects (GET /v1/account); a sandbox key
        raises Forbidden."""
        return cast(AccountView, self._json("GET", "/v1/account", "account"))

    def ledger(self, after: str | None = None, limit: int = 0) -> list[CreditEntry]:
        """The account's credit ledger, oldest first (GET /v1/account/ledger)."""
        return cast(list[CreditEntry], self._json("GET", "/v1/account/ledger", "ledger", query=_page(after, limit)))

    def keys(self) -> list[Key]:
        """The project's API keys, revoked ones included; never the keys themselves (GET /v1/keys)."""
        return cast(list[Key], self._json("GET", "/v1/keys", "keys"))

    def create_key(self, name: str = "") -> NewKey:
        """Makes another key of the client's key's kind (POST /v1/keys); ``api_key`` is shown once."""
        body = {"name": name} if name else {}
        return cast(NewKey, self._json("POST", "/v1/keys", "create key", body=body, keyed=True))

    def revoke_key(self, key_id: str) -> Key:
        """Revokes one of the project's keys (DELETE /v1/keys/{id}); it stops working at once."""
        out = self._json("DELETE", f"/v1/keys/{_p(key_id)}", "revoke key")
        if not out:
            # A retried DELETE answered not_found after an attempt that may have gone through; revoking
            # never removes a key, so the id was never the project's.
            raise NotFound(404, "not_found", f"no key {key_id}")
        return cast(Key, out)

    # Listening.

    def message_of(self, event: Event) -> InboundMessage:
        """The inbound message of a message.received event (from events() or a push delivery), bound to
        this client so that its reply works."""
        if event.get("type") != MESSAGE_RECEIVED:
            raise CommError(f"comm: event {event.get('seq')} is {event.get('type')}, not {MESSAGE_RECEIVED}")
        data = event.get("data") or {}
        m: dict[str, Any] = data.get("message") or {}
        if not m.get("id"):
            raise CommError(f"comm: event {event.get('seq')}: message without an id")
        return InboundMessage(
            id=str(m["id"]),
            conversation_id=str(m.get("conversation_id") or ""),
            connection_id=str(m.get("connection_id") or ""),
            channel=str(m.get("channel") or ""),
            sender=str(m.get("sender") or ""),
            text=str(m.get("text") or ""),
            subject=str(m.get("subject") or ""),
            html=str(m.get("html") or ""),
            attachments=cast(list[AttachmentInfo], m.get("attachments") or []),
            details=cast("dict[str, Any] | None", m.get("details")),
            customer_id=str(data.get("customer_id") or ""),
            agent_id=str(data.get("agent_id") or ""),
            event=event,
            client=self,
        )

    def listen(
        self,
        handler: MessageHandler | None = None,
        *,
        on_event: dict[str, EventHandler] | None = None,
        on_error: Callable[[Event | None, BaseException], None] | None = None,
        cursor: CursorStore | str | None = ".comm-cursor",
        start_seq: int = 0,
        poll_interval: float = 1.0,
        long_poll: float = 25.0,
        batch: int = 100,
        concurrency: int = 8,
        typing_every: float = 5.0,
        grace: float = 30.0,
        stop: threading.Event | None = None,
        handle_signals: bool = True,
        websocket: bool = False,
        socket_retry: float = 5.0,
    ) -> None:
        """Follows the project's stream and calls ``handler`` for every inbound message, until ``stop``
        is set, SIGINT/SIGTERM arrives (when called from the main thread with ``handle_signals``), or a
        permanent error (a revoked key, say) is raised.

        It long-polls GET /v1/events, keeps its cursor in ``cursor`` (a file path, default
        ``.comm-cursor``, or a CursorStore; None keeps it in memory) and saves it only past events whose
        handlers finished, deduplicates messages within a run, shows the typing indicator while the
        handler runs (every ``typing_every`` seconds; 0 turns it off), dispatches other event types to
        ``on_event`` (type "" for any), and continues after a handler's exception, which goes to
        ``on_error`` (default: logged) and counts as handled. Handlers run one at a time in seq order
        within a conversation and concurrently across conversations (``concurrency`` threads). On a stop
        it starts no new event, lets running handlers finish (up to ``grace`` seconds) and saves the
        cursor, so a restart handles each event once. ``start_seq`` is where a listener without a saved
        cursor starts: 0 the whole stream, -1 the head (only new events).

        With ``websocket=True`` it follows the GraphQL subscription (graphql-transport-ws on
        ws(s)://<base>/graphql) instead of polling; when the socket cannot be opened or drops, it polls and
        tries the socket again after ``socket_retry`` seconds, doubling up to 16 times that while it keeps
        failing."""
        from ._listen import run_listen

        run_listen(
            self,
            handler,
            on_event=on_event or {},
            on_error=on_error,
            cursor=cursor,
            start_seq=start_seq,
            poll_interval=poll_interval,
            long_poll=long_poll,
            batch=batch,
            concurrency=concurrency,
            typing_every=typing_every,
            grace=grace,
            stop=stop,
            handle_signals=handle_signals,
            websocket=websocket,
            socket_retry=socket_retry if socket_retry > 0 else 5.0,
        )

    def stream(
        self,
        type: str | None = None,
        *,
        cursor: CursorStore | str | None = ".comm-cursor",
        start_seq: int = 0,
        long_poll: float = 25.0,
        batch: int = 100,
    ) -> EventStream:
        """Iterates over the stream's events (of one ``type``, if given), waiting for new ones:
        ``for event in client.stream(): ...``. The cursor (as in listen) is saved past an event when the
        next one is asked for, or when the stream is closed (``with client.stream() as s``, ``close()``)
        after the loop body finished; an exception in the loop leaves the event unsaved, so it comes
        again after a restart."""
        from ._listen import EventStream

        return EventStream(self, type, cursor=cursor, start_seq=start_seq, long_poll=long_poll, batch=batch)
