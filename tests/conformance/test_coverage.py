"""Spec coverage cannot drift: every property declares what it covers, every key belongs to the
vendored official spec, the declarations hold on the reference server, the vendored extract
reproduces schemas/ (the site's coverage page is generated, tests/test_docs.py)."""

from __future__ import annotations

import hashlib
import inspect
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conformance.catalogue import COVERAGE_KINDS, REGISTRY, property_of
from conformance.properties import load_all
from conformance.reporting import coverage, coverage_report
from conformance.reporting.reports import write_exchanges
from conformance.wire.target import Exchange

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "schemas"
SOURCE = REPO.parent / "shared" / "spec" / "anthropic-openapi-2026-05.json"
# Exemptions stay few; each carries its reason in the property. Four are ERR-031's: the error
# types a run meets only when the target is limited, failing or overloaded.
MAX_UNOBSERVED = 12
SAMPLING_KEYS = {"request:temperature", "request:top_p", "request:top_k"}


@pytest.fixture(scope="module", autouse=True)
def catalogue() -> None:
    load_all()


def functions() -> dict[str, Callable[..., Any]]:
    """Property id → its test function."""
    found = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("conformance.properties.test_"):
            for value in vars(module).values():
                prop = property_of(value)
                if prop is not None:
                    found[prop.id] = value
    return found


# --- metadata -------------------------------------------------------------------------------


def test_every_property_declares_what_it_covers():
    missing = sorted(pid for pid, prop in REGISTRY.items() if not prop.covers and not prop.retired)
    assert not missing, f"declare covers=(...) on {missing} (keys: conformance/reporting/coverage.py)"


def test_every_key_is_in_the_spec():
    universe = coverage.universe()
    unknown = {pid: [k for k in p.covers if k not in universe] for pid, p in REGISTRY.items()}
    assert not {pid: keys for pid, keys in unknown.items() if keys}


def test_unobserved_exemptions_are_few_and_explained():
    exemptions = [(pid, key, why) for pid, p in REGISTRY.items() for key, why in p.unobserved]
    assert len(exemptions) <= MAX_UNOBSERVED, exemptions
    assert all(len(why) > 20 for _, _, why in exemptions)


def test_universe_reads_the_messages_surface():
    keys = coverage.universe()
    assert {k.kind for k in keys.values()} == COVERAGE_KINDS == set(coverage.KINDS)
    for key in (
        "endpoint:POST /v1/messages",
        "endpoint:POST /v1/messages/count_tokens",
        "endpoint:GET /v1/models",
        "endpoint:GET /v1/models/{model_id}",
        "endpoint:POST /v1/messages/batches",
        "request:max_tokens",
        "request:tools[].input_schema",
        "request:tool_choice.disable_parallel_tool_use",
        "response:usage.input_tokens",
        "count_response:input_tokens",
        "models:has_more",
        "model:max_tokens",
        "error_body:error.message",
        "block:tool_use",
        "block:tool_result",
        "delta:input_json_delta",
        "event:message_delta",
        "event:ping",
        "stop_reason:stop_sequence",
        "error:invalid_request_error",
    ):
        assert keys[key].official, key
    # What only SDK 2.14 has is marked as an overlay's, not the official copy's.
    for key in ("stop_reason:model_context_window_exceeded", "error:request_too_large", "event:error"):
        assert not keys[key].official, key
    assert keys["block:tool_result"].note == "request"
    assert "request:messages[].content[].type" not in keys  # blocks are block: keys


def test_observe_reads_requests_streams_and_errors():
    stream = (
        'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","content":[],'
        '"stop_reason":null,"usage":{"input_tokens":3}}}\n\n'
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        '"content_block":{"type":"tool_use","id":"toolu_1","name":"t","input":{}}}\n\n'
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        '"delta":{"type":"input_json_delta","partial_json":"{}"}}\n\n'
        'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use"},'
        '"usage":{"output_tokens":2}}\n\n'
    )
    exchange = {
        "request": {
            "method": "POST",
            "url": "http://h/v1/messages?beta=true",
            "headers": {"anthropic-version": "2023-06-01"},
            "body": {"tools": [{"name": "t", "input_schema": {}}], "stream": True},
        },
        "response": {"status": 200, "body": stream},
    }
    seen = coverage.observe(exchange)
    assert {
        "endpoint:POST /v1/messages",
        "param:anthropic-version",
        "request:tools[].input_schema",
        "request:stream",
        "event:message_start",
        "block:tool_use",
        "delta:input_json_delta",
        "stop_reason:tool_use",
        "response:usage.input_tokens",
        "response:usage.output_tokens",
    } <= seen
    error = {
        "request": {"method": "GET", "url": "http://h/v1/models/nope", "headers": {}, "body": ""},
        "response": {"status": 404, "body": {"type": "error", "error": {"type": "not_found_error"}}},
    }
    assert {"endpoint:GET /v1/models/{model_id}", "param:model_id", "error:not_found_error"} <= (
        coverage.observe(error)
    )


def test_observe_takes_generated_requests_and_answers_of_any_shape():
    """A schema-invalid request (FUZZ-001's `messages: 487`) or a list whose data is not a list
    is observed for what it holds, never a crash."""
    generated = {
        "request": {
            "method": "POST",
            "url": "http://h/v1/messages",
            "headers": {},
            "body": {"messages": 487},
        },
        "response": {"status": 400, "body": {"type": "error", "error": {"type": "invalid_request_error"}}},
    }
    assert "request:messages" in coverage.observe(generated)
    odd_list = {
        "request": {"method": "GET", "url": "http://h/v1/models", "headers": {}, "body": ""},
        "response": {"status": 200, "body": {"data": 3, "has_more": False}},
    }
    assert "models:has_more" in coverage.observe(odd_list)


