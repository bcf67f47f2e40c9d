"""The HTTP layer: one call with retries, on the standard library's http.client."""

from __future__ import annotations

import http.client
import json
import random
import secrets
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._errors import APIError, CommError, ConnectionFailed, NotFound, RateLimited, error_of

USER_AGENT = "comm-python-client/0.1"

DEFAULT_TIMEOUT = 30.0
"""Bounds one HTTP attempt, in seconds (a long poll gets its wait on top)."""

DEFAULT_RETRIES = 3
"""How many times an idempotent call is retried."""

MAX_RETRY_AFTER = 60.0
"""The longest Retry-After waited for; a longer one ends the retries."""

MAX_ANSWER_BYTES = 64 << 20
"""An answer body larger than this is refused (pages of events are 4 MiB by default)."""

MAX_ERROR_BYTES = 64 << 10
"""How much of an error answer's body is read."""

_IDEMPOTENT = frozenset(("GET", "HEAD", "PUT", "DELETE"))


class Cancelled(CommError):
    """A call was cancelled (Cancel.set) while it ran."""


class Cancel:
    """Cancels calls from another thread: set() shuts down the sockets of the calls given this token and
    stops their retries."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = threading.Event()
        self._socks: set[socket.socket] = set()

    def is_set(self) -> bool:
        return self._set.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleeps up to seconds; True when cancelled meanwhile."""
        return self._set.wait(max(seconds, 0.0))

    def set(self) -> None:
        with self._lock:
            self._set.set()
            socks = list(self._socks)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _register(self, s: socket.socket) -> None:
        with self._lock:
            self._socks.add(s)
            if not self._set.is_set():
                return
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _unregister(self, s: socket.socket) -> None:
        with self._lock:
            self._socks.discard(s)


@dataclass
class Backoff:
    """Exponential backoff with jitter: the delay before retry n is between half and all of
    first * 2**n, capped at limit (seconds)."""

    first: float = 0.25
    limit: float = 8.0

    def delay(self, n: int) -> float:
        d = min(self.first * (2 ** min(n, 30)), self.limit)
        return float(d / 2 + random.uniform(0, d / 2))


@dataclass
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytes


class Transport:
    """Makes the calls of one client: base URL, key, timeouts, retries."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        backoff: Backoff | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.timeout = timeout if timeout > 0 else DEFAULT_TIMEOUT
        self.retries = max(retries, 0)
        self.backoff = backoff or Backoff()
        self.ssl_context = ssl_context
        u = urllib.parse.urlsplit(base_url)
        self._https = u.scheme == "https"
        self._host = u.hostname or ""
        self._port = u.port
        self._prefix = u.path.rstrip("/")

    def call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int] | None = None,
        body: Any = None,
        keyed: bool = False,
        auth: bool = True,
        wait: float = 0.0,
        raw: bool = False,
        cancel: Cancel | None = None,
    ) -> Answer:
        """Runs a call, retrying idempotent ones (GET, PUT, DELETE) and keyed POSTs (which send an
        Idempotency-Key, the same on every attempt) after 429, 5xx other than 501/505, and connection
        errors, with exponential backoff and jitter, honouring Retry-After. A keyed POST is also retried
        after the 409 (with Retry-After) saying its first attempt is still running. A DELETE whose
        earlier attempt may have gone through and that now answers not_found counts as done."""
        idem_key = "py_" + secrets.token_hex(16) if keyed else ""
        payload = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        target = self._prefix + path
        if query:
            target += "?" + urllib.parse.urlencode({k: str(v) for k, v in query.items()})
        headers = {"User-Agent": USER_AGENT, "Accept": "*/*" if raw else "application/json"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        if auth:
            headers["Authorization"] = "Bearer " + self.api_key
        if idem_key:
            headers["Idempotency-Key"] = idem_key
        may_retry = method in _IDEMPOTENT or bool(idem_key)
        uncertain = False
        attempt = 0
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"comm: {method} {path}: cancelled")
            err: CommError
            retry = False
            try:
                ans = self._once(method, target, payload, headers, wait, cancel)
            except OSError as e:
                if cancel is not None and cancel.is_set():
                    raise Cancelled(f"comm: {method} {path}: cancelled") from None
                err = ConnectionFailed(f"comm: {method} {path}: {e}")
                retry, uncertain = True, True
            except http.client.HTTPException as e:
                if cancel is not None and cancel.is_set():
                    raise Cancelled(f"comm: {method} {path}: cancelled") from None
                err = ConnectionFailed(f"comm: {method} {path}: {type(e).__name__}: {e}")
                retry, uncertain = True, True
            else:
                if 200 <= ans.status <= 299:
                    return ans
                api_err = error_of(
                    ans.status,
                    ans.body[:MAX_ERROR_BYTES],
                    ans.headers.get("x-request-id", ""),
                    ans.headers.get("retry-after"),
                )
                if method == "DELETE" and uncertain and isinstance(api_err, NotFound):
                    return Answer(204, {}, b"")
                s = ans.status
                running = s == 409 and bool(idem_key) and bool(ans.headers.get("retry-after"))
                retry = running or s == 429 or (s >= 500 and s not in (501, 505))
                err = api_err
            if not retry or not may_retry or attempt >= self.retries:
                raise err
            delay = self.backoff.delay(attempt)
            if isinstance(err, APIError):
                if err.retry_after > MAX_RETRY_AFTER:
                    raise err
                if err.retry_after > 0:
                    delay = err.retry_after
                if not isinstance(err, RateLimited):
                    uncertain = True
            if cancel is not None:
                if cancel.wait(delay):
                    raise err
            else:
                time.sleep(delay)
            attempt += 1

    def _once(
        self,
        method: str,
        target: str,
        payload: bytes | None,
        headers: Mapping[str, str],
        wait: float,
        cancel: Cancel | None,
    ) -> Answer:
        timeout = self.timeout + wait
        conn: http.client.HTTPConnection
        if self._https:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self.ssl_context)
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        try:
            conn.connect()
            sock = conn.sock
            if cancel is not None and isinstance(sock, socket.socket):
                cancel._register(sock)  # pyright: ignore[reportPrivateUsage]
            try:
                conn.request(method, target, body=payload, headers=dict(headers))
                resp = conn.getresponse()
                limit = MAX_ERROR_BYTES if resp.status >= 300 else MAX_ANSWER_BYTES
                data = resp.read(limit + 1)
                if len(data) > limit and resp.status < 300:
                    raise ConnectionFailed(f"comm: {method} {target}: answer larger than {limit} bytes")
                hdrs = {k.lower(): v for k, v in resp.getheaders()}
                return Answer(resp.status, hdrs, data)
            finally:
                if cancel is not None and isinstance(sock, socket.socket):
                    cancel._unregister(sock)  # pyright: ignore[reportPrivateUsage]
        finally:
            conn.close()


def decode_json(ans: Answer, what: str) -> Any:
    """Decodes a 2xx answer's JSON body."""
    if ans.status == 204 or not ans.body:
        return None
    try:
        return json.loads(ans.body)
    except ValueError as e:
        raise CommError(f"comm: {what}: decode answer: {e}") from None
