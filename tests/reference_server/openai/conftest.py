from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from litestar.testing import TestClient

from reference_server.catalog import Alias
from reference_server.engine.scripted import ScriptedEngine

from ..conftest import make_client

KEY = "secret"
AUTH = {"authorization": f"Bearer {KEY}"}  # and no anthropic-version: this route speaks OpenAI
USER = [{"role": "user", "content": "Say hello"}]


def chat(**changes):
    return {"model": "scripted", "messages": USER, **changes}


def data_lines(text: str) -> list[str]:
    """The `data:` payloads of an OpenAI stream, checking its framing on the way."""
    frames = text.split("\n\n")
    assert frames[-1] == ""
    payloads = []
    for frame in frames[:-1]:
        assert frame.startswith("data: "), frame
        assert "\n" not in frame
        payloads.append(frame.removeprefix("data: "))
    return payloads


def chunks_of(text: str) -> list[dict]:
    payloads = data_lines(text)
    assert payloads[-1] == "[DONE]"
    return [json.loads(p) for p in payloads[:-1]]


def assert_openai_error(response, status: int, code: str | None = None, param: str | None = None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    assert error["type"] == ("invalid_request_error" if status < 500 else "server_error")
    if code is not None:
        assert error["code"] == code
    if param is not None:
        assert error["param"] == param
    return error


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine("Hello, world. The end.", model_id="scripted", context_window=256)


@pytest.fixture
def client(engine: ScriptedEngine) -> Iterator[TestClient]:
    aliases = (Alias.parse("gpt-*=scripted"),)
    with make_client(engine, api_key=KEY, aliases=aliases) as test_client:
        test_client.headers.update(AUTH)
        yield test_client
