"""TOOL-*: client tools: forced calls, tool_choice, ids, tool_result round trips, streamed
tool input, and count_tokens with tools. Each runs only on a target that serves tools (the
profile, or one probe request: conformance/features.py); a target that serves them and breaks
them fails.

Every request forces what it judges (`tool_choice` any or tool) with small enum schemas, so any
model, a random one under constrained decoding included, answers with a short call. The schema
of a tool call (block shape, id pattern, `input` an object) is TOOL-004's rule only; the others
read the fields they need and judge their own rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import given, note

from conformance.catalogue import Level, prop
from conformance.generating.budget import Tally, budgeted
from conformance.generating.strategies import object_schemas, uses_extended_keywords
from conformance.generating.tooluse import (
    COLOUR_SCHEMA,
    FORCING_WAYS,
    SHAPE_SCHEMA,
    TOOL_MAX_TOKENS,
    TOOLS,
    colour_tool,
    expect_valid_instance,
    forcing,
    streamed_tool_calls,
    tool_body,
    tool_result_turns,
    tool_uses,
    way_choice,
)
from conformance.judging import checks
from conformance.judging.checks import (
    Cases,
    expect,
    expect_equal,
    expect_id_prefix,
    expect_no_schema_errors,
    expect_status,
    expect_stop,
    json_object,
    not_judged,
    read,
    stop_reason,
)
from conformance.judging.schemas import validate_component, validate_event
from conformance.wire.drivers import (
    TOOLS_NOT_COUNTED,
    StreamRun,
    create_json,
    expect_no_violations,
    expect_stream,
    sdk_call,
    stream_raw,
    total_input_tokens,
)
from conformance.wire.sse import parse_sse
from conformance.wire.target import Target

TOOL_USE = "agents-and-tools/tool-use/implement-tool-use"
STRICT = "build-with-claude/structured-outputs"
MESSAGES = "api/messages"
STREAMING = "build-with-claude/streaming"
MESSAGE = "the Message"
LAST_DELTA = "the last message_delta"
# Forced calls, one each: several are asked for only where they are judged. A property asks
# for calls the way the target takes them (tooluse.forcing: any, else the named tool, else
# auto); only TOOL-001 sends a way the run found refused, as its finding.
ANY = {"type": "any", "disable_parallel_tool_use": True}
SHAPE = {"type": "tool", "name": "record_shape", "disable_parallel_tool_use": True}
ANSWER = 16  # max_tokens where any answer will do
NO_CALL = "the forced request got no tool_use block"


def forced(target: Target, choice: dict[str, Any] | None = None, **changes: Any) -> dict[str, Any]:
    """The non-streamed answer to a forced call (default: the way the target takes one)."""
    return create_json(target, tool_body(target, tool_choice=choice, **changes))


def refused_ways(target: Target) -> list[str]:
    """The ways of asking for a call (tool_choice types) the run's probe found refused: those it
    tried before the one the target took (TOOL-001 judges them)."""
    way = target.ways.get("tools")
    return list(FORCING_WAYS[: FORCING_WAYS.index(way)]) if way in FORCING_WAYS else []


def taken(target: Target, choices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`choices` less the ways the target refuses (each left out is said under the verdict);
    none left: the way it takes."""
    refused = refused_ways(target)
    for choice in choices:
        if choice["type"] in refused:
            checks.note(
                f"tool_choice {choice['type']} left out: the run found it refused (TOOL-001 judges that)"
            )
    kept = [choice for choice in choices if choice["type"] not in refused]
    return kept or [forcing(target)]


def calls_or_skip(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = tool_uses(message)
    if not calls:
        not_judged(NO_CALL, judged_by="TOOL-001")
    return calls


@prop(
    "TOOL-001",
    Level.MUST,
    "A forced tool_choice gives tool_use blocks",
    url=f"{TOOL_USE}#forcing-tool-use",
    requirement="tool_choice {type: any} makes the model use one of the tools, and {type: tool, "
    "name} the named one: the answer, streamed or not, contains at least one tool_use block.",
    source="docs: agents-and-tools/tool-use/implement-tool-use#forcing-tool-use (SDK "
    'tool_choice_*_param.py) — any: "The model will use any available tools."; tool: "The model '
    'will use the specified tool with `tool_choice.name`."',
    invariant=40,
    requires=("tools", "tool_calls"),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools",
        "request:tools[].name",
        "request:tools[].description",
        "request:tools[].input_schema",
        "request:tool_choice",
        "request:tool_choice.type",
        "request:tool_choice.name",
        "request:stream",
        "block:tool_use",
        "event:content_block_start",
    ),
)
def test_tool_001_forced_call(target: Target) -> None:
    """Sends two tools with tool_choice any, then tool (naming the second), plain and streamed."""
    cases = Cases()
    for choice in (ANY, SHAPE):
        body = tool_body(target, tool_choice=choice)
        with cases.case(f"tool_choice {choice['type']}"):
            calls = tool_uses(create_json(target, body))
            expect(bool(calls), "at least one tool_use block", "no tool_use block", reason="no-tool-call")
        with cases.case(f"tool_choice {choice['type']}, streamed"):
            streamed = streamed_tool_calls(expect_stream(stream_raw(target, body)))
            expect(bool(streamed), "a tool_use block in the stream", "none started", reason="no-tool-call")
    cases.check()


