"""The HTTP surface over the scripted engine (in process). Real-socket and MLX tests are
in test_e2e.py."""

from __future__ import annotations

import json

import pytest

from reference_server.engine.errors import PromptTooLongError, TokenizerError
from reference_server.engine.scripted import ScriptedEngine

from .conftest import HEADERS, make_client

USER = [{"role": "user", "content": "Say hello"}]


def body(**changes):
    return {"model": "scripted", "max_tokens": 64, "messages": USER, **changes}


def sse_events(text: str) -> list[dict]:
    events = []
    for block in text.split("\n\n"):
        if not block:
            continue
        name, data = block.split("\n")
        payload = json.loads(data.removeprefix("data: "))
        assert name.removeprefix("event: ") == payload["type"]
        events.append(payload)
    return events


def assert_error(response, status: int, kind: str) -> dict:
    assert response.status_code == status
    assert response.headers["content-type"].startswith("application/json")
    payload = response.json()
    assert payload["type"] == "error"
    assert payload["error"]["type"] == kind
    assert payload["error"]["message"]
    assert payload["request_id"] == response.headers["request-id"]
    assert payload["request_id"].startswith("req_")
    return payload


def test_message_shape(client):
    response = client.post("/v1/messages", json=body())
    assert response.status_code == 200
    assert response.headers["request-id"].startswith("req_")
    message = response.json()
    assert message["id"].startswith("msg_")
    assert (message["type"], message["role"], message["model"]) == (
        "message",
        "assistant",
        "scripted",
    )
    assert message["content"] == [{"type": "text", "text": "Hello, world. The end.", "citations": None}]
    assert (message["stop_reason"], message["stop_sequence"]) == ("end_turn", None)
    usage = message["usage"]
    assert usage["output_tokens"] == len("Hello, world. The end.") + 1  # + end-of-turn
    assert usage["cache_creation_input_tokens"] == usage["cache_read_input_tokens"] == 0


def test_requested_model_id_is_echoed_for_aliases(client):
    assert (
        client.post("/v1/messages", json=body(model="claude-sonnet-4-5")).json()["model"]
        == "claude-sonnet-4-5"
    )
    assert client.get("/v1/models/claude-sonnet-4-5").json()["id"] == "scripted"


def test_unknown_model_is_404(client):
    payload = assert_error(client.post("/v1/messages", json=body(model="gpt-4")), 404, "not_found_error")
    assert payload["error"]["message"] == "model: gpt-4"
    assert_error(client.get("/v1/models/gpt-4"), 404, "not_found_error")


def test_max_tokens_stop(client):
    message = client.post("/v1/messages", json=body(max_tokens=3)).json()
    assert message["content"][0]["text"] == "Hel"
    assert (message["stop_reason"], message["usage"]["output_tokens"]) == ("max_tokens", 3)


def test_max_tokens_zero_generates_nothing(client, scripted_engine):
    message = client.post("/v1/messages", json=body(max_tokens=0)).json()
    assert message["content"] == []
    assert (message["stop_reason"], message["usage"]["output_tokens"]) == ("max_tokens", 0)


def test_max_tokens_above_the_model_maximum(client):
    payload = assert_error(
        client.post("/v1/messages", json=body(max_tokens=257)), 400, "invalid_request_error"
    )
    assert payload["error"]["message"] == (
        "max_tokens: 257 > 256, which is the maximum allowed number of output tokens for scripted"
    )


def test_context_window_bounds_generation():
    engine = ScriptedEngine("x" * 100, model_id="scripted", context_window=64)
    with make_client(engine) as client:
        client.headers.update(HEADERS)
        message = client.post("/v1/messages", json=body(max_tokens=64)).json()
        prompt = message["usage"]["input_tokens"]
        assert message["stop_reason"] == "model_context_window_exceeded"
        assert message["usage"]["output_tokens"] == 64 - prompt
        too_long = body(messages=[{"role": "user", "content": "y" * 80}])
        payload = assert_error(client.post("/v1/messages", json=too_long), 400, "invalid_request_error")
        assert payload["error"]["message"].startswith("prompt is too long")


def test_stop_sequence_is_reported_and_cut(client):
    message = client.post("/v1/messages", json=body(stop_sequences=["world", "xyz"])).json()
    assert message["content"][0]["text"] == "Hello, "
    assert (message["stop_reason"], message["stop_sequence"]) == ("stop_sequence", "world")


def test_stop_sequence_matching_at_the_start_gives_no_empty_block(client):
    message = client.post("/v1/messages", json=body(stop_sequences=["Hel"])).json()
    assert message["content"] == []
    assert message["stop_reason"] == "stop_sequence"


def test_prefill_is_continued(scripted_engine):
    engine = ScriptedEngine(lambda req: f" continued after {req.turns[-1].text!r}", model_id="scripted")
    with make_client(engine) as client:
        client.headers.update(HEADERS)
        prefill = [*USER, {"role": "assistant", "content": "Well,"}]
        message = client.post("/v1/messages", json=body(messages=prefill)).json()
        assert message["content"][0]["text"] == " continued after 'Well,'"
        assert engine.requests[-1].turns[-1].role == "assistant"


