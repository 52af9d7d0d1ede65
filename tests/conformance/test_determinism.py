"""The determinism probe: the profile's word, else the same greedy request sent twice."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from conformance.determinism import probe_determinism
from conformance.profile import Profile
from conformance.wire.target import Target, TargetConfig

from .fault_proxy import running_proxy


def answering(texts: Any) -> Any:
    """An ASGI app answering every request with a Message whose text is the next of `texts`."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        message = {
            "type": "message",
            "content": [{"type": "text", "text": next(texts)}],
            "stop_reason": "max_tokens",
        }
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": json.dumps(message).encode()})

    return app


def probe(url: str, deterministic: bool | None = None) -> Any:
    target = Target(TargetConfig(url=url, model="m", profile=Profile(deterministic=deterministic)))
    try:
        return probe_determinism(target)
    finally:
        target.close()


@pytest.mark.parametrize(
    ("texts", "expected"),
    [(itertools.repeat("same"), True), (map(str, itertools.count()), False)],
)
def test_the_probe_compares_two_greedy_answers(texts, expected):
    with running_proxy(answering(texts)) as url:  # type: ignore[arg-type]
        found = probe(url)
    assert (found.deterministic, found.source) == (expected, "probe")


def test_the_profile_decides_without_a_request():
    found = probe("http://127.0.0.1:9", deterministic=False)  # nothing listens: nothing is sent
    assert (found.deterministic, found.source) == (False, "profile")


def test_a_failing_probe_means_not_deterministic():
    found = probe("http://127.0.0.1:9")
    assert (found.deterministic, found.source) == (False, "probe")
    assert "ConnectError" in found.detail
