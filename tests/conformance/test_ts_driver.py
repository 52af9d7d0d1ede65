"""The TypeScript SDK driver (conformance/wire/tsdriver.py) against a small canned server: a final
message for a stream, an error class for a 400/401/404, exchanges recorded and tagged, and the
accumulation rule the SDK-* faults rely on (finalMessage() is the snapshot at message_stop).

Skipped where node or npm is missing, or the pinned SDK cannot be installed (no registry)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conformance.wire import tsdriver
from conformance.wire.launcher import free_port
from conformance.wire.target import Target, TargetConfig
from conformance.wire.tsdriver import TSDriverUnavailable, run_ts

from .fault_proxy import running_proxy

KEY = "ts-driver-test-key"
TEXT = ["Hel", "lo, ", "world"]
FRAGMENTS = ['{"col', 'our": "bl', 'ue"}']
# Where the canned stream puts message_delta + message_stop: at the end, or before the content.
FINISH_FIRST = "finish-first"


def _events(body: dict[str, Any]) -> list[dict[str, Any]]:
    tools = bool(body.get("tools"))
    message = {
        "id": "msg_ts",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": body["model"],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 0},
    }
    if tools:
        start = {"type": "tool_use", "id": "toolu_ts", "name": "record", "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": f} for f in FRAGMENTS]
    else:
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": t} for t in TEXT]
    content = [
        {"type": "content_block_start", "index": 0, "content_block": start},
        *({"type": "content_block_delta", "index": 0, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": 0},
    ]
    finish = [
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use" if tools else "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 3},
        },
        {"type": "message_stop"},
    ]
    first = {"type": "message_start", "message": message}
    if body.get("metadata", {}).get("user_id") == FINISH_FIRST:
        return [first, content[0], *finish, *content[1:]]
    return [first, *content, *finish]


def _answer(headers: dict[str, str], body: Any) -> tuple[int, str, bytes]:
    def error(status: int, kind: str) -> tuple[int, str, bytes]:
        envelope = {"type": "error", "error": {"type": kind, "message": kind}, "request_id": "req_ts"}
        return status, "application/json", json.dumps(envelope).encode()

    key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
    if key != KEY:
        return error(401, "authentication_error")
    if not isinstance(body, dict) or "max_tokens" not in body:
        return error(400, "invalid_request_error")
    if body.get("model") != "canned":
        return error(404, "not_found_error")
    events = _events(body)
    if body.get("stream"):
        frames = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        return 200, "text/event-stream", frames.encode()
    message = events[0]["message"] | {"content": [{"type": "text", "text": "".join(TEXT)}]}
    message |= {"stop_reason": "end_turn", "usage": {"input_tokens": 5, "output_tokens": 3}}
    return 200, "application/json", json.dumps(message).encode()


async def canned(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    raw = b""
    while True:
        event = await receive()
        raw += event.get("body", b"")
        if not event.get("more_body"):
            break
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    status, media, data = _answer(headers, body)
    head = [(b"content-type", media.encode()), (b"request-id", b"req_ts")]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data})


@pytest.fixture(scope="module")
def sdk() -> None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not on PATH")
    try:
        tsdriver.install_ts_sdk()
    except TSDriverUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def server(sdk: None) -> Iterator[str]:
    with running_proxy(canned) as url:  # type: ignore[arg-type]
        yield url


@pytest.fixture
def target(request: pytest.FixtureRequest, server: str) -> Iterator[Target]:
    """A target with a key sent as x-api-key (or as `indirect` parametrization says)."""
    auth = getattr(request, "param", "x-api-key")
    target = Target(TargetConfig(url=server, model="canned", api_key=KEY, auth_header=auth))
    target.recorder.reset("SDK-001")
    yield target
    target.close()


def body(**changes: Any) -> dict[str, Any]:
    return {"model": "canned", "max_tokens": 16, "messages": [{"role": "user", "content": "Hi"}], **changes}


@pytest.mark.parametrize("target", ["x-api-key", "bearer"], indirect=True)
def test_a_stream_gives_the_final_message_and_is_recorded(target):
    result = run_ts(target, "stream", body())
    assert result.ok, result.output
    assert [(b["type"], b["text"]) for b in result.message["content"]] == [("text", "Hello, world")]
    assert result.message["stop_reason"] == "end_turn"
    exchange = result.exchange
    assert exchange is not None
    assert exchange.status == 200
    assert exchange.request_headers["x-plumbline-property"] == "SDK-001"
    assert b"event: message_stop" in exchange.response_body
    assert json.loads(exchange.request_body)["stream"] is True
    # The key travels as the run's --auth-header says, and never appears in the evidence.
    sent = exchange.request_headers
    if target.config.auth_header == "bearer":
        assert sent["authorization"] == f"Bearer {KEY}"
        assert "x-api-key" not in sent
    else:
        assert sent["x-api-key"] == KEY
        assert "authorization" not in sent
    assert KEY not in result.evidence()


def test_create_gives_the_message(target):
    result = run_ts(target, "create", body())
    assert result.ok, result.output
    assert result.message["content"][0]["text"] == "Hello, world"


@pytest.mark.parametrize(
    ("changes", "key", "status", "error_class", "error_type"),
    [
        ({"max_tokens": None}, None, 400, "BadRequestError", "invalid_request_error"),
        ({}, "wrong", 401, "AuthenticationError", "authentication_error"),
        ({"model": "missing"}, None, 404, "NotFoundError", "not_found_error"),
    ],
)
@pytest.mark.parametrize("operation", ["create", "stream"])
def test_error_statuses_give_the_sdk_error_classes(
    target, operation, changes, key, status, error_class, error_type
):
    params = {k: v for k, v in body(**changes).items() if v is not None}
    result = run_ts(target, operation, params, api_key=key)
    assert not result.ok
    assert (result.error["class"], result.error["status"], result.error["type"]) == (
        error_class,
        status,
        error_type,
    )
    assert result.error["request_id"] == "req_ts"
    assert result.error["body"]["error"]["type"] == error_type


def test_a_streamed_tool_input_is_assembled(target):
    result = run_ts(target, "stream", body(tools=[{"name": "record", "input_schema": {"type": "object"}}]))
    assert result.ok, result.output
    [call] = result.message["content"]
    assert (call["type"], call["name"], call["input"]) == ("tool_use", "record", {"colour": "blue"})


def test_final_message_is_the_snapshot_at_message_stop(target):
    """The rule behind SDK-001's fault (and TS-only empty text behind LiteLLM): content after
    message_stop never reaches finalMessage(), though the stream carries it."""
    result = run_ts(target, "stream", body(metadata={"user_id": FINISH_FIRST}))
    assert result.ok, result.output
    assert [block["text"] for block in result.message["content"]] == [""]
    assert b'"text": "world"' in result.exchange.response_body


def test_unavailable_without_node_or_npm(monkeypatch, tmp_path):
    monkeypatch.setenv("PLUMBLINE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tsdriver.shutil, "which", lambda name: None)
    with pytest.raises(TSDriverUnavailable, match="node and npm"):
        tsdriver._install.__wrapped__()


def test_a_failed_install_is_unavailable_and_not_retried(monkeypatch, tmp_path):
    monkeypatch.setenv("PLUMBLINE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tsdriver.shutil, "which", lambda name: f"/usr/bin/{name}")
    calls = []

    def npm(command, **kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, 1, "", "npm error 404 Not Found")

    monkeypatch.setattr(tsdriver.subprocess, "run", npm)
    monkeypatch.setattr(tsdriver, "_UNAVAILABLE", [])
    monkeypatch.setattr(tsdriver, "_install", tsdriver._install.__wrapped__)
    for _ in range(2):
        with pytest.raises(
            TSDriverUnavailable, match=r"npm ci of @anthropic-ai/sdk@.* failed: npm error 404"
        ):
            tsdriver.install_ts_sdk()
    assert len(calls) == 1
    assert not list((tmp_path / "ts-sdk").glob("*"))  # the staging directory is gone


def test_a_target_that_cannot_be_reached_raises_its_transport_error(sdk):
    """Judged by the plugin like any transport failure (an ERROR here), not as the SDK's error."""
    target = Target(TargetConfig(url=f"http://127.0.0.1:{free_port()}", model="canned", api_key=KEY))
    with pytest.raises(httpx.ConnectError):
        run_ts(target, "stream", body())
    target.close()
