"""Message Batches on disk: one SQLite database (standard library, WAL mode) in the data directory.

Every state change is one transaction, committed (and synced: `synchronous=FULL`) before the
server answers or moves on, so a `kill -9` at any moment loses nothing that was acknowledged:
- a batch and all its requests are written together when it is created;
- a request is `pending` until its result is written; writing the result, counting it and, for
  the last one, ending the batch are one transaction. A request that was running when the
  process died is still `pending`, and runs again after a restart;
- canceling, expiring and deleting are single transactions too.

Request counts live in the batch row, updated in the same transactions as the states they count,
so they always add up to the number of requests. Deleted batches leave a tombstone row (their
requests are dropped), so a list cursor naming one still works and its id is never reused.

The methods are synchronous and serialised by a lock: call them off the event loop
(`asyncio.to_thread`). Several processes may open the same database (SQLite locks it), serving
different models: each request keeps the served model it named (`model`: the card id the
creating server resolved its model to), and only a server serving that model runs it
(`processor.py` holds one lock file per model for that).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from reference_server.workspaces.keys import DEFAULT_WORKSPACE

__all__ = [
    "ARCHIVE_AFTER_S",
    "EXPIRY_S",
    "BatchRecord",
    "BatchStore",
    "CursorNotFound",
    "NotEnded",
    "PendingRequest",
    "ProcessingStatus",
    "ResultState",
    "StoredResult",
]

ProcessingStatus = Literal["in_progress", "canceling", "ended"]
ResultState = Literal["succeeded", "errored", "canceled", "expired"]
RESULT_STATES: tuple[ResultState, ...] = ("succeeded", "errored", "canceled", "expired")

# A batch expires 24 hours after creation; its results are kept for 29 days (the API's figures).
EXPIRY_S = 24 * 3600.0
ARCHIVE_AFTER_S = 29 * 24 * 3600.0

# 2: requests.model; 3: batches.api_version; 4: batches.workspace (older databases are
# migrated on open).
_SCHEMA_VERSION = 4
_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- creation order: the list is newest first
    id TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL CHECK (status IN ('in_progress', 'canceling', 'ended')),
    created_at REAL NOT NULL,               -- Unix seconds
    expires_at REAL NOT NULL,
    ended_at REAL,
    cancel_initiated_at REAL,
    archived_at REAL,
    deleted INTEGER NOT NULL DEFAULT 0,
    betas TEXT NOT NULL,                    -- JSON array: the anthropic-beta of the create call
    api_version TEXT,                       -- the create call's anthropic-version (NULL: 2023-06-01)
    workspace TEXT NOT NULL DEFAULT 'default',  -- its key's; another workspace sees no such batch
    total INTEGER NOT NULL,
    succeeded INTEGER NOT NULL DEFAULT 0,
    errored INTEGER NOT NULL DEFAULT 0,
    canceled INTEGER NOT NULL DEFAULT 0,
    expired INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS requests (
    batch_seq INTEGER NOT NULL REFERENCES batches (seq),
    idx INTEGER NOT NULL,
    custom_id TEXT NOT NULL,
    params TEXT,                            -- JSON; dropped once the result is written
    state TEXT NOT NULL
        CHECK (state IN ('pending', 'succeeded', 'errored', 'canceled', 'expired')),
    result TEXT,                            -- JSON of the result object
    model TEXT,                             -- the served model that runs it (NULL: any)
    PRIMARY KEY (batch_seq, idx)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS requests_pending ON requests (batch_seq, idx) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS batches_open ON batches (seq) WHERE status != 'ended';
"""
# Version 1 had no model column: a pending request keeps the model its params name (equal to the
# served card id unless an alias was used; such a request waits for a server of that id).
_MIGRATE_FROM_1 = """
ALTER TABLE requests ADD COLUMN model TEXT;
UPDATE requests SET model = json_extract(params, '$.model')
    WHERE state = 'pending' AND json_valid(params) AND json_type(params, '$.model') = 'text';
"""
# Version 2 had no api_version: its batches were all served with 2023-06-01's rules (NULL).
_MIGRATE_FROM_2 = "ALTER TABLE batches ADD COLUMN api_version TEXT"
# Version 3 had no workspaces: its batches are the default workspace's (DEFAULT_WORKSPACE).
_MIGRATE_FROM_3 = "ALTER TABLE batches ADD COLUMN workspace TEXT NOT NULL DEFAULT 'default'"
_BATCH_COLUMNS = (
    "seq, id, status, created_at, expires_at, ended_at, cancel_initiated_at, archived_at,"
    " betas, total, succeeded, errored, canceled, expired"
)


