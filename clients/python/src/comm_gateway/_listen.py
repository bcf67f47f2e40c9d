"""listen() and stream(): following the project's event stream (threads)."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, cast

from ._cursor import DEFAULT_CURSOR_FILE, CursorStore, FileCursorStore
from ._errors import APIError, CommError
from ._http import Backoff, Cancel, Cancelled
from ._types import MESSAGE_FAILED, MESSAGE_RECEIVED, MESSAGE_SENT, Event, Project
from ._ws import follow_socket

if TYPE_CHECKING:
    from ._client import Client, InboundMessage

log = logging.getLogger("comm_gateway")

MessageHandler = Callable[["InboundMessage"], Any]
"""Handles one inbound message; its return value is ignored."""

EventHandler = Callable[[Event], Any]
"""Handles one event of the stream."""

MAX_SEEN = 4096
"""Message ids remembered for deduplication."""

MAX_PENDING = 1024
"""Events held behind an unfinished one; fetching waits beyond it."""


def permanent(err: BaseException) -> bool:
    """Whether repeating a failed request cannot help: an error answer of 4xx other than 408 and 429."""
    return isinstance(err, APIError) and 400 <= err.status < 500 and err.status not in (408, 429)


def open_store(cursor: CursorStore | str | None, project_id: str) -> CursorStore | None:
    if cursor is None:
        return None
    if isinstance(cursor, str):
        return FileCursorStore(cursor or DEFAULT_CURSOR_FILE, project_id)
    return cursor


def start_cursor(store: CursorStore | None, start_seq: int, proj: Project) -> int:
    """Loads the cursor, or places a fresh one at start_seq (-1: the head) and saves it."""
    cur = store.load() if store is not None else 0
    fresh = cur == 0 and start_seq != 0
    if fresh:
        cur = proj["last_seq"] if start_seq < 0 else start_seq
    if cur > proj["last_seq"]:
        raise CommError(
            f"comm: listen: cursor {cur} is ahead of project {proj['id']}'s stream, whose last seq is "
            f"{proj['last_seq']}: the cursor belongs to another project or database"
        )
    if fresh and store is not None and cur > 0:
        store.save(cur)
    return cur


def conversation_key(ev: Event) -> str:
    if ev.get("type") in (MESSAGE_RECEIVED, MESSAGE_SENT, MESSAGE_FAILED):
        m: Any = (ev.get("data") or {}).get("message")
        if isinstance(m, dict):
            return "conv:" + str(cast(dict[str, Any], m).get("conversation_id") or "")
    return ""


@dataclass
class _Item:
    ev: Event
    key: str
    msg: InboundMessage | None
    done: bool = False


class _Typing:
    """Shows the typing indicator every `every` seconds until stopped."""

    def __init__(self, client: Client, message_id: str, every: float) -> None:
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, args=(client, message_id, every), daemon=True)
        self._t.start()

    def _run(self, client: Client, message_id: str, every: float) -> None:
        while not self._stop.is_set():
            try:
                client.typing(message_id)
            except CommError as e:
                log.debug("comm: typing indicator for %s: %s", message_id, e)
                if permanent(e):
                    return
            if self._stop.wait(every):
                return

    def stop(self) -> None:
        """Ends the loop and waits for a typing call in flight, so that it cannot land after a reply."""
        self._stop.set()
        if threading.current_thread() is not self._t:
            self._t.join()


class _Listener:
    def __init__(
        self,
        client: Client,
        handler: MessageHandler | None,
        on_event: dict[str, EventHandler],
        on_error: Callable[[Event | None, BaseException], None] | None,
        concurrency: int,
        typing_every: float,
    ) -> None:
        self.c = client
        self.handler = handler
        self.on_event = on_event
        self.on_error = on_error
        self.typing_every = typing_every
        self.sem = threading.Semaphore(max(concurrency, 1))
        self.max_in_flight = max(4 * concurrency, 16)
        self.cond = threading.Condition()
        self.pending: deque[_Item] = deque()
        self.lanes: dict[str, deque[_Item]] = {}
        self.threads: list[threading.Thread] = []
        self.accepted = 0
        self.cursor = 0
        self.in_flight = 0
        self.started = 0
        self.stopping = False
        self.frozen = 0
        self.seen: dict[str, None] = {}
        self.store: CursorStore | None = None
        self.saved = 0
        self.save_lock = threading.Lock()

    def report(self, ev: Event | None, err: BaseException) -> None:
        if self.on_error is not None:
            try:
                self.on_error(ev, err)
            except Exception:
                log.exception("comm: on_error failed")
            return
        if ev is not None:
            log.error("comm: handler failed on event %s (%s): %r", ev.get("seq"), ev.get("type"), err)
        else:
            log.warning("comm: listen: %s", err)

    def handler_for(self, typ: str) -> EventHandler | None:
        if typ == MESSAGE_RECEIVED and self.handler is not None:
            return None
        return self.on_event.get(typ) or self.on_event.get("")

    def accept(self, ev: Event) -> tuple[bool, bool]:
        """Hands an event to the lanes; (fresh, ok): ok is False once stopping."""
        typ = ev.get("type", "")
        it = _Item(ev, conversation_key(ev), None)
        if self.handler_for(typ) is None and not (typ == MESSAGE_RECEIVED and self.handler is not None):
            it.done = True
        if not it.done and typ == MESSAGE_RECEIVED and self.handler is not None:
            try:
                it.msg = self.c.message_of(ev)
            except CommError as e:
                self.report(ev, e)
                it.done = True
        with self.cond:
            if ev["seq"] <= self.accepted:
                return False, not self.stopping
            while (self.in_flight >= self.max_in_flight or len(self.pending) >= MAX_PENDING) and not self.stopping:
                self.cond.wait()
            if self.stopping:
                return False, False
            if it.msg is not None:
                if it.msg.id in self.seen:
                    it.done, it.msg = True, None
                else:
                    self.seen[it.msg.id] = None
                    if len(self.seen) > MAX_SEEN:
                        del self.seen[next(iter(self.seen))]
            self.accepted = ev["seq"]
            self.pending.append(it)
            if it.done:
                self.advance()
                return True, True
            self.in_flight += 1
            lane = self.lanes.get(it.key)
            if lane is not None:
                lane.append(it)
                return True, True
            lane = deque([it])
            self.lanes[it.key] = lane
            t = threading.Thread(target=self.run_lane, args=(it.key, lane), daemon=True)
            self.threads = [x for x in self.threads if x.is_alive()]
            self.threads.append(t)
            t.start()
            return True, True

    def run_lane(self, key: str, lane: deque[_Item]) -> None:
        with self.sem:
            while True:
                with self.cond:
                    if not lane or (self.stopping and lane[0].ev["seq"] > self.frozen):
                        del self.lanes[key]
                        self.in_flight -= len(lane)  # never started: not finished
                        self.cond.notify_all()
                        return
                    it = lane.popleft()
                    self.started = max(self.started, it.ev["seq"])
                self.handle(it)
                with self.cond:
                    it.done = True
                    self.in_flight -= 1
                    self.advance()
                    self.cond.notify_all()
                self.save()

    def handle(self, it: _Item) -> None:
        try:
            if it.msg is not None and self.handler is not None:
                m = it.msg
                typing: _Typing | None = None
                if self.typing_every > 0:
                    typing = _Typing(self.c, m.id, self.typing_every)
                    m = replace(m, _stop_typing=typing.stop)
                try:
                    self.handler(m)
                finally:
                    if typing is not None:
                        typing.stop()
            else:
                h = self.handler_for(it.ev.get("type", ""))
                if h is not None:
                    h(it.ev)
        except Exception as e:
            self.report(it.ev, e)

    def advance(self) -> None:
        """Moves the cursor over finished events; called with cond held."""
        while self.pending and self.pending[0].done:
            self.cursor = self.pending.popleft().ev["seq"]

    def save(self) -> None:
        with self.save_lock:
            with self.cond:
                cur = self.cursor
            if self.store is None or cur <= self.saved:
                return
            try:
                self.store.save(cur)
                self.saved = cur
            except Exception as e:
                self.report(None, CommError(f"comm: listen: save cursor: {e}"))

    def stop(self) -> None:
        with self.cond:
            if not self.stopping:
                self.stopping = True
                self.frozen = self.started
            self.cond.notify_all()


def _retry_project(client: Client, cancel: Cancel, lst: _Listener, interval: float) -> Project | None:
    n = 0
    while True:
        try:
            return client.project()
        except CommError as e:
            if permanent(e):
                raise
            lst.report(None, e)
            if cancel.wait(Backoff(interval, max(30.0, interval)).delay(n)):
                return None
            n += 1


def run_listen(
    client: Client,
    handler: MessageHandler | None,
    *,
    on_event: dict[str, EventHandler],
    on_error: Callable[[Event | None, BaseException], None] | None,
    cursor: CursorStore | str | None,
    start_seq: int,
    poll_interval: float,
    long_poll: float,
    batch: int,
    concurrency: int,
    typing_every: float,
    grace: float,
    stop: threading.Event | None,
    handle_signals: bool,
    websocket: bool = False,
    socket_retry: float = 5.0,
) -> None:
    if handler is None and not on_event:
        raise CommError("comm: listen: no handler")
    poll_interval = poll_interval if poll_interval > 0 else 1.0
    batch = min(batch, 1000) if batch > 0 else 100
    long_poll = min(max(long_poll, 0.0), 60.0)
    lst = _Listener(client, handler, on_event, on_error, concurrency, typing_every)
    cancel = Cancel()
    type_filter = MESSAGE_RECEIVED if not on_event else None

    def halt() -> None:
        cancel.set()  # ends the poll in flight at once
        lst.stop()  # and wakes the poll loop if it waits for room among the handlers

    def on_signal(signum: int, frame: FrameType | None) -> None:
        halt()

    old: dict[signal.Signals, Any] = {}
    if handle_signals and threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            old[s] = signal.signal(s, on_signal)
    watcher: threading.Thread | None = None
    if stop is not None:
        stop_event = stop

        def watch() -> None:
            while not cancel.is_set():
                if stop_event.wait(0.2):
                    halt()
                    return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
    try:
        proj = _retry_project(client, cancel, lst, poll_interval)
        if proj is None:
            return
        lst.store = open_store(cursor, proj["id"])
        cur = start_cursor(lst.store, start_seq, proj)
        lst.cursor = lst.accepted = lst.saved = cur
        failures = 0
        socket_fails = 0
        socket_next = 0.0
        while not cancel.is_set():
            if websocket and time.monotonic() >= socket_next:
                up = 0.0
                began = time.monotonic()
                try:
                    with lst.cond:
                        after = lst.accepted
                    up = follow_socket(
                        client.base_url,
                        client.api_key,
                        after,
                        type_filter,
                        lambda ev: lst.accept(ev)[1],
                        cancel,
                        ssl_context=client._t.ssl_context,  # pyright: ignore[reportPrivateUsage]
                    )
                    err: CommError = CommError("comm: listen: websocket ended")
                except Cancelled:
                    break
                except CommError as e:
                    if cancel.is_set():
                        break
                    if permanent(e):
                        raise
                    err, up = e, time.monotonic() - began
                if cancel.is_set():
                    break
                if up >= 30:
                    socket_fails = 0
                retry = socket_retry * (2 ** min(socket_fails, 4))
                socket_fails += 1
                socket_next = time.monotonic() + retry
                lst.report(None, CommError(f"comm: listen: websocket: {err}; polling, socket again in {retry:g}s"))
                continue
            wait = long_poll
            if websocket:
                wait = max(min(wait, socket_next - time.monotonic()), 0.0)
            began = time.monotonic()
            with lst.cond:
                after = lst.accepted
            try:
                evs = client.events(after, batch, type_filter, wait=wait, cancel=cancel)
            except Cancelled:
                break
            except CommError as e:
                if cancel.is_set():
                    break
                if permanent(e):
                    raise
                lst.report(None, e)
                cancel.wait(Backoff(poll_interval, max(30.0, poll_interval)).delay(failures))
                failures += 1
                continue
            failures = 0
            fresh = 0
            for ev in evs:
                is_new, ok = lst.accept(ev)
                if not ok:
                    break
                fresh += is_new
            if fresh == 0 or (wait <= 0 and len(evs) < batch):
                cancel.wait(poll_interval - (time.monotonic() - began))
    finally:
        cancel.set()
        lst.stop()
        deadline = time.monotonic() + grace
        for t in list(lst.threads):
            t.join(max(deadline - time.monotonic(), 0))
        lst.save()
        for s, h in old.items():
            signal.signal(s, h)


class EventStream:
    """Iterates over the stream's events, long-polling for new ones (Client.stream)."""

    def __init__(
        self,
        client: Client,
        type: str | None,
        *,
        cursor: CursorStore | str | None,
        start_seq: int,
        long_poll: float,
        batch: int,
    ) -> None:
        self._c = client
        self._type = type
        self._cursor_arg = cursor
        self._start_seq = start_seq
        self._wait = min(max(long_poll, 0.0), 60.0)
        self._batch = min(batch, 1000) if batch > 0 else 100
        self._store: CursorStore | None = None
        self._opened = False
        self._after = 0
        self._buf: deque[Event] = deque()
        self._last: int | None = None
        self.cancel = Cancel()
        """Set it (from another thread or a signal handler) to end the iteration."""

    def _open(self) -> None:
        proj = self._c.project()
        self._store = open_store(self._cursor_arg, proj["id"])
        self._after = start_cursor(self._store, self._start_seq, proj)
        self._opened = True

    def commit(self) -> None:
        """Saves the cursor past the event last returned."""
        if self._last is not None and self._store is not None:
            self._store.save(self._last)
        self._last = None

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> Event:
        if not self._opened:
            self._open()
        self.commit()
        while not self._buf:
            if self.cancel.is_set():
                raise StopIteration
            try:
                evs = self._c.events(self._after, self._batch, self._type, wait=self._wait, cancel=self.cancel)
            except Cancelled:
                raise StopIteration from None
            for ev in evs:
                if ev["seq"] > self._after:
                    self._after = ev["seq"]
                    self._buf.append(ev)
            if not evs and self._wait <= 0:
                self.cancel.wait(1.0)
        ev = self._buf.popleft()
        self._last = ev["seq"]
        return ev

    def close(self) -> None:
        """Saves the cursor past the event last returned and ends the iteration."""
        self.commit()
        self.cancel.set()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if et is None:
            self.commit()
        self.cancel.set()
