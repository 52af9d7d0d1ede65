"""GET /health and GET /metrics over the scripted engine (in process): who may read them, and
that the counters say what the responses said."""

from __future__ import annotations

import json
import logging

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reference_server.engine.scripted import ScriptedEngine
from reference_server.observability.logs import ACCESS_LOGGER, JsonFormatter
from tests.reference_server.conftest import make_client

KEY = "observability-key"
BODY = {"model": "scripted", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus text page: (name, sorted labels) -> value."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(page: str, name: str, **labels: str) -> float:
    return samples(page).get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def keyed(scripted_engine: ScriptedEngine):
    with make_client(scripted_engine, api_key=KEY) as client:
        yield client


def test_health_needs_no_key_and_no_version(keyed):
    response = keyed.get("/health")
    assert response.status_code == 200
    health = response.json()
    assert health["status"] == "ok"
    assert health["models"] == ["scripted"]
    assert health["uptime_s"] >= 0
    assert response.headers["request-id"].startswith("req_")


def test_metrics_need_the_key_when_the_server_has_one(keyed):
    refused = keyed.get("/metrics")
    assert refused.status_code == 401
    assert refused.json()["error"]["type"] == "authentication_error"
    served = keyed.get("/metrics", headers={"authorization": f"Bearer {KEY}"})
    assert served.status_code == 200
    assert served.headers["content-type"].startswith("text/plain; version=0.0.4")


def test_counters_follow_the_responses(client):
    message = client.post("/v1/messages", json=BODY).json()
    client.post("/v1/messages", json={**BODY, "max_tokens": "many"})  # a 400
    client.get("/v1/files/file_nope", headers={"anthropic-beta": "files-api-2025-04-14"})  # a 404
    client.get("/no/such/route")  # the router's 404: no route template
    page = client.get("/metrics").text
    requests = "plumbline_http_requests_total"
    assert value(page, requests, route="/v1/messages", method="POST", status="200", workspace="default") == 1
    assert value(page, requests, route="/v1/messages", method="POST", status="400", workspace="default") == 1
    assert (
        value(page, requests, route="/v1/files/{file_id}", method="GET", status="404", workspace="default")
        == 1
    )
    assert value(page, requests, route="unmatched", method="GET", status="404", workspace="default") == 1
    usage = message["usage"]
    assert value(page, "plumbline_input_tokens_total") == usage["input_tokens"]
    assert value(page, "plumbline_output_tokens_total") == usage["output_tokens"]
    assert value(page, "plumbline_generations_total") == 1
    assert value(page, "plumbline_time_to_first_token_seconds_count") == 1
    assert value(page, "plumbline_decode_tokens_per_second_count") == 1
    assert value(page, "plumbline_prompt_cache_hits_total") == 0


def test_a_stream_cut_short_is_still_counted(client):
    with client.stream("POST", "/v1/messages", json={**BODY, "stream": True}) as response:
        assert response.status_code == 200
        for _ in response.iter_lines():
            break  # hang up after the first line
    page = client.get("/metrics").text
    assert value(page, "plumbline_generations_total") == 1
    assert (
        value(
            page,
            "plumbline_http_requests_total",
            route="/v1/messages",
            method="POST",
            status="200",
            workspace="default",
        )
        == 1
    )


def test_each_request_is_logged_once_with_its_request_id(client, caplog):
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    response = client.post("/v1/messages", json=BODY)
    records = [r for r in caplog.records if r.name == ACCESS_LOGGER]
    assert len(records) == 1
    line = JsonFormatter().format(records[0])

    entry = json.loads(line)
    assert entry["request_id"] == response.headers["request-id"]
    assert (entry["method"], entry["path"], entry["route"], entry["status"]) == (
        "POST",
        "/v1/messages",
        "/v1/messages",
        200,
    )
    assert entry["duration_ms"] >= 0
    assert entry["level"] == "info"
    assert entry["message"] == "POST /v1/messages 200"


def test_no_engine_load_no_gauges(client):
    """The scripted engine reports no queue: the gauges are left out, not made up."""
    page = client.get("/metrics").text
    assert "plumbline_queue_depth" not in page