class CursorNotFound(KeyError):
    """A list cursor (`after_id` / `before_id`) that names no batch this server ever had."""


class NotEnded(Exception):
    """The batch is still being processed (it cannot be deleted, and has no results yet)."""


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """A batch as stored, with its counts by final state."""

    seq: int
    id: str
    status: ProcessingStatus
    created_at: float
    expires_at: float
    ended_at: float | None
    cancel_initiated_at: float | None
    archived_at: float | None
    betas: tuple[str, ...]
    total: int
    succeeded: int
    errored: int
    canceled: int
    expired: int

    @property
    def done(self) -> int:
        """Requests with a result."""
        return self.succeeded + self.errored + self.canceled + self.expired


@dataclass(frozen=True, slots=True)
class PendingRequest:
    """A request waiting for its result, with what is needed to run it."""

    batch_seq: int
    batch_id: str
    idx: int
    custom_id: str
    params: str  # JSON text, as sent
    betas: tuple[str, ...]
    api_version: str | None = None  # the create call's anthropic-version (None: 2023-06-01)
    workspace: str = DEFAULT_WORKSPACE  # the batch's: its files and containers are this one's

    @property
    def key(self) -> tuple[int, int]:
        """Identifies the request within the database."""
        return (self.batch_seq, self.idx)


@dataclass(frozen=True, slots=True)
class StoredResult:
    """One line of a batch's results."""

    idx: int
    custom_id: str
    result: str  # JSON text of the result object


