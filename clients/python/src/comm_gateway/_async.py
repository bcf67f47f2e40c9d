"""AsyncClient: the same calls for asyncio, and listen()/stream() as coroutines and async iterators.

Each HTTP call runs the synchronous client's call in a worker thread (asyncio.to_thread); the long polls
of listen() and stream() are given a Cancel token, so cancelling the task closes their socket at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import signal
import ssl
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from ._client import Client, InboundMessage
from ._cursor import CursorStore
from ._errors import CommError
from ._http import DEFAULT_RETRIES, DEFAULT_TIMEOUT, Backoff, Cancel, Cancelled
from ._listen import MAX_PENDING, MAX_SEEN, conversation_key, open_store, permanent, start_cursor
from ._types import MESSAGE_RECEIVED, AttachmentInfo, Event, Message, Project, Template, TypingState
from ._ws import follow_socket

log = logging.getLogger("comm_gateway")

P = ParamSpec("P")
R = TypeVar("R")


def _wrap(f: Callable[Concatenate[Client, P], R]) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, R]]:
    async def call(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(f, self.sync, *args, **kwargs)

    call.__name__ = f.__name__
    call.__qualname__ = "AsyncClient." + f.__name__
    call.__doc__ = f.__doc__
    return call


AsyncMessageHandler = Callable[["AsyncInboundMessage"], Awaitable[Any]]
AsyncEventHandler = Callable[[Event], Awaitable[Any]]


@dataclass
class AsyncInboundMessage:
    """An inbound message within AsyncClient.listen: ``await m.reply(...)``."""

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
    client: AsyncClient = field(repr=False)
    _stop_typing: Callable[[], Awaitable[None]] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, m: InboundMessage, client: AsyncClient) -> AsyncInboundMessage:
        return cls(
            m.id,
            m.conversation_id,
            m.connection_id,
            m.channel,
            m.sender,
            m.text,
            m.subject,
            m.html,
            m.attachments,
            m.details,
            m.customer_id,
            m.agent_id,
            m.event,
            client,
        )

    async def reply(
        self, text: str = "", *, html: str = "", subject: str = "", template: Template | None = None
    ) -> Message:
        """Answers the message; within listen() it first stops the typing indicator."""
        if self._stop_typing is not None:
            await self._stop_typing()
        return await self.client.reply(self.id, text, html=html, subject=subject, template=template)

    async def typing(self) -> TypingState:
        return await self.client.typing(self.id)


class AsyncClient:
    """Client for asyncio: every method of Client as a coroutine, configured the same way."""

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
        self.sync = Client(
            api_key,
            base_url,
            dotenv=dotenv,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            ssl_context=ssl_context,
        )

    @property
    def base_url(self) -> str:
        return self.sync.base_url

    project = _wrap(Client.project)
    events = _wrap(Client.events)
    set_webhook = _wrap(Client.set_webhook)
    get_webhook = _wrap(Client.get_webhook)
    delete_webhook = _wrap(Client.delete_webhook)
    replay_webhook = _wrap(Client.replay_webhook)
    webhook_attempts = _wrap(Client.webhook_attempts)
    channels = _wrap(Client.channels)
    connect = _wrap(Client.connect)
    connect_imessage = _wrap(Client.connect_imessage)
    connections = _wrap(Client.connections)
    connection = _wrap(Client.connection)
    delete_connection = _wrap(Client.delete_connection)
    bindings = _wrap(Client.bindings)
    unbind = _wrap(Client.unbind)
    inject = _wrap(Client.inject)
    inject_receipt = _wrap(Client.inject_receipt)
    conversations = _wrap(Client.conversations)
    conversation = _wrap(Client.conversation)
    messages = _wrap(Client.messages)
    message = _wrap(Client.message)
    reply = _wrap(Client.reply)
    typing = _wrap(Client.typing)
    send = _wrap(Client.send)
    attachment = _wrap(Client.attachment)
    add_domain = _wrap(Client.add_domain)
    domains = _wrap(Client.domains)
    domain = _wrap(Client.domain)
    verify_domain = _wrap(Client.verify_domain)
    delete_domain = _wrap(Client.delete_domain)
    account = _wrap(Client.account)
    ledger = _wrap(Client.ledger)
    keys = _wrap(Client.keys)
    create_key = _wrap(Client.create_key)
    revoke_key = _wrap(Client.revoke_key)

    def message_of(self, event: Event) -> AsyncInboundMessage:
        """The inbound message of a message.received event, bound to this client."""
        return AsyncInboundMessage.of(self.sync.message_of(event), self)

    async def _events(self, after: int, limit: int, typ: str | None, wait: float) -> list[Event]:
        cancel = Cancel()
        fut = asyncio.ensure_future(asyncio.to_thread(self.sync.events, after, limit, typ, wait=wait, cancel=cancel))
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            cancel.set()
            try:
                await fut
            except (Cancelled, CommError):
                pass
            raise

    async def _project(self, interval: float, report: Callable[[Event | None, BaseException], None]) -> Project:
        n = 0
        while True:
            try:
                return await self.project()
            except CommError as e:
                if permanent(e):
                    raise
                report(None, e)
                await asyncio.sleep(Backoff(interval, max(30.0, interval)).delay(n))
                n += 1

    def stream(
        self,
        type: str | None = None,
        *,
        cursor: CursorStore | str | None = ".comm-cursor",
        start_seq: int = 0,
        long_poll: float = 25.0,
        batch: int = 100,
    ) -> AsyncEventStream:
        """``async for event in client.stream(): ...``: the stream's events (of one ``type``), waiting for
        new ones. The cursor (as in listen) is saved past an event when the next one is asked for, or when
        the stream is closed after the loop body finished (``async with client.stream() as s``,
        ``await s.aclose()``); an exception in the loop leaves the event unsaved, so it comes again after a
        restart."""
        return AsyncEventStream(self, type, cursor=cursor, start_seq=start_seq, long_poll=long_poll, batch=batch)

    async def listen(
        self,
        handler: AsyncMessageHandler | None = None,
        *,
        on_event: dict[str, AsyncEventHandler] | None = None,
        on_error: Callable[[Event | None, BaseException], None] | None = None,
        cursor: CursorStore | str | None = ".comm-cursor",
        start_seq: int = 0,
        poll_interval: float = 1.0,
        long_poll: float = 25.0,
        batch: int = 100,
        concurrency: int = 8,
        typing_every: float = 5.0,
        grace: float = 30.0,
        stop: asyncio.Event | None = None,
        handle_signals: bool = True,
        websocket: bool = False,
        socket_retry: float = 5.0,
    ) -> None:
        """Client.listen for asyncio: ``await client.listen(handler)`` with an async handler. It runs until
        ``stop`` is set, SIGINT or SIGTERM arrives (with ``handle_signals``, in the main thread, on loops
        that support signal handlers), or the task is cancelled; then running handlers get ``grace``
        seconds, the cursor is saved, and (when cancelled) CancelledError is raised again. Same cursor,
        ordering, dedup, typing, error and ``websocket`` rules as Client.listen."""
        if handler is None and not on_event:
            raise CommError("comm: listen: no handler")
        events = on_event or {}
        poll_interval = poll_interval if poll_interval > 0 else 1.0
        batch = min(batch, 1000) if batch > 0 else 100
        long_poll = min(max(long_poll, 0.0), 60.0)
        type_filter = MESSAGE_RECEIVED if not events else None

        def report(ev: Event | None, err: BaseException) -> None:
            if on_error is not None:
                try:
                    on_error(ev, err)
                except Exception:
                    log.exception("comm: on_error failed")
            elif ev is not None:
                log.error("comm: handler failed on event %s (%s): %r", ev.get("seq"), ev.get("type"), err)
            else:
                log.warning("comm: listen: %s", err)

        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        signals: list[signal.Signals] = []
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, stop.set)
                    signals.append(sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass
        try:
            await self._listen(
                handler,
                events,
                report,
                stop,
                websocket,
                socket_retry if socket_retry > 0 else 5.0,
                cursor,
                start_seq,
                poll_interval,
                long_poll,
                batch,
                concurrency,
                typing_every,
                grace,
                type_filter,
            )
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    async def _listen(
        self,
        handler: AsyncMessageHandler | None,
        on_event: dict[str, AsyncEventHandler],
        report: Callable[[Event | None, BaseException], None],
        stop: asyncio.Event,
        websocket: bool,
        socket_retry: float,
        cursor: CursorStore | str | None,
        start_seq: int,
        poll_interval: float,
        long_poll: float,
        batch: int,
        concurrency: int,
        typing_every: float,
        grace: float,
        type_filter: str | None,
    ) -> None:
        def handler_for(typ: str) -> AsyncEventHandler | None:
            if typ == MESSAGE_RECEIVED and handler is not None:
                return None
            return on_event.get(typ) or on_event.get("")

        proj = await self._project(poll_interval, report)
        store = open_store(cursor, proj["id"])
        cur = start_cursor(store, start_seq, proj)
        state = _State(cursor=cur, accepted=cur, saved=cur)
        sem = asyncio.Semaphore(max(concurrency, 1))
        changed = asyncio.Event()
        max_in_flight = max(4 * concurrency, 16)

        def save() -> None:
            if store is not None and state.cursor > state.saved:
                try:
                    store.save(state.cursor)
                    state.saved = state.cursor
                except Exception as e:
                    report(None, CommError(f"comm: listen: save cursor: {e}"))

        def advance() -> None:
            while state.pending and state.pending[0].done:
                state.cursor = state.pending.popleft().ev["seq"]
            save()
            changed.set()

        async def typing_loop(message_id: str, done: asyncio.Event) -> None:
            while not done.is_set():
                try:
                    await self.typing(message_id)
                except CommError as e:
                    log.debug("comm: typing indicator for %s: %s", message_id, e)
                    if permanent(e):
                        return
                try:
                    await asyncio.wait_for(done.wait(), typing_every)
                except asyncio.TimeoutError:
                    pass

        async def handle(it: _AItem) -> None:
            try:
                if it.msg is not None and handler is not None:
                    m = it.msg
                    stop_typing: Callable[[], Awaitable[None]] | None = None
                    if typing_every > 0:
                        done = asyncio.Event()
                        task = asyncio.create_task(typing_loop(m.id, done))

                        async def stop_typing_fn() -> None:
                            done.set()
                            await task

                        stop_typing = stop_typing_fn
                        m = replace(m, _stop_typing=stop_typing)  # a copy per handler call
                    try:
                        await _maybe_await(handler(m))
                    finally:
                        if stop_typing is not None:
                            await stop_typing()
                else:
                    h = handler_for(it.ev.get("type", ""))
                    if h is not None:
                        await _maybe_await(h(it.ev))
            except Exception as e:
                report(it.ev, e)

        async def run_lane(key: str, lane: deque[_AItem]) -> None:
            async with sem:
                while True:
                    if not lane or (state.stopping and lane[0].ev["seq"] > state.frozen):
                        del state.lanes[key]
                        state.in_flight -= len(lane)
                        changed.set()
                        return
                    it = lane.popleft()
                    state.started = max(state.started, it.ev["seq"])
                    await handle(it)
                    it.done = True
                    state.in_flight -= 1
                    advance()

        async def accept(ev: Event) -> bool:
            if ev["seq"] <= state.accepted:
                return False
            while state.in_flight >= max_in_flight or len(state.pending) >= MAX_PENDING:
                changed.clear()
                await changed.wait()
            typ = ev.get("type", "")
            it = _AItem(ev, conversation_key(ev))
            if handler_for(typ) is None and not (typ == MESSAGE_RECEIVED and handler is not None):
                it.done = True
            if not it.done and typ == MESSAGE_RECEIVED and handler is not None:
                try:
                    it.msg = self.message_of(ev)
                except CommError as e:
                    report(ev, e)
                    it.done = True
                if it.msg is not None:
                    if it.msg.id in state.seen:
                        it.done, it.msg = True, None
                    else:
                        state.seen[it.msg.id] = None
                        if len(state.seen) > MAX_SEEN:
                            del state.seen[next(iter(state.seen))]
            state.accepted = ev["seq"]
            state.pending.append(it)
            if it.done:
                advance()
                return True
            state.in_flight += 1
            lane = state.lanes.get(it.key)
            if lane is not None:
                lane.append(it)
                return True
            lane = deque([it])
            state.lanes[it.key] = lane
            state.tasks.add(asyncio.create_task(run_lane(it.key, lane)))
            return True

        async def follow_socket_once() -> float:
            """Runs the subscription in a worker thread; its events come through a bounded queue, so the
            socket waits while the lanes are full. Returns how long it was up; raises how it failed."""
            loop = asyncio.get_running_loop()
            queue: asyncio.Queue[Event] = asyncio.Queue()
            room = threading.BoundedSemaphore(MAX_PENDING)
            cancel = Cancel()

            def hand_over(ev: Event) -> bool:
                while not room.acquire(timeout=0.2):
                    if cancel.is_set():
                        return False
                loop.call_soon_threadsafe(queue.put_nowait, ev)
                return not cancel.is_set()

            t = self.sync._t  # pyright: ignore[reportPrivateUsage]
            fut = asyncio.ensure_future(
                asyncio.to_thread(
                    follow_socket,
                    t.base_url,
                    t.api_key,
                    state.accepted,
                    type_filter,
                    hand_over,
                    cancel,
                    ssl_context=t.ssl_context,
                )
            )
            try:
                while True:
                    get = asyncio.ensure_future(queue.get())
                    await asyncio.wait({get, fut}, return_when=asyncio.FIRST_COMPLETED)
                    if not get.done():
                        get.cancel()
                        while not queue.empty():  # events handed over before the socket ended
                            await accept(queue.get_nowait())
                            room.release()
                        return await fut
                    await accept(get.result())
                    room.release()
            finally:
                cancel.set()
                if not fut.done():
                    with contextlib.suppress(Exception):
                        await asyncio.shield(fut)

        async def follow() -> None:
            failures = 0
            socket_fails = 0
            socket_next = 0.0
            loop = asyncio.get_running_loop()
            while True:
                if websocket and loop.time() >= socket_next:
                    began = loop.time()
                    err: BaseException = CommError("comm: listen: websocket ended")
                    try:
                        await follow_socket_once()
                    except CommError as e:
                        if permanent(e):
                            raise
                        err = e
                    if loop.time() - began >= 30:
                        socket_fails = 0
                    retry = socket_retry * (2 ** min(socket_fails, 4))
                    socket_fails += 1
                    socket_next = loop.time() + retry
                    report(None, CommError(f"comm: listen: websocket: {err}; polling, socket again in {retry:g}s"))
                    continue
                wait = long_poll
                if websocket:
                    wait = max(min(wait, socket_next - loop.time()), 0.0)
                began = loop.time()
                try:
                    evs = await self._events(state.accepted, batch, type_filter, wait)
                except CommError as e:
                    if permanent(e):
                        raise
                    report(None, e)
                    await asyncio.sleep(Backoff(poll_interval, max(30.0, poll_interval)).delay(failures))
                    failures += 1
                    continue
                failures = 0
                fresh = 0
                for ev in evs:
                    fresh += await accept(ev)
                if fresh == 0 or (wait <= 0 and len(evs) < batch):
                    await asyncio.sleep(max(poll_interval - (loop.time() - began), 0))

        follower = asyncio.create_task(follow())
        waiters: set[asyncio.Future[Any]] = {follower}
        stopper = asyncio.create_task(stop.wait())
        waiters.add(stopper)
        cancelled = False
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            cancelled = True
        follower.cancel()
        stopper.cancel()
        err: BaseException | None = None
        try:
            await follower
        except asyncio.CancelledError:
            pass
        except Exception as e:
            err = e
        state.stopping, state.frozen = True, state.started
        await _drain(state, grace)
        save()
        if err is not None:
            raise err
        if cancelled:
            raise asyncio.CancelledError


async def _drain(state: _State, grace: float) -> None:
    tasks = {t for t in state.tasks if not t.done()}
    if tasks:
        _, late = await asyncio.wait(tasks, timeout=grace)
        for t in late:
            t.cancel()


async def _maybe_await(v: Any) -> None:
    if inspect.isawaitable(v):
        await v


@dataclass
class _AItem:
    ev: Event
    key: str
    msg: AsyncInboundMessage | None = None
    done: bool = False


@dataclass
class _State:
    cursor: int
    accepted: int
    saved: int
    pending: deque[_AItem] = field(default_factory=lambda: deque[_AItem]())
    lanes: dict[str, deque[_AItem]] = field(default_factory=lambda: dict[str, deque[_AItem]]())
    tasks: set[asyncio.Task[None]] = field(default_factory=lambda: set[asyncio.Task[None]]())
    seen: dict[str, None] = field(default_factory=lambda: dict[str, None]())
    in_flight: int = 0
    started: int = 0
    stopping: bool = False
    frozen: int = 0


class AsyncEventStream:
    """Iterates over the stream's events with ``async for``, long-polling for new ones (AsyncClient.stream)."""

    def __init__(
        self,
        client: AsyncClient,
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
        self._closed = False
        self._after = 0
        self._buf: deque[Event] = deque()
        self._last: int | None = None

    def commit(self) -> None:
        """Saves the cursor past the event last returned."""
        if self._last is not None and self._store is not None:
            self._store.save(self._last)
        self._last = None

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> Event:
        if not self._opened:
            proj = await self._c.project()
            self._store = open_store(self._cursor_arg, proj["id"])
            self._after = start_cursor(self._store, self._start_seq, proj)
            self._opened = True
        self.commit()
        while not self._buf:
            if self._closed:
                raise StopAsyncIteration
            evs = await self._c._events(self._after, self._batch, self._type, self._wait)  # pyright: ignore[reportPrivateUsage]
            for ev in evs:
                if ev["seq"] > self._after:
                    self._after = ev["seq"]
                    self._buf.append(ev)
            if not evs and self._wait <= 0:
                await asyncio.sleep(1.0)
        ev = self._buf.popleft()
        self._last = ev["seq"]
        return ev

    async def aclose(self) -> None:
        """Saves the cursor past the event last returned and ends the iteration."""
        self.commit()
        self._closed = True

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if et is None:
            self.commit()
        self._closed = True
