"""listen(): the cursor across restarts (each event handled once), a handler's exception, ordering."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import comm_gateway as comm
from conftest import Proj


def run_until(client: comm.Client, cursor: str, want: int, handled: list[str], **kw: object) -> None:
    """Runs listen until `want` more messages were handled (or 2 s of quiet when want is 0)."""
    stop = threading.Event()
    start = len(handled)

    def h(m: comm.InboundMessage) -> None:
        handled.append(m.text)
        if len(handled) - start >= want:
            stop.set()

    if want == 0:
        threading.Timer(2.0, stop.set).start()
    t = threading.Thread(target=client.listen, args=(h,), kwargs={"stop": stop, "cursor": cursor, **kw})
    t.start()
    t.join(30)
    assert not t.is_alive()


def test_cursor_survives_restart(proj: Proj, tmp_path: Path) -> None:
    c = proj.client
    conn = c.connect("test")
    cursor = str(tmp_path / ".comm-cursor")
    for i in range(3):
        c.inject(conn["id"], f"p{i}", f"first {i}")
    handled: list[str] = []
    run_until(c, cursor, 3, handled, typing_every=0)
    assert sorted(handled) == ["first 0", "first 1", "first 2"]
    saved = comm.FileCursorStore(cursor, c.project()["id"]).load()
    assert saved == c.project()["last_seq"]
    for i in range(2):
        c.inject(conn["id"], f"p{i}", f"second {i}")
    run_until(c, cursor, 2, handled, typing_every=0)
    run_until(c, cursor, 0, handled, typing_every=0)  # a third run finds nothing new
    assert sorted(handled) == ["first 0", "first 1", "first 2", "second 0", "second 1"]
    assert len(handled) == len(set(handled))
    # A cursor file of another project is refused, not silently used.
    other = comm.FileCursorStore(cursor, "proj_other")
    try:
        other.load()
    except comm.CommError as e:
        assert "belongs to project" in str(e)
    else:
        raise AssertionError("cursor of another project accepted")


def test_handler_exception_does_not_stop_listen(proj: Proj, tmp_path: Path) -> None:
    c = proj.client
    conn = c.connect("test")
    c.inject(conn["id"], "ann", "boom")
    c.inject(conn["id"], "bob", "fine")
    errors: list[tuple[int | None, str]] = []
    handled: list[str] = []
    stop = threading.Event()

    def h(m: comm.InboundMessage) -> None:
        handled.append(m.text)
        if m.text == "boom":
            raise RuntimeError("handler blew up")
        m.reply("ok")
        stop.set()

    def on_error(ev: comm.Event | None, err: BaseException) -> None:
        errors.append((ev["seq"] if ev else None, str(err)))

    c.listen(h, on_error=on_error, stop=stop, cursor=str(tmp_path / "cur"), handle_signals=False)
    assert sorted(handled) == ["boom", "fine"]
    assert len(errors) == 1 and errors[0][1] == "handler blew up" and errors[0][0] is not None
    # The failed event counts as handled: the cursor is past both.
    seqs = [e["seq"] for e in c.events(0, 100, comm.MESSAGE_RECEIVED)]
    assert comm.FileCursorStore(str(tmp_path / "cur")).load() >= max(seqs)


def test_order_within_conversation_and_typing(proj: Proj) -> None:
    c = proj.client
    conn = c.connect("test")
    for i in range(4):
        c.inject(conn["id"], "same-person", f"m{i}")
    c.inject(conn["id"], "other", "x")
    order: list[str] = []
    typing_seen: list[bool] = []
    stop = threading.Event()
    running = 0
    lock = threading.Lock()
    overlap = False

    def h(m: comm.InboundMessage) -> None:
        nonlocal running, overlap
        if m.sender == "same-person":
            with lock:
                running += 1
                overlap = overlap or running > 1
            time.sleep(0.3)
            typing_seen.append(c.conversation(m.conversation_id)["typing"])
            order.append(m.text)
            with lock:
                running -= 1
        if len(order) == 4:
            stop.set()

    c.listen(h, stop=stop, cursor=None, handle_signals=False)
    assert order == ["m0", "m1", "m2", "m3"] and not overlap
    assert all(typing_seen), typing_seen


def test_listen_over_websocket(proj: Proj) -> None:
    # Polling is made too slow to matter (no long poll, 60 s between polls): the message arrives through
    # the GraphQL subscription.
    c = proj.client
    conn = c.connect("test")
    errors: list[BaseException] = []
    got: list[str] = []
    stop = threading.Event()

    def on_error(ev: comm.Event | None, e: BaseException) -> None:
        errors.append(e)

    def h(m: comm.InboundMessage) -> None:
        got.append(m.text)
        assert len(m.html) == 60000
        m.reply("over the socket")
        stop.set()

    t = threading.Thread(
        target=c.listen,
        args=(h,),
        kwargs={
            "stop": stop,
            "cursor": None,
            "websocket": True,
            "long_poll": 0,
            "poll_interval": 60,
            "on_error": on_error,
            "start_seq": -1,
        },
    )
    t.start()
    time.sleep(1.0)
    began = time.monotonic()
    big = "y" * 60000  # text and html: an event over 64 KiB, a frame with a 64-bit length
    c.inject(conn["id"], "ann", "socket hello", html=big)
    t.join(20)
    assert not t.is_alive()
    assert got == ["socket hello"] and time.monotonic() - began < 10
    assert not errors, errors


def test_websocket_failure_falls_back_to_polling(proj: Proj, monkeypatch: pytest.MonkeyPatch) -> None:
    import comm_gateway._listen as listen_mod

    tries: list[int] = []

    def broken(*args: object, **kw: object) -> float:
        tries.append(1)
        raise comm.ConnectionFailed("comm: websocket: refused (test)")

    monkeypatch.setattr(listen_mod, "follow_socket", broken)
    c = proj.client
    conn = c.connect("test")
    c.inject(conn["id"], "ann", "polled")
    reported: list[str] = []
    got: list[str] = []
    stop = threading.Event()

    def on_error(ev: comm.Event | None, e: BaseException) -> None:
        reported.append(str(e))

    def h(m: comm.InboundMessage) -> None:
        got.append(m.text)
        stop.set()

    c.listen(h, stop=stop, cursor=None, websocket=True, socket_retry=0.2, on_error=on_error, handle_signals=False)
    assert got == ["polled"] and tries
    assert "polling, socket again in 0.2s" in reported[0]


def test_revoked_key_ends_listen(proj: Proj) -> None:
    # A permanent error (the key revoked while listening) ends listen with the typed error.
    c = proj.client
    nk = c.create_key("listener")
    assert nk["api_key"] and nk["kind"] == "sandbox"
    listener = comm.Client(nk["api_key"], proj.base_url)
    raised: list[BaseException] = []

    def run() -> None:
        try:
            listener.listen(print, cursor=None, long_poll=1, handle_signals=False)
        except comm.CommError as e:
            raised.append(e)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.5)
    revoked = c.revoke_key(nk["id"])
    assert revoked["revoked_at"]
    t.join(15)
    assert not t.is_alive()
    assert len(raised) == 1 and isinstance(raised[0], comm.Unauthenticated), raised
    listed = {k["id"]: k for k in c.keys()}  # noqa: SIM118 - Client.keys, not dict.keys
    assert listed[nk["id"]]["revoked_at"] and not listed[nk["id"]]["current"]