@prop(
    "TOOL-002",
    Level.MUST,
    "A tool call names a request tool, the forced one when forced",
    url=f"{TOOL_USE}#forcing-tool-use",
    requirement="With tool_choice {type: tool, name: N} the model calls N; every tool_use names one "
    "of the request's tools (a SHOULD sub-case where the tools are not strict: only strict: true "
    "guarantees the names).",
    source="docs: agents-and-tools/tool-use/implement-tool-use#forcing-tool-use; "
    'build-with-claude/structured-outputs#strict-tool-use — tool: "The model will use the '
    'specified tool with `tool_choice.name`."; strict: "Guarantee schema validation on tool names'
    ' and inputs"',
    invariant=39,
    requires=("tools", "tool_calls"),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools[].name",
        "request:tool_choice",
        "request:tool_choice.type",
        "request:tool_choice.name",
        "block:tool_use",
    ),
)
def test_tool_002_forced_name(target: Target) -> None:
    """Forces the second of two tools (a server that calls the first one fails), then any. An
    answer without any call is TOOL-001's to judge: the forced name is then not judged (said
    under the verdict), whatever the answer to any shows."""
    names = [tool["name"] for tool in TOOLS]
    cases = Cases()
    judged = 0
    for choice in taken(target, [SHAPE, ANY]):
        calls = tool_uses(forced(target, choice))
        judged += bool(calls)
        called = [read(call, "name", str, where="a tool_use block") for call in calls]
        if choice == SHAPE:
            with cases.case("tool_choice tool names the call"):
                if not calls:
                    not_judged(NO_CALL, judged_by="TOOL-001")
                expect("record_shape" in called, "a tool_use named record_shape", called, reason="tool-name")
        # Only strict tools guarantee the names; these are not strict.
        with cases.case(f"tool_choice {choice['type']}: only request tools", level=Level.SHOULD):
            expect(
                set(called) <= set(names), f"only tools of the request {names}", called, reason="tool-name"
            )
    cases.check()
    if not judged:
        not_judged(NO_CALL, judged_by="TOOL-001")


@prop(
    "TOOL-003",
    Level.MUST,
    "stop_reason is tool_use when the turn ends in a tool call",
    url=f"{MESSAGES}#response-stop-reason",
    requirement="stop_reason 'tool_use' means the model invoked one or more tools: a turn that ends "
    "with tool_use blocks (not cut by max_tokens) says tool_use, streamed or not, and a turn "
    "without one never does.",
    source="docs: api/messages#response-stop-reason; "
    "agents-and-tools/tool-use/implement-tool-use#handling-results-from-client-tools — "
    '"`\\"tool_use\\"`: the model invoked one or more tools"; "The response will have a '
    '`stop_reason` of `tool_use` and one or more `tool_use` content blocks"',
    invariant=36,
    requires=("tools", "tool_calls"),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools",
        "request:tool_choice.type",
        "request:stream",
        "response:stop_reason",
        "event:message_delta",
        "block:tool_use",
        "stop_reason:tool_use",
    ),
)
def test_tool_003_stop_reason_tool_use(target: Target) -> None:
    """A forced call, plain and streamed (tool_use where a call ends the turn), and tool_choice
    none (no tool_use without a call). The MUST is the first: with no turn ending in a call it
    is not judged (TOOL-001's finding), whatever the turns without one show."""
    cases = Cases()
    body = tool_body(target)
    ended_in_call = 0
    with cases.case("forced call"):
        message = create_json(target, body)
        reason = stop_reason(message, where=MESSAGE)
        if tool_uses(message) and reason != "max_tokens":
            ended_in_call += 1
            expect_stop(reason, "tool_use", "stop_reason of a turn ending in a tool call")
        elif not tool_uses(message):
            expect(reason != "tool_use", "no stop_reason tool_use without a tool_use block", reason)
    with cases.case("forced call, streamed"):
        run = expect_stream(stream_raw(target, body))
        if not streamed_tool_calls(run):
            not_judged("the stream has no tool_use block", judged_by="TOOL-001")
        reason = stop_reason(run.last("message_delta"), "delta.stop_reason", where=LAST_DELTA)
        if reason != "max_tokens":
            ended_in_call += 1
            expect_stop(reason, "tool_use", "streamed stop_reason of a turn ending in a tool call")
    with cases.case("tool_choice none"):
        message = forced(target, {"type": "none"}, max_tokens=16)
        if not tool_uses(message):
            reason = stop_reason(message, where=MESSAGE)
            expect(reason != "tool_use", "no stop_reason tool_use without a tool_use block", reason)
    cases.check()
    if not ended_in_call:
        not_judged(f"{NO_CALL} that max_tokens left whole, plain or streamed", judged_by="TOOL-001")


