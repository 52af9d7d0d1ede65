"""Custom skills on disk: rows in SQLite (`skills.sqlite3`), each version's files in
`skills/<skill id>/<version>/<name>/`, both in the data directory.

A version's files are written into a temporary directory and renamed into place before its row
is committed, so a crash leaves either a listed version with all its files or nothing listed
(`open` removes the leftovers). Versions are the API's: a Unix timestamp in microseconds, as a
string, increasing within a skill; `latest` names the newest one left. Deleted rows stay as
tombstones (an id is never reused, a cursor naming one still works); their files go.

The methods are synchronous and serialised by a lock: call them off the event loop.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sqlite3
import string
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reference_server.workspaces.keys import DEFAULT_WORKSPACE
from reference_server.workspaces.migration import add_columns

from .bundle import Bundle

__all__ = ["SkillRecord", "SkillStore", "SkillVersionRecord"]

_ALPHABET = string.ascii_letters + string.digits
_SCHEMA = """
CREATE TABLE IF NOT EXISTS skills (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- creation order: lists are newest first
    id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,                     -- the slug every version must keep
    display_name TEXT NOT NULL,
    created_at REAL NOT NULL,               -- Unix seconds
    updated_at REAL NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    workspace TEXT NOT NULL DEFAULT 'default'  -- its versions are its workspace's too
);
CREATE TABLE IF NOT EXISTS skill_versions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    skill_id TEXT NOT NULL,
    version TEXT NOT NULL,
    description TEXT NOT NULL,
    created_at REAL NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    UNIQUE (skill_id, version)
);
"""
_TEMP_PREFIX = ".upload-"


@dataclass(frozen=True, slots=True)
class SkillRecord:
    id: str
    name: str
    display_name: str
    created_at: float
    updated_at: float
    latest_version: str | None  # None only between deleting its versions and deleting it


@dataclass(frozen=True, slots=True)
class SkillVersionRecord:
    skill_id: str
    version: str
    name: str
    description: str
    created_at: float
    directory: Path  # the version's files (the skill's top-level directory, named `name`)


class NameChanged(ValueError):
    """A new version's SKILL.md names another skill than the first version's."""


class SkillStore:
    def __init__(self, root: Path, workspace: str = DEFAULT_WORKSPACE) -> None:
        """`root`: the data directory. Every method sees and makes `workspace`'s skills only
        (`scoped` gives another workspace's view of the same store)."""
        self.workspace = workspace
        self._files: Path = root / "skills"
        self._files.mkdir(parents=True, exist_ok=True)
        os.chmod(self._files, 0o755)  # a sandboxed run reads a version's files through a mount
        self._db = sqlite3.connect(root / "skills.sqlite3", check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        add_columns(self._db, "skills", {"workspace": f"TEXT NOT NULL DEFAULT '{DEFAULT_WORKSPACE}'"})
        self._lock = threading.Lock()
        self._sweep()

    def scoped(self, workspace: str) -> SkillStore:
        """The same store (one connection and lock), seen from `workspace`."""
        view = object.__new__(SkillStore)
        view.workspace, view._files, view._db, view._lock = workspace, self._files, self._db, self._lock
        return view

    def close(self) -> None:
        self._db.close()

    def create(self, bundle: Bundle, display_name: str | None) -> SkillRecord:
        """A new skill holding `bundle` as its first version."""
        skill_id = "skill_01" + "".join(secrets.choice(_ALPHABET) for _ in range(22))
        now = time.time()
        with self._lock:
            version = self._write(skill_id, None, bundle)
            with self._db:
                self._db.execute(
                    "INSERT INTO skills (id, name, display_name, created_at, updated_at, workspace)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (skill_id, bundle.name, display_name or bundle.name, now, now, self.workspace),
                )
                self._insert_version(skill_id, version, bundle, now)
            found = self._skill(skill_id)
        assert found is not None
        return found

    def add_version(self, skill_id: str, bundle: Bundle) -> SkillVersionRecord | None:
        """A new version of `skill_id` (None: no such skill); `NameChanged` when the bundle's
        name is not the skill's."""
        now = time.time()
        with self._lock:
            skill = self._skill(skill_id)
            if skill is None:
                return None
            if bundle.name != skill.name:
                raise NameChanged(skill.name)
            version = self._write(skill_id, skill.latest_version, bundle)
            with self._db:
                self._insert_version(skill_id, version, bundle, now)
                self._db.execute("UPDATE skills SET updated_at = ? WHERE id = ?", (now, skill_id))
            found = self._version(skill_id, version)
        assert found is not None
        return found

    def get(self, skill_id: str) -> SkillRecord | None:
        with self._lock:
            return self._skill(skill_id)

    def page(
        self, *, after: str | None, limit: int, source: str | None = None
    ) -> tuple[list[SkillRecord], bool] | None:
        """Skills newest first, after the skill `after` (None: from the newest); None when
        `after` names no skill this store ever held. Only custom skills are held."""
        if source not in (None, "custom"):
            return [], False
        with self._lock:
            rows = self._walk(
                "SELECT seq FROM skills WHERE id = ? AND workspace = ?",
                (after, self.workspace),
                "SELECT id FROM skills WHERE deleted = 0 AND workspace = ? AND seq < ?"
                " ORDER BY seq DESC LIMIT ?",
                (self.workspace,),
                after,
                limit,
            )
            if rows is None:
                return None
            skills = [self._skill(row[0]) for row in rows[:limit]]
        return [s for s in skills if s is not None], len(rows) > limit

    def _walk(
        self,
        cursor: str,
        cursor_args: tuple[Any, ...],
        query: str,
        args: tuple[Any, ...],
        after: str | None,
        limit: int,
    ) -> list[Any] | None:
        """One page newest first: `query`'s rows (its last two parameters: a sequence number
        and a limit) below the sequence number `cursor` finds for `after`, limit + 1 of them
        (the last says more follow); None when `after` is given and `cursor` finds nothing."""
        start = 1 << 62
        if after is not None:
            row = self._db.execute(cursor, cursor_args).fetchone()
            if row is None:
                return None
            start = row[0]
        found: list[Any] = self._db.execute(query, (*args, start, limit + 1)).fetchall()
        return found

    def delete(self, skill_id: str) -> bool | None:
        """Delete a skill that holds no version: True; False when versions remain; None when
        there is no such skill."""
        with self._lock:
            skill = self._skill(skill_id)
            if skill is None:
                return None
            if skill.latest_version is not None:
                return False
            with self._db:
                self._db.execute("UPDATE skills SET deleted = 1 WHERE id = ?", (skill_id,))
            shutil.rmtree(self._files / skill_id, ignore_errors=True)
        return True

    def version(self, skill_id: str, version: str) -> SkillVersionRecord | None:
        """A live version (`latest`: the newest one left)."""
        with self._lock:
            if version == "latest":
                skill = self._skill(skill_id)
                if skill is None or skill.latest_version is None:
                    return None
                version = skill.latest_version
            return self._version(skill_id, version)

    def versions(
        self, skill_id: str, *, after: str | None, limit: int
    ) -> tuple[list[SkillVersionRecord], bool] | None:
        """A skill's versions newest first, after version `after`; None when the skill, or the
        cursor's version, does not exist."""
        with self._lock:
            if self._skill(skill_id) is None:
                return None
            rows = self._walk(
                "SELECT seq FROM skill_versions WHERE skill_id = ? AND version = ?",
                (skill_id, after),
                "SELECT version FROM skill_versions WHERE skill_id = ? AND deleted = 0 AND seq < ?"
                " ORDER BY seq DESC LIMIT ?",
                (skill_id,),
                after,
                limit,
            )
            if rows is None:
                return None
            found = [self._version(skill_id, row[0]) for row in rows[:limit]]
        return [v for v in found if v is not None], len(rows) > limit

    def delete_version(self, skill_id: str, version: str) -> bool:
        with self._lock:
            if self._version(skill_id, version) is None:
                return False
            with self._db:
                self._db.execute(
                    "UPDATE skill_versions SET deleted = 1 WHERE skill_id = ? AND version = ?",
                    (skill_id, version),
                )
                self._db.execute("UPDATE skills SET updated_at = ? WHERE id = ?", (time.time(), skill_id))
            shutil.rmtree(self._files / skill_id / version, ignore_errors=True)
        return True

    # Under the lock.

    def _skill(self, skill_id: str) -> SkillRecord | None:
        row = self._db.execute(
            "SELECT id, name, display_name, created_at, updated_at FROM skills"
            " WHERE id = ? AND deleted = 0 AND workspace = ?",
            (skill_id, self.workspace),
        ).fetchone()
        if row is None:
            return None
        latest = self._db.execute(
            "SELECT version FROM skill_versions WHERE skill_id = ? AND deleted = 0 ORDER BY seq DESC LIMIT 1",
            (skill_id,),
        ).fetchone()
        found_id, name, display_name, created, updated = row
        return SkillRecord(found_id, name, display_name, created, updated, latest[0] if latest else None)

    def _version(self, skill_id: str, version: str) -> SkillVersionRecord | None:
        row = self._db.execute(
            "SELECT v.description, v.created_at, s.name FROM skill_versions v"
            " JOIN skills s ON s.id = v.skill_id"
            " WHERE v.skill_id = ? AND v.version = ? AND v.deleted = 0 AND s.deleted = 0 AND s.workspace = ?",
            (skill_id, version, self.workspace),
        ).fetchone()
        if row is None:
            return None
        description, created, name = row
        directory = self._files / skill_id / version / name
        return SkillVersionRecord(skill_id, version, name, description, created, directory)

    def _insert_version(self, skill_id: str, version: str, bundle: Bundle, now: float) -> None:
        self._db.execute(
            "INSERT INTO skill_versions (skill_id, version, description, created_at) VALUES (?, ?, ?, ?)",
            (skill_id, version, bundle.description, now),
        )

    def _write(self, skill_id: str, latest: str | None, bundle: Bundle) -> str:
        """Write `bundle` as a new version's files; its version string."""
        version = str(time.time_ns() // 1000)
        if latest is not None and int(version) <= int(latest):
            version = str(int(latest) + 1)
        home = self._files / skill_id
        home.mkdir(mode=0o755, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=_TEMP_PREFIX, dir=home))
        try:
            os.chmod(staging, 0o755)
            top = staging / bundle.name
            for relative, data in bundle.files:
                path = top / relative
                path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                path.write_bytes(data)
                os.chmod(path, 0o644)  # read by a run's own user, never written
            top.mkdir(mode=0o755, exist_ok=True)
            os.rename(staging, home / version)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return version

    def _sweep(self) -> None:
        """Remove what a crash left: staging directories and versions no live row names."""
        live = set(
            self._db.execute(
                "SELECT skill_id || '/' || version FROM skill_versions WHERE deleted = 0"
            ).fetchall()
        )
        names = {row[0] for row in live}
        for home in self._files.iterdir():
            if not home.is_dir():
                continue
            for entry in home.iterdir():
                if f"{home.name}/{entry.name}" not in names:
                    shutil.rmtree(entry, ignore_errors=True)
