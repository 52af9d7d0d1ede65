"""Thinking sent back in history (thinking/history.py): verified, then kept or dropped."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reference_server.errors import InvalidRequestError
from reference_server.protocol import MessageCreateParams
from reference_server.thinking import ThinkingSigner, kept_thinking
from reference_server.tools.definitions import ToolDefinition
from reference_server.validation import build_turns, parse_body

MODEL = "m"


@pytest.fixture
def signer(tmp_path) -> ThinkingSigner:
    return ThinkingSigner.in_directory(tmp_path)


CLOCK = ToolDefinition("clock", "", {"type": "object"}, False)


def params(messages: list[dict[str, Any]]) -> MessageCreateParams:
    body = {"model": MODEL, "max_tokens": 10, "messages": messages}
    return parse_body(json.dumps(body).encode(), "application/json", MessageCreateParams)


def thinking(
    signer: ThinkingSigner, text: str = "I should greet back.", omitted: bool = False
) -> dict[str, Any]:
    signature = signer.seal(MODEL, text, "omitted" if omitted else "summarized")
    return {"type": "thinking", "thinking": "" if omitted else text, "signature": signature}


def conversation(first: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [first, {"type": "text", "text": "Hello!"}]},
        {"role": "user", "content": "and now?"},
    ]


def tool_loop(first: dict[str, Any] | None) -> list[dict[str, Any]]:
    call = {"type": "tool_use", "id": "toolu_1", "name": "clock", "input": {}}
    return [
        {"role": "user", "content": "time?"},
        {"role": "assistant", "content": [first, call] if first else [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "noon"}]},
    ]


def refusal(messages: list[dict[str, Any]], signer: ThinkingSigner) -> str:
    with pytest.raises(InvalidRequestError) as info:
        kept_thinking(params(messages).messages, signer, MODEL, enabled=True)
    return info.value.message


def test_earlier_thinking_that_verifies_is_dropped_from_the_prompt(signer):
    request = params(conversation(thinking(signer)))
    kept = kept_thinking(request.messages, signer, MODEL, enabled=True).kept
    assert kept == {}
    assert [turn.text for turn in build_turns(request, thinking=kept)] == ["hi", "Hello!", "and now?"]


def test_changed_thinking_text_is_refused_naming_the_block(signer):
    block = thinking(signer) | {"thinking": "I should insult them."}
    assert refusal(conversation(block), signer).startswith(
        "messages.1.content.0.thinking: the thinking was modified"
    )


def test_a_signature_that_does_not_verify_is_refused(signer, tmp_path):
    forged = thinking(ThinkingSigner.in_directory(tmp_path / "elsewhere"))
    assert (
        refusal(conversation(forged), signer)
        == "messages.1.content.0.signature: Invalid `signature` in `thinking` block"
    )
    assert refusal(conversation(thinking(signer) | {"signature": ""}), signer).startswith(
        "messages.1.content.0.signature"
    )


def test_omitted_thinking_comes_back_empty_and_nothing_else(signer):
    kept_thinking(params(conversation(thinking(signer, omitted=True))).messages, signer, MODEL, enabled=True)
    shown = thinking(signer, omitted=True) | {"thinking": "guessed text"}
    assert "modified" in refusal(conversation(shown), signer)


def test_redacted_thinking_must_be_data_this_server_sealed(signer):
    good = {"type": "redacted_thinking", "data": signer.seal(MODEL, "secret")}
    kept_thinking(params(conversation(good)).messages, signer, MODEL, enabled=True)
    bad = {"type": "redacted_thinking", "data": "opaque-from-elsewhere"}
    assert (
        refusal(conversation(bad), signer)
        == "messages.1.content.0.data: Invalid `data` in `redacted_thinking` block"
    )


def test_the_tool_loop_keeps_its_thinking_as_generated(signer):
    request = params(tool_loop(thinking(signer, "Use the clock.", omitted=True)))
    kept = kept_thinking(request.messages, signer, MODEL, enabled=True).kept
    assert kept == {(1, 0): "Use the clock."}  # restored from the signature of an omitted block
    turns = build_turns(request, tools={"clock": CLOCK}, thinking=kept)
    assert turns[1].role == "assistant"
    assert turns[1].text == "Use the clock."
    assert [call.name for call in turns[1].tool_calls] == ["clock"]


def test_the_tool_loop_must_start_with_its_thinking(signer):
    message = refusal(tool_loop(None), signer)
    assert message.startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`"
    )


def test_thinking_in_a_user_message_and_a_prefill_are_refused(signer):
    user = [{"role": "user", "content": [thinking(signer), {"type": "text", "text": "hi"}]}]
    assert (
        refusal(user, signer) == "messages.0.content.0: thinking blocks may only appear in assistant messages"
    )
    prefill = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure"}]
    assert refusal(prefill, signer).startswith("messages.1: prefilling")


def test_with_thinking_off_thinking_blocks_are_dropped_unread(signer):
    request = params(conversation({"type": "thinking", "thinking": "x", "signature": "not ours"}))
    assert kept_thinking(request.messages, signer, MODEL, enabled=False).kept == {}
    assert [turn.text for turn in build_turns(request)] == ["hi", "Hello!", "and now?"]


def test_clear_thinking_keeps_the_most_recent_turns(signer):
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [thinking(signer, "first"), {"type": "text", "text": "A"}]},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": [thinking(signer, "second"), {"type": "text", "text": "B"}]},
        {"role": "user", "content": "c"},
    ]
    history = params(messages).messages
    one = kept_thinking(history, signer, MODEL, enabled=True, keep=1)
    assert one.kept == {(3, 0): "second"}
    assert one.cleared_turns == 1
    every = kept_thinking(history, signer, MODEL, enabled=True, keep="all")
    assert every.kept == {(1, 0): "first", (3, 0): "second"}
    assert every.cleared_turns == 0
    default = kept_thinking(history, signer, MODEL, enabled=True)
    assert default.kept == {}
    assert default.cleared_turns == 2
