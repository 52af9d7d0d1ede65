"""`POST /v1/chat/completions` over the scripted engine (in process): the completion and its
stream, usage, limits, stop strings, and the auth guard."""

from __future__ import annotations

import json

from reference_server.engine.scripted import ScriptedEngine

from ..conftest import make_client
from .conftest import KEY, assert_openai_error, chat, chunks_of, data_lines

REPLY = "Hello, world. The end."


def test_completion_shape(client):
    response = client.post("/v1/chat/completions", json=chat(model="gpt-4o"))
    assert response.status_code == 200
    assert response.headers["x-request-id"] == response.headers["request-id"]
    completion = response.json()
    assert completion["id"].startswith("chatcmpl-")
    assert completion["object"] == "chat.completion"
    assert isinstance(completion["created"], int)
    assert completion["model"] == "scripted"  # the served model, as OpenAI names the snapshot
    assert completion["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": REPLY, "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ]
    usage = completion["usage"]
    assert usage["completion_tokens"] == len(REPLY) + 1  # + end-of-turn
    assert usage["prompt_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_stream_framing_and_equivalence(client):
    plain = client.post("/v1/chat/completions", json=chat()).json()
    response = client.post("/v1/chat/completions", json=chat(stream=True))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    chunks = chunks_of(response.text)
    assert {c["id"] for c in chunks} == {chunks[0]["id"]}
    assert chunks[0]["id"].startswith("chatcmpl-")
    assert all(c["object"] == "chat.completion.chunk" and "usage" not in c for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == plain["choices"][0]["message"]["content"]
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}


def test_stream_usage_chunk(client):
    plain = client.post("/v1/chat/completions", json=chat()).json()
    body = chat(stream=True, stream_options={"include_usage": True})
    chunks = chunks_of(client.post("/v1/chat/completions", json=body).text)
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == plain["usage"]


def test_max_tokens_is_length(client, engine):
    completion = client.post("/v1/chat/completions", json=chat(max_tokens=5)).json()
    assert completion["choices"][0]["message"]["content"] == REPLY[:5]
    assert completion["choices"][0]["finish_reason"] == "length"
    assert completion["usage"]["completion_tokens"] == 5
    completion = client.post("/v1/chat/completions", json=chat(max_tokens=50, max_completion_tokens=3)).json()
    assert completion["choices"][0]["message"]["content"] == REPLY[:3]
    assert engine.requests[-1].max_tokens == 3


def test_without_a_limit_the_context_window_bounds_generation(client, engine):
    completion = client.post("/v1/chat/completions", json=chat()).json()
    assert engine.requests[-1].max_tokens == 256 - completion["usage"]["prompt_tokens"]


def test_stop_strings_cut_the_text(client):
    for stop in (", w", [", w", "zzz"]):
        completion = client.post("/v1/chat/completions", json=chat(stop=stop)).json()
        assert completion["choices"][0]["message"]["content"] == "Hello"
        assert completion["choices"][0]["finish_reason"] == "stop"
    # More than OpenAI's four, as vLLM and llama.cpp take them (gateways translating
    # Anthropic's stop_sequences send them all).
    many = ["q1", "q2", "q3", "q4", ", w"]
    assert (
        client.post("/v1/chat/completions", json=chat(stop=many)).json()["choices"][0]["message"]["content"]
        == "Hello"
    )
    # Whitespace stops are fine on OpenAI's API (a common "\n" stop).
    completion = client.post("/v1/chat/completions", json=chat(stop=[" "])).json()
    assert completion["choices"][0]["message"]["content"] == "Hello,"
    streamed = chunks_of(client.post("/v1/chat/completions", json=chat(stop=" ", stream=True)).text)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in streamed) == "Hello,"


def test_sampling_and_accepted_fields(client, engine):
    body = chat(temperature=0, top_p=0.5, seed=7, user="u", n=1, logprobs=False, metadata={"a": "b"})
    assert client.post("/v1/chat/completions", json=body).status_code == 200
    sampling = engine.requests[-1].sampling
    assert (sampling.temperature, sampling.top_p, sampling.top_k) == (0, 0.5, None)
    client.post("/v1/chat/completions", json=chat(temperature=1.5))
    assert engine.requests[-1].sampling.temperature == 1.5
    # top_k: the vLLM-style extension gateways forward; -1 and 0 mean no limit.
    for top_k, expected in ((40, 40), (0, None), (-1, None)):
        assert client.post("/v1/chat/completions", json=chat(top_k=top_k)).status_code == 200
        assert engine.requests[-1].sampling.top_k == expected
    assert_openai_error(
        client.post("/v1/chat/completions", json=chat(top_k=-2)), 400, "invalid_value", "top_k"
    )


def test_a_failure_mid_stream_is_an_error_line_without_done():
    engine = ScriptedEngine(REPLY, model_id="scripted", fail_after=3)
    with make_client(engine) as client:
        response = client.post("/v1/chat/completions", json=chat(stream=True))
    payloads = data_lines(response.text)
    assert "[DONE]" not in payloads
    error = json.loads(payloads[-1])["error"]
    assert (error["type"], error["code"]) == ("server_error", None)
    assert "".join(json.loads(p)["choices"][0]["delta"].get("content", "") for p in payloads[:-1]) == "Hel"


def test_auth_guard_speaks_openai_here_and_anthropic_there(client):
    for headers in ({"authorization": "Bearer wrong"}, {"authorization": ""}):
        response = client.post("/v1/chat/completions", json=chat(), headers=headers)
        error = assert_openai_error(response, 401, "invalid_api_key")
        assert "wrong" not in error["message"]
    assert client.post("/v1/chat/completions", json=chat(), headers={"x-api-key": KEY}).status_code == 200
    response = client.post("/v1/messages", json={}, headers={"authorization": "Bearer wrong"})
    assert response.json()["error"]["type"] == "authentication_error"
    # The Anthropic routes still require anthropic-version.
    response = client.post("/v1/messages", json={"model": "scripted", "max_tokens": 5, "messages": []})
    assert response.json()["error"]["message"] == "anthropic-version: header is required"


def test_models_without_anthropic_version_are_openai_shaped(client):
    listing = client.get("/v1/models")
    assert listing.status_code == 200
    body = listing.json()
    assert body["object"] == "list"
    assert [(m["id"], m["object"], m["owned_by"]) for m in body["data"]] == [
        ("scripted", "model", "plumbline")
    ]
    assert isinstance(body["data"][0]["created"], int)
    # Through an alias, the served model answers; an unknown id is OpenAI's 404.
    assert client.get("/v1/models/gpt-4o").json()["id"] == "scripted"
    assert assert_openai_error(client.get("/v1/models/nope"), 404, "model_not_found")["param"] is None
    # With the header, the same routes speak Anthropic.
    anthropic = client.get("/v1/models", headers={"anthropic-version": "2023-06-01"}).json()
    assert anthropic["data"][0]["type"] == "model"
    assert anthropic["has_more"] is False
    missing = client.get("/v1/models/nope", headers={"anthropic-version": "2023-06-01"}).json()
    assert missing["error"]["type"] == "not_found_error"
    # The key is still required either way.
    assert client.get("/v1/models", headers={"authorization": "Bearer wrong"}).status_code == 401
