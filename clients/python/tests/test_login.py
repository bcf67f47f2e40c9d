"""login() against the gateway's device flow, approved through the local operator sign-in on /device."""

from __future__ import annotations

import html
import http.cookiejar
import re
import threading
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import comm_gateway as comm
from conftest import LOCAL_PASSWORD, Gateway, Proj

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def approve_in_browser(prompt: comm.LoginPrompt, base_url: str, decision: str = "approve") -> None:
    """What a person does: open the URL, sign in as the local operator, approve (or deny) the code."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def page(url: str, form: dict[str, str] | None = None) -> str:
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        with opener.open(url, data, timeout=15) as r:
            return r.read().decode()

    def csrf(text: str) -> str:
        m = CSRF.search(text)
        assert m, text[:2000]
        return html.unescape(m.group(1))

    p = page(prompt.url)
    assert prompt.code in p and "Local operator sign-in" in p
    p = page(base_url + "/device/signin/local", {"code": prompt.code, "csrf": csrf(p), "password": LOCAL_PASSWORD})
    assert 'action="/device/approve"' in p
    p = page(base_url + f"/device/{decision}", {"code": prompt.code, "csrf": csrf(p)})
    assert ("Approved" if decision == "approve" else "Denied") in p


def test_login_device_flow(gateway: Gateway, proj: Proj, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The sandbox key and the base URL come from the .env in the working directory (tmp_path).
    env_file = tmp_path / ".env"
    env_file.write_text(f"OTHER=kept\nCOMM_API_KEY={proj.sandbox['api_key']}\nCOMM_BASE_URL={gateway.base_url}\n")
    prompts: list[comm.LoginPrompt] = []

    def show(p: comm.LoginPrompt) -> None:
        prompts.append(p)
        comm.print_login_prompt(p)
        threading.Thread(target=approve_in_browser, args=(p, gateway.base_url)).start()

    res = comm.login(show=show, env_file=env_file)
    assert len(prompts) == 1 and prompts[0].interval >= 1 and re.fullmatch(r"[A-Z]{4}-[A-Z]{4}", prompts[0].code)
    out = capsys.readouterr().out
    assert prompts[0].code in out and prompts[0].url in out
    assert res.api_key.startswith("comm_") and res.api_key != proj.sandbox["api_key"]
    assert res.base_url == gateway.base_url
    # The signed-in key is written to .env, other lines kept.
    env = comm.read_dotenv(env_file)
    assert env == {"OTHER": "kept", "COMM_API_KEY": res.api_key, "COMM_BASE_URL": gateway.base_url}
    # The sandbox project carried over; the signed-in key has an account and passes the 402.
    signed = comm.Client(dotenv=[env_file])
    assert signed.project()["id"] == proj.sandbox["project_id"]
    acct = signed.account()
    assert acct["account"]["issuer"] == "local" and acct["balance"] == "100.00"
    try:
        signed.connect_imessage()
    except comm.PaymentRequired:
        raise AssertionError("signed-in key still gets 402") from None
    except comm.APIError as e:
        assert e.status != 402  # a gateway without iMessage relays answers 501
    with pytest.raises(comm.Forbidden):
        proj.client.account()


def test_login_denied(gateway: Gateway, tmp_path: Path) -> None:
    def show(p: comm.LoginPrompt) -> None:
        threading.Thread(target=approve_in_browser, args=(p, gateway.base_url, "deny")).start()

    with pytest.raises(comm.LoginDenied):
        comm.login(gateway.base_url, show=show, env_file=tmp_path / ".env")
    assert not (tmp_path / ".env").exists()
