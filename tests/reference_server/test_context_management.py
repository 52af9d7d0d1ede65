"""Context management edits (context_management.py): what is served, what is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reference_server.context_management import CONTEXT_MANAGEMENT_BETA, ContextEdits, plan_context_edits
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


@pytest.mark.parametrize("kind", ["clear_tool_uses_20250919", "compact_20260112"])
def test_edits_not_served_are_refused_by_name(kind):
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
