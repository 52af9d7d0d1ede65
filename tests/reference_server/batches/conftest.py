"""Helpers of the Message Batches tests: an app on the scripted engine with its own data directory,
a movable clock, and polling until a batch ends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from litestar.testing import TestClient

from reference_server import Settings, create_app
from reference_server.engine.scripted import ScriptedEngine

HEADERS = {"anthropic-version": "2023-06-01"}
MODEL = "scripted"
REPLY = "Hello, world. The end."


def params(text: str = "Say hello", **changes: Any) -> dict[str, Any]:
    """A Messages create body for the scripted model."""
    return {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": text}], **changes}


def batch_body(count: int = 3, **changes: Any) -> dict[str, Any]:
    return {
        "requests": [
            {"custom_id": f"req-{i}", "params": params(f"Question {i}", **changes)} for i in range(count)
        ]
    }


def slow_engine(token_delay: float = 0.05) -> ScriptedEngine:
    """Each answer takes about `len(REPLY) * token_delay` seconds."""
    return ScriptedEngine(REPLY, model_id=MODEL, context_window=256, token_delay=token_delay)


def parse_time(value: str) -> datetime:
    """An RFC 3339 time as the API writes it (UTC, `Z`)."""
    assert value.endswith("Z")
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class Clock:
    """A clock the test moves (Unix seconds), starting at the real time."""

    def __init__(self, now: float | None = None) -> None:
        self.now = time.time() if now is None else now

    def __call__(self) -> float:
        return self.now


@contextmanager
def batch_client(
    data_dir: Path, engine: ScriptedEngine | None = None, **settings: Any
) -> Iterator[TestClient]:
    """A TestClient of an app on `engine` (a quick scripted one by default) storing batches in
    `data_dir`; the app's lifespan runs (store opened, processor started) inside the block."""
    engine = engine or ScriptedEngine(REPLY, model_id=MODEL, context_window=256)
    app = create_app(Settings(data_dir=data_dir, **settings), engine=engine)
    with TestClient(app) as client:
        client.headers.update(HEADERS)
        yield client


def batches_of(client: TestClient) -> Any:
    """The app's `Batches` (store and processor)."""
    return client.app.state.batches


def wait_until_ended(client: TestClient, batch_id: str, timeout: float = 10.0) -> dict[str, Any]:
    """Poll the batch until `processing_status` is `ended`; checks the counts at every poll."""
    deadline = time.monotonic() + timeout
    while True:
        response = client.get(f"/v1/messages/batches/{batch_id}")
        assert response.status_code == 200, response.text
        batch = response.json()
        counts = batch["request_counts"]
        if batch["processing_status"] != "ended":
            # Documented: every request counts as processing until the whole batch has ended.
            assert counts["succeeded"] == counts["errored"] == counts["canceled"] == counts["expired"] == 0
            assert batch["results_url"] is None
            assert batch["ended_at"] is None
        if batch["processing_status"] == "ended":
            return batch
        if time.monotonic() > deadline:
            raise AssertionError(f"batch {batch_id} did not end within {timeout} s: {batch}")
        time.sleep(0.02)


def results_of(client: TestClient, batch: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The batch's results by custom_id, read from its results_url; each custom_id exactly once."""
    import json

    response = client.get(batch["results_url"])
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-jsonl")
    lines = response.text.split("\n")
    assert lines[-1] == ""
    assert all(lines[:-1])
    found: dict[str, dict[str, Any]] = {}
    for line in lines[:-1]:
        item = json.loads(line)
        assert set(item) == {"custom_id", "result"}
        assert item["custom_id"] not in found
        found[item["custom_id"]] = item["result"]
    return found


def assert_error(response: Any, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    payload = response.json()
    assert payload["type"] == "error"
    assert payload["error"]["type"] == kind
    assert payload["error"]["message"]
    assert payload["request_id"] == response.headers["request-id"]
    return payload
