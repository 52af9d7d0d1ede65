"""Thinking end to end: the official SDK against the reference server on tiny-random over a
real socket. tiny-random writes random text, so each test judges structure (blocks, deltas,
signatures, usage), never content."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from conformance.wire.launcher import reference_server

# One worker runs this module (pytest-xdist): its servers start once, not once per worker.
pytestmark = [pytest.mark.mlx, pytest.mark.xdist_group("thinking_e2e")]

MODEL = "tiny-random"
ADAPTIVE: dict[str, Any] = {"type": "adaptive"}
LOW = {"output_config": {"effort": "low"}}
QUESTION = [{"role": "user", "content": "What is 2 + 2?"}]
# Stop sequences cut the answer, never the thinking: tiny-random writes random text to max_tokens,
# so common letters end the answer soon after the thinking and keep these tests short.
SOON = ["e", "a", "o", "i"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("thinking-data")


@pytest.fixture(scope="module")
def url(data_dir: Path) -> Iterator[str]:
    with reference_server(MODEL, log=data_dir / "server.log", args=["--data-dir", str(data_dir)]) as base:
        yield base


@pytest.fixture
def client(url: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0) as sdk:
        yield sdk


def ask(client: anthropic.Anthropic, **extra: Any) -> anthropic.types.Message:
    body: dict[str, Any] = {"model": MODEL, "max_tokens": 24, "thinking": ADAPTIVE, "messages": QUESTION}
    return client.messages.create(**(body | extra))


def history(message: anthropic.types.Message) -> list[dict[str, Any]]:
    blocks = [block.model_dump(exclude_none=True) for block in message.content]
    return [*QUESTION, {"role": "assistant", "content": blocks}, {"role": "user", "content": "And 3 + 3?"}]


def test_thinking_comes_first_signed_and_counted(client):
    message = ask(
        client,
        max_tokens=2000,
        thinking={"type": "enabled", "budget_tokens": 1024},
        stop_sequences=SOON,
        extra_body=LOW,
    )
    first = message.content[0]
    assert first.type == "thinking"
    assert first.thinking.strip()
    assert first.signature
    details = message.usage.output_tokens_details
    assert details is not None
    assert 0 < details.thinking_tokens <= 33  # effort low: at most 32 thinking tokens (+ the blank line)
    assert details.thinking_tokens <= message.usage.output_tokens


def test_effort_bounds_the_thinking(client):
    low = ask(client, max_tokens=600, stop_sequences=SOON, extra_body=LOW)
    high = ask(client, max_tokens=600, stop_sequences=SOON)  # default effort high: up to 256 tokens
    assert low.usage.output_tokens_details.thinking_tokens <= 33
    assert high.usage.output_tokens_details.thinking_tokens > 33  # tiny-random never ends a paragraph early


def test_the_stream_signs_last_and_adds_up(client):
    with client.messages.stream(model=MODEL, max_tokens=24, thinking=ADAPTIVE, messages=QUESTION) as stream:
        events = list(stream)
        final = stream.get_final_message()
    deltas = [e for e in events if e.type == "content_block_delta" and e.index == 0]
    assert [d.delta.type for d in deltas][-1] == "signature_delta"
    assert sum(d.delta.type == "signature_delta" for d in deltas) == 1
    thinking = "".join(d.delta.thinking for d in deltas if d.delta.type == "thinking_delta")
    assert final.content[0].type == "thinking"
    assert thinking == final.content[0].thinking
    assert final.usage.output_tokens_details.thinking_tokens <= final.usage.output_tokens


def test_omitted_thinking_has_no_text_but_a_signature_that_continues(client):
    display = {"type": "adaptive", "display": "omitted"}
    message = ask(client, thinking=display)
    assert message.content[0].type == "thinking"
    assert message.content[0].thinking == ""
    assert message.content[0].signature
    with client.messages.stream(model=MODEL, max_tokens=24, thinking=display, messages=QUESTION) as stream:
        kinds = [e.delta.type for e in stream if e.type == "content_block_delta" and e.index == 0]
    assert kinds == ["signature_delta"]
    assert ask(client, thinking=display, messages=history(message)).stop_reason is not None


def test_thinking_sent_back_unchanged_continues_and_changed_is_refused(client):
    message = ask(client)
    assert ask(client, messages=history(message)).content[0].type == "thinking"
    changed = history(message)
    changed[1]["content"][0]["thinking"] += " (edited)"
    with pytest.raises(anthropic.BadRequestError, match=r"messages\.1\.content\.0\.thinking"):
        ask(client, messages=changed)
    forged = copy.deepcopy(history(message))
    forged[1]["content"][0]["signature"] = forged[1]["content"][0]["signature"][::-1]
    with pytest.raises(anthropic.BadRequestError, match=r"messages\.1\.content\.0\.signature"):
        ask(client, messages=forged)


def test_signatures_survive_a_restart_on_the_same_data_directory(client, data_dir):
    message = ask(client)
    args = ["--data-dir", str(data_dir)]
    with reference_server(MODEL, log=data_dir / "second.log", args=args) as other:
        again = anthropic.Anthropic(base_url=other, api_key="unused", max_retries=0)
        assert ask(again, messages=history(message)).stop_reason is not None


def test_count_tokens_agrees_with_usage_with_thinking_on(client):
    counted = client.messages.count_tokens(model=MODEL, thinking=ADAPTIVE, messages=QUESTION).input_tokens
    assert ask(client).usage.input_tokens == counted
    assert (
        counted > client.messages.count_tokens(model=MODEL, messages=QUESTION).input_tokens
    )  # the instruction


def test_disabled_thinking_gives_no_thinking_block(client):
    message = ask(client, thinking={"type": "disabled"})
    assert all(block.type != "thinking" for block in message.content)
    assert message.usage.output_tokens_details is None


def test_the_rules_are_400s(client):
    # The SDK's own message format changes between releases (2.17 dropped "Error code:"); judge the body.
    with pytest.raises(anthropic.BadRequestError, match="max_tokens: must be greater") as refused:
        ask(client, max_tokens=1024, thinking={"type": "enabled", "budget_tokens": 1024})
    assert refused.value.status_code == 400
    with pytest.raises(anthropic.BadRequestError, match="temperature: may only be set to 1"):
        # 2023-06-01: under the SDK's 2026-10-21 temperature is refused by the version first.
        ask(client, extra_body={"temperature": 0.0}, extra_headers={"anthropic-version": "2023-06-01"})
    tool = {"name": "clock", "description": "the time", "input_schema": {"type": "object"}}
    with pytest.raises(anthropic.BadRequestError, match="forces tool use"):
        ask(client, tools=[tool], tool_choice={"type": "any"})


def test_a_tool_loop_keeps_its_thinking(client):
    tool = {"name": "clock", "description": "the time", "input_schema": {"type": "object"}}
    thought = ask(client)
    call = {"type": "tool_use", "id": "toolu_01", "name": "clock", "input": {}}
    blocks = [thought.content[0].model_dump(exclude_none=True), call]
    result = {"type": "tool_result", "tool_use_id": "toolu_01", "content": "noon"}
    loop = [*QUESTION, {"role": "assistant", "content": blocks}, {"role": "user", "content": [result]}]
    answer = ask(client, tools=[tool], messages=loop)
    assert answer.content[0].type == "thinking"
    with pytest.raises(anthropic.BadRequestError, match="must start with a thinking block"):
        ask(client, tools=[tool], messages=[*QUESTION, {"role": "assistant", "content": [call]}, loop[2]])


def test_clear_thinking_reports_what_it_cleared(client):
    first = ask(client)
    messages = history(first)
    second = ask(client, messages=messages)
    blocks = [block.model_dump(exclude_none=True) for block in second.content]
    longer = [*messages, {"role": "assistant", "content": blocks}, {"role": "user", "content": "Thanks."}]
    edit = {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}
    beta = {"anthropic-beta": "context-management-2025-06-27"}
    body = {"context_management": {"edits": [edit]}}
    answer = ask(client, messages=longer, extra_headers=beta, extra_body=body)
    raw = answer.model_dump()["context_management"]  # the GA type lacks the field: read the extra
    (applied,) = raw["applied_edits"]
    assert applied["type"] == "clear_thinking_20251015"
    assert applied["cleared_thinking_turns"] == 1
    assert applied["cleared_input_tokens"] > 0
    kept_all = ask(
        client,
        messages=longer,
        extra_headers=beta,
        extra_body={"context_management": {"edits": [edit | {"keep": "all"}]}},
    )
    assert kept_all.usage.input_tokens == answer.usage.input_tokens + applied["cleared_input_tokens"]
    assert "context_management" not in ask(client).model_dump()  # only for requests with edits
    with pytest.raises(anthropic.BadRequestError, match="compact_20260112 is not supported"):
        ask(
            client,
            extra_headers=beta,
            extra_body={"context_management": {"edits": [{"type": "compact_20260112"}]}},
        )
