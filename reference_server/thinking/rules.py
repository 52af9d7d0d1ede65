"""Which thinking a request asks for, and the API's rules around it.

`thinking: enabled` (with `budget_tokens`) or `adaptive` turns on a reasoning phase before the
answer. The documented rules: `budget_tokens` >= 1024 (the schema) and < `max_tokens` unless
the `interleaved-thinking-2025-05-14` beta spreads the budget over a tool loop; no tool_choice
that forces a call; temperature only 1, top_k unset, top_p >= 0.95 (the feature compatibility
list of extended thinking). `cache_control` on thinking blocks is an unknown field (schema).

How long this server thinks: at most the budget, and at most what the effort allows
(`output_config.effort`, default `high`): that is what effort changes here. A caller's budget is
an upper bound the model need not use, as the API documents.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from reference_server.errors import InvalidRequestError
from reference_server.protocol import MessageCreateParams, PromptParams, ThinkingConfigEnabledParam

__all__ = [
    "DEFAULT_EFFORT",
    "EFFORT_THINKING_TOKENS",
    "INTERLEAVED_THINKING_BETA",
    "ThinkingPlan",
    "plan_thinking",
]

INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"
Effort = Literal["low", "medium", "high", "xhigh", "max"]
DEFAULT_EFFORT: Effort = "high"
# The most thinking tokens generated at each effort (then the budget and max_tokens bound it).
EFFORT_THINKING_TOKENS: dict[Effort, int] = {"low": 32, "medium": 128, "high": 256, "xhigh": 512, "max": 1024}
_COMPATIBILITY = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility"
_MIN_TOP_P = 0.95


@dataclass(frozen=True, slots=True)
class ThinkingPlan:
    """Thinking for one request: at most `budget` tokens, shown or `omitted`."""

    budget: int
    display: Literal["summarized", "omitted"]
    # The documented test string was sent: the thinking comes back as a redacted_thinking block.
    redacted: bool = False


def plan_thinking(params: PromptParams, betas: Collection[str] = ()) -> ThinkingPlan | None:
    """The request's thinking, or None when it asks for none; a broken rule is a 400."""
    config = params.thinking
    if config is None or config.type == "disabled":
        return None
    choice = params.tool_choice
    if choice is not None and choice.type in ("any", "tool"):
        raise InvalidRequestError("Thinking may not be enabled when tool_choice forces tool use.")
    effort = (params.output_config.effort if params.output_config else None) or DEFAULT_EFFORT
    budget = EFFORT_THINKING_TOKENS[effort]
    if isinstance(config, ThinkingConfigEnabledParam):
        budget = min(budget, config.budget_tokens)
    if isinstance(params, MessageCreateParams):
        _check_sampling(params)
        if isinstance(config, ThinkingConfigEnabledParam):
            _check_budget(config.budget_tokens, params.max_tokens, betas)
        # Room for the answer after the thinking: with a budget, at least one token; adaptive
        # thinking (the model's choice of length) takes at most half of max_tokens.
        room = (
            params.max_tokens - 1
            if isinstance(config, ThinkingConfigEnabledParam)
            else params.max_tokens // 2
        )
        budget = max(1, min(budget, room))
    return ThinkingPlan(
        budget=budget, display=config.display or "summarized", redacted=_asks_redaction(params)
    )


# The string Anthropic documents for testing redacted_thinking handling (docs: "Extended
# thinking", redacted thinking): a prompt holding it gets its thinking as redacted_thinking.
REDACTED_THINKING_TRIGGER = (
    "ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_"  # the documented string, in two parts
    "46C9A13E193C177646C7398A98432ECCCE4C1253D5E2D82641AC0E52CC2876CB"
)


def _asks_redaction(params: PromptParams) -> bool:
    for message in params.messages:
        if message.role != "user":
            continue
        texts = (
            [message.content]
            if isinstance(message.content, str)
            else [text for block in message.content if isinstance(text := getattr(block, "text", None), str)]
        )
        if any(REDACTED_THINKING_TRIGGER in text for text in texts):
            return True
    return False


def _check_budget(budget_tokens: int, max_tokens: int, betas: Collection[str]) -> None:
    if budget_tokens >= max_tokens and INTERLEAVED_THINKING_BETA not in betas:
        raise InvalidRequestError(
            "max_tokens: must be greater than thinking.budget_tokens"
            f" ({max_tokens} <= {budget_tokens}; the budget counts toward max_tokens)"
        )


def _check_sampling(params: MessageCreateParams) -> None:
    if params.temperature is not None and params.temperature != 1.0:
        raise InvalidRequestError(
            f"temperature: may only be set to 1 when thinking is enabled (see {_COMPATIBILITY})"
        )
    if params.top_k is not None:
        raise InvalidRequestError(f"top_k: may not be set when thinking is enabled (see {_COMPATIBILITY})")
    if params.top_p is not None and params.top_p < _MIN_TOP_P:
        raise InvalidRequestError(
            f"top_p: must be between {_MIN_TOP_P} and 1 when thinking is enabled (see {_COMPATIBILITY})"
        )
