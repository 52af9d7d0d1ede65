"""Servers of different models on one data directory (issue 23): each batch request is run by a
server that serves its model, never errored by one that does not; a request whose model no
running server serves waits, and runs once one starts; a model the creating server does not
serve is answered as that server would (not_found_error); a version 1 database is migrated."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from reference_server.batches.processor import lock_name
from reference_server.batches.runtime import DATABASE_NAME
from reference_server.batches.store import BatchStore
from reference_server.engine.scripted import ScriptedEngine

from .conftest import REPLY, batch_body, batch_client, batches_of, results_of, wait_until_ended

TINY, SMOL = "tiny-model", "smol-model"


def engine(model: str) -> ScriptedEngine:
    return ScriptedEngine(REPLY, model_id=model, context_window=256)


def body(model: str, count: int = 2) -> dict[str, Any]:
    batch = batch_body(count)
    for item in batch["requests"]:
        item["params"]["model"] = model
    return batch


def test_each_servers_batches_are_run_by_a_server_of_their_model(tmp_path):
    tiny, smol = engine(TINY), engine(SMOL)
    with batch_client(tmp_path, tiny) as first, batch_client(tmp_path, smol) as second:
        assert batches_of(first).processor.processed_models == {TINY}
        assert batches_of(second).processor.processed_models == {SMOL}
        assert (tmp_path / lock_name(TINY)).exists()
        on_tiny = first.post("/v1/messages/batches", json=body(TINY, 3)).json()["id"]
        on_smol = second.post("/v1/messages/batches", json=body(SMOL, 2)).json()["id"]
        # read through the other server: one database
        for client, batch_id, model in ((second, on_tiny, TINY), (first, on_smol, SMOL)):
            batch = wait_until_ended(client, batch_id)
            results = results_of(client, batch)
            assert {r["type"] for r in results.values()} == {"succeeded"}, results
            assert {r["message"]["model"] for r in results.values()} == {model}
    assert (len(tiny.requests), len(smol.requests)) == (3, 2)


def test_a_model_the_creating_server_does_not_serve_is_its_not_found_error(tmp_path):
    tiny, smol = engine(TINY), engine(SMOL)
    with batch_client(tmp_path, tiny) as first, batch_client(tmp_path, smol):
        batch = wait_until_ended(
            first, first.post("/v1/messages/batches", json=body("no-such-model", 1)).json()["id"]
        )
        (result,) = results_of(first, batch).values()
    assert result["type"] == "errored"
    assert result["error"]["error"]["type"] == "not_found_error"
    assert smol.requests == []  # answered by a server of the creator's model


def test_a_request_waits_for_a_server_of_its_model(tmp_path):
    store = BatchStore(tmp_path / DATABASE_NAME)  # written by a tiny-model server now gone
    params = json.dumps(body(TINY, 1)["requests"][0]["params"])
    batch_id = store.create("msgbatch_waits", [("c0", params)], betas=[], now=time.time(), models=[TINY]).id
    store.close()
    smol = engine(SMOL)
    with batch_client(tmp_path, smol) as other:
        time.sleep(3 * batches_of(other).processor.tick)
        waiting = other.get(f"/v1/messages/batches/{batch_id}").json()
        assert waiting["processing_status"] == "in_progress"
        assert waiting["request_counts"]["processing"] == 1
        tiny = engine(TINY)
        with batch_client(tmp_path, tiny) as back:
            batch = wait_until_ended(back, batch_id)
            assert [r["type"] for r in results_of(back, batch).values()] == ["succeeded"]
    assert (len(tiny.requests), smol.requests) == (1, [])


def test_a_version_1_database_is_migrated_with_each_pending_requests_model(tmp_path):
    path = tmp_path / DATABASE_NAME
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE batches (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
            status TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL, ended_at REAL,
            cancel_initiated_at REAL, archived_at REAL, deleted INTEGER NOT NULL DEFAULT 0,
            betas TEXT NOT NULL, total INTEGER NOT NULL, succeeded INTEGER NOT NULL DEFAULT 0,
            errored INTEGER NOT NULL DEFAULT 0, canceled INTEGER NOT NULL DEFAULT 0,
            expired INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE requests (batch_seq INTEGER NOT NULL REFERENCES batches (seq), idx INTEGER NOT NULL,
            custom_id TEXT NOT NULL, params TEXT, state TEXT NOT NULL, result TEXT,
            PRIMARY KEY (batch_seq, idx)) WITHOUT ROWID;
        PRAGMA user_version = 1;
        """
    )
    now = time.time()
    db.execute(
        "INSERT INTO batches (id, status, created_at, expires_at, betas, total) VALUES (?, 'in_progress', ?, ?, '[]', 3)",
        ("msgbatch_old", now, now + 86400),
    )
    rows = [
        (0, json.dumps({"model": TINY})),
        (1, json.dumps({"model": SMOL})),
        (2, json.dumps({"messages": []})),
    ]
    db.executemany(
        "INSERT INTO requests (batch_seq, idx, custom_id, params, state) VALUES (1, ?, ?, ?, 'pending')",
        [(idx, f"c{idx}", params) for idx, params in rows],
    )
    db.commit()
    db.close()
    store = BatchStore(path)
    try:
        assert [p.idx for p in store.pending(10, models={TINY})] == [0, 2]  # 2 names none: any server
        assert [p.idx for p in store.pending(10, models={SMOL})] == [1, 2]
        assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 4
        assert {p.api_version for p in store.pending(10)} == {None}  # served with 2023-06-01's rules
    finally:
        store.close()
    BatchStore(path).close()  # opening again leaves it as it is


def test_a_version_2_database_is_migrated_and_its_batches_keep_2023_06_01(tmp_path):
    path = tmp_path / DATABASE_NAME
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE batches (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
            status TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL, ended_at REAL,
            cancel_initiated_at REAL, archived_at REAL, deleted INTEGER NOT NULL DEFAULT 0,
            betas TEXT NOT NULL, total INTEGER NOT NULL, succeeded INTEGER NOT NULL DEFAULT 0,
            errored INTEGER NOT NULL DEFAULT 0, canceled INTEGER NOT NULL DEFAULT 0,
            expired INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE requests (batch_seq INTEGER NOT NULL REFERENCES batches (seq), idx INTEGER NOT NULL,
            custom_id TEXT NOT NULL, params TEXT, state TEXT NOT NULL, result TEXT, model TEXT,
            PRIMARY KEY (batch_seq, idx)) WITHOUT ROWID;
        PRAGMA user_version = 2;
        """
    )
    now = time.time()
    db.execute(
        "INSERT INTO batches (id, status, created_at, expires_at, betas, total) VALUES (?, 'in_progress', ?, ?, '[]', 1)",
        ("msgbatch_two", now, now + 86400),
    )
    db.execute(
        "INSERT INTO requests (batch_seq, idx, custom_id, params, state, model) VALUES (1, 0, 'c0', ?, 'pending', ?)",
        (json.dumps({"model": TINY}), TINY),
    )
    db.commit()
    db.close()
    store = BatchStore(path)
    try:
        [pending] = store.pending(10, models={TINY})
        assert (pending.custom_id, pending.api_version) == ("c0", None)
        assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 4
        later = store.create("msgbatch_new", [("c0", "{}")], betas=[], now=now, api_version="2026-10-21")
        assert later.total == 1
        assert [p.api_version for p in store.pending(10)] == [None, "2026-10-21"]
    finally:
        store.close()
    BatchStore(path).close()  # opening again leaves it as it is
