"""verify_webhook against real deliveries of the gateway, and the Standard Webhooks reference vectors."""

from __future__ import annotations

import base64
import http.server
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

import comm_gateway as comm
from conftest import Proj, wait_for

SECRET = "whsec_" + base64.b64encode(b"python client test secret").decode()


@dataclass
class Receiver:
    url: str = ""
    events: list[comm.Event] = field(default_factory=lambda: list[comm.Event]())
    raw: list[tuple[dict[str, str], bytes]] = field(default_factory=lambda: list[tuple[dict[str, str], bytes]]())
    statuses: list[int] = field(default_factory=lambda: list[int]())
    fail_next: int = 0


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rc = Receiver()

    def on_event(ev: comm.Event) -> None:
        if rc.fail_next:
            rc.fail_next -= 1
            raise RuntimeError("not now")
        rc.events.append(ev)

    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            rc.raw.append((dict(self.headers.items()), body))
            status, text = comm.handle_webhook(SECRET, self.command, self.headers.items(), body, on_event)
            rc.statuses.append(status)
            self.send_response(status)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text.encode())

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    rc.url = f"http://127.0.0.1:{srv.server_address[1]}/hook"
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield rc
    srv.shutdown()
    srv.server_close()


def test_real_deliveries_verify(proj: Proj, receiver: Receiver) -> None:
    c = proj.client
    receiver.fail_next = 1  # the first delivery fails (500): the gateway delivers it again
    wh = c.set_webhook(receiver.url, SECRET)
    assert wh["url"] == receiver.url and wh["status"] == "active" and not wh.get("secret")
    assert c.get_webhook()["id"] == wh["id"]
    conn = c.connect("test")
    c.inject(conn["id"], "ann", "pushed")
    wait_for(lambda: any(e["type"] == "message.received" for e in receiver.events), 30, "push delivery")
    ev = next(e for e in receiver.events if e["type"] == "message.received")
    assert c.message_of(ev).text == "pushed"
    assert 500 in receiver.statuses and 204 in receiver.statuses
    # The same real delivery checked directly; altered, it does not verify.
    headers, body = receiver.raw[-1]
    assert comm.verify_webhook(headers, body, SECRET)["seq"] > 0
    with pytest.raises(comm.WebhookVerificationError):
        comm.verify_webhook(headers, body.replace(b"}", b" }", 1), SECRET)
    with pytest.raises(comm.WebhookVerificationError):
        comm.verify_webhook(headers, body, "whsec_" + base64.b64encode(b"another secret").decode())
    status, _ = comm.handle_webhook(SECRET, "POST", headers, body + b" ", lambda e: None)
    assert status == 401
    attempts = c.webhook_attempts()
    assert attempts and attempts[0]["ok"]
    c.delete_webhook()
    with pytest.raises(comm.NotFound):
        c.get_webhook()


def test_generated_secret(proj: Proj, receiver: Receiver) -> None:
    wh = proj.client.set_webhook(receiver.url)
    assert wh.get("secret", "").startswith("whsec_")


# The Standard Webhooks specification's example (standard-webhooks/spec/standard-webhooks.md), as used by
# the reference libraries' tests.
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TS = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIG = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_reference_vector_signature() -> None:
    assert comm.sign_webhook(SPEC_SECRET, SPEC_ID, SPEC_TS, SPEC_BODY) == SPEC_SIG


def test_reference_vector_verification() -> None:
    body = b'{"seq":7,"type":"message.received","data":{"message":{"id":"msg_1"}}}'
    sig = comm.sign_webhook(SPEC_SECRET, SPEC_ID, SPEC_TS, body)
    h = {"Webhook-Id": SPEC_ID, "Webhook-Timestamp": str(SPEC_TS), "Webhook-Signature": sig}
    assert comm.verify_webhook(h, body, SPEC_SECRET, now=SPEC_TS + 10)["seq"] == 7
    # Several space-separated signatures (key rotation), other versions ignored.
    multi = dict(h, **{"Webhook-Signature": "v1a,bm9wZQ== v1,Zm9v " + sig})
    assert comm.verify_webhook(multi, body, SPEC_SECRET, now=SPEC_TS)["seq"] == 7
    # A WSGI environ works as headers too.
    environ = {"HTTP_WEBHOOK_ID": SPEC_ID, "HTTP_WEBHOOK_TIMESTAMP": str(SPEC_TS), "HTTP_WEBHOOK_SIGNATURE": sig}
    assert comm.verify_webhook(environ, body, SPEC_SECRET, now=SPEC_TS)["type"] == "message.received"
    # Too old, too new (5 minutes), missing headers, another secret, a body that is not an event.
    for now in (SPEC_TS + 301, SPEC_TS - 301):
        with pytest.raises(comm.WebhookVerificationError, match="tolerance"):
            comm.verify_webhook(h, body, SPEC_SECRET, now=now)
    with pytest.raises(comm.WebhookVerificationError, match="missing"):
        comm.verify_webhook({"webhook-id": SPEC_ID}, body, SPEC_SECRET, now=SPEC_TS)
    with pytest.raises(comm.WebhookVerificationError, match="no signature"):
        comm.verify_webhook(h, body, "whsec_" + base64.b64encode(b"x").decode(), now=SPEC_TS)
    sig2 = comm.sign_webhook(SPEC_SECRET, SPEC_ID, SPEC_TS, SPEC_BODY)
    h2 = dict(h, **{"Webhook-Signature": sig2})
    with pytest.raises(comm.WebhookPayloadError):
        comm.verify_webhook(h2, SPEC_BODY, SPEC_SECRET, now=SPEC_TS)
    for bad in ("", "whsec_", "whsec_!!!"):
        with pytest.raises(comm.ConfigError):
            comm.verify_webhook(h, body, bad, now=SPEC_TS)


def test_plain_secret_and_receiver_statuses() -> None:
    body = b'{"seq":1,"type":"connection.active","data":{}}'
    ts = int(time.time())
    h = {
        "webhook-id": "proj_x_1",
        "webhook-timestamp": str(ts),
        "webhook-signature": comm.sign_webhook("plain secret", "proj_x_1", ts, body),
    }
    got: list[comm.Event] = []
    assert comm.handle_webhook("plain secret", "POST", h, body, got.append) == (204, "")
    assert got[0]["seq"] == 1
    assert comm.handle_webhook("plain secret", "GET", h, body, got.append)[0] == 405
    assert comm.handle_webhook("plain secret", "POST", h, b"x" * (comm.MAX_WEBHOOK_BODY + 1), got.append)[0] == 413

    def fail(e: comm.Event) -> None:
        raise ValueError("no")

    assert comm.handle_webhook("plain secret", "POST", h, body, fail)[0] == 500