@prop(
    "TOOL-004",
    Level.MUST,
    "A tool call matches the schema",
    url=f"{MESSAGES}#response-content",
    requirement="A tool_use block has type, an id matching ^[a-zA-Z0-9_-]+$, a name, an input that "
    "is a JSON object (not a JSON string) and caller, valid against the schema, returned or "
    "streamed (its content_block_start and input_json_delta events); the official SDK (strict) "
    "accepts the Message. A caller left out is a SHOULD sub-case: the schema requires it, but it "
    "is newer than most servers and the official SDKs read it as optional.",
    source="schema: OpenAPI ResponseToolUseBlock; OpenAPI ContentBlockDeltaEvent — required [caller, id,"
    " input, name, type]; id pattern ^[a-zA-Z0-9_-]+$; input type object; name minLength 1",
    invariant=38,
    requires=("tools", "tool_calls"),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools",
        "request:tool_choice",
        "request:stream",
        "block:tool_use",
        "delta:input_json_delta",
        "event:content_block_start",
        "event:content_block_delta",
    ),
)
def test_tool_004_tool_call_schema(target: Target) -> None:
    """The property that judges the schema of tool calls, plain and streamed; the other TOOL-*
    properties read the fields they need. The rest of the Message and of the stream is MSG-001's
    and STREAM-011's to judge."""
    cases = Cases()
    body = tool_body(target)
    judged = 0
    with cases.case("raw"):
        for n, call in enumerate(tool_uses(create_json(target, body))):
            judged += 1
            expect_no_schema_errors(validate_component("ResponseToolUseBlock", call), f"tool_use block {n}")
    with cases.case("streamed"):
        run = expect_stream(stream_raw(target, body))
        tool_blocks = {call.index for call in streamed_tool_calls(run)}
        for event in run.events:
            delta = event.get("delta")
            index = event.get("index")
            if event.get("type") == "content_block_start" and isinstance(index, int) and index in tool_blocks:
                judged += 1
            elif not (isinstance(delta, dict) and delta.get("type") == "input_json_delta"):
                continue
            expect_no_schema_errors(
                validate_event(event), f"the {event.get('type')} event of a tool_use block"
            )
    with cases.case("official SDK"):
        answer = sdk_call(
            "messages.create with tools",
            target.sdk().messages.create,
            model=target.model,
            max_tokens=TOOL_MAX_TOKENS,
            messages=body["messages"],
            tools=body["tools"],
            tool_choice=body["tool_choice"],
            extra_body=target.greedy_fields(),
        )
        judged += sum(block.type == "tool_use" for block in answer.content)
    cases.check()
    if not judged:
        not_judged(NO_CALL, judged_by="TOOL-001")


def _judge_inputs(target: Target, *, strict: bool) -> None:
    tool = colour_tool(strict=strict)
    cases = Cases()
    judged = 0
    for choice in taken(target, [way_choice("tool", [tool]), ANY]):
        with cases.case(f"tool_choice {choice['type']}"):
            message = forced(target, choice, tools=[tool, TOOLS[1]])
            schemas = {tool["name"]: COLOUR_SCHEMA, "record_shape": SHAPE_SCHEMA}
            # A non-object input is TOOL-004's to judge, an unknown name TOOL-002's.
            made = tool_uses(message)
            if made and stop_reason(message, where=MESSAGE) == "max_tokens":
                made = made[:-1]  # the API documents that max_tokens may cut the last call short
            calls = [
                call
                for call in made
                if isinstance(call.get("input"), dict) and str(call.get("name")) in schemas
            ]
            judged += len(calls)
            for call in calls:
                expect_valid_instance(
                    schemas[call["name"]], call["input"], f"{call['name']} input", reason="input-schema"
                )
    cases.check()
    if not judged:
        pytest.skip("no forced call had an object input for a request tool (TOOL-001/002/004 judge that)")


@prop(
    "TOOL-005",
    Level.MUST,
    "A strict tool's input validates against its input_schema",
    url=f"{STRICT}#strict-tool-use",
    requirement="With strict: true the tool's input is guaranteed to follow its input_schema: every "
    "required property, no undeclared one (additionalProperties false), enum values only.",
    source='docs: build-with-claude/structured-outputs#strict-tool-use — "Strict tool use (`strict: '
    'true`): Guarantee schema validation on tool names and inputs"; ToolParam.strict: "When true,'
    ' guarantees schema validation on tool names and inputs"',
    invariant=38,
    requires=("tools", "tool_calls"),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools[].input_schema",
        "request:tools[].input_schema.properties",
        "request:tools[].input_schema.required",
        "request:tools[].strict",
        "request:tool_choice",
        "request:tool_choice.type",
        "request:tool_choice.name",
        "block:tool_use",
    ),
)
def test_tool_005_strict_input_valid(target: Target) -> None:
    """Forces a strict tool (an object with enums, a boolean and a nested object) by name and by
    any; each call's input object is validated against the tool's schema. Its longest valid
    input is a few dozen tokens, so max_tokens (200) never excuses an invalid one; only a last
    call that max_tokens cut short (a model may repeat calls until then) is not judged."""
    _judge_inputs(target, strict=True)


@prop(
    "TOOL-006",
    Level.SHOULD,
    "A tool's input validates against its input_schema",
    url=f"{TOOL_USE}#specifying-client-tools",
    requirement="input_schema defines the input the model produces: without strict the input still "
    "should follow it (strict only adds the guarantee).",
    invariant=38,
    requires=("tools", "tool_calls"),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools[].input_schema",
        "request:tools[].input_schema.properties",
        "request:tools[].input_schema.required",
        "request:tool_choice",
        "request:tool_choice.type",
        "request:tool_choice.name",
        "block:tool_use",
    ),
)
def test_tool_006_input_valid(target: Target) -> None:
    _judge_inputs(target, strict=False)