def test_kept_exchanges_are_what_observe_reads(tmp_path: Path):
    exchange = Exchange("POST", "http://h/v1/messages/count_tokens", {}, b'{"system": "s"}', status=200)
    exchange.response_body.extend(b'{"input_tokens": 3}')
    kept = json.loads(write_exchanges(tmp_path, "TOKENS-003", [exchange]).read_text())
    assert kept["id"] == "TOKENS-003"
    assert {"count_request:system", "count_response:input_tokens"} <= coverage.observe(kept["exchanges"][0])


# --- the report -----------------------------------------------------------------------------


def test_report_lists_numbers_gaps_and_every_key(tmp_path: Path):
    assert coverage_report.main(["--out", str(tmp_path)]) == 0
    page = (tmp_path / "coverage.md").read_text()
    assert "## Gaps" in page
    assert "`POST /v1/messages/batches`" in page
    assert "| `max_tokens` |" in page
    assert "MSG-006" in page
    html = (tmp_path / "coverage.html").read_text()
    assert html.startswith("<!doctype html>")
    assert "<table>" in html


# --- the vendored spec ----------------------------------------------------------------------


def test_schemas_derive_from_the_vendored_extract(tmp_path: Path):
    """A fresh clone re-derives schemas/ byte for byte, from the extract alone."""
    script = REPO / "scripts" / "derive_schemas.py"
    subprocess.run([sys.executable, str(script), "--out", str(tmp_path)], check=True, capture_output=True)
    fresh = {p.relative_to(tmp_path) for p in tmp_path.rglob("*.json")}
    assert fresh == {p.relative_to(SCHEMAS) for p in SCHEMAS.rglob("*.json")}
    for relative in fresh:
        assert (tmp_path / relative).read_bytes() == (SCHEMAS / relative).read_bytes(), relative


@pytest.mark.skipif(not SOURCE.is_file(), reason=f"the full spec copy is not at {SOURCE}")
def test_extract_is_faithful_to_its_source():
    raw = SOURCE.read_bytes()
    source = json.loads(raw)
    # The source is in the layout the extract is written in, so equal values are equal bytes.
    assert (json.dumps(source, indent=2, ensure_ascii=False) + "\n").encode("utf-8") == raw
    extract = json.loads(coverage.SPEC_PATH.read_text(encoding="utf-8"))
    record = extract.pop("x-plumbline-extract")
    assert record["sha256"] == hashlib.sha256(raw).hexdigest()
    assert record["source"] == SOURCE.name
    assert list(extract["paths"]) == record["paths"]
    for path, item in extract["paths"].items():
        assert item == source["paths"][path], path
    for name, schema in extract["components"]["schemas"].items():
        assert schema == source["components"]["schemas"][name], name
    for key in ("openapi", "info", "servers"):
        assert extract[key] == source[key]


# --- the declarations hold on the reference server -------------------------------------------


@pytest.mark.mlx
@pytest.mark.slow
@pytest.mark.xdist_group("catalogue")  # the session's reference_run, on the worker that holds it
def test_declarations_hold_on_the_reference_server(reference_run):
    """Each declared key shows in what the property sent or saw in the session's run of the whole
    catalogue (every exchange kept): request fields and parameters in its requests, endpoints
    called, fields, blocks, deltas, events, stop reasons and error types in its answers. The
    session's ModelInfo (fixture `model_info`) counts for the properties that take it."""
    _, index, run_dir = reference_run
    verdicts = {p["id"]: p["verdict"] for p in index["properties"]}
    exchanges: dict[str, list[dict[str, Any]]] = {}
    for file in (run_dir / "exchanges").glob("*.json"):
        case = json.loads(file.read_text())
        exchanges[case["id"]] = case["exchanges"]
    model_info: set[str] = set()
    for recorded in exchanges.values():
        for exchange in recorded:
            seen = coverage.observe(exchange)
            if "endpoint:GET /v1/models/{model_id}" in seen and exchange["response"]["status"] == 200:
                model_info |= seen
    by_function = functions()
    # Where the target refuses sampling parameters at the version judged (the reference under
    # 2026-10-21), only a property whose rule they are sends them (ERR-004, MSG-018, VER-001); the
    # generated requests carry them where the target takes them (2023-06-01).
    sampling = index["feature_support"]["sampling_parameters"]["supported"]
    shaped = set() if sampling else SAMPLING_KEYS
    wrong: dict[str, list[str]] = {}
    for pid, prop in sorted(REGISTRY.items()):
        if verdicts.get(pid) == "UNSUPPORTED" or (verdicts.get(pid) == "SKIP" and not exchanges.get(pid)):
            continue  # nothing was sent for it (a feature not served, a driver missing here)
        seen = set().union(*(coverage.observe(e) for e in exchanges.get(pid, [])))
        if "model_info" in inspect.signature(by_function[pid]).parameters:
            seen |= model_info
        exempt = dict(prop.unobserved)
        missing = [key for key in prop.covers if key not in seen and key not in exempt and key not in shaped]
        if missing:
            wrong[pid] = missing
    assert not wrong, f"declared but never sent or seen in the run: {json.dumps(wrong, indent=1)}"


def test_every_gap_says_why():
    load_all()
    declared = coverage.covered_by((p.id, p.covers) for p in REGISTRY.values())
    gaps = [key for key in coverage.universe() if key not in declared]
    assert gaps, "no gap left: GAP_REASONS can go"
    assert not [key for key in gaps if coverage_report.gap_reason(key) is None]
