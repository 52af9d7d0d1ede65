"""A target's broken transport is judged, not blamed on the suite: a connection the target
closes without an answer, or an answer that never comes while the target answers other
requests, FAILs the property; a target that cannot be reached at all is an ERROR (exit 2)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from conformance.wire.launcher import free_port

from .fault_proxy import running_proxy
from .suite import run_suite

MODEL_LIST = {"data": [{"type": "model", "id": "m"}], "has_more": False, "first_id": "m", "last_id": "m"}


@contextmanager
def closing_server() -> Iterator[str]:
    """Accepts each connection, reads the request, and closes without a byte of answer."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(2)
                with suppress(OSError):
                    connection.recv(65536)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


async def hanging_messages(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers the model list at once, and never answers POST /v1/messages."""
    if scope["type"] != "http":
        return
    if scope["method"] == "POST":
        await asyncio.sleep(4)  # far past --timeout 1; short, so the server stops soon
        return
    body = json.dumps(MODEL_LIST).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": body})


def verdict(index: dict[str, Any], pid: str) -> dict[str, Any]:
    return next(p for p in index["properties"] if p["id"] == pid)


def test_a_connection_closed_without_an_answer_is_a_fail(tmp_path):
    with closing_server() as url:
        code, index, output = run_suite(url, tmp_path, model="m", extra=["-k", "hdr_001"], timeout=120)
    result = verdict(index, "HDR-001")
    assert result["verdict"] == "FAIL", result
    assert result["reason"] == "connection-closed"
    # A close or a reset, whichever the kernel reports first.
    assert "RemoteProtocolError" in result["actual"] or "ReadError" in result["actual"], result["actual"]
    assert code == 1, output[-2000:]
    # A close before the first byte is retried once (a stale keep-alive connection looks so).
    case = json.loads(
        (tmp_path / index["target"]["slug"] / index["run_id"] / result["evidence_file"]).read_text()
    )
    first, second = case["exchanges"][-2:]
    assert first["request"]["url"] == second["request"]["url"]
    assert first["transport_error"]
    assert second["transport_error"]


def test_an_answer_that_never_comes_is_a_fail_when_the_target_is_alive(tmp_path):
    with running_proxy(hanging_messages) as url:  # type: ignore[arg-type]
        code, index, output = run_suite(
            url, tmp_path, model="m", extra=["-k", "hdr_001", "--timeout", "1"], timeout=120
        )
    result = verdict(index, "HDR-001")
    assert result["verdict"] == "FAIL", result
    assert result["reason"] == "timeout"
    assert code == 1, output[-2000:]


def test_an_unreachable_target_is_a_harness_error(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    code, index, output = run_suite(url, tmp_path, model="m", extra=["-k", "hdr_001"], timeout=120)
    result = verdict(index, "HDR-001")
    assert result["verdict"] == "ERROR", result
    assert result["message"].startswith("ConnectError"), result["message"]
    assert "ConnectError" in output  # the console shows the exception line, not a traceback frame
    assert code == 2