@prop(
    "TOOL-007",
    Level.MUST,
    "tool_use ids are unique, in a message and across a conversation",
    url=f"{TOOL_USE}#handling-results-from-client-tools",
    requirement="A tool_use id identifies one call: tool_result blocks refer to it, so ids are "
    "unique within a Message and never reused in later turns of the conversation.",
    source="docs: agents-and-tools/tool-use/implement-tool-use#handling-results-from-client-tools — "
    '"`id`: A unique identifier for this particular tool use block. This will be used to match up'
    ' the tool results later."',
    invariant=37,
    requires=("tools", "tool_calls"),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools",
        "request:messages[].content",
        "block:tool_use",
        "block:tool_result",
    ),
)
def test_tool_007_unique_ids(target: Target) -> None:
    """Forced calls (several allowed, within 96 tokens), their results sent back, and forced
    calls again in the same conversation. One call and none after it has no two ids to compare:
    SKIP (TOOL-001's finding)."""
    body = tool_body(target, tool_choice=forcing(target, parallel=True), max_tokens=96)
    first = calls_or_skip(create_json(target, body))
    first_ids = [read(call, "id", str, where="a tool_use block") for call in first]
    expect(
        len(set(first_ids)) == len(first_ids), "distinct ids within the Message", first_ids, reason="tool-id"
    )
    history = [
        *body["messages"],
        {"role": "assistant", "content": first},
        tool_result_turns(first),
        {"role": "user", "content": "Record them once more."},
    ]
    second = tool_uses(create_json(target, {**body, "messages": _merge_users(history)}))
    if len(first) < 2 and not second:
        # One id, and none after it: nothing it could clash with.
        not_judged(f"one call, then {NO_CALL} in the next turn: no two ids to compare", judged_by="TOOL-001")
    second_ids = [read(call, "id", str, where="a tool_use block") for call in second]
    expect(
        len(set(second_ids)) == len(second_ids),
        "distinct ids within the Message",
        second_ids,
        reason="tool-id",
    )
    reused = sorted(set(first_ids) & set(second_ids))
    expect(
        not reused, f"ids not used earlier in the conversation ({first_ids})", second_ids, reason="tool-id"
    )


def _merge_users(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive user turns as one (tool_result blocks first, as the API wants them)."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        if merged and merged[-1]["role"] == message["role"] == "user":
            merged[-1]["content"].extend(blocks)
        else:
            merged.append({"role": message["role"], "content": blocks})
    return merged


CALL = {
    "type": "tool_use",
    "id": "toolu_plumbline_01",
    "name": "record_colour",
    "input": {"colour": "blue", "bright": True, "where": {"part": "overhead"}},
}


@prop(
    "TOOL-008",
    Level.MUST,
    "A tool_result is accepted and answered",
    url=f"{TOOL_USE}#handling-results-from-client-tools",
    requirement="A user turn whose tool_result blocks answer the previous turn's tool_use blocks "
    "(content a string or content blocks, is_error true or not) is valid and gets a Message.",
    source="docs: agents-and-tools/tool-use/implement-tool-use#handling-results-from-client-tools; "
    'OpenAPI RequestToolResultBlock — "`tool_use_id`: The id of the tool use request this is a '
    'result for."; "`content`: The result of the tool, as a string ... a list of nested content '
    'blocks ... or a list of document blocks"; "`is_error` (optional): Set to `true` if the tool '
    "…",
    invariant=14,
    requires=("tools",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools",
        "request:tool_choice.type",
        "request:messages[].content",
        "response:stop_reason",
        "block:tool_use",
        "block:tool_result",
    ),
)
def test_tool_008_tool_result_round_trip(target: Target) -> None:
    """Sends a conversation with a tool call and its result in three forms (raw), then the
    target's own forced call echoed back with its result (through the SDK; without a call, that
    case is not judged). Any answer will do, so the answers are short (tool_choice auto: a cut
    call or text)."""
    cases = Cases()
    ask = {"role": "user", "content": "What colour is the sky? Use the tool."}
    for name, result, extra in (
        ("string content", "recorded", {}),
        ("text block content", [{"type": "text", "text": "recorded"}], {}),
        ("is_error", "the colour service is down", {"is_error": True}),
    ):
        with cases.case(name):
            turns = [
                ask,
                {"role": "assistant", "content": [CALL]},
                tool_result_turns([CALL], result, **extra),
            ]
            stop_reason(
                create_json(
                    target, tool_body(target, messages=turns, tool_choice={"type": "auto"}, max_tokens=ANSWER)
                ),
                where=MESSAGE,
            )
    with cases.case("the target's own call, through the SDK"):
        client = target.sdk()
        request: dict[str, Any] = {
            "model": target.model,
            "tools": TOOLS,
            "extra_body": target.greedy_fields(),
        }
        first = sdk_call(
            "messages.create (forced call)",
            client.messages.create,
            messages=[ask],
            tool_choice=forcing(target),
            max_tokens=TOOL_MAX_TOKENS,
            **request,
        )
        calls = [block for block in first.content if block.type == "tool_use"]
        if not calls:
            not_judged(NO_CALL, judged_by="TOOL-001")
        results = [{"type": "tool_result", "tool_use_id": call.id, "content": "recorded"} for call in calls]
        answer = sdk_call(
            "messages.create (tool results)",
            client.messages.create,
            messages=[
                ask,
                {"role": "assistant", "content": first.content},
                {"role": "user", "content": results},
            ],
            max_tokens=ANSWER,
            **request,
        )
        expect(answer.stop_reason is not None, "a stop_reason", answer.stop_reason, reason="stop-reason")
    cases.check()


@prop(
    "TOOL-009",
    Level.MUST,
    "tool_choice none gives no tool_use",
    url=f"{TOOL_USE}#forcing-tool-use",
    requirement="With tool_choice {type: none} the model does not use any tool: no tool_use "
    "block, streamed or not, although tools are defined.",
    source="docs: agents-and-tools/tool-use/implement-tool-use#forcing-tool-use (SDK "
    'tool_choice_none_param.py) — "The model will not be allowed to use tools."',
    invariant=41,
    requires=("tools",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools",
        "request:tool_choice.type",
        "request:stream",
        "response:content",
        "event:content_block_start",
    ),
)
def test_tool_009_tool_choice_none(target: Target) -> None:
    body = tool_body(target, tool_choice={"type": "none"}, max_tokens=12)
    cases = Cases()
    with cases.case("plain"):
        calls = tool_uses(create_json(target, body))
        expect(not calls, "no tool_use block", calls, reason="tool-call-not-allowed")
    with cases.case("streamed"):
        started = [call.start for call in streamed_tool_calls(expect_stream(stream_raw(target, body)))]
        expect(not started, "no tool_use block in the stream", started, reason="tool-call-not-allowed")
    cases.check()


@prop(
    "TOOL-010",
    Level.MUST,
    "disable_parallel_tool_use gives at most one tool_use",
    url=f"{TOOL_USE}#parallel-tool-use",
    requirement="With disable_parallel_tool_use: true the model uses at most one tool (exactly one "
    "when tool_choice is any or tool).",
    source="docs: agents-and-tools/tool-use/implement-tool-use#parallel-tool-use (SDK "
    'tool_choice_*_param.py) — auto: "If set to `true`, the model will output at most one tool '
    'use."; any/tool: "the model will output exactly one tool use."',
    invariant=42,
    requires=("tools", "tool_calls"),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools",
        "request:tool_choice.type",
        "request:tool_choice.disable_parallel_tool_use",
        "block:tool_use",
    ),
)
def test_tool_010_no_parallel_calls(target: Target) -> None:
    """Asks for three calls with tool_choice any, the named tool and auto, each with
    disable_parallel_tool_use (the ways the run found refused are TOOL-001's). An answer without
    a call judges nothing here: none at all is TOOL-001's finding."""
    prompt = "Record three colours: red, then green, then blue. Call the tool once for each colour."
    cases = Cases()
    judged = 0
    for choice in taken(target, [way_choice(way, TOOLS) for way in FORCING_WAYS]):
        with cases.case(f"tool_choice {choice['type']}"):
            calls = tool_uses(forced(target, choice, prompt=prompt, max_tokens=96))
            judged += bool(calls)
            expect(
                len(calls) <= 1,
                "at most one tool_use block",
                [c.get("name") for c in calls],
                reason="parallel",
                subject="disable_parallel_tool_use ignored: several tool_use blocks",
            )
    cases.check()
    if not judged:
        not_judged(f"{NO_CALL}, whatever the tool_choice", judged_by="TOOL-001")


