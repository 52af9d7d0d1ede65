"""`--model-behaviour newest` over HTTP on the scripted engine: only default sampling values and
no assistant prefill, at either API version; `classic` takes them all. On MLX (tiny-random):
test_versioning_e2e.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from reference_server.__main__ import parse_args
from reference_server.engine.base import ToolCall
from reference_server.engine.scripted import ScriptedEngine
from reference_server.model_behaviour import check_model_behaviour
from reference_server.protocol import MessageCreateParams

from .conftest import make_client
from .server_tools.pages import serving_pages
from .server_tools.test_app_server_tools import FETCH, calling, client_for
from .test_app import assert_error

LEGACY = {"anthropic-version": "2023-06-01"}
CURRENT = {"anthropic-version": "2026-10-21"}
PREFILL_WORDS = (
    "This model does not support assistant message prefill. The conversation must end with a user message."
)


def engine() -> ScriptedEngine:
    return ScriptedEngine("Hello.", model_id="scripted", context_window=4096)


@pytest.fixture
def newest() -> Iterator[TestClient]:
    with make_client(engine(), model_behaviour="newest") as client:
        yield client


@pytest.fixture
def classic() -> Iterator[TestClient]:
    with make_client(engine()) as client:
        yield client


def body(**changes: Any) -> dict[str, Any]:
    return {"model": "scripted", "max_tokens": 16, "messages": [{"role": "user", "content": "Hi"}], **changes}


def prefill(content: Any = "The answer is") -> dict[str, Any]:
    return body(messages=[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": content}])


def message_of(response: Any) -> str:
    return str(assert_error(response, 400, "invalid_request_error")["error"]["message"])


REFUSED = [
    ({"temperature": 0.0}, "temperature: `temperature` is deprecated for this model"),
    ({"temperature": 0.7}, "temperature: `temperature` is deprecated for this model"),
    ({"top_p": 0.98}, "top_p: `top_p` is deprecated for this model"),
    ({"top_p": 0.5}, "top_p: `top_p` is deprecated for this model"),
    ({"top_k": 40}, "top_k: `top_k` is deprecated for this model"),
    ({"top_k": 0}, "top_k: `top_k` is deprecated for this model"),
]
TAKEN = [
    {},
    {"temperature": 1.0},
    {"top_p": 0.99},
    {"top_p": 1.0},
    {"temperature": 1.0, "top_p": 0.995},
    {"temperature": None, "top_p": None, "top_k": None},  # null asks for the default
]


@pytest.mark.parametrize(("fields", "words"), REFUSED)
def test_newest_refuses_sampling_values_other_than_the_defaults(newest, fields, words):
    message = message_of(newest.post("/v1/messages", json=body(**fields), headers=LEGACY))
    assert message.startswith(words)


@pytest.mark.parametrize("fields", TAKEN)
def test_newest_takes_the_default_sampling_values(newest, fields):
    response = newest.post("/v1/messages", json=body(**fields), headers=LEGACY)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("fields", [fields for fields, _ in REFUSED] + TAKEN)
def test_classic_takes_every_sampling_value(classic, fields):
    assert classic.post("/v1/messages", json=body(**fields), headers=LEGACY).status_code == 200


def test_under_2026_10_21_the_version_refuses_sampling_first(newest):
    """Even temperature 1.0, which the newest models take, names the version."""
    message = message_of(newest.post("/v1/messages", json=body(temperature=1.0), headers=CURRENT))
    assert message.startswith("temperature: not supported in anthropic-version 2026-10-21")


@pytest.mark.parametrize("content", ["The answer is", [{"type": "text", "text": "The answer is"}], "", []])
@pytest.mark.parametrize("headers", [LEGACY, CURRENT], ids=["2023-06-01", "2026-10-21"])
def test_newest_refuses_an_assistant_prefill(newest, classic, content, headers):
    message = message_of(newest.post("/v1/messages", json=prefill(content), headers=headers))
    assert message == f"messages.1: {PREFILL_WORDS}"
    streamed = newest.post("/v1/messages", json={**prefill(content), "stream": True}, headers=headers)
    assert message_of(streamed) == message
    assert classic.post("/v1/messages", json=prefill(content), headers=headers).status_code == 200


def test_newest_takes_a_conversation_that_ends_with_the_user(newest):
    history = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "How are you?"},
    ]
    assert newest.post("/v1/messages", json=body(messages=history), headers=CURRENT).status_code == 200


def test_newest_counts_any_conversation(newest):
    counted = {k: v for k, v in prefill().items() if k != "max_tokens"}
    assert newest.post("/v1/messages/count_tokens", json=counted, headers=CURRENT).status_code == 200


def test_a_turn_paused_on_a_server_tool_resumes_under_newest():
    """pause_turn's documented resumption sends the paused turn back last: not a prefill."""
    with serving_pages() as site:
        url = f"{site.url}/plain"
        fetch = ToolCall("x", "web_fetch", {"url": url})
        client, _ = client_for(
            calling(fetch, fetch),
            allow_private_fetch=True,
            server_tool_iterations=1,
            model_behaviour="newest",
        )
        with client:
            ask = {"model": "scripted", "max_tokens": 600, "tools": [FETCH]}
            first = [{"role": "user", "content": f"Read {url}"}]
            paused = client.post("/v1/messages", json={**ask, "messages": first}).json()
            assert paused["stop_reason"] == "pause_turn"
            history = [*first, {"role": "assistant", "content": paused["content"]}]
            resumed = client.post("/v1/messages", json={**ask, "messages": history})
    assert resumed.status_code == 200, resumed.text


def test_the_check_on_params_directly():
    def params(**fields: Any) -> MessageCreateParams:
        return MessageCreateParams.model_validate(body(**fields))

    check_model_behaviour(params(temperature=0.0, top_k=1), "classic")
    check_model_behaviour(params(temperature=1.0, top_p=0.99), "newest")
    with pytest.raises(Exception, match="top_k"):
        check_model_behaviour(params(top_k=1), "newest")


def test_the_cli_flag():
    assert parse_args([]).model_behaviour == "classic"
    assert parse_args(["--model-behaviour", "newest"]).model_behaviour == "newest"
    with pytest.raises(SystemExit):
        parse_args(["--model-behaviour", "latest"])
