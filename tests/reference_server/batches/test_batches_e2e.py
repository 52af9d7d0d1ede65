"""Message Batches end to end: `python -m reference_server` on tiny-random in a subprocess, over a
real socket, driven by the official SDK (`client.messages.batches.*`) and, for the `?beta=true`
twins, by raw httpx.

The server these tests use has survived a crash: the module's fixture starts one, submits two
batches, kills it with SIGKILL once the first results are on disk, and restarts it on the same
data directory (the first test checks what the restart recovered). Small max_tokens throughout."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from conformance.wire.launcher import free_port, stop, wait_until_ready

# One worker runs this module (pytest-xdist): its servers start once, not once per worker.
pytestmark = [pytest.mark.mlx, pytest.mark.xdist_group("batches_e2e")]

MODEL = "tiny-random"
# The SDK sends anthropic-version 2026-10-21, which removed temperature: these tests decode
# greedily (temperature 0), so they speak 2023-06-01.
VERSION = {"anthropic-version": "2023-06-01"}
BETA = {**VERSION, "anthropic-beta": "message-batches-2024-09-24"}
# More batch requests than decode rows: without background priority the batch would hold every
# row and interactive requests would queue behind it (the last test).
SERVER_ARGS = ["--max-batch", "4", "--batch-concurrency", "8", "--ping-interval", "0.5"]
# The batches submitted before the crash, by name: their custom_ids.
BEFORE_CRASH = {"first": [f"a{i}" for i in range(6)], "second": [f"b{i}" for i in range(3)]}


def params(text: str, max_tokens: int = 6, **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": text}],
        "temperature": 0,
        **extra,
    }


def start(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`python -m reference_server` on `data_dir` and a free port, ready to answer."""
    port, log = free_port(), data_dir / "server.log"
    command = [sys.executable, "-m", "reference_server", "--model", MODEL, "--port", str(port)]
    command += ["--data-dir", str(data_dir), *SERVER_ARGS]
    with log.open("ab") as sink:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(url, process, log, timeout=300, api_key=None)
    except BaseException:
        stop(process)
        raise
    return process, url


def written(database: Path) -> dict[tuple[str, str], str]:
    """(batch id, custom_id) -> result JSON of every result on disk (read beside the server)."""
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)) as db:
        rows = db.execute(
            "SELECT b.id, r.custom_id, r.result FROM requests AS r JOIN batches AS b ON b.seq = r.batch_seq"
            " WHERE r.result IS NOT NULL"
        ).fetchall()
    return {(batch_id, custom_id): result for batch_id, custom_id, result in rows}


@dataclass(frozen=True)
class Survivor:
    url: str
    batch_ids: dict[str, str]  # BEFORE_CRASH's names -> the ids the server answered
    before: dict[tuple[str, str], str]  # the results on disk when the server was killed


@pytest.fixture(scope="module")
def survivor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Survivor]:
    data = tmp_path_factory.mktemp("batches-e2e")
    process, url = start(data)
    try:
        with anthropic.Anthropic(
            base_url=url, api_key="unused", default_headers=VERSION, max_retries=0
        ) as client:
            ids = {
                name: client.messages.batches.create(
                    requests=[
                        {"custom_id": c, "params": params(f"A story about {c}.", 24)} for c in custom_ids
                    ]
                ).id
                for name, custom_ids in BEFORE_CRASH.items()
            }
        deadline = time.monotonic() + 60
        while not written(data / "batches.sqlite3"):  # the first results are on disk ...
            assert time.monotonic() < deadline, "no result was written"
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)  # ... and the rest is running or queued
        process.wait()
    finally:
        stop(process)
    before = written(data / "batches.sqlite3")
    process, url = start(data)
    try:
        yield Survivor(url, ids, before)
    finally:
        stop(process)


@pytest.fixture
def url(survivor: Survivor) -> str:
    return survivor.url


@pytest.fixture
def client(url: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=url, api_key="unused", default_headers=VERSION, max_retries=0) as sdk:
        yield sdk


