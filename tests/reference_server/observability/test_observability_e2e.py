"""The server as a service, end to end: tiny-random on MLX over a real socket with
`--log-format json`: /health, the Prometheus page after real generations (tokens as the
responses' usage says, a prompt-cache hit, the engine's queue and cache gauges), and a log in
which every line is JSON and each request's line carries its request id."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conformance.wire.launcher import reference_server

from .test_metrics_app import value

pytestmark = [pytest.mark.mlx, pytest.mark.slow]

MODEL = "tiny-random"
HEADERS = {"anthropic-version": "2023-06-01"}
SYSTEM = [{"type": "text", "text": "You answer questions. " * 40, "cache_control": {"type": "ephemeral"}}]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    log = tmp_path_factory.mktemp("observability") / "server.log"
    args = ["--log-format", "json", "--cache-min-tokens", "16"]
    with reference_server(MODEL, log=log, args=args) as url:
        yield url, log


def settled(client: httpx.Client, timeout: float = 10.0) -> str:
    """/metrics once the engine has retired the last generation: it answers with the final
    token and drops the row on its next step, so the batch gauge may lag the answer briefly."""
    deadline = time.monotonic() + timeout
    while True:
        page = client.get("/metrics").text
        if value(page, "plumbline_batch_size") == 0 or time.monotonic() > deadline:
            return page
        time.sleep(0.05)


def test_metrics_and_json_logs_of_real_generations(served: tuple[str, Path]) -> None:
    url, log = served
    with httpx.Client(base_url=url, headers=HEADERS, timeout=60) as client:
        assert client.get("/health").json()["models"] == [MODEL]
        body = {"model": MODEL, "max_tokens": 4, "temperature": 0, "system": SYSTEM}
        usages, ids = [], []
        for question in ("Hi", "Hello"):
            response = client.post(
                "/v1/messages", json={**body, "messages": [{"role": "user", "content": question}]}
            )
            assert response.status_code == 200, response.text
            usages.append(response.json()["usage"])
            ids.append(response.headers["request-id"])
        page = settled(client)
    assert usages[1]["cache_read_input_tokens"] > 0  # the second read the system prompt's prefix
    prompt = sum(
        u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"] for u in usages
    )
    assert value(page, "plumbline_input_tokens_total") == prompt
    assert value(page, "plumbline_output_tokens_total") == sum(u["output_tokens"] for u in usages)
    assert value(page, "plumbline_prompt_cache_hits_total") == 1
    assert value(page, "plumbline_prompt_cache_read_tokens_total") == usages[1]["cache_read_input_tokens"]
    assert value(page, "plumbline_time_to_first_token_seconds_count") == 2
    assert value(page, "plumbline_decode_tokens_per_second_count") == 2
    assert value(page, "plumbline_queue_depth") == 0
    assert value(page, "plumbline_batch_size") == 0
    assert value(page, "plumbline_prompt_cache_entries") >= 1
    assert value(page, "plumbline_prompt_cache_bytes") > 0
    # What speculative decoding verified and kept (a page that never changes: zeros on tiny-random's
    # float32, which does not draft; test_speculative.py checks the counts where it does).
    assert value(page, "plumbline_speculative_drafted_tokens") >= value(
        page, "plumbline_speculative_kept_tokens"
    )
    assert (
        value(
            page,
            "plumbline_http_requests_total",
            route="/v1/messages",
            method="POST",
            status="200",
            workspace="default",
        )
        == 2
    )

    lines = [line for line in log.read_text().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line, uvicorn's own included
    assert any(e["logger"].startswith("uvicorn") for e in entries)
    logged = {e["request_id"]: e for e in entries if e["logger"] == "reference_server.access"}
    for rid in ids:
        assert logged[rid]["status"] == 200
        assert logged[rid]["route"] == "/v1/messages"