@pytest.mark.parametrize("extra", [{}, {"stop_sequences": ["world"]}, {"max_tokens": 5}])
def test_stream_accumulates_to_the_non_streamed_message(client, extra):
    plain = client.post("/v1/messages", json=body(**extra)).json()
    response = client.post("/v1/messages", json=body(stream=True, **extra))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "message_start"
    assert kinds[-2:] == ["message_delta", "message_stop"]
    start = events[0]["message"]
    assert (start["content"], start["stop_reason"], start["stop_sequence"]) == ([], None, None)
    assert start["usage"]["input_tokens"] == plain["usage"]["input_tokens"]
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    assert text == plain["content"][0]["text"]
    delta = events[-2]
    assert delta["delta"]["stop_reason"] == plain["stop_reason"]
    assert delta["delta"]["stop_sequence"] == plain["stop_sequence"]
    assert delta["usage"]["output_tokens"] == plain["usage"]["output_tokens"]
    assert "[DONE]" not in response.text


def test_count_tokens_matches_usage(client):
    request = {"model": "scripted", "messages": USER, "system": "Be brief."}
    counted = client.post("/v1/messages/count_tokens", json=request).json()
    used = client.post("/v1/messages", json=body(system="Be brief.")).json()["usage"]["input_tokens"]
    assert counted == {"input_tokens": used}
    more = client.post("/v1/messages/count_tokens", json={**request, "system": "Be brief. Really."})
    assert more.json()["input_tokens"] > used


def test_beta_query_is_accepted_everywhere(client):
    assert client.post("/v1/messages?beta=true", json=body()).status_code == 200
    count = {"model": "scripted", "messages": USER}
    assert client.post("/v1/messages/count_tokens?beta=true", json=count).status_code == 200
    assert client.get("/v1/models?beta=true").status_code == 200
    assert client.get("/v1/models/scripted?beta=true").status_code == 200


def test_models_list_shape(client):
    page = client.get("/v1/models").json()
    assert (page["has_more"], page["first_id"], page["last_id"]) == (False, "scripted", "scripted")
    model = page["data"][0]
    assert model["type"] == "model"
    assert model["created_at"].endswith("Z")
    assert (model["max_input_tokens"], model["max_tokens"]) == (256, 256)
    assert model["capabilities"]["image_input"] == {"supported": False}
    assert_error(client.get("/v1/models?limit=0"), 400, "invalid_request_error")


def test_missing_anthropic_version_is_400(scripted_engine):
    with make_client(scripted_engine) as client:
        assert_error(client.post("/v1/messages", json=body()), 400, "invalid_request_error")


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"x-api-key": "wrong"}, 401),
        ({"authorization": "Bearer wrong"}, 401),
        ({"authorization": "Basic sekret"}, 401),
        ({"x-api-key": "sekret"}, 200),
        ({"authorization": "Bearer sekret"}, 200),
    ],
)
def test_api_key_in_either_header(scripted_engine, headers, status):
    with make_client(scripted_engine, api_key="sekret") as client:
        response = client.get("/v1/models", headers={**HEADERS, **headers})
        if status == 200:
            assert response.status_code == 200
        else:
            payload = assert_error(response, 401, "authentication_error")
            assert "sekret" not in json.dumps(payload)


def test_every_error_is_an_envelope_with_the_request_id(client):
    assert_error(client.get("/v1/nothing-here"), 404, "not_found_error")
    response = client.delete("/v1/messages")
    assert_error(response, 405, "invalid_request_error")
    assert "POST" in response.headers["allow"]
    assert_error(
        client.post("/v1/messages", content=b"{nope", headers={"content-type": "application/json"}),
        400,
        "invalid_request_error",
    )
    assert_error(
        client.post("/v1/messages", content=b"x=1", headers={"content-type": "text/plain"}),
        400,
        "invalid_request_error",
    )


def test_body_over_the_limit_is_413(scripted_engine):
    with make_client(scripted_engine, max_body_bytes=1024) as client:
        client.headers.update(HEADERS)
        big = body(messages=[{"role": "user", "content": "x" * 2048}])
        assert_error(client.post("/v1/messages", json=big), 413, "request_too_large")


def test_engine_failure_before_the_first_byte_is_a_500_envelope():
    engine = ScriptedEngine("abc", model_id="scripted", fail_after=1)
    with make_client(engine) as client:
        client.headers.update(HEADERS)
        assert_error(client.post("/v1/messages", json=body()), 500, "api_error")
        events = sse_events(client.post("/v1/messages", json=body(stream=True)).text)
        assert [e["type"] for e in events][-1] == "error"
        assert "message_stop" not in [e["type"] for e in events]


class _RefusingEngine(ScriptedEngine):
    """Raises the engine's own errors, as the MLX engine does."""

    def __init__(self, error: Exception) -> None:
        super().__init__(model_id="scripted")
        self.error = error

    async def count_tokens(self, request):
        raise self.error


@pytest.mark.parametrize(
    ("error", "needle"),
    [
        (PromptTooLongError(9000, 4096), "prompt is too long: 9000 tokens"),
        (TokenizerError("roles must alternate"), "roles must alternate"),
    ],
)
def test_engine_refusals_are_400s(error, needle):
    with make_client(_RefusingEngine(error)) as client:
        client.headers.update(HEADERS)
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            request = body() if path == "/v1/messages" else {"model": "scripted", "messages": USER}
            payload = assert_error(client.post(path, json=request), 400, "invalid_request_error")
            assert needle in payload["error"]["message"]