def wait_until_ended(client: anthropic.Anthropic, batch_id: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while (batch := client.messages.batches.retrieve(batch_id)).processing_status != "ended":
        counts = batch.request_counts
        assert counts.succeeded == counts.errored == counts.canceled == counts.expired == 0
        assert time.monotonic() < deadline, f"{batch_id} did not end: {batch}"
        time.sleep(0.05)
    return batch


@pytest.mark.slow
def test_a_kill_9_mid_processing_loses_nothing(survivor, client):
    total = sum(len(custom_ids) for custom_ids in BEFORE_CRASH.values())
    assert 1 <= len(survivor.before) < total, "the kill came too late to interrupt anything"
    for name, custom_ids in BEFORE_CRASH.items():
        batch_id = survivor.batch_ids[name]  # accepted before the kill: still there
        counts = wait_until_ended(client, batch_id).request_counts
        assert (counts.processing, counts.errored, counts.canceled, counts.expired) == (0, 0, 0, 0)
        assert counts.succeeded == len(custom_ids)
        lines = list(client.messages.batches.results(batch_id))
        assert sorted(line.custom_id for line in lines) == custom_ids  # each exactly once
        for line in lines:
            assert line.result.type == "succeeded"
            kept = survivor.before.get((batch_id, line.custom_id))
            if kept is not None:  # written before the kill: the very same answer, not a rerun
                assert line.result.message.id == json.loads(kept)["message"]["id"]


def test_sdk_create_retrieve_results_equal_plain_messages(client, url):
    questions = {"sea": "Tell me about the sea.", "sky": "Why is the sky blue?", "two": "What is 2 + 2?"}
    requests = [{"custom_id": key, "params": params(text)} for key, text in questions.items()]
    requests.append({"custom_id": "broken", "params": params("x", max_tokens=-1)})
    created = client.messages.batches.create(requests=requests)
    assert created.id.startswith("msgbatch_")
    assert created.processing_status == "in_progress"
    assert created.request_counts.processing == 4
    assert created.results_url is None
    assert (created.expires_at - created.created_at).total_seconds() == 24 * 3600
    batch = wait_until_ended(client, created.id)
    counts = batch.request_counts
    assert (counts.processing, counts.succeeded, counts.errored, counts.canceled, counts.expired) == (
        0,
        3,
        1,
        0,
        0,
    )
    assert batch.ended_at is not None
    assert batch.results_url == f"{url}/v1/messages/batches/{created.id}/results"
    results = {line.custom_id: line.result for line in client.messages.batches.results(created.id)}
    assert set(results) == {*questions, "broken"}
    for key, text in questions.items():
        same = params(text)
        greedy = {"temperature": same.pop("temperature")}  # SDK 2.x: only as an extra field
        plain = client.messages.create(**same, extra_body=greedy)  # the same params, not in a batch
        result = results[key]
        assert result.type == "succeeded"
        assert result.message.model_dump(exclude={"id"}) == plain.model_dump(exclude={"id"})
    broken = results["broken"]
    assert broken.type == "errored"
    assert broken.error.type == "error"
    assert broken.error.error.type == "invalid_request_error"
    assert broken.error.error.message.startswith("max_tokens: ")


def test_sdk_list_is_newest_first_and_paginates(client):
    ids = [
        client.messages.batches.create(requests=[{"custom_id": "a", "params": params("hi", 1)}]).id
        for _ in range(3)
    ]
    first = client.messages.batches.list(limit=2)
    assert [b.id for b in first.data] == ids[::-1][:2]
    assert first.has_more
    everything = [b.id for b in client.messages.batches.list(limit=2)]  # the SDK follows after_id
    assert everything[:3] == ids[::-1]
    assert len(everything) == len(set(everything))
    for batch_id in ids:
        wait_until_ended(client, batch_id)


def test_sdk_cancel_then_delete(client):
    requests = [{"custom_id": f"long-{i}", "params": params("Write a long story.", 400)} for i in range(6)]
    created = client.messages.batches.create(requests=requests)
    with pytest.raises(anthropic.BadRequestError):
        client.messages.batches.delete(created.id)  # still in progress
    canceling = client.messages.batches.cancel(created.id)
    assert canceling.processing_status in ("canceling", "ended")
    assert canceling.cancel_initiated_at is not None
    batch = wait_until_ended(client, created.id, timeout=20)
    counts = batch.request_counts
    assert counts.canceled >= 1
    assert counts.succeeded + counts.canceled == 6
    assert counts.errored == counts.expired == 0
    kinds = [line.result.type for line in client.messages.batches.results(created.id)]
    assert sorted(kinds) == sorted(["canceled"] * counts.canceled + ["succeeded"] * counts.succeeded)
    deleted = client.messages.batches.delete(created.id)
    assert (deleted.id, deleted.type) == (created.id, "message_batch_deleted")
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve(created.id)
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.cancel(created.id)


def test_beta_twins_on_the_raw_wire(url):
    with httpx.Client(base_url=url, headers=BETA, timeout=60) as raw:
        body = {"requests": [{"custom_id": "only", "params": params("Hello there.")}]}
        created = raw.post("/v1/messages/batches?beta=true", json=body)
        assert created.status_code == 200
        assert created.headers["request-id"].startswith("req_")
        batch_id = created.json()["id"]
        deadline = time.monotonic() + 60
        while (batch := raw.get(f"/v1/messages/batches/{batch_id}?beta=true").json())[
            "processing_status"
        ] != "ended":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        listed = raw.get("/v1/messages/batches?beta=true", params={"limit": 1}).json()
        assert listed["data"][0]["id"] == batch_id
        assert listed["first_id"] == listed["last_id"] == batch_id
        results = raw.get(
            f"/v1/messages/batches/{batch_id}/results?beta=true", headers={"accept": "application/binary"}
        )
        assert results.status_code == 200
        assert results.headers["content-type"].startswith("application/x-jsonl")
        lines = results.text.split("\n")
        assert len(lines) == 2
        assert lines[1] == ""
        assert '"custom_id":"only"' in lines[0]
        assert '"type":"succeeded"' in lines[0]
        assert (
            raw.post(f"/v1/messages/batches/{batch_id}/cancel?beta=true").json() == batch
        )  # ended: unchanged
        deleted = raw.delete(f"/v1/messages/batches/{batch_id}?beta=true")
        assert deleted.json() == {"id": batch_id, "type": "message_batch_deleted"}
        missing = raw.get(f"/v1/messages/batches/{batch_id}?beta=true")
        assert missing.status_code == 404
        assert missing.json()["error"]["type"] == "not_found_error"


def first_token_seconds(url: str) -> float:
    """Seconds from sending a streamed interactive request to its first text delta."""
    body = {**params("Hello.", 2), "stream": True}
    started = time.perf_counter()
    with httpx.stream("POST", f"{url}/v1/messages", json=body, headers=VERSION, timeout=60) as response:
        for line in response.iter_lines():  # pings every 0.5 s until the first token
            elapsed = time.perf_counter() - started
            if line.startswith("data:") and "text_delta" in line:
                return elapsed
            assert elapsed < 5, "no first token after 5 s: queued behind the batch"
    raise AssertionError("no text delta")


def test_interactive_requests_keep_their_first_token_time_while_a_batch_runs(client, url):
    alone = min(first_token_seconds(url) for _ in range(3))
    requests = [{"custom_id": f"bg-{i}", "params": params("Write a long story.", 1500)} for i in range(8)]
    created = client.messages.batches.create(requests=requests)
    try:
        time.sleep(0.5)  # the batch is decoding
        # The median of three: one request the shared machine's scheduler stalled is not the
        # server queueing it (that would delay all three by seconds).
        busy = statistics.median(first_token_seconds(url) for _ in range(3))
        # Measured while the batch ran (8 x 1500 tokens take tiny-random a minute).
        assert client.messages.batches.retrieve(created.id).processing_status == "in_progress"
    finally:
        client.messages.batches.cancel(created.id)
    wait_until_ended(client, created.id)
    # One decode step of tiny-random with four rows is tens of milliseconds; the bound is generous
    # for a shared machine, and far below waiting for a row behind the batch (1500 tokens: seconds).
    assert busy < alone + 0.5, (alone, busy)
