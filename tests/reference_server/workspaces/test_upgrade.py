"""An upgrade keeps every row: databases as the server wrote them before workspaces (files with
their bytes, an ended batch with its result, a pending batch request, a code execution
container) are opened by today's server with a keys file; every row is the default workspace's
(the `--api-key` beside the file sees them all, and a pending request still runs), and the
keys file's other workspaces see none of them."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from litestar.testing import TestClient

from reference_server.app import create_app
from reference_server.batches.runtime import DATABASE_NAME
from reference_server.code_execution import ContainerStore, UnknownContainer
from reference_server.engine.scripted import ScriptedEngine
from reference_server.settings import Settings
from tests.reference_server.test_app import assert_error

from .test_workspaces import B_KEY, KEYS, OLD_KEY, as_key, keys_file

# The schemas as the server wrote them before workspaces (commit 779711f).
OLD_FILES = """
CREATE TABLE files (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, filename TEXT NOT NULL,
    mime_type TEXT NOT NULL, size_bytes INTEGER NOT NULL, created_at REAL NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0, downloadable INTEGER NOT NULL DEFAULT 0
);
INSERT INTO files (id, filename, mime_type, size_bytes, created_at) VALUES
    ('file_old000000000000000000001', 'notes.txt', 'text/plain', 25, 1765000000.0);
"""
OLD_BATCHES = """
CREATE TABLE batches (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL CHECK (status IN ('in_progress', 'canceling', 'ended')),
    created_at REAL NOT NULL, expires_at REAL NOT NULL, ended_at REAL, cancel_initiated_at REAL,
    archived_at REAL, deleted INTEGER NOT NULL DEFAULT 0, betas TEXT NOT NULL, api_version TEXT,
    total INTEGER NOT NULL, succeeded INTEGER NOT NULL DEFAULT 0, errored INTEGER NOT NULL DEFAULT 0,
    canceled INTEGER NOT NULL DEFAULT 0, expired INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE requests (
    batch_seq INTEGER NOT NULL REFERENCES batches (seq), idx INTEGER NOT NULL, custom_id TEXT NOT NULL,
    params TEXT, state TEXT NOT NULL CHECK (state IN ('pending', 'succeeded', 'errored', 'canceled', 'expired')),
    result TEXT, model TEXT, PRIMARY KEY (batch_seq, idx)
) WITHOUT ROWID;
CREATE INDEX requests_pending ON requests (batch_seq, idx) WHERE state = 'pending';
CREATE INDEX batches_open ON batches (seq) WHERE status != 'ended';
PRAGMA user_version = 3;
"""
OLD_CONTAINERS = """
CREATE TABLE containers (
    id TEXT PRIMARY KEY, created_at REAL NOT NULL, used_at REAL NOT NULL, expired INTEGER NOT NULL DEFAULT 0
);
"""
PARAMS = {"model": "scripted", "max_tokens": 20, "messages": [{"role": "user", "content": "Hi"}]}


def write_old_databases(data: Path) -> None:
    now = time.time()
    with sqlite3.connect(data / "files.sqlite3") as db:
        db.executescript(OLD_FILES)
    (data / "files").mkdir()
    (data / "files" / "file_old000000000000000000001").write_bytes(b"The harbour opens at six.")
    with sqlite3.connect(data / DATABASE_NAME) as db:
        db.executescript(OLD_BATCHES)
        db.execute(
            "INSERT INTO batches (id, status, created_at, expires_at, ended_at, betas, total, succeeded)"
            " VALUES ('msgbatch_old_ended', 'ended', ?, ?, ?, '[]', 1, 1)",
            (now - 60, now + 3600, now - 30),
        )
        result = {"type": "succeeded", "message": {"id": "msg_old"}}
        db.execute(
            "INSERT INTO requests VALUES (1, 0, 'done', NULL, 'succeeded', ?, 'scripted')",
            (json.dumps(result),),
        )
        db.execute(
            "INSERT INTO batches (id, status, created_at, expires_at, betas, total)"
            " VALUES ('msgbatch_old_pending', 'in_progress', ?, ?, '[]', 1)",
            (now - 10, now + 3600),
        )
        db.execute(
            "INSERT INTO requests VALUES (2, 0, 'waiting', ?, 'pending', NULL, 'scripted')",
            (json.dumps(PARAMS),),
        )
    with sqlite3.connect(data / "containers.sqlite3") as db:
        db.executescript(OLD_CONTAINERS)
        db.execute("INSERT INTO containers VALUES ('container_old', ?, ?, 0)", (now, now))
    (data / "containers" / "container_old").mkdir(parents=True)


def test_every_old_row_is_the_default_workspaces(tmp_path):
    write_old_databases(tmp_path)
    engine = ScriptedEngine("ok", model_id="scripted", context_window=4096)
    settings = Settings(data_dir=tmp_path, keys_file=keys_file(tmp_path, KEYS), api_key=OLD_KEY)
    with TestClient(create_app(settings, engine=engine)) as client:
        old, other = as_key(OLD_KEY), as_key(B_KEY)
        assert client.get("/v1/files/file_old000000000000000000001", headers=old).json()["size_bytes"] == 25
        source = {"type": "document", "source": {"type": "file", "file_id": "file_old000000000000000000001"}}
        counted = {"model": "scripted", "messages": [{"role": "user", "content": [source]}]}
        assert client.post("/v1/messages/count_tokens", json=counted, headers=old).status_code == 200
        assert '"msg_old"' in client.get("/v1/messages/batches/msgbatch_old_ended/results", headers=old).text
        deadline = time.monotonic() + 10
        while (
            client.get("/v1/messages/batches/msgbatch_old_pending", headers=old).json()["processing_status"]
            != "ended"
        ):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert (
            '"succeeded"' in client.get("/v1/messages/batches/msgbatch_old_pending/results", headers=old).text
        )
        listed = client.get("/v1/messages/batches", headers=old).json()["data"]
        assert {b["id"] for b in listed} == {"msgbatch_old_ended", "msgbatch_old_pending"}
        for path in (
            "/v1/files/file_old000000000000000000001",
            "/v1/messages/batches/msgbatch_old_ended",
            "/v1/messages/batches/msgbatch_old_ended/results",
        ):
            assert_error(client.get(path, headers=other), 404, "not_found_error")
        assert client.get("/v1/files", headers=other).json()["data"] == []
        assert client.get("/v1/messages/batches", headers=other).json()["data"] == []
    store = ContainerStore(tmp_path)
    assert store.use("container_old").workspace == "default"
    with pytest.raises(UnknownContainer):
        store.scoped("wrkspc_team_b").use("container_old")
    store.close()
