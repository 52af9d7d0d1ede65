"""The request rules of thinking (thinking/rules.py) and what effort changes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reference_server.errors import InvalidRequestError
from reference_server.protocol import MessageCountTokensParams, MessageCreateParams
from reference_server.thinking import EFFORT_THINKING_TOKENS, INTERLEAVED_THINKING_BETA, plan_thinking
from reference_server.validation import parse_body

BASE = {"model": "m", "max_tokens": 4096, "messages": [{"role": "user", "content": "hi"}]}
ENABLED = {"type": "enabled", "budget_tokens": 2048}


def create(**changes: Any) -> MessageCreateParams:
    return parse_body(json.dumps({**BASE, **changes}).encode(), "application/json", MessageCreateParams)


def refusal(betas: tuple[str, ...] = (), **changes: Any) -> str:
    with pytest.raises(InvalidRequestError) as info:
        plan_thinking(create(**changes), betas)
    return info.value.message


def test_no_thinking_or_disabled_plans_nothing():
    assert plan_thinking(create()) is None
    assert plan_thinking(create(thinking={"type": "disabled"})) is None


def test_budget_below_the_minimum_is_a_schema_error():
    with pytest.raises(InvalidRequestError, match=r"^thinking\.enabled\.budget_tokens: .*1024"):
        create(thinking={"type": "enabled", "budget_tokens": 1023})


def test_budget_must_be_below_max_tokens_unless_interleaved():
    message = refusal(thinking={"type": "enabled", "budget_tokens": 4096})
    assert message.startswith("max_tokens: must be greater than thinking.budget_tokens")
    plan = plan_thinking(
        create(thinking={"type": "enabled", "budget_tokens": 8000}), {INTERLEAVED_THINKING_BETA}
    )
    assert plan is not None
    assert plan.budget < 4096


@pytest.mark.parametrize("choice", [{"type": "any"}, {"type": "tool", "name": "t"}])
def test_a_forcing_tool_choice_is_refused(choice):
    assert refusal(thinking=ENABLED, tool_choice=choice) == (
        "Thinking may not be enabled when tool_choice forces tool use."
    )


def test_auto_and_none_tool_choice_are_fine():
    for choice in ({"type": "auto"}, {"type": "none"}):
        assert plan_thinking(create(thinking=ENABLED, tool_choice=choice)) is not None


@pytest.mark.parametrize(
    ("sampling", "field"),
    [({"temperature": 0.0}, "temperature"), ({"top_k": 5}, "top_k"), ({"top_p": 0.5}, "top_p")],
)
def test_sampling_thinking_cannot_take_is_refused(sampling, field):
    assert refusal(thinking=ENABLED, **sampling).startswith(f"{field}: ")


def test_sampling_thinking_takes_is_fine():
    assert plan_thinking(create(thinking=ENABLED, temperature=1.0, top_p=0.95)) is not None


def test_effort_bounds_the_thinking_and_the_budget_bounds_it_too():
    budgets = {
        effort: plan_thinking(create(thinking=ENABLED, output_config={"effort": effort})).budget  # type: ignore[union-attr]
        for effort in EFFORT_THINKING_TOKENS
    }
    assert budgets == {"low": 32, "medium": 128, "high": 256, "xhigh": 512, "max": 1024}
    assert plan_thinking(create(thinking=ENABLED)).budget == 256  # type: ignore[union-attr]  # default: high


def test_adaptive_thinking_leaves_half_of_max_tokens_to_the_answer():
    plan = plan_thinking(create(max_tokens=40, thinking={"type": "adaptive", "display": "omitted"}))
    assert plan is not None
    assert plan.budget == 20
    assert plan.display == "omitted"


def test_count_tokens_checks_the_rules_that_do_not_need_max_tokens():
    body = {"model": "m", "messages": BASE["messages"], "thinking": ENABLED, "tool_choice": {"type": "any"}}
    params = MessageCountTokensParams.model_validate(body)
    with pytest.raises(InvalidRequestError, match="forces tool use"):
        plan_thinking(params)
