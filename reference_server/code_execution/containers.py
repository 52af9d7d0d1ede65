"""Code execution containers: a directory each, rows in SQLite (`containers.sqlite3`), both in
the data directory, so a container outlives the server's restarts as the API's outlives a
request.

A container expires `idle` after its last use (the response's `expires_at`, a rolling value as
the API's is) and at the latest `MAX_AGE` after it was made; an expired one's files are removed
and its row kept, so a request naming it is told it expired rather than that it never existed.

The methods are synchronous and serialised by a lock: call them off the event loop.
"""

from __future__ import annotations

import secrets
import shutil
import sqlite3
import string
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reference_server.timestamps import rfc3339
from reference_server.workspaces.keys import DEFAULT_WORKSPACE
from reference_server.workspaces.migration import add_columns

__all__ = ["MAX_AGE", "Container", "ContainerExpired", "ContainerStore", "UnknownContainer"]

MAX_AGE = 30 * 24 * 3600.0  # the API's: 30 days after creation
_ALPHABET = string.ascii_letters + string.digits
_SCHEMA = """
CREATE TABLE IF NOT EXISTS containers (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,   -- Unix seconds
    used_at REAL NOT NULL,
    expired INTEGER NOT NULL DEFAULT 0,
    workspace TEXT NOT NULL DEFAULT 'default'
);
"""


class UnknownContainer(LookupError):
    """No container has this id."""


class ContainerExpired(LookupError):
    """The container existed and has expired: its files are gone."""


@dataclass(frozen=True, slots=True)
class Container:
    id: str
    directory: Path
    expires_at: float  # Unix seconds
    workspace: str = DEFAULT_WORKSPACE  # the files its code writes are this workspace's
    # This request's skills (skills/loading.py): host directories its runs see read-only
    # (host, path inside), and the response's `container.skills` entries.
    mounts: tuple[tuple[Path, str], ...] = ()
    skills: tuple[dict[str, str], ...] = ()

    def response(self) -> dict[str, Any]:
        """The response's `container`: its id, when it expires (RFC 3339), the skills loaded."""
        when = rfc3339(self.expires_at)
        answer: dict[str, Any] = {"id": self.id, "expires_at": when}
        if self.skills:
            answer["skills"] = [dict(skill) for skill in self.skills]
        return answer


class ContainerStore:
    def __init__(self, root: Path, *, idle: float = 3600.0, workspace: str = DEFAULT_WORKSPACE) -> None:
        """`root`: the data directory; containers live in `root/containers/<id>/`. Every method
        but `sweep` sees and makes `workspace`'s containers only (`scoped`: another's view)."""
        self._root = root
        self._dirs = root / "containers"
        self._dirs.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(root / "containers.sqlite3", check_same_thread=False)
        self._db.executescript(_SCHEMA)
        add_columns(self._db, "containers", {"workspace": f"TEXT NOT NULL DEFAULT '{DEFAULT_WORKSPACE}'"})
        self._lock = threading.Lock()
        self.idle = idle
        self.workspace = workspace

    def scoped(self, workspace: str) -> ContainerStore:
        """The same store (one connection and lock), seen from `workspace`."""
        view = object.__new__(ContainerStore)
        view._root, view._dirs, view._db, view._lock = self._root, self._dirs, self._db, self._lock
        view.idle, view.workspace = self.idle, workspace
        return view

    def create(self) -> Container:
        """A new, empty container."""
        container_id = "container_" + "".join(secrets.choice(_ALPHABET) for _ in range(24))
        now = time.time()
        directory = self._dirs / container_id
        directory.mkdir(mode=0o700)
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO containers (id, created_at, used_at, expired, workspace) VALUES (?, ?, ?, 0, ?)",
                (container_id, now, now, self.workspace),
            )
        return Container(container_id, directory, self._expiry(now, now), self.workspace)

    def use(self, container_id: str) -> Container:
        """The container `container_id`, its idle time restarted; `UnknownContainer` or
        `ContainerExpired` when it cannot be used."""
        now = time.time()
        with self._lock:
            row = self._db.execute(
                "SELECT created_at, used_at, expired FROM containers WHERE id = ? AND workspace = ?",
                (container_id, self.workspace),
            ).fetchone()
            if row is None:  # another workspace's is as unknown
                raise UnknownContainer(container_id)
            created, used, expired = row
            if expired or now >= self._expiry(created, used):
                self._expire(container_id)
                raise ContainerExpired(container_id)
            with self._db:
                self._db.execute("UPDATE containers SET used_at = ? WHERE id = ?", (now, container_id))
        return Container(container_id, self._dirs / container_id, self._expiry(created, now), self.workspace)

    def sweep(self) -> int:
        """Expire every container past its time; how many."""
        now = time.time()
        with self._lock:
            rows = self._db.execute(
                "SELECT id, created_at, used_at FROM containers WHERE expired = 0"
            ).fetchall()
            gone = [cid for cid, created, used in rows if now >= self._expiry(created, used)]
            for container_id in gone:
                self._expire(container_id)
        return len(gone)

    def close(self) -> None:
        self._db.close()

    def _expiry(self, created: float, used: float) -> float:
        return min(used + self.idle, created + MAX_AGE)

    def _expire(self, container_id: str) -> None:
        # Under the lock: the row says expired before its files go (a crash between leaves files
        # that `sweep` never lists again, never a listed container without them).
        with self._db:
            self._db.execute("UPDATE containers SET expired = 1 WHERE id = ?", (container_id,))
        shutil.rmtree(self._dirs / container_id, ignore_errors=True)
