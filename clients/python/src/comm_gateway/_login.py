"""The device sign-in: login() prints the URL and code, polls, and writes the signed-in key to .env."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from ._config import ENV_API_KEY, ENV_BASE_URL, resolve, write_dotenv
from ._errors import CommError, LoginDenied, LoginExpired
from ._http import decode_json
from ._types import LoginPrompt, LoginResult


def print_prompt(p: LoginPrompt) -> None:
    print(f"Open this page to sign in, and check that it shows the code {p.code}:\n\n  {p.url}\n", flush=True)


def login(
    base_url: str | None = None,
    api_key: str | None = None,
    *,
    show: Callable[[LoginPrompt], None] = print_prompt,
    env_file: str | os.PathLike[str] | None = ".env",
    stop: threading.Event | None = None,
) -> LoginResult:
    """Runs the device sign-in flow: POST /v1/auth/device/start (with the sandbox key, so that its project
    carries over into the account), shows the prompt (default: prints the URL and the code), then polls
    POST /v1/auth/device/token every ``interval`` seconds (5 more after each ``slow_down``) until the
    person approves, denies (LoginDenied), the code expires (LoginExpired) or ``stop`` is set.

    ``base_url`` and ``api_key`` default to COMM_BASE_URL and COMM_API_KEY as Client reads them (the key
    may be absent: a new project is made in the account). The signed-in key and base URL are written to
    ``env_file`` (default ``.env``; other lines are kept; None writes nothing)."""
    from ._client import _keyless  # pyright: ignore[reportPrivateUsage]

    cfg = resolve({ENV_API_KEY: api_key, ENV_BASE_URL: base_url})
    t = _keyless(cfg[ENV_BASE_URL])
    body: dict[str, str] = {"api_key": cfg[ENV_API_KEY]} if cfg[ENV_API_KEY] else {}
    try:
        st: Any = decode_json(t.call("POST", "/v1/auth/device/start", body=body, auth=False), "start sign-in")
    except CommError as e:
        raise CommError(f"comm: start sign-in: {e}") from e
    interval = float(max(int(st.get("interval") or 1), 1))
    show(LoginPrompt(code=str(st["user_code"]), url=str(st["verification_uri_complete"]), interval=interval))
    waiter = stop or threading.Event()
    while True:
        if waiter.wait(interval):
            raise CommError("comm: sign-in cancelled")
        tok: Any = decode_json(
            t.call("POST", "/v1/auth/device/token", body={"device_code": st["device_code"]}, auth=False),
            "sign-in",
        )
        status = tok.get("status")
        if status == "pending":
            continue
        if status == "slow_down":
            interval = max(interval + 5, float(tok.get("interval") or 0))
            continue
        if status == "denied":
            raise LoginDenied("comm: sign-in was denied")
        if status == "expired":
            raise LoginExpired("comm: sign-in code expired; start again")
        if status != "approved":
            raise CommError(f"comm: sign-in: unexpected status {status!r}")
        key = str(tok.get("api_key") or "")
        if not key:
            raise CommError("comm: sign-in approved without a key")
        res = LoginResult(api_key=key, base_url=str(tok.get("base_url") or t.base_url))
        if env_file is not None:
            write_dotenv(env_file, {ENV_API_KEY: res.api_key, ENV_BASE_URL: res.base_url})
        return res