class BatchStore:
    """The batches database (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        """Open (or create) the database at `path`."""
        path.parent.mkdir(parents=True, exist_ok=True)
        # Prompts and answers are private: the owner only (SQLite gives its -wal and -shm files the
        # database's permissions).
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        with contextlib.suppress(OSError):  # a database an older server created
            os.chmod(path, 0o600)
        self.path = path
        self._lock = threading.Lock()
        # Autocommit mode: every transaction below is an explicit BEGIN IMMEDIATE ... COMMIT.
        self._db = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a commit survives power loss, not only kill -9
        self._db.execute("PRAGMA foreign_keys=ON")
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if version > _SCHEMA_VERSION:
            self._db.close()
            raise RuntimeError(f"{path} was written by a newer server (schema version {version})")
        # One transaction, so that two servers starting on the same directory agree (the version
        # is read again inside it: another server may have migrated meanwhile).
        self._db.execute("BEGIN IMMEDIATE")
        try:
            version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
            tables = self._db.execute(
                "SELECT count(*) FROM sqlite_master WHERE name = 'requests'"
            ).fetchone()[0]
            if version == 1 and tables:
                for statement in _MIGRATE_FROM_1.strip().split(";\n"):
                    self._db.execute(statement)
            if version in (1, 2) and tables:
                self._db.execute(_MIGRATE_FROM_2)
            if version in (1, 2, 3) and tables:
                self._db.execute(_MIGRATE_FROM_3)
            for statement in _SCHEMA.strip().split(";\n"):
                self._db.execute(statement)
            self._db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            self._db.close()
            raise

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    # -- batches -------------------------------------------------------------------------------

    def create(
        self,
        batch_id: str,
        requests: Sequence[tuple[str, str]],
        *,
        betas: Iterable[str],
        now: float,
        models: Sequence[str | None] = (),
        api_version: str | None = None,
        workspace: str = DEFAULT_WORKSPACE,
    ) -> BatchRecord:
        """Store a new batch of `(custom_id, params JSON)` requests, all pending; `models[i]` is the
        served model that runs request i (missing or None: any server's processor); every request
        is served under the create call's `api_version` (None: 2023-06-01)."""
        with self._transaction():
            cursor = self._db.execute(
                "INSERT INTO batches (id, status, created_at, expires_at, betas, api_version, total,"
                " workspace) VALUES (?, 'in_progress', ?, ?, ?, ?, ?, ?)",
                (
                    batch_id,
                    now,
                    now + EXPIRY_S,
                    json.dumps(sorted(betas)),
                    api_version,
                    len(requests),
                    workspace,
                ),
            )
            seq = int(cursor.lastrowid or 0)
            self._db.executemany(
                "INSERT INTO requests (batch_seq, idx, custom_id, params, state, model)"
                " VALUES (?, ?, ?, ?, 'pending', ?)",
                (
                    (seq, idx, custom_id, params, models[idx] if idx < len(models) else None)
                    for idx, (custom_id, params) in enumerate(requests)
                ),
            )
            record = self._get(batch_id, workspace)
        assert record is not None
        return record

    def get(self, batch_id: str, *, workspace: str = DEFAULT_WORKSPACE) -> BatchRecord | None:
        """The batch, or None (never existed, deleted, or another workspace's)."""
        with self._lock:
            return self._get(batch_id, workspace)

    def page(
        self, *, after_id: str | None, before_id: str | None, limit: int, workspace: str = DEFAULT_WORKSPACE
    ) -> tuple[list[BatchRecord], bool]:
        """`workspace`'s batches newest first: the `limit` just after `after_id`, just before
        `before_id`, or the newest; and whether more lie beyond the page in that direction."""
        with self._lock:
            where, order, args = "deleted = 0 AND workspace = ?", "DESC", list[object]([workspace])
            if after_id is not None:
                where += " AND seq < ?"
                args.append(self._seq_of(after_id, "after_id", workspace))
            elif before_id is not None:
                where, order = where + " AND seq > ?", "ASC"
                args.append(self._seq_of(before_id, "before_id", workspace))
            rows = self._db.execute(
                f"SELECT {_BATCH_COLUMNS} FROM batches WHERE {where} ORDER BY seq {order} LIMIT ?",
                (*args, limit + 1),
            ).fetchall()
        records = [_record(row) for row in rows[:limit]]
        if order == "ASC":
            records.reverse()
        return records, len(rows) > limit

    def cancel(self, batch_id: str, *, now: float, workspace: str = DEFAULT_WORKSPACE) -> BatchRecord | None:
        """Start canceling an in-progress batch of `workspace` (a batch canceling or ended is left
        as it is)."""
        with self._transaction():
            self._db.execute(
                "UPDATE batches SET status = 'canceling', cancel_initiated_at = ?"
                " WHERE id = ? AND deleted = 0 AND status = 'in_progress' AND workspace = ?",
                (now, batch_id, workspace),
            )
            return self._get(batch_id, workspace)

    def delete(self, batch_id: str, *, workspace: str = DEFAULT_WORKSPACE) -> bool:
        """Delete an ended batch of `workspace` and its results; False when there is no such
        batch. Raises NotEnded while it is being processed."""
        with self._transaction():
            record = self._get(batch_id, workspace)
            if record is None:
                return False
            if record.status != "ended":
                raise NotEnded(batch_id)
            self._db.execute("UPDATE batches SET deleted = 1 WHERE seq = ?", (record.seq,))
            self._db.execute("DELETE FROM requests WHERE batch_seq = ?", (record.seq,))
            return True

    # -- processing ----------------------------------------------------------------------------

    def pending(
        self, limit: int, *, skip: Iterable[tuple[int, int]] = (), models: Collection[str] | None = None
    ) -> list[PendingRequest]:
        """Up to `limit` pending requests of in-progress batches, oldest batch first, except those
        in `skip` (already running); with `models`, only those for these served models (or for
        any, model NULL)."""
        skipped = set(skip)
        where, args = "", []
        if models is not None:
            where = f" AND (r.model IS NULL OR r.model IN ({', '.join('?' * len(models))}))"
            args = sorted(models)
        with self._lock:
            rows = self._db.execute(
                "SELECT r.batch_seq, b.id, r.idx, r.custom_id, r.params, b.betas, b.api_version, b.workspace"
                " FROM requests AS r JOIN batches AS b ON b.seq = r.batch_seq"
                " WHERE r.state = 'pending' AND b.status = 'in_progress' AND b.deleted = 0"
                f"{where} ORDER BY r.batch_seq, r.idx LIMIT ?",
                (*args, limit + len(skipped)),
            ).fetchall()
        found = [
            PendingRequest(
                seq, batch_id, idx, custom_id, params, tuple(json.loads(betas)), version, workspace
            )
            for seq, batch_id, idx, custom_id, params, betas, version, workspace in rows
            if (seq, idx) not in skipped
        ]
        return found[:limit]

    def record(self, key: tuple[int, int], state: ResultState, result: str, *, now: float) -> bool:
        """Write a pending request's result (False if it already has one); the last one ends its
        batch, in the same transaction."""
        seq, idx = key
        with self._transaction():
            changed = self._db.execute(
                "UPDATE requests SET state = ?, result = ?, params = NULL"
                " WHERE batch_seq = ? AND idx = ? AND state = 'pending'",
                (state, result, seq, idx),
            ).rowcount
            if changed:
                self._count(seq, state, changed, now)
            return bool(changed)

    def due(self, *, now: float) -> list[tuple[int, Literal["canceled", "expired"]]]:
        """Batches to settle now: those canceling (their pending requests become `canceled`) and
        those past their expiry (`expired`)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, status FROM batches WHERE deleted = 0 AND status != 'ended'"
                " AND (status = 'canceling' OR expires_at <= ?) ORDER BY seq",
                (now,),
            ).fetchall()
        return [(seq, "canceled" if status == "canceling" else "expired") for seq, status in rows]

    def settle(self, seq: int, state: Literal["canceled", "expired"], *, now: float) -> None:
        """Give every pending request of batch `seq` the result `state`, and end the batch."""
        with self._transaction():
            changed = self._db.execute(
                "UPDATE requests SET state = ?, result = ?, params = NULL"
                " WHERE batch_seq = ? AND state = 'pending'",
                (state, json.dumps({"type": state}), seq),
            ).rowcount
            self._count(seq, state, changed, now)

    def archive(self, *, now: float) -> int:
        """Drop the results of ended batches created more than 29 days ago (`archived_at` is set:
        the batch stays visible); the number of batches archived."""
        with self._transaction():
            rows = self._db.execute(
                "SELECT seq, created_at FROM batches WHERE deleted = 0 AND status = 'ended'"
                " AND archived_at IS NULL AND created_at + ? <= ?",
                (ARCHIVE_AFTER_S, now),
            ).fetchall()
            for seq, created_at in rows:
                self._db.execute(
                    "UPDATE batches SET archived_at = ? WHERE seq = ?", (created_at + ARCHIVE_AFTER_S, seq)
                )
                self._db.execute("DELETE FROM requests WHERE batch_seq = ?", (seq,))
            return len(rows)

    def results(self, seq: int, *, after_idx: int, limit: int) -> list[StoredResult]:
        """The next `limit` results of batch `seq` after request index `after_idx` (a page, so
        that results are streamed without holding the whole file)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT idx, custom_id, result FROM requests"
                " WHERE batch_seq = ? AND idx > ? AND result IS NOT NULL ORDER BY idx LIMIT ?",
                (seq, after_idx, limit),
            ).fetchall()
        return [StoredResult(idx, custom_id, result) for idx, custom_id, result in rows]

    # -- internals -----------------------------------------------------------------------------

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db, self._lock)

    def _get(self, batch_id: str, workspace: str) -> BatchRecord | None:
        row = self._db.execute(
            f"SELECT {_BATCH_COLUMNS} FROM batches WHERE id = ? AND deleted = 0 AND workspace = ?",
            (batch_id, workspace),
        ).fetchone()
        return _record(row) if row is not None else None

    def _seq_of(self, batch_id: str, name: str, workspace: str) -> int:
        row = self._db.execute(
            "SELECT seq FROM batches WHERE id = ? AND workspace = ?", (batch_id, workspace)
        ).fetchone()
        if row is None:
            raise CursorNotFound(name)
        return int(row[0])

    def _count(self, seq: int, state: ResultState, n: int, now: float) -> None:
        """Add `n` results in `state` to batch `seq`, and end it when every request has one."""
        if state not in RESULT_STATES:  # never interpolate anything else into the SQL
            raise ValueError(state)
        self._db.execute(f"UPDATE batches SET {state} = {state} + ? WHERE seq = ?", (n, seq))
        self._db.execute(
            "UPDATE batches SET status = 'ended', ended_at = ? WHERE seq = ? AND status != 'ended'"
            " AND succeeded + errored + canceled + expired >= total",
            (now, seq),
        )


class _Transaction:
    """`with`: the store's lock, then BEGIN IMMEDIATE ... COMMIT (ROLLBACK on an exception)."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock) -> None:
        self._db = db
        self._lock = lock

    def __enter__(self) -> None:
        self._lock.acquire()
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise

    def __exit__(self, kind: object, value: object, traceback: object) -> None:
        try:
            self._db.execute("ROLLBACK" if kind is not None else "COMMIT")
        finally:
            self._lock.release()


def _record(row: Any) -> BatchRecord:
    seq, batch_id, status, created, expires, ended, cancel, archived, betas, total, *counts = row
    succeeded, errored, canceled, expired = (int(c) for c in counts)
    return BatchRecord(
        seq=int(seq),
        id=str(batch_id),
        status=status,
        created_at=float(created),
        expires_at=float(expires),
        ended_at=_optional(ended),
        cancel_initiated_at=_optional(cancel),
        archived_at=_optional(archived),
        betas=tuple(json.loads(betas)),
        total=int(total),
        succeeded=succeeded,
        errored=errored,
        canceled=canceled,
        expired=expired,
    )


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)
