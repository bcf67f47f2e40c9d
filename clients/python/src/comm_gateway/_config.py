"""Configuration: COMM_API_KEY and COMM_BASE_URL from arguments, .env files and the environment."""

from __future__ import annotations

import os
import sys
import urllib.parse
from collections.abc import Mapping, Sequence

from ._errors import ConfigError

ENV_API_KEY = "COMM_API_KEY"
ENV_BASE_URL = "COMM_BASE_URL"

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
"""Where ``comm serve`` listens by default."""

MAX_DOTENV_BYTES = 1 << 20
"""A .env file larger than this is refused."""

NO_KEY_MESSAGE = (
    "comm: no API key: set COMM_API_KEY in the environment or in a .env file "
    "(in the working directory or beside the program), or pass api_key="
)


def read_dotenv(path: str | os.PathLike[str]) -> dict[str, str]:
    """Reads KEY=VALUE lines (``export`` prefix, quotes, ``#`` comments allowed).

    Raises FileNotFoundError when the file is missing and ConfigError when a line is malformed.
    """
    with open(path, "rb") as f:
        raw = f.read(MAX_DOTENV_BYTES + 1)
    if len(raw) > MAX_DOTENV_BYTES:
        raise ConfigError(f"comm: read {os.fspath(path)}: larger than {MAX_DOTENV_BYTES} bytes")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConfigError(f"comm: read {os.fspath(path)}: not UTF-8: {e}") from None
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith("export "):
            s = s[len("export ") :].lstrip()
        key, eq, value = s.partition("=")
        key = key.strip()
        if not eq or not key or not all(c.isalnum() or c in "_.-" for c in key):
            raise ConfigError(f"comm: read {os.fspath(path)}: line {n}: want KEY=VALUE")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
            if s.partition("=")[2].strip()[0] == '"':
                value = value.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        out[key] = value
    return out


def write_dotenv(path: str | os.PathLike[str], values: Mapping[str, str]) -> None:
    """Sets keys in an env file, keeping its other lines (as ``comm login`` does); mode 0600."""
    try:
        with open(path, encoding="utf-8") as f:
            old = f.read()
    except FileNotFoundError:
        old = ""
    lines: list[str] = []
    done: set[str] = set()
    for line in old.rstrip("\n").split("\n"):
        s = line.strip()
        if s.startswith("export "):
            s = s[len("export ") :]
        key = s.partition("=")[0].strip()
        if key in values:
            line = f"{key}={values[key]}"
            done.add(key)
        if line or lines:
            lines.append(line)
    for k, v in values.items():
        if k not in done:
            lines.append(f"{k}={v}")
    tmp = f"{os.fspath(path)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def default_dotenv_dirs() -> list[str]:
    """The directories searched for a .env file: the working directory, then the main script's."""
    dirs: list[str] = []
    try:
        dirs.append(os.getcwd())
    except OSError:
        pass
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None) if main is not None else None
    if isinstance(script, str) and script:
        d = os.path.dirname(os.path.realpath(script))
        if d not in dirs:
            dirs.append(d)
    return dirs


def resolve(
    values: Mapping[str, str | None],
    dotenv: Sequence[str | os.PathLike[str]] = (),
    environ: Mapping[str, str] | None = None,
    search_dirs: Sequence[str] | None = None,
) -> dict[str, str]:
    """Fills each variable from, in order: ``values`` (arguments); the ``dotenv`` files given (the first
    that sets it wins; a missing one is an error); the environment; a .env file in each of
    ``search_dirs`` (default: the working directory, then the main script's directory)."""
    out = {k: (v or "").strip() for k, v in values.items()}

    def fill(src: Mapping[str, str]) -> None:
        for k in out:
            if not out[k]:
                out[k] = (src.get(k) or "").strip()

    for path in dotenv:
        try:
            fill(read_dotenv(path))
        except OSError as e:
            raise ConfigError(f"comm: read {os.fspath(path)}: {e.strerror or e}") from None
    fill(os.environ if environ is None else environ)
    for d in default_dotenv_dirs() if search_dirs is None else search_dirs:
        if all(out.values()):
            break
        p = os.path.join(d, ".env")
        try:
            fill(read_dotenv(p))
        except FileNotFoundError:
            continue
        except OSError as e:
            raise ConfigError(f"comm: read {p}: {e.strerror or e}") from None
    return out


def parse_base_url(raw: str) -> str:
    """Checks a base URL and strips its trailing slash; empty means DEFAULT_BASE_URL."""
    if not raw:
        return DEFAULT_BASE_URL
    u = urllib.parse.urlsplit(raw)
    if u.scheme not in ("http", "https") or not u.hostname or u.query or u.fragment or u.username is not None:
        raise ConfigError(f"comm: base URL {raw!r}: want http(s)://host[:port][/path], without query or credentials")
    return raw.rstrip("/")
