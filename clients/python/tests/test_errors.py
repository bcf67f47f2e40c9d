"""Typed errors from the real gateway, and the retry rules against a local stub."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

import comm_gateway as comm
from conftest import Gateway, Proj


def test_unauthenticated(gateway: Gateway) -> None:
    c = comm.Client("comm_sandbox_not_a_real_key", gateway.base_url)
    with pytest.raises(comm.Unauthenticated) as ei:
        c.project()
    e = ei.value
    assert e.status == 401 and e.code == "unauthenticated" and e.message and e.request_id.startswith("req_")
    assert isinstance(e, comm.APIError) and isinstance(e, comm.CommError)


def test_payment_required_on_connect_imessage(proj: Proj) -> None:
    with pytest.raises(comm.PaymentRequired) as ei:
        proj.client.connect_imessage()
    e = ei.value
    assert e.status == 402 and e.code == "payment_required"
    assert "sign" in e.message and "login" in e.message
    assert "comm: 402 payment_required" in str(e)


def test_not_found_and_bad_request(proj: Proj) -> None:
    with pytest.raises(comm.NotFound) as nf:
        proj.client.message("msg_doesnotexist")
    assert nf.value.status == 404 and nf.value.code == "not_found" and nf.value.request_id
    with pytest.raises(comm.BadRequest) as br:
        proj.client.events(limit=5000)
    assert br.value.status == 400 and br.value.code == "invalid_parameter" and br.value.param == "limit"
    with pytest.raises(comm.BadRequest) as br2:
        proj.client.connect("no-such-channel")
    assert br2.value.param == "channel"


@dataclass
class Stub:
    """A local HTTP server answering `failures` 503s (with an optional Retry-After), then 200 {}."""

    failures: int
    retry_after: str = ""
    hits: list[tuple[str, str, str]] = field(default_factory=lambda: list[tuple[str, str, str]]())
    url: str = ""


@pytest.fixture
def stub() -> Iterator[Stub]:
    st = Stub(failures=2)

    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def answer(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                self.rfile.read(n)
            st.hits.append((self.command, self.path, self.headers.get("Idempotency-Key") or ""))
            if len(st.hits) <= st.failures:
                body = b'{"error":{"code":"unavailable","message":"try later","request_id":"req_stub"}}'
                self.send_response(503)
                if st.retry_after:
                    self.send_header("Retry-After", st.retry_after)
            else:
                body = b'{"id":"x","project_id":"p","api_key":"k","last_seq":0}'
                self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = answer

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    st.url = f"http://127.0.0.1:{srv.server_address[1]}"
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield st
    srv.shutdown()
    srv.server_close()


def test_get_retried_on_503(stub: Stub) -> None:
    c = comm.Client("k", stub.url, backoff=(0.01, 0.05))
    assert c.project()["id"] == "x"
    assert [h[0] for h in stub.hits] == ["GET", "GET", "GET"]


def test_retries_give_up_with_the_error(stub: Stub) -> None:
    stub.failures = 100
    c = comm.Client("k", stub.url, retries=2, backoff=(0.01, 0.05))
    with pytest.raises(comm.Unavailable) as ei:
        c.project()
    assert ei.value.status == 503 and ei.value.request_id == "req_stub" and len(stub.hits) == 3


def test_retry_after_honoured(stub: Stub) -> None:
    stub.failures, stub.retry_after = 1, "1"
    c = comm.Client("k", stub.url, backoff=(0.01, 0.05))
    began = time.monotonic()
    c.project()
    assert time.monotonic() - began >= 0.95 and len(stub.hits) == 2


def test_post_without_idempotency_key_never_retried(stub: Stub) -> None:
    with pytest.raises(comm.Unavailable):
        comm.create_sandbox("x", base_url=stub.url)
    assert [h[:2] for h in stub.hits] == [("POST", "/v1/projects/sandbox")]
    assert stub.hits[0][2] == ""
    stub.hits.clear()
    c = comm.Client("k", stub.url, backoff=(0.01, 0.05))
    with pytest.raises(comm.Unavailable):
        c.verify_domain("dom_1")
    assert len(stub.hits) == 1


def test_keyed_post_retried_with_one_key(stub: Stub) -> None:
    c = comm.Client("k", stub.url, backoff=(0.01, 0.05))
    c.reply("msg_1", "hi")
    assert [h[:2] for h in stub.hits] == [("POST", "/v1/messages/msg_1/reply")] * 3
    keys = {h[2] for h in stub.hits}
    assert len(keys) == 1 and next(iter(keys)).startswith("py_")
    stub.hits.clear()
    c.send("conn_1", "ann", "hi")
    assert len(stub.hits) == 3 and len({h[2] for h in stub.hits}) == 1 and stub.hits[0][2] not in keys


def test_connection_refused_is_connection_failed() -> None:
    c = comm.Client("k", "http://127.0.0.1:9", retries=1, backoff=(0.01, 0.02))
    with pytest.raises(comm.ConnectionFailed):
        c.project()
