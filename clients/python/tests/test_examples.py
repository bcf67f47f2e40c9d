"""The examples run as a user runs them: examples/echo.py answers, stops cleanly on SIGINT and SIGTERM, and
resumes from its cursor."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import comm_gateway as comm
from conftest import Proj, wait_for

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SRC = Path(__file__).resolve().parents[1] / "src"


def start_agent(script: str, cwd: Path) -> subprocess.Popen[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / script)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.parametrize(
    ("script", "sig"),
    [
        ("echo.py", signal.SIGINT),
        ("echo.py", signal.SIGTERM),
        ("echo_async.py", signal.SIGINT),
        ("echo_async.py", signal.SIGTERM),
    ],
)
def test_echo_agent(proj: Proj, tmp_path: Path, script: str, sig: signal.Signals) -> None:
    c = proj.client
    conn = c.connect("test")
    (tmp_path / ".env").write_text(f"COMM_API_KEY={proj.sandbox['api_key']}\nCOMM_BASE_URL={proj.base_url}\n")

    def replies() -> list[str]:
        return [e["data"]["message"]["text"] for e in c.events(0, 100, comm.MESSAGE_SENT)]

    for round_, text in enumerate(["hello", "again"]):
        agent = start_agent(script, tmp_path)
        try:
            c.inject(conn["id"], "ann", text)
            wait_for(lambda n=round_: len(replies()) == n + 1, 20, "the reply")
            time.sleep(0.3)
            began = time.monotonic()
            agent.send_signal(sig)
            out, _ = agent.communicate(timeout=10)
        finally:
            agent.kill()
        assert agent.returncode == 0, out
        assert time.monotonic() - began < 3
        # Each run answers its own message only: the second resumed from the cursor.
        assert out.strip() == f"test ann: {text}", out
    assert replies() == ["You said: hello", "You said: again"]
    assert comm.FileCursorStore(tmp_path / ".comm-cursor").load() > 0