@prop(
    "TOOL-011",
    Level.MUST,
    "Streamed input_json_delta fragments join into the input object",
    url=f"{STREAMING}#input-json-delta",
    requirement="A streamed tool_use block's input arrives as input_json_delta partial_json "
    "fragments whose concatenation is exactly one JSON object, the input; the SDK's stream "
    "helper accumulates the same object.",
    source='docs: build-with-claude/streaming#input-json-delta — "the deltas are partial JSON strings, '
    'whereas the final `tool_use.input` is always an object"',
    invariant=62,
    requires=("tools", "tool_calls"),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools",
        "request:stream",
        "event:content_block_delta",
        "block:tool_use",
        "delta:input_json_delta",
    ),
)
def test_tool_011_fragments_join(target: Target) -> None:
    """One call: it fits max_tokens, so no call is cut short; where one is (a model may repeat
    calls until then), its fragments stop mid-object, as the API documents for max_tokens, and
    only the calls before it are judged."""
    body = tool_body(target)
    run = expect_stream(stream_raw(target, body))
    calls = streamed_tool_calls(run)
    cut = None
    if calls and _cut_by_max_tokens(run):
        cut = calls.pop().index
        checks.note("the last tool_use, cut by max_tokens, is not judged (its input may stop mid-object)")
    if not calls:
        not_judged("the stream has no tool_use block that max_tokens left whole", judged_by="TOOL-001")
    found = [
        v
        for v in (run.report.violations if run.report is not None else [])
        if v.code == "partial-json-invalid" and not re.match(rf"block {cut}\b", v.message)
    ]
    expect(
        not found,
        "each tool block's partial_json joins into one JSON object",
        "; ".join(f"[{v.code}] event {v.event_index}: {v.message}" for v in found[:4]),
        reason="partial-json-invalid",
    )

    def accumulate() -> Any:
        request = {k: v for k, v in body.items() if k not in ("temperature", "model")}
        with target.sdk().messages.stream(
            model=target.model, extra_body=target.greedy_fields(), **request
        ) as stream:
            return stream.get_final_message()

    final = sdk_call("messages.stream with tools", accumulate)
    sdk_inputs = [block.input for block in final.content if block.type == "tool_use"]
    # The very stream the SDK read, as recorded on its way: its fragments, joined, are what the
    # SDK's object must hold (no second request, so no determinism is needed).
    wire = bytes(target.recorder.exchanges[-1].response_body)
    read_by_sdk = streamed_tool_calls(StreamRun(200, httpx.Headers(), wire, parse_sse(wire)))
    joined = [_loads(call.joined) if call.joined else call.start.get("input") for call in read_by_sdk]
    if joined and None not in joined:
        expect_equal(
            sdk_inputs,
            joined,
            "the SDK's accumulated inputs vs the joined fragments of the stream it read",
            reason="stream-diff",
        )


