"""Fixtures: a real `comm serve` on SQLite in a temporary directory, and sandbox projects on it.

The binary is $COMM_BIN, or built from the repository with `go build ./cmd/comm` once per session.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import comm_gateway as comm

REPO = Path(__file__).resolve().parents[3]
LOCAL_PASSWORD = "py-client-test-password"
LISTENING = re.compile(r"^comm: listening on (http://\S+) \(database: (.+)\)$")


@dataclass
class Gateway:
    base_url: str
    proc: subprocess.Popen[str]
    log: list[str]


@pytest.fixture(scope="session")
def comm_bin(tmp_path_factory: pytest.TempPathFactory) -> str:
    env_bin = os.environ.get("COMM_BIN")
    if env_bin:
        return env_bin
    out = tmp_path_factory.mktemp("bin") / "comm"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/comm"], cwd=REPO, check=True)
    return str(out)


def start_serve(comm_bin: str, data_dir: Path) -> Gateway:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMM_")}
    proc = subprocess.Popen(
        [
            comm_bin,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--smtp-listen",
            "127.0.0.1:0",
            "--data-dir",
            str(data_dir),
            "--local-signin-password",
            LOCAL_PASSWORD,
            "--webhook-allow-private",
            "true",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    log: list[str] = []
    base = ""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        log.append(line)
        m = LISTENING.match(line.strip())
        if m:
            base = m.group(1)
            break
    if not base:
        proc.kill()
        raise RuntimeError("comm serve did not start:\n" + "".join(log))
    stdout = proc.stdout

    def drain() -> None:
        for line in stdout:
            log.append(line)

    threading.Thread(target=drain, daemon=True).start()
    return Gateway(base, proc, log)


@pytest.fixture(scope="session")
def gateway(comm_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    g = start_serve(comm_bin, tmp_path_factory.mktemp("comm-data"))
    yield g
    g.proc.terminate()
    try:
        g.proc.wait(30)
    except subprocess.TimeoutExpired:
        g.proc.kill()


@dataclass
class Proj:
    client: comm.Client
    sandbox: comm.Sandbox
    base_url: str


@pytest.fixture
def proj(gateway: Gateway, request: pytest.FixtureRequest) -> Proj:
    sb = comm.create_sandbox(request.node.name[:60], base_url=gateway.base_url)
    c = comm.Client(sb["api_key"], gateway.base_url, backoff=(0.02, 0.2))
    return Proj(c, sb, gateway.base_url)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests never read the developer's COMM_* settings or a .env of the working directory."""
    for k in list(os.environ):
        if k.startswith("COMM_") and k != "COMM_BIN":
            monkeypatch.delenv(k)
    monkeypatch.chdir(tmp_path)


def wait_for(cond: object, timeout: float = 15.0, what: str = "condition") -> None:
    """Polls cond() until it is true."""
    assert callable(cond)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
