"""CTX-*: context management (`context_management.edits`, beta `context-management-2025-06-27`).

Where the target serves it (the profile, or a request with the edit answered with its
`context_management` report: conformance/evidence.py): `clear_thinking_20251015` clears the
thinking of older assistant turns and says so in `context_management.applied_edits`
(non-streamed and in the final message_delta), `clear_tool_uses_20250919` clears the oldest tool
results once its trigger is reached and reports how many, count_tokens counts the prompt as
edited, and an edit is reported or refused with a 400, never silently ignored (CTX-005, which
judges the run's probe of each edit where it failed). Each edit is judged by what it
reports and by what it takes out of the prompt (the input tokens of the same request with
nothing cleared).

The thinking history comes from the target itself (two real turns, so their signatures are its
own): adaptive thinking lets a model skip thinking, so a property that needs it SKIPs when none
comes. The tool history is written by hand: three calls and their results. The properties
require only the edit they judge (clear_thinking needs thinking on, clear_tool_uses needs tools:
a model that claims the edit claims those too), and their names avoid `think` and `tool`, so the
thinking and tool selections (`-k think`, `-k tool`) do not pick them up.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance import evidence
from conformance.catalogue import Level, prop
from conformance.features import declared_in
from conformance.generating.content import count_input_tokens, expect_accepted
from conformance.generating.thinking import FOLLOW_UP, thinking_blocks, thinking_body
from conformance.judging.checks import (
    Cases,
    ConformanceFailure,
    expect,
    expect_equal,
    expect_error,
    json_object,
    read,
    read_optional,
)
from conformance.wire.drivers import expect_stream, message_body, stream_raw, total_input_tokens
from conformance.wire.target import Target

EDITING = "build-with-claude/context-editing"
BETA = evidence.CONTEXT_BETA
CLEAR_THINKING = "clear_thinking_20251015"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
LAST_QUESTION = "And four plus four?"
ANSWER_BLOCKS = ("text", "tool_use")

Info = dict[str, Any] | None
CITIES = ("Paris", "Oslo", "Lima")
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def beta_headers(target: Target) -> dict[str, str]:
    return {**target.headers(), "anthropic-beta": BETA}


def managed(body: dict[str, Any], *edits: dict[str, Any]) -> dict[str, Any]:
    return {**body, "context_management": {"edits": list(edits)}}


def create(target: Target, body: dict[str, Any], what: str) -> dict[str, Any]:
    return expect_accepted(target, body, what, headers=beta_headers(target))


def keep_thinking(value: Any) -> dict[str, Any]:
    return {"type": CLEAR_THINKING, "keep": value}


def thinking_turn(target: Target, body: dict[str, Any], what: str) -> list[Any]:
    """The content of the target's answer to `body`: a thinking block, then an answer."""
    message = create(target, body, what)
    content: list[Any] = read(message, "content", list, where="the Message")
    if not thinking_blocks(message):
        if body["thinking"]["type"] == "adaptive":
            pytest.skip(f"{what}: no thinking block (adaptive thinking lets the model skip thinking)")
        raise ConformanceFailure(f"{what}: a thinking block", "no thinking block", reason="no-thinking")
    if not any(isinstance(b, dict) and b.get("type") in ANSWER_BLOCKS for b in content):
        pytest.skip(f"{what}: no answer after the thinking (cut by max_tokens), nothing to send back")
    return content


def thinking_conversation(target: Target, model_info: Info) -> dict[str, Any]:
    """A request whose history has two assistant turns with the target's own thinking."""
    body = thinking_body(target, model_info)
    first = thinking_turn(target, body, "the first turn")
    messages = [
        *body["messages"],
        {"role": "assistant", "content": first},
        {"role": "user", "content": FOLLOW_UP},
    ]
    second = thinking_turn(target, {**body, "messages": messages}, "the second turn")
    messages += [{"role": "assistant", "content": second}, {"role": "user", "content": LAST_QUESTION}]
    return {**body, "messages": messages}