def _cut_by_max_tokens(run: StreamRun) -> bool:
    deltas = run.of_type("message_delta")
    delta = deltas[-1].get("delta") if deltas else None
    return isinstance(delta, dict) and delta.get("stop_reason") == "max_tokens"


def _loads(text: str) -> Any:
    """The JSON value of `text`, or None (a delta the grammar did not count may break it)."""
    try:
        return json.loads(text)
    except ValueError:
        return None


@prop(
    "TOOL-012",
    Level.SHOULD,
    "A streamed tool call equals the non-streamed one",
    url=f"{STREAMING}#input-json-delta",
    requirement="On a deterministic target (the same request gets the same answer) "
    "the tool calls the SDK accumulates from "
    "a stream have the same names and inputs, and the same stop_reason, as the same request "
    "made without streaming (streamed inputs are not lost or left {})."
    " Two calls agree only on a deterministic target, and the docs say temperature 0 is not fully "
    "deterministic: a SHOULD, judged only where the run found the target deterministic.",
    invariant=64,
    requires=("tools", "tool_calls"),
    compares=True,
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools",
        "request:stream",
        "response:stop_reason",
        "block:tool_use",
        "delta:input_json_delta",
        "stop_reason:tool_use",
    ),
)
def test_tool_012_stream_equals_create(target: Target) -> None:
    """The same forced call through the SDK, plain and streamed. A plain answer without a call
    has no call to compare (TOOL-001's finding: SKIP)."""
    if not target.deterministic:
        pytest.skip("the target is not deterministic (by its profile, or by the run's probe)")
    body = tool_body(target)
    run = expect_stream(stream_raw(target, body))
    if run.report is not None and "partial-json-invalid" in run.report.codes:
        not_judged("the streamed fragments do not join into JSON", judged_by="TOOL-011")
    client = target.sdk()
    request = {k: v for k, v in body.items() if k not in ("temperature",)}
    plain = sdk_call(
        "messages.create with tools", client.messages.create, extra_body=target.greedy_fields(), **request
    )

    def accumulate() -> Any:
        with client.messages.stream(extra_body=target.greedy_fields(), **request) as stream:
            return stream.get_final_message()

    if not _calls(plain):  # [] == [] compares nothing
        not_judged(f"{NO_CALL} (the plain answer)", judged_by="TOOL-001")
    streamed = sdk_call("messages.stream with tools", accumulate)
    expect_equal(_calls(streamed), _calls(plain), "streamed tool calls (name, input)", reason="stream-diff")
    expect_equal(streamed.stop_reason, plain.stop_reason, "streamed stop_reason", reason="stream-diff")


def _calls(message: Any) -> list[tuple[str, Any]]:
    return [(block.name, block.input) for block in message.content if block.type == "tool_use"]


@prop(
    "TOOL-013",
    Level.MUST,
    "A streamed tool_use block starts empty and is filled by input_json_delta",
    url=f"{STREAMING}#input-json-delta",
    requirement="A tool_use content_block_start carries the id and the name; the input arrives only "
    "through input_json_delta events (the SDK ignores an input sent in the start, and any other "
    "delta type on the block). That the start holds input {} is a SHOULD sub-case: the docs' "
    "example, not a stated rule.",
    source="docs and schema: OpenAPI ContentBlockStartEvent (content_block ResponseToolUseBlock); "
    "build-with-claude/streaming#input-json-delta — ResponseToolUseBlock required [caller, id, "
    'input, name, type]; "The deltas for `tool_use` content blocks correspond to updates for the '
    '`input` field of the block"; start example: "input":{}',
    invariant=68,
    requires=("tools", "tool_calls"),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools",
        "request:stream",
        "event:content_block_start",
        "block:tool_use",
        "delta:input_json_delta",
    ),
)
def test_tool_013_block_start_empty(target: Target) -> None:
    run = expect_stream(stream_raw(target, tool_body(target)))
    calls = streamed_tool_calls(run)
    if not calls:
        not_judged("the stream has no tool_use block", judged_by="TOOL-001")
    cases = Cases()
    with cases.case("id and name at the start, input_json_delta after"):
        expect_no_violations(run, {"delta-type-mismatch"}, "tool_use blocks take input_json_delta")
        for call in calls:
            read(call.start, "id", str, where="a tool_use content_block_start")
            read(call.start, "name", str, where="a tool_use content_block_start")
            started = call.start.get("input")
            expect(
                bool(call.fragments) or started in ({}, None),
                "the input in input_json_delta events (the SDK ignores one sent in the start)",
                f"an input in content_block_start and no input_json_delta: {started}",
                reason="input-in-start",
                subject="tool inputs sent in content_block_start, where the SDK ignores them",
            )
    with cases.case("input {} at the start", level=Level.SHOULD):  # the docs' example, not a rule
        expect_no_violations(run, {"block-start-not-empty"}, "tool_use blocks start with input {}")
    cases.check()


