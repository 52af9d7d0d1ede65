"""The SQLite store of Message Batches: states, counts, pagination, and what survives a crash."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from contextlib import closing
from pathlib import Path

import pytest

from reference_server.batches.store import (
    ARCHIVE_AFTER_S,
    EXPIRY_S,
    BatchStore,
    CursorNotFound,
    NotEnded,
)

T0 = 1_800_000_000.0
OK = json.dumps({"type": "succeeded", "message": {}})


@pytest.fixture
def store(tmp_path: Path):
    opened = BatchStore(tmp_path / "batches.sqlite3")
    yield opened
    opened.close()


def make(store: BatchStore, batch_id: str, count: int = 3, now: float = T0):
    return store.create(
        batch_id, [(f"c{i}", json.dumps({"i": i})) for i in range(count)], betas=["b"], now=now
    )


def test_a_new_batch_is_in_progress_with_every_request_pending(store):
    record = make(store, "msgbatch_a", 3)
    assert (record.status, record.total, record.done) == ("in_progress", 3, 0)
    assert record.expires_at == T0 + EXPIRY_S
    assert (record.ended_at, record.cancel_initiated_at, record.archived_at) == (None, None, None)
    assert record.betas == ("b",)
    pending = store.pending(10)
    assert [(p.batch_id, p.idx, p.custom_id, json.loads(p.params)) for p in pending] == [
        ("msgbatch_a", i, f"c{i}", {"i": i}) for i in range(3)
    ]


def test_the_database_is_in_wal_mode_and_private(store):
    with closing(sqlite3.connect(store.path)) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.path.stat().st_mode & 0o777 == 0o600  # it holds prompts and answers


def test_results_are_counted_and_the_last_one_ends_the_batch(store):
    record = make(store, "msgbatch_a", 3)
    assert store.record((record.seq, 0), "succeeded", OK, now=T0 + 1)
    assert store.record((record.seq, 2), "errored", '{"type":"errored"}', now=T0 + 2)
    middle = store.get("msgbatch_a")
    assert (middle.status, middle.succeeded, middle.errored, middle.ended_at) == ("in_progress", 1, 1, None)
    assert [p.idx for p in store.pending(10)] == [1]
    assert store.record((record.seq, 1), "succeeded", OK, now=T0 + 3)
    ended = store.get("msgbatch_a")
    assert (ended.status, ended.succeeded, ended.errored, ended.ended_at) == ("ended", 2, 1, T0 + 3)
    assert store.pending(10) == []
    assert [(r.idx, r.custom_id) for r in store.results(record.seq, after_idx=-1, limit=10)] == [
        (0, "c0"),
        (1, "c1"),
        (2, "c2"),
    ]
    assert [r.idx for r in store.results(record.seq, after_idx=0, limit=1)] == [1]  # paged


def test_a_result_is_written_once(store):
    record = make(store, "msgbatch_a", 2)
    assert store.record((record.seq, 0), "succeeded", OK, now=T0)
    assert not store.record((record.seq, 0), "errored", "{}", now=T0)  # a late second answer
    again = store.get("msgbatch_a")
    assert (again.succeeded, again.errored) == (1, 0)
    assert json.loads(store.results(record.seq, after_idx=-1, limit=5)[0].result)["type"] == "succeeded"


def test_pending_skips_running_requests_and_takes_the_oldest_batch_first(store):
    first, second = make(store, "msgbatch_a", 2), make(store, "msgbatch_b", 2)
    assert [p.key for p in store.pending(3)] == [(first.seq, 0), (first.seq, 1), (second.seq, 0)]
    assert [p.key for p in store.pending(2, skip=[(first.seq, 0)])] == [(first.seq, 1), (second.seq, 0)]


def test_cancel_then_settle_cancels_what_has_no_result(store):
    record = make(store, "msgbatch_a", 3)
    store.record((record.seq, 0), "succeeded", OK, now=T0)
    canceling = store.cancel("msgbatch_a", now=T0 + 5)
    assert (canceling.status, canceling.cancel_initiated_at) == ("canceling", T0 + 5)
    assert store.pending(10) == []  # a canceling batch starts nothing new
    assert store.due(now=T0 + 6) == [(record.seq, "canceled")]
    store.settle(record.seq, "canceled", now=T0 + 6)
    ended = store.get("msgbatch_a")
    assert (ended.status, ended.succeeded, ended.canceled, ended.ended_at) == ("ended", 1, 2, T0 + 6)
    lines = [json.loads(r.result) for r in store.results(record.seq, after_idx=-1, limit=5)]
    assert [line["type"] for line in lines] == ["succeeded", "canceled", "canceled"]
    # Canceling again changes nothing (the batch has ended).
    assert store.cancel("msgbatch_a", now=T0 + 9) == ended


def test_a_batch_past_its_expiry_is_due_and_its_pending_requests_expire(store):
    record = make(store, "msgbatch_a", 2)
    store.record((record.seq, 1), "succeeded", OK, now=T0)
    assert store.due(now=T0 + EXPIRY_S - 1) == []
    assert store.due(now=T0 + EXPIRY_S) == [(record.seq, "expired")]
    store.settle(record.seq, "expired", now=T0 + EXPIRY_S)
    ended = store.get("msgbatch_a")
    assert (ended.status, ended.succeeded, ended.expired) == ("ended", 1, 1)
    assert store.due(now=T0 + 2 * EXPIRY_S) == []


def test_only_an_ended_batch_can_be_deleted(store):
    record = make(store, "msgbatch_a", 1)
    with pytest.raises(NotEnded):
        store.delete("msgbatch_a")
    store.record((record.seq, 0), "succeeded", OK, now=T0)
    assert store.delete("msgbatch_a")
    assert store.get("msgbatch_a") is None
    assert not store.delete("msgbatch_a")
    assert store.results(record.seq, after_idx=-1, limit=5) == []


def test_pages_are_newest_first_with_both_cursors(store):
    ids = [f"msgbatch_{i}" for i in range(5)]
    for i, batch_id in enumerate(ids):
        make(store, batch_id, 1, now=T0 + i)
    newest = ids[::-1]  # 4 3 2 1 0

    def page(**cursor):
        records, more = store.page(limit=2, **{"after_id": None, "before_id": None, **cursor})
        return [r.id for r in records], more

    assert page() == (newest[0:2], True)
    assert page(after_id=newest[1]) == (newest[2:4], True)
    assert page(after_id=newest[3]) == (newest[4:5], False)
    assert page(before_id=newest[4]) == (newest[2:4], True)
    assert page(before_id=newest[2]) == (newest[0:2], False)
    assert store.page(after_id=None, before_id=None, limit=1000)[0][0].id == newest[0]
    with pytest.raises(CursorNotFound):
        page(after_id="msgbatch_unknown")


def test_a_deleted_batch_leaves_the_list_but_still_works_as_a_cursor(store):
    for i in range(3):
        record = make(store, f"msgbatch_{i}", 1, now=T0 + i)
        store.record((record.seq, 0), "succeeded", OK, now=T0 + i)
    store.delete("msgbatch_1")
    assert [r.id for r in store.page(after_id=None, before_id=None, limit=10)[0]] == [
        "msgbatch_2",
        "msgbatch_0",
    ]
    assert [r.id for r in store.page(after_id="msgbatch_1", before_id=None, limit=10)[0]] == ["msgbatch_0"]


def test_results_are_archived_29_days_after_creation(store):
    record = make(store, "msgbatch_a", 1)
    store.record((record.seq, 0), "succeeded", OK, now=T0)
    assert store.archive(now=T0 + ARCHIVE_AFTER_S - 1) == 0
    assert store.archive(now=T0 + ARCHIVE_AFTER_S + 5) == 1
    archived = store.get("msgbatch_a")
    assert archived.archived_at == T0 + ARCHIVE_AFTER_S
    assert (archived.status, archived.succeeded) == ("ended", 1)  # still visible, counts kept
    assert store.results(record.seq, after_idx=-1, limit=5) == []


def test_everything_survives_closing_and_reopening(tmp_path):
    path = tmp_path / "batches.sqlite3"
    first = BatchStore(path)
    record = make(first, "msgbatch_a", 2)
    first.record((record.seq, 0), "succeeded", OK, now=T0)
    first.close()
    second = BatchStore(path)
    try:
        again = second.get("msgbatch_a")
        assert (again.status, again.succeeded, again.total) == ("in_progress", 1, 2)
        assert [p.idx for p in second.pending(5)] == [1]
    finally:
        second.close()


# A writer that records results as fast as it can until it is killed.
WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from reference_server.batches.store import BatchStore

    store = BatchStore(Path(sys.argv[1]))
    record = store.create("msgbatch_k", [(f"c{i}", "{}") for i in range(20_000)], betas=[], now=0.0)
    print("created", flush=True)
    for i in range(20_000):
        store.record((record.seq, i), "succeeded" if i % 3 else "errored", '{"type":"x"}', now=1.0)
    """
)


def test_a_kill_9_mid_write_leaves_states_and_counts_consistent(tmp_path):
    path = tmp_path / "batches.sqlite3"
    command = [sys.executable, "-c", WRITER, str(path)]
    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}
    with subprocess.Popen(command, stdout=subprocess.PIPE, env=env) as writer:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == b"created"  # the batch was acknowledged
        time.sleep(0.3)  # some results written, most not
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    store = BatchStore(path)
    try:
        record = store.get("msgbatch_k")
        assert record is not None
        assert record.total == 20_000
        with closing(sqlite3.connect(path)) as db:
            states = dict(db.execute("SELECT state, count(*) FROM requests GROUP BY state").fetchall())
        assert 0 < states["succeeded"] + states["errored"] < 20_000
        # The counters were written in the same transactions as the states they count.
        assert (record.succeeded, record.errored) == (states["succeeded"], states["errored"])
        assert states["pending"] == record.total - record.done
        assert len(store.pending(10)) == 10
        assert record.status == "in_progress"
    finally:
        store.close()
