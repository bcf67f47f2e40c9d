"""The quickstart loop against the real gateway: sandbox, connect test, inject, listen replies, events show
message.sent; in sync and asyncio forms."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from pathlib import Path

import comm_gateway as comm
from conftest import Gateway, Proj, wait_for


def test_quickstart_loop(gateway: Gateway, tmp_path: Path) -> None:
    sb = comm.create_sandbox("quickstart", base_url=gateway.base_url)
    assert sb["api_key"].startswith("comm_sandbox_")
    client = comm.Client(sb["api_key"], gateway.base_url)
    assert client.project()["id"] == sb["project_id"]
    conn = client.connect("test")
    assert conn["channel"] == "test"
    client.inject(conn["id"], "ann", "hello")

    stop = threading.Event()
    seen: list[comm.InboundMessage] = []

    def echo(m: comm.InboundMessage) -> None:
        seen.append(m)
        m.reply("You said: " + m.text)
        stop.set()

    t = threading.Thread(target=client.listen, args=(echo,), kwargs={"stop": stop, "cursor": str(tmp_path / "c")})
    t.start()
    t.join(30)
    assert not t.is_alive()
    assert [m.text for m in seen] == ["hello"]
    assert seen[0].sender == "ann" and seen[0].channel == "test" and seen[0].connection_id == conn["id"]

    def sent() -> list[comm.Event]:
        return client.events(0, 100, comm.MESSAGE_SENT)

    wait_for(lambda: len(sent()) == 1, what="message.sent")
    ev = sent()[0]
    assert ev["type"] == "message.sent" and ev["data"]["message"]["text"] == "You said: hello"
    msgs = client.messages(seen[0].conversation_id)
    assert [(m["direction"], m["text"]) for m in msgs] == [("inbound", "hello"), ("outbound", "You said: hello")]
    types = [e["type"] for e in client.events()]
    assert types[:2] == ["connection.active", "message.received"] and "message.sent" in types
    # The cursor file is the Go client's format, past the handled message.
    assert '"project_id":"' + sb["project_id"] + '"' in (tmp_path / "c").read_text()


def test_sync_stream(proj: Proj, tmp_path: Path) -> None:
    c = proj.client
    conn = c.connect("test")
    c.inject(conn["id"], "bob", "one")
    c.inject(conn["id"], "bob", "two")
    cur = str(tmp_path / "cursor")
    got: list[str] = []
    with c.stream(comm.MESSAGE_RECEIVED, cursor=cur, long_poll=5) as s:
        for ev in s:
            got.append(c.message_of(ev).text)
            if len(got) == 2:
                break
    assert got == ["one", "two"]
    saved = comm.FileCursorStore(cur).load()
    assert saved == c.events(0, 100, comm.MESSAGE_RECEIVED)[-1]["seq"]
    # An exception in the loop body leaves its event unsaved; the next run gets it again.
    c.inject(conn["id"], "bob", "three")
    try:
        with c.stream(comm.MESSAGE_RECEIVED, cursor=cur, long_poll=5) as s:
            for ev in s:
                raise RuntimeError(c.message_of(ev).text)
    except RuntimeError as e:
        assert str(e) == "three"
    assert comm.FileCursorStore(cur).load() == saved
    with c.stream(comm.MESSAGE_RECEIVED, cursor=cur, long_poll=5) as s:
        assert c.message_of(next(s)).text == "three"
    assert comm.FileCursorStore(cur).load() > saved


def test_async_listen_and_stream(proj: Proj, tmp_path: Path) -> None:
    async def main() -> None:
        ac = comm.AsyncClient(proj.sandbox["api_key"], proj.base_url)
        conn = await ac.connect("test")
        await ac.inject(conn["id"], "cy", "async hello")
        stop = asyncio.Event()
        got: list[str] = []

        async def echo(m: comm.AsyncInboundMessage) -> None:
            got.append(m.text)
            await m.reply("You said: " + m.text)
            stop.set()

        await asyncio.wait_for(ac.listen(echo, stop=stop, cursor=str(tmp_path / "acur")), 30)
        assert got == ["async hello"]

        async def sent() -> list[comm.Event]:
            return await ac.events(0, 100, comm.MESSAGE_SENT)

        for _ in range(200):
            if await sent():
                break
            await asyncio.sleep(0.05)
        evs = await sent()
        assert evs and evs[0]["data"]["message"]["text"] == "You said: async hello"

        # async for over the stream, from the start; the cursor is saved past the last event handled.
        texts: list[str] = []
        cur = str(tmp_path / "stream-cursor")
        last = 0
        async with ac.stream(cursor=cur, long_poll=5) as s:
            async for ev in s:
                last = ev["seq"]
                if ev["type"] in (comm.MESSAGE_RECEIVED, comm.MESSAGE_SENT):
                    texts.append(ev["data"]["message"]["text"])
                if len(texts) == 2:
                    break
        assert texts == ["async hello", "You said: async hello"]
        assert comm.FileCursorStore(cur).load() == last
        # An exception in the loop body leaves its event unsaved: it comes again.
        await ac.inject(conn["id"], "cy", "later")
        try:
            async with ac.stream(cursor=cur, long_poll=1) as s:
                async for ev in s:
                    raise RuntimeError(f"failed on {ev['seq']}")
        except RuntimeError:
            pass
        assert comm.FileCursorStore(cur).load() == last

        # Cancelling a listener parked in a long poll ends it at once (its socket is closed).
        task = asyncio.create_task(ac.listen(echo, cursor=None, start_seq=-1, long_poll=60))
        await asyncio.sleep(1.0)
        began = time.monotonic()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        assert time.monotonic() - began < 3, "cancel waited for the long poll"

    asyncio.run(main())


def ignore(m: comm.InboundMessage) -> None:
    pass


def test_sync_listen_stops_promptly(proj: Proj) -> None:
    stop = threading.Event()
    t = threading.Thread(
        target=proj.client.listen,
        args=(ignore,),
        kwargs={"stop": stop, "cursor": None, "start_seq": -1, "long_poll": 60},
    )
    t.start()
    time.sleep(1.0)
    began = time.monotonic()
    stop.set()
    t.join(10)
    assert not t.is_alive() and time.monotonic() - began < 3


def test_async_listen_over_websocket(proj: Proj) -> None:
    # As the sync test in test_listen: polling is made useless, so the message comes through the socket.
    async def main() -> None:
        ac = comm.AsyncClient(proj.sandbox["api_key"], proj.base_url)
        conn = await ac.connect("test")
        stop = asyncio.Event()
        got: list[str] = []
        errors: list[BaseException] = []

        async def h(m: comm.AsyncInboundMessage) -> None:
            got.append(m.text)
            await m.reply("over the socket")
            stop.set()

        def on_error(ev: comm.Event | None, e: BaseException) -> None:
            errors.append(e)

        task = asyncio.create_task(
            ac.listen(
                h,
                stop=stop,
                cursor=None,
                start_seq=-1,
                websocket=True,
                long_poll=0,
                poll_interval=60,
                on_error=on_error,
                handle_signals=False,
            )
        )
        await asyncio.sleep(1.0)
        began = time.monotonic()
        await ac.inject(conn["id"], "ann", "async socket")
        await asyncio.wait_for(task, 15)
        assert got == ["async socket"] and time.monotonic() - began < 10
        assert not errors, errors

        # Cancelling a listener on the socket ends it at once too.
        task = asyncio.create_task(ac.listen(h, cursor=None, start_seq=-1, websocket=True, handle_signals=False))
        await asyncio.sleep(1.0)
        began = time.monotonic()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert time.monotonic() - began < 3

    asyncio.run(main())