@prop(
    "TOOL-016",
    Level.MUST,
    "A streamed tool call follows the event grammar",
    url=f"{STREAMING}#event-types",
    requirement="A stream that calls tools keeps the event grammar: message_start first, blocks "
    "0, 1, 2… started, filled and stopped one at a time (a tool block is stopped before the next "
    "block starts), then message_delta and message_stop.",
    source="docs: build-with-claude/streaming#event-types; "
    'build-with-claude/streaming#full-http-stream-response — "Each stream uses the following '
    "event flow: 1. `message_start`: contains a `Message` object with empty `content`. 2. A "
    "series of content blocks, each of which have a `content_block_start`, one or more "
    "`content_block_delta` events, and a …",
    invariant=57,
    requires=("tools", "tool_calls"),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools",
        "request:stream",
        "event:message_start",
        "event:content_block_start",
        "event:content_block_delta",
        "event:content_block_stop",
        "event:message_delta",
        "event:message_stop",
        "block:tool_use",
        "delta:input_json_delta",
    ),
)
def test_tool_016_tool_stream_grammar(target: Target) -> None:
    """The grammar codes the text streams' properties judge (STREAM-002..010), on a forced call;
    a stream without a tool block is not one (TOOL-001's finding: SKIP)."""
    codes = {
        "missing-event-name", "event-name-mismatch", "done-sentinel", "first-not-message-start",
        "duplicate-message-start", "start-not-empty", "index-gap", "interleaved-blocks",
        "delta-unknown-block", "stop-unknown-block", "double-stop", "block-not-stopped",
        "block-after-message-delta", "no-message-delta", "no-message-stop", "event-after-stop",
        "invalid-json", "data-not-object", "unterminated-event", "malformed-event",
    }  # fmt: skip
    run = expect_stream(stream_raw(target, tool_body(target)))
    if not streamed_tool_calls(run):  # a stream without one is the text streams' (STREAM-*)
        not_judged("the stream has no tool_use block", judged_by="TOOL-001")
    expect_no_violations(run, codes, "a grammatical stream with tool blocks")


