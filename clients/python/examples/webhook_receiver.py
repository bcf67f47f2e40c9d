"""A push receiver on the standard library's WSGI server: verifies each delivery and prints it.
Register it with Client().set_webhook("https://<public address>/", secret) and run with
COMM_WEBHOOK_SECRET set to the same secret."""

import os
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import make_server

from comm_gateway import Event, handle_webhook

SECRET = os.environ["COMM_WEBHOOK_SECRET"]


def on_event(e: Event) -> None:
    print(e["seq"], e["type"])


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    status, text = handle_webhook(SECRET, environ["REQUEST_METHOD"], environ.items(), body, on_event)
    start_response(f"{status} {'OK' if status < 300 else 'Error'}", [("Content-Type", "text/plain")])
    return [text.encode()]


make_server("127.0.0.1", int(os.environ.get("PORT", "8000")), app).serve_forever()
