"""Message Batches over time, in process on the scripted engine: expiry after 24 hours (a moved
clock), cancellation and expiry across a restart, pending requests resumed after a stop,
archiving after 29 days, and two servers sharing one data directory."""

from __future__ import annotations

import time
from datetime import timedelta

from reference_server.batches.runtime import DATABASE_NAME
from reference_server.batches.store import ARCHIVE_AFTER_S, EXPIRY_S, BatchStore
from reference_server.engine.scripted import ScriptedEngine

from .conftest import (
    MODEL,
    REPLY,
    Clock,
    assert_error,
    batch_body,
    batch_client,
    batches_of,
    parse_time,
    results_of,
    slow_engine,
    wait_until_ended,
)


def test_a_batch_expires_24_hours_after_creation(tmp_path):
    clock = Clock()
    with batch_client(tmp_path, slow_engine(10)) as client:  # nothing finishes on its own
        batches = batches_of(client)
        batches.processor.clock = clock
        batch_id = client.post("/v1/messages/batches", json=batch_body(5)).json()["id"]
        clock.now += EXPIRY_S - 1
        batches.processor.wake()
        time.sleep(0.2)
        assert client.get(f"/v1/messages/batches/{batch_id}").json()["processing_status"] == "in_progress"
        clock.now += 1
        batches.processor.wake()
        batch = wait_until_ended(client, batch_id)
        assert batch["request_counts"] == {
            "processing": 0,
            "succeeded": 0,
            "errored": 0,
            "canceled": 0,
            "expired": 5,
        }
        assert batch["ended_at"] == batch["expires_at"]
        assert {r["type"] for r in results_of(client, batch).values()} == {"expired"}


def test_expiry_and_cancellation_carry_across_a_restart(tmp_path):
    # Both batches were accepted by a server that stopped before it could run them.
    store = BatchStore(tmp_path / DATABASE_NAME)
    day_old = store.create(
        "msgbatch_old", [("a", "{}"), ("b", "{}")], betas=[], now=time.time() - EXPIRY_S - 60
    )
    canceled = store.create("msgbatch_can", [("a", "{}")], betas=[], now=time.time())
    store.cancel(canceled.id, now=time.time())
    store.close()
    with batch_client(tmp_path) as client:
        old = wait_until_ended(client, day_old.id)
        assert old["request_counts"]["expired"] == 2
        stopped = wait_until_ended(client, canceled.id)
        assert stopped["request_counts"]["canceled"] == 1


def test_pending_requests_run_after_a_restart_and_finished_ones_are_kept(tmp_path):
    with batch_client(tmp_path, slow_engine(0.02)) as client:
        batch_id = client.post("/v1/messages/batches", json=batch_body(8)).json()["id"]
        store = batches_of(client).store
        deadline = time.monotonic() + 10
        while store.get(batch_id).done < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    # Stopped mid-batch; what was written stays, the rest runs on the next start.
    reopened = BatchStore(tmp_path / DATABASE_NAME)
    before = {
        r.custom_id: r.result for r in reopened.results(reopened.get(batch_id).seq, after_idx=-1, limit=100)
    }
    reopened.close()
    assert 2 <= len(before) < 8
    with batch_client(tmp_path) as client:
        batch = wait_until_ended(client, batch_id)
        assert batch["request_counts"]["succeeded"] == 8
        results = results_of(client, batch)
    assert len(results) == 8
    for custom_id, result in before.items():
        assert results[custom_id]["message"]["id"] in result  # the same answer, not a rerun


def test_results_are_archived_after_29_days(tmp_path):
    clock = Clock()
    with batch_client(tmp_path) as client:
        batches = batches_of(client)
        batches.processor.clock = clock
        batch = wait_until_ended(client, client.post("/v1/messages/batches", json=batch_body(1)).json()["id"])
        clock.now += ARCHIVE_AFTER_S
        batches.processor.wake()
        deadline = time.monotonic() + 5
        while (archived := client.get(f"/v1/messages/batches/{batch['id']}").json())["archived_at"] is None:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert parse_time(archived["archived_at"]) - parse_time(archived["created_at"]) == timedelta(days=29)
        assert archived["request_counts"] == batch["request_counts"]
        assert_error(client.get(batch["results_url"]), 404, "not_found_error")


def test_two_servers_on_one_directory_process_each_request_once(tmp_path):
    first_engine, second_engine = ScriptedEngine(REPLY, model_id=MODEL), ScriptedEngine(REPLY, model_id=MODEL)
    with batch_client(tmp_path, first_engine) as first:
        wait_until_ended(first, first.post("/v1/messages/batches", json=batch_body(1)).json()["id"])
        with batch_client(tmp_path, second_engine) as second:
            assert batches_of(first).processor.leader
            assert not batches_of(second).processor.leader
            batch_id = second.post("/v1/messages/batches", json=batch_body(3)).json()["id"]
            batch = wait_until_ended(second, batch_id)  # run by the first server
            assert len(results_of(second, batch)) == 3
            assert (len(first_engine.requests), len(second_engine.requests)) == (4, 0)
    with batch_client(tmp_path, second_engine) as alone:
        assert batches_of(alone).processor.leader  # the lock was released with the first server
