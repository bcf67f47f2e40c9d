"""Following the stream over the GraphQL subscription (graphql-transport-ws on ws(s)://<base>/graphql), with a
small RFC 6455 client on the standard library."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import ssl
import struct
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, cast

from ._errors import APIError, CommError, ConnectionFailed, Unauthenticated
from ._http import USER_AGENT, Cancel, Cancelled
from ._types import Event

PROTOCOL = "graphql-transport-ws"
SUBSCRIPTION = "subscription($after: Int, $type: String) { events(afterSeq: $after, type: $type) { seq type data } }"
MAX_MESSAGE = 16 << 20
"""The largest websocket message read (an event page is 4 MiB by default)."""
PING_EVERY = 15.0

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

_CODE_STATUS = {
    "invalid_parameter": 400,
    "malformed_json": 400,
    "unauthenticated": 401,
    "payment_required": 402,
    "forbidden": 403,
    "not_found": 404,
    "rate_limited": 429,
    "not_implemented": 501,
    "unavailable": 503,
}


class _Socket:
    """One websocket connection: text messages in and out, pings answered."""

    def __init__(self, sock: socket.socket, rest: bytes) -> None:
        self.sock = sock
        self.buf = bytearray(rest)
        self.wlock = threading.Lock()

    def _exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise ConnectionFailed("comm: websocket: connection closed")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def send(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        key = (mask * (n // 4 + 1))[:n]
        masked = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big") if n else b""
        with self.wlock:
            self.sock.sendall(head + mask + masked)

    def send_json(self, msg: dict[str, Any]) -> None:
        self.send(0x1, json.dumps(msg, separators=(",", ":")).encode())

    def recv_text(self) -> bytes:
        """The next text message; answers pings, raises on close."""
        parts: list[bytes] = []
        size = 0
        while True:
            b0, b1 = self._exact(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._exact(8))[0]
            mask = self._exact(4) if b1 & 0x80 else b""
            if n > MAX_MESSAGE or size + n > MAX_MESSAGE:
                raise ConnectionFailed(f"comm: websocket: message larger than {MAX_MESSAGE} bytes")
            data = self._exact(n)
            if mask:
                data = bytes(c ^ mask[i % 4] for i, c in enumerate(data))
            if opcode == 0x9:  # ping
                self.send(0xA, data)
                continue
            if opcode == 0xA:  # pong
                continue
            if opcode == 0x8:  # close
                code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else 1005
                reason = data[2:].decode("utf-8", "replace")
                if code in (4401, 4403):
                    raise Unauthenticated(401, "unauthenticated", reason or "websocket closed by the gateway")
                raise ConnectionFailed(f"comm: websocket closed: {code} {reason}")
            parts.append(data)
            size += n
            if b0 & 0x80:
                return b"".join(parts)


def _connect(base_url: str, api_key: str, timeout: float, ssl_context: ssl.SSLContext | None) -> _Socket:
    u = urllib.parse.urlsplit(base_url)
    tls = u.scheme == "https"
    host = u.hostname or ""
    port = u.port or (443 if tls else 80)
    raw = socket.create_connection((host, port), timeout=timeout)
    sock: socket.socket = raw
    try:
        if tls:
            sock = (ssl_context or ssl.create_default_context()).wrap_socket(raw, server_hostname=host)
        key = base64.b64encode(os.urandom(16)).decode()
        path = u.path.rstrip("/") + "/graphql"
        req = (
            f"GET {path} HTTP/1.1\r\nHost: {u.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {PROTOCOL}\r\n"
            f"Authorization: Bearer {api_key}\r\nUser-Agent: {USER_AGENT}\r\n\r\n"
        )
        sock.sendall(req.encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(4096)
            if not chunk or len(buf) > 16384:
                raise ConnectionFailed("comm: websocket: no handshake answer")
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = lines[0].split(" ", 2)
        hdrs = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        if len(status) < 2 or status[1] != "101":
            code = int(status[1]) if len(status) > 1 and status[1].isdigit() else 0
            if code == 401:
                raise Unauthenticated(401, "unauthenticated", "websocket refused")
            raise ConnectionFailed(f"comm: websocket: handshake answered {lines[0]!r}")
        want = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
        if hdrs.get("sec-websocket-accept") != want:
            raise ConnectionFailed("comm: websocket: bad Sec-WebSocket-Accept")
        if hdrs.get("sec-websocket-protocol") != PROTOCOL:
            raise ConnectionFailed(f"comm: websocket: the gateway did not accept subprotocol {PROTOCOL}")
        return _Socket(sock, rest)
    except BaseException:
        sock.close()
        raise


def _graphql_error(payload: Any) -> APIError:
    errs = cast(list[dict[str, Any]], payload if isinstance(payload, list) else [])
    e = errs[0] if errs else {}
    ext = cast(dict[str, Any], e.get("extensions") or {})
    code = str(ext.get("code") or "internal_error")
    from ._errors import error_of

    status = _CODE_STATUS.get(code, 500)
    err = error_of(status, b"")
    err.code, err.message, err.param = code, str(e.get("message") or "subscription failed"), str(ext.get("param") or "")
    return err


def follow_socket(
    base_url: str,
    api_key: str,
    after: int,
    type_filter: str | None,
    accept: Callable[[Event], bool],
    cancel: Cancel,
    timeout: float = 10.0,
    ssl_context: ssl.SSLContext | None = None,
) -> float:
    """Subscribes to the events after `after` and hands each to accept (False: stop) until the socket fails
    (raised), cancel is set (Cancelled) or accept says stop. Returns how long the subscription was up."""
    try:
        ws = _connect(base_url, api_key, timeout, ssl_context)
    except OSError as e:
        raise ConnectionFailed(f"comm: websocket: {e}") from None
    cancel._register(ws.sock)  # pyright: ignore[reportPrivateUsage]
    began = time.monotonic()
    done = threading.Event()
    try:
        ws.send_json({"type": "connection_init", "payload": {"Authorization": "Bearer " + api_key}})
        ws.sock.settimeout(15.0)
        while True:
            m = json.loads(ws.recv_text())
            if m.get("type") == "connection_ack":
                break
            if m.get("type") == "ping":
                ws.send_json({"type": "pong"})
        variables: dict[str, Any] = {"after": after, "type": type_filter}
        ws.send_json({"id": "events", "type": "subscribe", "payload": {"query": SUBSCRIPTION, "variables": variables}})

        def keepalive() -> None:
            while not done.wait(PING_EVERY):
                try:
                    ws.send_json({"type": "ping"})
                except OSError:
                    return

        threading.Thread(target=keepalive, daemon=True).start()
        ws.sock.settimeout(3 * PING_EVERY)
        while True:
            m = cast(dict[str, Any], json.loads(ws.recv_text()))
            typ = m.get("type")
            if typ == "next":
                p = cast(dict[str, Any], m.get("payload") or {})
                if p.get("errors"):
                    raise _graphql_error(p["errors"])
                ev = cast(dict[str, Any], p.get("data") or {}).get("events")
                if not isinstance(ev, dict):
                    raise CommError("comm: websocket: event message without an event")
                if not accept(cast(Event, ev)):
                    return time.monotonic() - began
            elif typ == "error":
                raise _graphql_error(m.get("payload"))
            elif typ == "complete":
                raise ConnectionFailed("comm: websocket: the gateway completed the subscription")
            elif typ == "ping":
                ws.send_json({"type": "pong"})
    except (OSError, ValueError) as e:
        if cancel.is_set():
            raise Cancelled("comm: websocket: cancelled") from None
        raise ConnectionFailed(f"comm: websocket: {e}") from None
    except ConnectionFailed:
        if cancel.is_set():
            raise Cancelled("comm: websocket: cancelled") from None
        raise
    finally:
        done.set()
        cancel._unregister(ws.sock)  # pyright: ignore[reportPrivateUsage]
        ws.sock.close()
