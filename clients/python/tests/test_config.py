"""Where the key and the base URL come from, in order: arguments, dotenv= files, the environment, .env in
the working directory, .env beside the main script."""

from __future__ import annotations

from pathlib import Path

import pytest

import comm_gateway as comm
from comm_gateway._config import resolve


def write(p: Path, text: str) -> Path:
    p.write_text(text)
    return p


def test_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cwd = tmp_path / "cwd"
    script = tmp_path / "script"
    cwd.mkdir()
    script.mkdir()
    monkeypatch.chdir(cwd)
    write(script / ".env", "COMM_API_KEY=from_script_dir\nCOMM_BASE_URL=http://script:1\n")
    dirs = [str(cwd), str(script)]
    keys = (comm.ENV_API_KEY, comm.ENV_BASE_URL)

    def got(args: dict[str, str | None], dotenv: list[Path] | None = None, env: dict[str, str] | None = None):
        r = resolve({k: args.get(k) for k in keys}, dotenv or [], env or {}, dirs)
        return r[comm.ENV_API_KEY], r[comm.ENV_BASE_URL]

    assert got({}) == ("from_script_dir", "http://script:1")
    write(cwd / ".env", '# the working directory\'s\nexport COMM_API_KEY="from_cwd"\n')
    # Each variable is filled separately: the base URL still comes from the script's directory.
    assert got({}) == ("from_cwd", "http://script:1")
    env = {"COMM_API_KEY": "from_env"}
    assert got({}, env=env) == ("from_env", "http://script:1")
    explicit = write(tmp_path / "explicit.env", "COMM_API_KEY=from_file  # comment\nCOMM_BASE_URL='http://file:2'\n")
    assert got({}, [explicit], env) == ("from_file", "http://file:2")
    assert got({comm.ENV_API_KEY: "from_arg"}, [explicit], env) == ("from_arg", "http://file:2")


def test_client_reads_env_and_dotenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / ".env", "COMM_API_KEY=dotenv_key\nCOMM_BASE_URL=http://127.0.0.1:1234/\n")
    c = comm.Client()
    assert c.api_key == "dotenv_key" and c.base_url == "http://127.0.0.1:1234"
    monkeypatch.setenv("COMM_API_KEY", "env_key")
    assert comm.Client().api_key == "env_key"
    assert comm.Client(api_key="arg_key").api_key == "arg_key"
    assert comm.Client(base_url="https://comm.example.com").base_url == "https://comm.example.com"


def test_missing_key_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(comm.ConfigError, match="COMM_API_KEY"):
        comm.Client()


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(comm.ConfigError, match="base URL"):
        comm.Client("k", "ftp://x")
    with pytest.raises(comm.ConfigError, match="base URL"):
        comm.Client("k", "http://user:pw@host")
    with pytest.raises(comm.ConfigError, match=r"missing\.env"):
        comm.Client("k", dotenv=[tmp_path / "missing.env"])
    bad = write(tmp_path / "bad.env", "COMM_API_KEY=x\nthis is not a setting\n")
    with pytest.raises(comm.ConfigError, match="line 2"):
        comm.Client(dotenv=[bad])


def test_write_dotenv_keeps_other_lines(tmp_path: Path) -> None:
    p = write(tmp_path / ".env", "OTHER=1\nexport COMM_API_KEY=old\n")
    comm.write_dotenv(p, {"COMM_API_KEY": "new", "COMM_BASE_URL": "http://b"})
    assert p.read_text() == "OTHER=1\nCOMM_API_KEY=new\nCOMM_BASE_URL=http://b\n"
    assert (p.stat().st_mode & 0o777) == 0o600
    assert comm.read_dotenv(p) == {"OTHER": "1", "COMM_API_KEY": "new", "COMM_BASE_URL": "http://b"}
