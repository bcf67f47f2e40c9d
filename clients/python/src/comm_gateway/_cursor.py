"""Where listen() and stream() keep their cursor across restarts."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from typing import Protocol, runtime_checkable

from ._errors import CommError

DEFAULT_CURSOR_FILE = ".comm-cursor"


@runtime_checkable
class CursorStore(Protocol):
    """Keeps the seq up to which every event has been handled."""

    def load(self) -> int:
        """The saved cursor, or 0 when none was saved."""
        ...

    def save(self, seq: int) -> None:
        """Records the cursor; called with increasing values, one call at a time."""
        ...


class MemoryCursorStore:
    """A cursor kept in memory (one run)."""

    def __init__(self, seq: int = 0) -> None:
        self.seq = seq

    def load(self) -> int:
        return self.seq

    def save(self, seq: int) -> None:
        self.seq = seq


class FileCursorStore:
    """The cursor in a small JSON file (``{"project_id":"proj_...","seq":42}``, the Go client's format),
    replaced atomically (write, fsync, rename) at each save. With ``project_id`` set, load refuses a file
    of another project: its cursor would skip this project's events."""

    def __init__(self, path: str | os.PathLike[str] = DEFAULT_CURSOR_FILE, project_id: str = "") -> None:
        self.path = os.fspath(path)
        self.project_id = project_id
        self._lock = threading.Lock()

    def load(self) -> int:
        with self._lock:
            try:
                with open(self.path, "rb") as f:
                    raw = f.read(4096).strip()
            except FileNotFoundError:
                return 0
            if raw.isdigit():
                return int(raw)
            try:
                doc = json.loads(raw)
            except ValueError:
                doc = None
            if not isinstance(doc, dict) or not isinstance(doc.get("seq"), int) or doc["seq"] < 0:  # pyright: ignore
                raise CommError(f'comm: cursor file {self.path}: want {{"project_id":...,"seq":N}}: {raw[:100]!r}')
            pid = doc.get("project_id") or ""  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
            if self.project_id and pid and pid != self.project_id:
                raise CommError(
                    f"comm: cursor file {self.path} belongs to project {pid}, but the API key is of project "
                    f"{self.project_id}: delete the file to start this project from its beginning, or use "
                    "another cursor file"
                )
            return int(doc["seq"])  # pyright: ignore[reportUnknownArgumentType]

    def save(self, seq: int) -> None:
        doc: dict[str, object] = {"seq": seq}
        if self.project_id:
            doc = {"project_id": self.project_id, "seq": seq}
        data = (json.dumps(doc, separators=(",", ":")) + "\n").encode()
        with self._lock:
            d = os.path.dirname(os.path.abspath(self.path))
            fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(self.path) + ".", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
            try:
                dfd = os.open(d, os.O_RDONLY)
            except OSError:
                return
            try:
                os.fsync(dfd)
            except OSError:
                pass
            finally:
                os.close(dfd)