@prop(
    "TOOL-014",
    Level.MUST,
    "count_tokens counts the tools",
    url="api/messages-count-tokens#body-tools",
    requirement="count_tokens covers the tool definitions: adding tools raises input_tokens; that "
    "the count of a request with tools agrees with its usage.input_tokens (within 2 tokens or 2 %) "
    "is a SHOULD sub-case, as TOKENS-001 (the docs call the count an estimate).",
    source="docs: api/messages-count-tokens#response-input-tokens; build-with-claude/token-counting — "
    'input_tokens: "The total number of tokens across the provided list of messages, system '
    'prompt, and tools."; "The token count should be considered an estimate"',
    invariant=51,
    requires=("tools",),
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:POST /v1/messages/count_tokens",
        "count_request:tools",
        "count_response:input_tokens",
        "request:tools",
        "response:usage.input_tokens",
        "response:usage.cache_creation_input_tokens",
        "response:usage.cache_read_input_tokens",
    ),
)
def test_tool_014_count_tokens_tools(target: Target) -> None:
    messages = [{"role": "user", "content": "Record the colour of the sky."}]

    def count(**fields: Any) -> int:
        body = {"model": target.model, "messages": messages, **fields}
        response = target.request("POST", "/v1/messages/count_tokens", json_body=body)
        expect_status(response, 200)
        value: int = read(
            json_object(response, "count_tokens body"), "input_tokens", int, where="count_tokens"
        )
        return value

    cases = Cases()
    bare, with_tools = count(), count(tools=TOOLS)
    with cases.case("tools raise the count"):
        expect(
            with_tools > bare,
            f"more than {bare} tokens with two tools",
            with_tools,
            reason="count-tools",
            subject=TOOLS_NOT_COUNTED,
        )
    with cases.case("the count agrees with usage", level=Level.SHOULD):  # TOKENS-001's bound
        message = create_json(
            target, tool_body(target, messages=messages, tool_choice={"type": "auto"}, max_tokens=4)
        )
        used = total_input_tokens(read(message, "usage", dict, where=MESSAGE), where="usage")
        allowed = max(2, -(-with_tools * 2 // 100))
        expect(
            abs(used - with_tools) <= allowed,
            f"usage.input_tokens within {allowed} of count_tokens {with_tools} (same tools)",
            used,
            reason="count-mismatch",
        )
    cases.check()


@prop(
    "TOOL-015",
    Level.MUST,
    "Generated tool schemas: a forced strict call's input validates",
    url=f"{STRICT}#strict-tool-use",
    requirement="For any input_schema within the supported subset (nested objects, arrays, enums, "
    "const, anyOf, required and optional properties, bounded patterns; numeric and length "
    "bounds), a strict tool forced by name gets an input valid against the schema. A schema "
    "using keywords the real API does not take (bounds) may instead be refused with a 400; a "
    "call cut by max_tokens is incomplete and not judged.",
    source="docs: build-with-claude/structured-outputs#strict-tool-use; "
    'build-with-claude/structured-outputs#json-schema-limitations — strict: "Guarantee schema '
    'validation on tool names and inputs"; "If you use an unsupported feature, you\'ll receive a '
    '400 error with details"',
    invariant=38,
    requires=("tools", "tool_calls"),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools[].input_schema",
        "request:tools[].strict",
        "request:tool_choice",
        "request:tool_choice.type",
        "request:tool_choice.name",
        "block:tool_use",
    ),
)
def test_tool_015_generated_schemas(target: Target) -> None:
    """Unlike TOOL-005's bounded schema, a generated one may admit inputs longer than max_tokens
    (an unbounded array or number that a weak model keeps extending): such a cut call is not
    judged, and neither is an answer without a call. SKIP when no call could be judged, never
    PASS (naming TOOL-001 where calls were missing)."""
    tally = Tally()
    uncalled = 0

    @given(schema=object_schemas())
    @budgeted(target.config.profile.generated_budget_seconds)
    def check(schema: dict[str, Any]) -> None:
        nonlocal uncalled
        tally.next_example()
        note(f"input_schema: {json.dumps(schema)}")
        tool = {"name": "fill_form", "description": "Fill the form.", "input_schema": schema, "strict": True}
        body = tool_body(target, tools=[tool], tool_choice={"type": "tool", "name": "fill_form"})
        response = target.request("POST", "/v1/messages", json_body=body)
        if response.status_code == 400 and uses_extended_keywords(schema):
            return  # refused, as the real API refuses numeric and length bounds (a cheap answer)
        expect_status(response, 200)
        message = json_object(response, MESSAGE)
        calls = tool_uses(message)
        if not calls:  # TOOL-001's finding, whatever cut the answer
            tally.unjudged += 1
            uncalled += 1
            return
        if stop_reason(message, where=MESSAGE) == "max_tokens":
            tally.unjudged += 1
            return
        inputs = [call["input"] for call in calls if isinstance(call.get("input"), dict)]
        if not inputs:  # TOOL-004 judges an input that is not an object
            tally.unjudged += 1
            return
        tally.judged += 1
        for value in inputs:
            expect_valid_instance(schema, value, "the forced call's input", reason="input-schema")

    check()
    if not tally.judged:
        why = tally.skip_reason("schemas (each call was refused, cut by max_tokens or not made)")
        not_judged(why, judged_by="TOOL-001" if uncalled else None)


def first_calls(fetch: Callable[[dict[str, Any]], list[Any]], target: Target) -> list[Any]:
    """The calls of the first way of asking (any, the named tool, auto; those the run found
    refused left out) that makes any: a target that ignores one tool_choice (TOOL-001's
    finding) may honour another. None at all: TOOL-001's finding."""
    for choice in taken(target, [way_choice(way, TOOLS) for way in FORCING_WAYS]):
        if calls := fetch(tool_body(target, tool_choice=choice)):
            return calls
    not_judged(f"{NO_CALL}, whatever the tool_choice (any, tool, auto)", judged_by="TOOL-001")


@prop(
    "TOOL-017",
    Level.SHOULD,
    "tool_use ids start with toolu_",
    url=f"{MESSAGES}#response-content",
    requirement="The schema holds a tool_use id to ^[a-zA-Z0-9_-]+$ (TOOL-004's rule); the toolu_ "
    "prefix (toolu_01D7FLrfh4GYq7yT1ULFeyMV) is shown by example only, so a compatible server "
    "should keep it, streamed or not (agents and gateways tell client tool calls from server "
    "tool calls, srvtoolu_, by it).",
    invariant=37,
    requires=("tools", "tool_calls"),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tool_choice",
        "block:tool_use",
        "event:content_block_start",
    ),
)
def test_tool_017_tool_use_id_prefix(target: Target) -> None:
    """Asks for a call (tool_choice any, else the named tool, else auto), plain and streamed:
    every tool_use id starts with toolu_."""
    cases = Cases()
    with cases.case("create"):
        for block in first_calls(lambda body: tool_uses(create_json(target, body)), target):
            expect_id_prefix(read(block, "id", str, where="a tool_use block"), "toolu_", "a tool_use id")
    with cases.case("stream"):

        def streamed(body: dict[str, Any]) -> list[Any]:
            return streamed_tool_calls(expect_stream(stream_raw(target, body)))

        for call in first_calls(streamed, target):
            start_id = read(call.start, "id", str, where="a streamed tool_use block")
            expect_id_prefix(start_id, "toolu_", "a streamed tool_use id")
    cases.check()


@prop(
    "TOOL-018",
    Level.MUST,
    "Every documented field of a custom tool is accepted",
    url=f"{TOOL_USE}#specifying-client-tools",
    requirement="A custom tool may carry type custom, strict, cache_control (with a ttl), "
    "eager_input_streaming, allowed_callers and input_examples: such a forced request is a 200 "
    "with the call (the request's top-level cache_control is MSG-017's).",
    source="schema: OpenAPI Tool — properties type, name, description, input_schema, strict, "
    "cache_control, eager_input_streaming, allowed_callers, input_examples",
    requires=("tools", "tool_calls"),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools[].type",
        "request:tools[].strict",
        "request:tools[].cache_control",
        "request:tools[].cache_control.type",
        "request:tools[].cache_control.ttl",
        "request:tools[].eager_input_streaming",
        "request:tools[].allowed_callers",
        "request:tools[].input_examples",
        "block:tool_use",
    ),
)
def test_tool_018_every_tool_field(target: Target) -> None:
    """A forced call of a tool with every optional field set."""
    tool = {
        **colour_tool(strict=True),
        "type": "custom",
        "cache_control": {"type": "ephemeral", "ttl": "1h"},
        "eager_input_streaming": True,
        "allowed_callers": ["direct"],
        "input_examples": [{"colour": "blue", "bright": True, "where": {"part": "overhead"}}],
    }
    body = tool_body(target, tools=[tool])
    if not tool_uses(create_json(target, body)):
        not_judged(NO_CALL, judged_by="TOOL-001")
