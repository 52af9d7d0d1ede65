"""Programmatic tool calling over HTTP (scripted engine, real sandbox): a tool with
`allowed_callers` becomes an async function of the code execution tool's Python; the code's calls
end the turn as `tool_use` blocks whose `caller` names the code execution call; the client's
results, sent back with the container, reach the waiting code, whose result opens the next
answer; the conversation that follows reads back. Also the 400s: no container, non-text
results, content beside the results, callers no code execution tool of the request serves.
test_code_execution_e2e.py runs it on MLX."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from reference_server.engine.base import ToolCall

from ..test_app import sse_events
from .test_app_server_tools import body, calling, client_for, refused, types

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux's sandbox")

CODE = {"type": "code_execution_20260120", "name": "code_execution"}
LOOKUP = {
    "name": "lookup",
    "description": "Look a key up in the client's table",
    "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    "allowed_callers": ["code_execution_20260120"],
}


def python(code: str) -> ToolCall:
    return ToolCall("x", "code_execution", {"code": code})


def code_client(reply, tmp_path):
    return client_for(reply, code_execution=True, data_dir=tmp_path)


def answered(first_body: dict[str, Any], paused: dict[str, Any], results: dict[str, Any], **changes: Any):
    """The request that answers a paused turn: its content appended as the assistant's, then
    one tool_result per call (`results`: tool_use id -> content)."""
    messages = [
        *first_body["messages"],
        {"role": "assistant", "content": paused["content"]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": key, "content": value}
                for key, value in results.items()
            ],
        },
    ]
    return {**first_body, "messages": messages, **changes}


def test_code_that_calls_a_tool_pauses_and_goes_on_with_the_clients_result(tmp_path):
    code = 'row = await lookup({"key": "k1"})\nprint("row:", row)'
    client, engine = code_client(calling(python(code), then="The row is there."), tmp_path)
    with client:
        first = body([CODE, LOOKUP], "Look k1 up")
        paused = client.post("/v1/messages", json=first).json()
        assert types(paused) == ["server_tool_use", "tool_use"], paused
        use, call = paused["content"]
        assert call["caller"] == {"type": "code_execution_20260120", "tool_id": use["id"]}
        assert (call["name"], call["input"]) == ("lookup", {"key": "k1"})
        assert call["id"].startswith("toolu_")
        assert paused["stop_reason"] == "tool_use"
        assert "code_execution_requests" not in paused["usage"]["server_tool_use"]  # counted with its result
        container = paused["container"]["id"]
        # The model was offered the tool as a function of its Python, not as a call of its own.
        offered = {tool.name: tool for tool in engine.requests[0].tools}
        assert "lookup" not in offered
        assert "lookup(input: dict) -> str: Look a key up" in offered["code_execution"].description

        done = client.post(
            "/v1/messages", json=answered(first, paused, {call["id"]: "k1=42"}, container=container)
        ).json()
    assert types(done) == ["code_execution_tool_result", "text"], done
    result = done["content"][0]
    assert result["tool_use_id"] == use["id"]
    assert result["content"]["stdout"] == "row: k1=42\n"
    assert done["container"]["id"] == container
    assert done["usage"]["server_tool_use"]["code_execution_requests"] == 1
    # The model read its call and the code's output, never the code's own tool calls as its own.
    turns = engine.requests[-1].turns
    assert [t.role for t in turns[-3:]] == ["user", "assistant", "tool"]
    assert [c.name for c in turns[-2].tool_calls] == ["code_execution"]
    assert "row: k1=42" in turns[-1].text


def test_gathered_calls_pause_together_and_a_second_round_pauses_without_generating(tmp_path):
    code = (
        "import asyncio\n"
        'a, b = await asyncio.gather(lookup({"key": "a"}), lookup({"key": "b"}))\n'
        'print(await lookup({"key": a + b}))'
    )
    client, engine = code_client(calling(python(code)), tmp_path)
    with client:
        first = body([CODE, LOOKUP], "Combine")
        paused = client.post("/v1/messages", json=first).json()
        calls = [b for b in paused["content"] if b["type"] == "tool_use"]
        assert [c["input"] for c in calls] == [{"key": "a"}, {"key": "b"}]
        generated = len(engine.requests)
        second_body = answered(
            first, paused, {calls[0]["id"]: "1", calls[1]["id"]: "2"}, container=paused["container"]["id"]
        )
        again = client.post("/v1/messages", json=second_body).json()
        assert types(again) == ["tool_use"], again
        assert again["content"][0]["input"] == {"key": "12"}
        assert again["content"][0]["caller"]["tool_id"] == paused["content"][0]["id"]
        assert (again["stop_reason"], again["usage"]["input_tokens"], again["usage"]["output_tokens"]) == (
            "tool_use",
            0,
            0,
        )
        assert len(engine.requests) == generated  # the model was not asked anything
        third_body = answered(
            second_body, again, {again["content"][0]["id"]: "done-12"}, container=paused["container"]["id"]
        )
        done = client.post("/v1/messages", json=third_body).json()
        assert types(done) == ["code_execution_tool_result", "text"]
        assert done["content"][0]["content"]["stdout"] == "done-12\n"
        # The whole conversation reads back, a new question after it.
        later = {
            **third_body,
            "messages": [
                *third_body["messages"],
                {"role": "assistant", "content": done["content"]},
                {"role": "user", "content": "Thanks"},
            ],
        }
        assert client.post("/v1/messages", json=later).status_code == 200
        counted = {k: v for k, v in later.items() if k not in ("max_tokens", "container")}
        assert client.post("/v1/messages/count_tokens", json=counted).json()["input_tokens"] > 0
    turns = engine.requests[-1].turns
    assert [t.role for t in turns] == ["user", "assistant", "tool", "assistant", "user"]
    assert "done-12" in turns[2].text


def test_the_pause_streams_as_tool_use_blocks_with_their_caller(tmp_path):
    client, _ = code_client(calling(python('await lookup({"key": "s"})')), tmp_path)
    with client:
        events = sse_events(client.post("/v1/messages", json=body([CODE, LOOKUP], "Go", stream=True)).text)
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [b["type"] for b in starts] == ["server_tool_use", "tool_use"]
    assert starts[1]["caller"] == {"type": "code_execution_20260120", "tool_id": starts[0]["id"]}
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta" and e["index"] == 1]
    assert json.loads("".join(d["partial_json"] for d in deltas)) == {"key": "s"}
    end = next(e for e in events if e["type"] == "message_delta")
    assert end["delta"]["stop_reason"] == "tool_use"
    assert end["delta"]["container"]["id"].startswith("container_")


def test_answers_without_the_container_or_not_as_text_are_refused(tmp_path):
    client, _ = code_client(calling(python('print(await lookup({"key": "k"}))')), tmp_path)
    with client:
        first = body([CODE, LOOKUP], "Go")
        paused = client.post("/v1/messages", json=first).json()
        call_id = paused["content"][1]["id"]
        container = paused["container"]["id"]
        refused(
            client.post("/v1/messages", json=answered(first, paused, {call_id: "x"})),
            "container_id is required when there are pending tool uses generated by code execution with tools.",
        )
        image = [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]
        refused(
            client.post("/v1/messages", json=answered(first, paused, {call_id: image}, container=container)),
            "image blocks are not accepted",
        )
        no_code = answered(first, paused, {call_id: "x"}, container=container, tool_choice={"type": "none"})
        refused(client.post("/v1/messages", json=no_code), "the request needs its code execution tool")
        beside = answered(first, paused, {call_id: "x"}, container=container)
        beside["messages"][-1]["content"].append({"type": "text", "text": "and more"})
        refused(client.post("/v1/messages", json=beside), "may hold only tool_result blocks")
        # The run still waits: a proper answer goes on.
        done = client.post(
            "/v1/messages", json=answered(first, paused, {call_id: "ok"}, container=container)
        ).json()
    assert done["content"][0]["content"]["stdout"] == "ok\n"


@pytest.mark.parametrize(
    ("tools", "words"),
    [
        ([LOOKUP], "names a code execution tool this request does not have"),
        (
            [
                {"type": "code_execution_20250825", "name": "code_execution"},
                {**LOOKUP, "allowed_callers": ["code_execution_20250825"]},
            ],
            "programmatic tool calling is served with code_execution_20260120 and code_execution_20260521",
        ),
        ([CODE, {**LOOKUP, "allowed_callers": []}], "at least one caller is required"),
        (
            [
                CODE,
                {
                    "type": "web_fetch_20250910",
                    "name": "web_fetch",
                    "allowed_callers": ["code_execution_20260120"],
                },
            ],
            "is served for custom tools",
        ),
    ],
)
def test_callers_no_code_execution_tool_serves_are_refused(tmp_path, tools, words):
    client, _ = code_client("unused", tmp_path)
    with client:
        refused(client.post("/v1/messages", json=body(tools)), words)


def test_a_tool_both_the_model_and_code_may_call_is_offered_to_both(tmp_path):
    both = {**LOOKUP, "allowed_callers": ["direct", "code_execution_20260120"]}
    client, engine = code_client("Fine.", tmp_path)
    with client:
        assert client.post("/v1/messages", json=body([CODE, both])).status_code == 200
        forced = body([CODE, LOOKUP], tool_choice={"type": "tool", "name": "lookup"})
        refused(client.post("/v1/messages", json=forced), "tool_choice.name")
    offered = {tool.name: tool for tool in engine.requests[0].tools}
    assert "lookup" in offered
    assert "lookup(input: dict)" in offered["code_execution"].description


def test_a_caller_naming_no_earlier_code_execution_call_is_refused(tmp_path):
    client, _ = code_client("unused", tmp_path)
    stray = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "lookup",
        "input": {},
        "caller": {"type": "code_execution_20260120", "tool_id": "srvtoolu_nowhere"},
    }
    request = body(
        [CODE, LOOKUP],
        messages=[
            {"role": "user", "content": "Go"},
            {"role": "assistant", "content": [stray]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]},
        ],
        container="container_x",
    )
    with client:
        refused(
            client.post("/v1/messages", json=request), "names no server_tool_use earlier in the conversation"
        )


def test_a_streamed_resume_opens_with_the_codes_result_or_pauses_again(tmp_path):
    code = 'await lookup({"key": "1"})\nprint(await lookup({"key": "2"}))'
    client, _ = code_client(calling(python(code), then="Fine."), tmp_path)
    with client:
        first = body([CODE, LOOKUP], "Go")
        paused = client.post("/v1/messages", json=first).json()
        container = paused["container"]["id"]
        second = answered(first, paused, {paused["content"][1]["id"]: "a"}, container=container, stream=True)
        events = sse_events(client.post("/v1/messages", json=second).text)
        starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
        assert [b["type"] for b in starts] == ["tool_use"]  # paused again, nothing generated
        again = {"content": starts}
        third = answered(
            {**second, "stream": False}, again, {starts[0]["id"]: "b"}, container=container, stream=True
        )
        events = sse_events(client.post("/v1/messages", json=third).text)
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [b["type"] for b in starts] == ["code_execution_tool_result", "text"]
    assert starts[0]["content"]["stdout"] == "b\n"
    end = next(e for e in events if e["type"] == "message_delta")
    assert (end["delta"]["stop_reason"], end["delta"]["container"]["id"]) == ("end_turn", container)
