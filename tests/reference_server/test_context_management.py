"""Context management edits (context_management.py): what is served, what is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reference_server.context_management import (
    CLEARED_TOOL_RESULT,
    CONTEXT_MANAGEMENT_BETA,
    ClearToolUses,
    ContextEdits,
    clear_tool_uses,
    plan_context_edits,
)
from reference_server.errors import InvalidRequestError
from reference_server.protocol import MessageCreateParams
from reference_server.validation import parse_body

BETAS = {CONTEXT_MANAGEMENT_BETA}
THINKING = {"type": "adaptive"}


def create(edits: list[dict[str, Any]], **changes: Any) -> MessageCreateParams:
    body = {
        "model": "m",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "hi"}],
        "thinking": THINKING,
        "context_management": {"edits": edits},
        **changes,
    }
    return parse_body(json.dumps(body).encode(), "application/json", MessageCreateParams)


def refusal(edits: list[dict[str, Any]], betas: set[str] = BETAS, **changes: Any) -> str:
    with pytest.raises(InvalidRequestError) as info:
        plan_context_edits(create(edits, **changes), betas)
    return info.value.message


@pytest.mark.parametrize(
    ("keep", "expected"),
    [
        (None, 1),
        ({"type": "thinking_turns", "value": 3}, 3),
        ("all", "all"),
        ({"type": "all"}, "all"),
    ],
)
def test_clear_thinking_keeps_what_it_says(keep, expected):
    edit = {"type": "clear_thinking_20251015"} | ({"keep": keep} if keep is not None else {})
    assert plan_context_edits(create([edit]), BETAS) == ContextEdits(keep_thinking=expected)


def test_no_edits_plan_nothing():
    assert plan_context_edits(create([]), BETAS) is None


def test_edits_need_the_beta():
    assert refusal([{"type": "clear_thinking_20251015"}], betas=set()).startswith(
        "context_management: requires the `anthropic-beta: context-management-2025-06-27` header"
    )


def test_clear_thinking_needs_thinking():
    message = refusal([{"type": "clear_thinking_20251015"}], thinking={"type": "disabled"})
    assert message == "context_management.edits.0: clear_thinking_20251015 requires thinking to be enabled"


def test_compaction_is_refused_by_name():
    kind = "compact_20260112"
    assert refusal([{"type": kind}]) == f"context_management.edits.0: {kind} is not supported by this server"


@pytest.mark.parametrize(
    "keep", [{"type": "thinking_turns", "value": 0}, {"type": "thinking_turns"}, 2, {"type": "some"}]
)
def test_a_bad_keep_is_refused(keep):
    assert refusal([{"type": "clear_thinking_20251015", "keep": keep}]).startswith(
        "context_management.edits.0.keep"
    )


def test_unknown_edit_fields_are_refused():
    message = refusal([{"type": "clear_thinking_20251015", "frob": 1}])
    assert message == "context_management.edits.0.frob: Extra inputs are not permitted"


# ------------------------------------------------------------------ clear_tool_uses_20250919


def tool_edit(**fields: Any) -> ClearToolUses:
    edits = plan_context_edits(create([{"type": "clear_tool_uses_20250919", **fields}]), BETAS)
    assert edits is not None
    assert edits.tool_uses is not None
    return edits.tool_uses


def test_clear_tool_uses_has_the_documented_defaults():
    assert tool_edit() == ClearToolUses(trigger=("input_tokens", 100_000), keep=3, clear_at_least=0)


def test_clear_tool_uses_reads_every_field():
    edit = tool_edit(
        trigger={"type": "tool_uses", "value": 2},
        keep={"type": "tool_uses", "value": 0},
        clear_at_least={"type": "input_tokens", "value": 50},
        exclude_tools=["keep_me"],
        clear_tool_inputs=["search"],
    )
    assert edit == ClearToolUses(
        trigger=("tool_uses", 2),
        keep=0,
        clear_at_least=50,
        exclude_tools=frozenset({"keep_me"}),
        clear_inputs=frozenset({"search"}),
    )
    assert edit.triggered(input_tokens=0, tool_uses=2)
    assert not edit.triggered(input_tokens=10**6, tool_uses=1)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("trigger", {"type": "input_tokens", "value": 0}),
        ("trigger", {"type": "turns", "value": 3}),
        ("keep", {"type": "tool_uses", "value": -1}),
        ("keep", 3),
        ("clear_at_least", {"type": "tool_uses", "value": 3}),
        ("exclude_tools", "search"),
        ("clear_tool_inputs", [1]),
        ("frob", 1),
    ],
)
def test_a_bad_clear_tool_uses_field_is_refused_by_path(field, value):
    message = refusal([{"type": "clear_tool_uses_20250919", field: value}])
    assert message.startswith(f"context_management.edits.0.{field}"), message


def test_clear_thinking_must_come_first():
    message = refusal([{"type": "clear_tool_uses_20250919"}, {"type": "clear_thinking_20251015"}])
    assert message == "context_management.edits.1: clear_thinking_20251015 must be the first edit in the list"


def tool_conversation(names: list[str]) -> MessageCreateParams:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Go."}]
    for i, name in enumerate(names):
        call = {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": {"q": f"query {i}"}}
        messages.append({"role": "assistant", "content": [call]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"result {i}"}
        messages.append({"role": "user", "content": [result]})
    return create([], messages=messages, thinking={"type": "disabled"})


def contents(params_messages: list[Any]) -> list[tuple[str, Any]]:
    out = []
    for message in params_messages:
        for block in message.content:
            out.append((block.type, block.content if block.type == "tool_result" else block.input))
    return out


def test_clearing_keeps_the_most_recent_and_the_excluded():
    params = tool_conversation(["search", "fetch", "search", "search"])
    edit = ClearToolUses(keep=2, exclude_tools=frozenset({"fetch"}))
    messages, cleared = clear_tool_uses(params.messages, edit)
    assert cleared == 1  # toolu_0 only: toolu_1 is excluded, toolu_2 and 3 are the two kept
    assert contents(messages[1:]) == [
        ("tool_use", {"q": "query 0"}),
        ("tool_result", CLEARED_TOOL_RESULT),
        ("tool_use", {"q": "query 1"}),
        ("tool_result", "result 1"),
        ("tool_use", {"q": "query 2"}),
        ("tool_result", "result 2"),
        ("tool_use", {"q": "query 3"}),
        ("tool_result", "result 3"),
    ]
    assert params.messages[2].content[0].content == "result 0"  # the request itself is untouched


def test_clearing_inputs_of_named_tools_only():
    params = tool_conversation(["search", "fetch"])
    messages, cleared = clear_tool_uses(
        params.messages, ClearToolUses(keep=0, clear_inputs=frozenset({"fetch"}))
    )
    assert cleared == 2
    assert contents(messages[1:]) == [
        ("tool_use", {"q": "query 0"}),
        ("tool_result", CLEARED_TOOL_RESULT),
        ("tool_use", {}),
        ("tool_result", CLEARED_TOOL_RESULT),
    ]


def test_nothing_to_clear_when_every_use_is_kept():
    params = tool_conversation(["search", "search"])
    messages, cleared = clear_tool_uses(params.messages, ClearToolUses(keep=3))
    assert cleared == 0
    assert messages == list(params.messages)