def tool_conversation(target: Target) -> dict[str, Any]:
    """A request whose history has three tool calls, each answered, then a question."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "What is the weather in Paris, Oslo and Lima?"}
    ]
    for n, city in enumerate(CITIES):
        call = {
            "type": "tool_use",
            "id": f"toolu_plumbline{n}",
            "name": "get_weather",
            "input": {"city": city},
        }
        result = {
            "type": "tool_result",
            "tool_use_id": call["id"],
            "content": f"In {city} it is cloudy and mild, with a light wind from the west and no rain today.",
        }
        messages += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    messages[-1]["content"].append({"type": "text", "text": "Which city is the warmest? One word."})
    return message_body(target, tools=[WEATHER_TOOL], messages=messages)


def applied(container: Any, kind: str, where: str) -> dict[str, Any] | None:
    """The entry of `context_management.applied_edits` for the edit `kind` (None when absent)."""
    edits = read(container, "context_management.applied_edits", list, where=where)
    found = [e for e in edits if isinstance(e, dict) and e.get("type") == kind]
    expect(len(found) <= 1, f"{where}: at most one {kind} entry in applied_edits", edits, reason="edits")
    return found[0] if found else None


def expect_cleared(entry: dict[str, Any] | None, count_key: str, count: int, where: str) -> None:
    """An applied edit that cleared `count` items (turns, tool uses) and some input tokens."""
    if entry is None:
        raise ConformanceFailure(f"{where}: an applied_edits entry", "none", reason="edit-not-reported")
    expect_equal(
        read(entry, count_key, int, where=where), count, f"{where}: {count_key}", reason="edit-count"
    )
    tokens = read(entry, "cleared_input_tokens", int, where=where)
    expect(tokens > 0, f"{where}: cleared_input_tokens > 0", tokens, reason="edit-tokens")


def expect_nothing_cleared(container: Any, kind: str, count_key: str, where: str) -> None:
    """An edit that cleared nothing is absent from applied_edits, or reports zeros."""
    entry = (
        applied(container, kind, where)
        if read_optional(container, "context_management", dict, where=where)
        else None
    )
    if entry is not None:
        for key in (count_key, "cleared_input_tokens"):
            expect_equal(read(entry, key, int, where=where), 0, f"{where}: {key}", reason="edit-count")


def input_tokens(message: dict[str, Any], where: str) -> int:
    return total_input_tokens(read(message, "usage", dict, where=where), where=f"{where}: usage")


THINKING_COVERS = (
    "endpoint:POST /v1/messages",
    "param:anthropic-beta",
    "request:thinking",
    "request:messages[].content",
    "block:thinking",
    "response:usage.input_tokens",
)


@prop(
    "CTX-001",
    Level.MUST,
    "clear_thinking clears older thinking and reports it",
    url=f"{EDITING}#thinking-block-clearing",
    requirement="clear_thinking_20251015 with keep {thinking_turns: 1} clears the thinking of all but "
    "the last assistant turn: applied_edits reports cleared_thinking_turns (here 1) and the "
    "cleared_input_tokens, which the usage no longer counts; keep 'all' clears nothing.",
    source="docs: build-with-claude/context-editing#configuration-options-for-thinking-block-clearing; "
    'build-with-claude/context-editing#context-editing-response — keep: "Defines how many recent '
    'assistant turns with thinking blocks to preserve. Use {type: \\"thinking_turns\\", value: N} '
    '... or \\"all\\" to keep all thinking blocks."; response example applied_edits [{type: '
    "clear_thinking_20251015, …",
    requires=("context_management", "clear_thinking"),
    covers=THINKING_COVERS,
)
def test_ctx_001_older_reasoning_cleared(target: Target, model_info: Info) -> None:
    body = thinking_conversation(target, model_info)
    cases = Cases()
    kept = create(target, managed(body, keep_thinking("all")), "keep all")
    with cases.case("keep all"):
        expect_nothing_cleared(kept, CLEAR_THINKING, "cleared_thinking_turns", "keep all")
    with cases.case("keep 1 thinking turn"):
        cleared = create(
            target, managed(body, keep_thinking({"type": "thinking_turns", "value": 1})), "keep 1"
        )
        expect_cleared(applied(cleared, CLEAR_THINKING, "keep 1"), "cleared_thinking_turns", 1, "keep 1")
        fewer, whole = input_tokens(cleared, "keep 1"), input_tokens(kept, "keep all")
        expect(
            fewer < whole,
            f"usage: fewer input tokens than with keep all ({whole})",
            fewer,
            reason="not-cleared",
        )
    cases.check()


@prop(
    "CTX-002",
    Level.MUST,
    "Streamed, applied edits come in the final message_delta",
    url=f"{EDITING}#context-editing-response",
    requirement="In a stream, the context edits applied to the request are reported in the final "
    "message_delta event's context_management.applied_edits, each with what it cleared (here "
    "clear_thinking: 1 thinking turn, and its input tokens).",
    source='docs: build-with-claude/context-editing#context-editing-response — "For streaming responses,'
    ' the context edits will be included in the final `message_delta` event"',
    requires=("context_management", "clear_thinking"),
    covers=(*THINKING_COVERS, "request:stream", "event:message_delta"),
)
def test_ctx_002_streamed_edits(target: Target, model_info: Info) -> None:
    body = managed(
        thinking_conversation(target, model_info), keep_thinking({"type": "thinking_turns", "value": 1})
    )
    run = expect_stream(stream_raw(target, body, headers=beta_headers(target)))
    where = "the last message_delta"
    expect_cleared(
        applied(run.last("message_delta"), CLEAR_THINKING, where), "cleared_thinking_turns", 1, where
    )


TOOL_COVERS = (
    "endpoint:POST /v1/messages",
    "param:anthropic-beta",
    "request:tools",
    "block:tool_use",
    "block:tool_result",
)


def clear_tool_uses(trigger: int, keep: int) -> dict[str, Any]:
    return {
        "type": CLEAR_TOOL_USES,
        "trigger": {"type": "tool_uses", "value": trigger},
        "keep": {"type": "tool_uses", "value": keep},
    }


@prop(
    "CTX-003",
    Level.MUST,
    "clear_tool_uses clears the oldest tool results past its trigger and reports them",
    url=f"{EDITING}#tool-result-clearing",
    requirement="clear_tool_uses_20250919 acts once the prompt passes its trigger: it clears all "
    "but the `keep` most recent tool uses (here 2 of 3) and reports cleared_tool_uses and "
    "cleared_input_tokens in applied_edits; under the trigger it clears nothing.",
    source="docs: build-with-claude/context-editing#configuration-options-for-tool-result-clearing — "
    'trigger: "Once the prompt exceeds this threshold, clearing will begin."; keep: "how many '
    "recent tool use/result pairs to keep after clearing occurs. The API removes the oldest tool "
    'interactions first"',
    requires=("context_management", "clear_tool_uses"),
    covers=(*TOOL_COVERS, "response:usage.input_tokens"),
)
def test_ctx_003_old_calls_cleared(target: Target) -> None:
    body = tool_conversation(target)
    cases = Cases()
    whole = create(target, managed(body, clear_tool_uses(trigger=10, keep=1)), "trigger not reached")
    with cases.case("trigger not reached"):
        expect_nothing_cleared(whole, CLEAR_TOOL_USES, "cleared_tool_uses", "trigger not reached")
    with cases.case("trigger passed, keep 1"):
        cleared = create(target, managed(body, clear_tool_uses(trigger=2, keep=1)), "trigger passed")
        expect_cleared(applied(cleared, CLEAR_TOOL_USES, "keep 1"), "cleared_tool_uses", 2, "keep 1")
        fewer, more = input_tokens(cleared, "keep 1"), input_tokens(whole, "trigger not reached")
        expect(
            fewer < more, f"usage: fewer input tokens than uncleared ({more})", fewer, reason="not-cleared"
        )
    cases.check()


@prop(
    "CTX-004",
    Level.MUST,
    "count_tokens counts the prompt as the edits leave it",
    url=f"{EDITING}#token-counting",
    requirement="count_tokens applies the context edits of the request: input_tokens is the count "
    "after clearing (fewer than with nothing cleared), and context_management."
    "original_input_tokens, when given, is the count before.",
    source='docs: build-with-claude/context-editing#token-counting — "The response shows both the final '
    "token count after context management is applied (`input_tokens`) and the original token "
    'count before any clearing occurred (`original_input_tokens`)."',
    requires=("context_management", "clear_tool_uses"),
    covers=(
        "endpoint:POST /v1/messages/count_tokens",
        "param:anthropic-beta",
        "count_request:messages",
        "count_request:tools",
        "count_response:input_tokens",
        "block:tool_result",
    ),
)
def test_ctx_004_count_tokens(target: Target) -> None:
    body = tool_conversation(target)
    headers = beta_headers(target)
    whole, _ = count_input_tokens(target, body, headers=headers)
    edited, answer = count_input_tokens(
        target, managed(body, clear_tool_uses(trigger=2, keep=1)), headers=headers
    )
    expect(
        edited < whole,
        f"input_tokens after clearing below the uncleared count ({whole})",
        edited,
        reason="not-cleared",
    )
    original = read_optional(answer, "context_management.original_input_tokens", int, where="the count")
    if original is not None:
        expect_equal(original, whole, "context_management.original_input_tokens (the uncleared count)")


@prop(
    "CTX-005",
    Level.SHOULD,
    "An edit is applied and reported, or refused: never ignored",
    url=f"{EDITING}#overview",
    requirement="A request with a context_management edit (clear_thinking, clear_tool_uses, compaction)"
    " is either answered with a context_management report (its applied_edits, empty where nothing "
    "was cleared) or refused with a 400 invalid_request_error, as the model's capabilities say of "
    "it where they do. A 200 without the report is the edit silently ignored."
    " No docs sentence says an edit a server lacks is refused rather than ignored; a refusal is what a "
    "client can act on, so this is a SHOULD.",
    requires=("context_management",),
    detects=tuple(evidence.EDITS),
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:GET /v1/models/{model_id}",
        "param:anthropic-beta",
        "model:capabilities.context_management.clear_thinking_20251015",
        "model:capabilities.context_management.clear_tool_uses_20250919",
        "model:capabilities.context_management.compact_20260112",
        "error:invalid_request_error",
    ),
)
def test_ctx_005_edit_never_ignored(target: Target, model_info: Info) -> None:
    """Each edit alone on a short request (the run's probe of it, conformance/evidence.py, sent
    again). `model_info` is the session's ModelInfo: what it says of an edit is a hint, and a
    refusal of an edit it says the model serves is judged here too."""
    cases = Cases()
    for name, edit in evidence.EDITS.items():
        with cases.case(str(edit["type"])):
            body = evidence.edit_body(target, name, model_info)
            response = target.request("POST", "/v1/messages", json_body=body, headers=beta_headers(target))
            if response.status_code != 200:
                expect_error(response, 400, "invalid_request_error")
                expect(
                    declared_in(model_info, name) is not True,
                    f"HTTP 200 with a context_management report: the capabilities say the model serves "
                    f"{edit['type']}",
                    f"HTTP {response.status_code}: {response.text[:300]}",
                    reason="refused",
                )
                continue
            answer = json_object(response, "the Message")
            expect(
                isinstance(answer.get("context_management"), dict),
                f"a context_management report of {edit['type']} (its applied_edits)",
                f"HTTP 200 without one: {response.text[:300]}",
                reason="edit-ignored",
                subject="context_management edits accepted, not used",
            )
    cases.check()
