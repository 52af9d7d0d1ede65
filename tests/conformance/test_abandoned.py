"""A request the suite gives up on is not left for the next property to wait behind (issue 42,
point 6): behind llama-cpp-python the first property judged waited 49-115 s while the backend
still worked for a client that had gone. The Target remembers what it abandoned (no answer in
time, a stream closed before its end) and, before the next property, waits until the target
answers a one-token message again: on a target that serves one request at a time, that answer
comes once the abandoned work is done."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from conformance.profile import Profile
from conformance.wire.target import Target, TargetConfig

from .fault_proxy import read_body, running_proxy

WORK = 1.5  # seconds the slow request keeps the one-at-a-time target busy


class OneAtATime:
    """Generation one request at a time; a request whose prompt says "slow" takes WORK seconds,
    and goes on when its client has gone (as a server that never notices)."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        async with self.lock:
            if b"slow" in body:
                await asyncio.sleep(WORK)
        data = json.dumps({"type": "message", "content": []}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": data})


def test_a_request_given_up_on_is_waited_out_before_the_next():
    with running_proxy(OneAtATime()) as url:
        target = Target(TargetConfig(url=url, model="m", profile=Profile(), timeout=0.3))
        slow = {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "slow"}]}
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            target.request("POST", "/v1/messages", json_body=slow)
        assert target.abandoned == "POST /v1/messages (no answer in time)"
        target.config = TargetConfig(url=url, model="m", profile=Profile(), timeout=10)
        settled = target.settle_abandoned()
        target.close()
    assert settled is not None
    what, waited = settled
    assert what == "POST /v1/messages (no answer in time)"
    assert waited is not None
    assert time.monotonic() - started >= WORK  # it answered once the abandoned work was done
    assert target.abandoned is None


def test_nothing_abandoned_costs_nothing():
    target = Target(TargetConfig(url="http://127.0.0.1:9", model="m", profile=Profile()))
    assert target.settle_abandoned() is None  # no request sent (nothing listens there)
    target.close()
