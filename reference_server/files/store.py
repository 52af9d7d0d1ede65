"""Uploaded files on disk: metadata in SQLite (`files.sqlite3`), bytes in `files/<id>`, both in
the data directory.

An upload is written to a temporary file in the same directory, synced, renamed to its final
name, and only then listed (one committed row), so a `kill -9` at any moment leaves either a
listed file with all its bytes or nothing listed; `FileStore.open` removes what such a kill left
behind (temporary files, and bytes no row names). A deleted file leaves a tombstone row, so a
list cursor naming it still works and its id is never reused; its bytes are removed.

The methods are synchronous and serialised by a lock: call them off the event loop.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import string
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from reference_server.workspaces.keys import DEFAULT_WORKSPACE
from reference_server.workspaces.migration import add_columns

__all__ = ["CursorNotFound", "FileRecord", "FileStore", "new_file_id"]

_ALPHABET = string.ascii_letters + string.digits
_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- upload order: the list is newest first
    id TEXT NOT NULL UNIQUE,
    filename TEXT NOT NULL,
    mime_type TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    created_at REAL NOT NULL,               -- Unix seconds
    deleted INTEGER NOT NULL DEFAULT 0
);
"""
# Columns added since the first schema, with their defaults (rows written before get them).
_ADDED = {
    "downloadable": "INTEGER NOT NULL DEFAULT 0",  # code execution's files
    "workspace": f"TEXT NOT NULL DEFAULT '{DEFAULT_WORKSPACE}'",  # several keys (workspaces/)
}
_TEMP_PREFIX = ".upload-"
_CHUNK = 1 << 20


def new_file_id() -> str:
    """A file id in the API's shape: `file_` and 24 random letters and digits."""
    return "file_" + "".join(secrets.choice(_ALPHABET) for _ in range(24))


class CursorNotFound(LookupError):
    """A list cursor (`after_id` / `before_id`) names no file this store ever held."""


@dataclass(frozen=True, slots=True)
class FileRecord:
    id: str
    filename: str
    mime_type: str
    size_bytes: int
    created_at: float
    downloadable: bool = False  # a file code execution wrote (uploads are never downloadable)


def _record(row: tuple[str, str, str, int, float, int]) -> FileRecord:
    return FileRecord(*row[:5], downloadable=bool(row[5]))


class FileStore:
    """Files under `directory`; `open` creates what is missing and sweeps a crash's leftovers."""

    def __init__(
        self,
        directory: Path,
        connection: sqlite3.Connection,
        workspace: str = DEFAULT_WORKSPACE,
        lock: threading.Lock | None = None,
    ) -> None:
        self.directory = directory
        self._blobs = directory / "files"
        self._db = connection
        self._lock = lock or threading.Lock()
        # Every method sees and makes this workspace's files only (`scoped` gives another's).
        self.workspace = workspace

    def scoped(self, workspace: str) -> FileStore:
        """The same store, seen from `workspace` (one connection and lock for all)."""
        return FileStore(self.directory, self._db, workspace, self._lock)

    @classmethod
    def open(cls, directory: Path) -> FileStore:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "files").mkdir(exist_ok=True)
        connection = sqlite3.connect(directory / "files.sqlite3", check_same_thread=False)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.executescript(_SCHEMA)
        add_columns(connection, "files", _ADDED)
        store = cls(directory, connection)
        store._sweep()
        return store

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _sweep(self) -> None:
        """Remove temporary uploads and bytes that no live row names (a kill between the rename
        and the commit, or between a delete's commit and the unlink)."""
        live = {row[0] for row in self._db.execute("SELECT id FROM files WHERE deleted = 0")}
        for path in self._blobs.iterdir():
            if path.name.startswith(_TEMP_PREFIX) or path.name not in live:
                path.unlink(missing_ok=True)

    def add(
        self,
        chunks: Iterable[bytes],
        *,
        filename: str,
        mime_type: str,
        now: float,
        downloadable: bool = False,
    ) -> FileRecord:
        """Store an upload's bytes (or a file code wrote: `downloadable`), then list it; returns
        its record."""
        file_id = new_file_id()
        handle, temp = tempfile.mkstemp(prefix=_TEMP_PREFIX, dir=self._blobs)
        try:
            size = 0
            with os.fdopen(handle, "wb") as out:
                for chunk in chunks:
                    out.write(chunk)
                    size += len(chunk)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, self._blobs / file_id)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        record = FileRecord(file_id, filename, mime_type, size, now, downloadable)
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO files (id, filename, mime_type, size_bytes, created_at, downloadable,"
                " workspace) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (file_id, filename, mime_type, size, now, int(downloadable), self.workspace),
            )
        return record

    def get(self, file_id: str) -> FileRecord | None:
        """A listed file of this store's workspace (another workspace's is None, as an unknown one)."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, filename, mime_type, size_bytes, created_at, downloadable FROM files"
                " WHERE id = ? AND deleted = 0 AND workspace = ?",
                (file_id, self.workspace),
            ).fetchone()
        return _record(row) if row else None

    def read(self, file_id: str) -> tuple[FileRecord, bytes] | None:
        """A listed file's record and bytes (None: unknown, deleted, or another workspace's)."""
        record = self.get(file_id)
        if record is None:
            return None
        try:
            return record, (self._blobs / file_id).read_bytes()
        except FileNotFoundError:  # deleted meanwhile
            return None

    def delete(self, file_id: str) -> bool:
        """Delete a listed file (False: unknown, already deleted, or another workspace's)."""
        with self._lock, self._db:
            done = self._db.execute(
                "UPDATE files SET deleted = 1 WHERE id = ? AND deleted = 0 AND workspace = ?",
                (file_id, self.workspace),
            ).rowcount
        if done:
            (self._blobs / file_id).unlink(missing_ok=True)
        return bool(done)

    def page(
        self, *, after_id: str | None, before_id: str | None, limit: int
    ) -> tuple[list[FileRecord], bool]:
        """The workspace's files, newest first; `after_id` pages on to older files, `before_id` back
        to newer ones (a cursor naming another workspace's file is as unknown)."""
        with self._lock:
            anchor = after_id if after_id is not None else before_id
            clause, order, args = "", "DESC", list[object]()
            if anchor is not None:
                row = self._db.execute(
                    "SELECT seq FROM files WHERE id = ? AND workspace = ?", (anchor, self.workspace)
                ).fetchone()
                if row is None:
                    raise CursorNotFound("after_id" if after_id is not None else "before_id")
                clause = "AND seq < ?" if after_id is not None else "AND seq > ?"
                order = "DESC" if after_id is not None else "ASC"
                args.append(row[0])
            rows = self._db.execute(
                "SELECT id, filename, mime_type, size_bytes, created_at, downloadable FROM files"
                f" WHERE deleted = 0 AND workspace = ? {clause} ORDER BY seq {order} LIMIT ?",
                (self.workspace, *args, limit + 1),
            ).fetchall()
        records = [_record(row) for row in rows[:limit]]
        if order == "ASC":
            records.reverse()
        return records, len(rows) > limit
