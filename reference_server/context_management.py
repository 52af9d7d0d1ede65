"""Context management (`context_management.edits`, beta `context-management-2025-06-27`).

Two edits are served, applied to the prompt before generation (the client keeps its full
history; only what the model reads changes):

- `clear_thinking_20251015` says how many recent assistant turns keep their thinking in the prompt
  (`keep`: `{"type": "thinking_turns", "value": N}`, default 1, or `"all"`); older thinking is
  cleared. Without the edit this server keeps only the tool loop's thinking (thinking/history.py).
- `clear_tool_uses_20250919` clears the oldest tool results once the prompt reaches its `trigger`
  (`input_tokens`, default 100,000, or a number of `tool_uses`): every tool use but the `keep` most
  recent (default 3) and those of `exclude_tools` has its result replaced by a placeholder, and its
  input too with `clear_tool_inputs` (true, or the names of the tools whose inputs go). With
  `clear_at_least`, nothing is cleared unless that many input tokens would be.

The response's `applied_edits` reports each edit that was applied, with what it cleared (turns or
tool uses, and the input tokens they would have taken); count_tokens reports the prompt's tokens
before the edits too. `compact_20260112` is refused with a 400
that says so, never ignored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from reference_server.engine.base import Turn
from reference_server.errors import InvalidRequestError
from reference_server.protocol import (
    ClearThinkingEdit,
    ClearToolUsesEdit,
    ContextManagementResponse,
    CountContextManagement,
    MessageTokensCount,
    PromptParams,
)
from reference_server.protocol.requests import MessageParam, ToolResultBlockParam, ToolUseBlockParam

__all__ = [
    "CLEARED_TOOL_INPUT",
    "CLEARED_TOOL_RESULT",
    "CONTEXT_MANAGEMENT_BETA",
    "ClearToolUses",
    "ClearedThinking",
    "ContextEdits",
    "ThinkingKeep",
    "applied_edits",
    "apply_tool_clearing",
    "clear_tool_uses",
    "count_tool_uses",
    "plan_context_edits",
    "tokens_count",
]

CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
CLEAR_THINKING = "clear_thinking_20251015"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
ThinkingKeep = int | Literal["all"]  # assistant turns, most recent first, whose thinking stays

# What the model reads in place of what was cleared: enough to know something was there.
CLEARED_TOOL_RESULT = "[tool result cleared by context management]"
CLEARED_TOOL_INPUT: dict[str, Any] = {}


@dataclass(frozen=True, slots=True)
class ClearToolUses:
    """A `clear_tool_uses_20250919` edit with the documented defaults filled in."""

    trigger: tuple[Literal["input_tokens", "tool_uses"], int] = ("input_tokens", 100_000)
    keep: int = 3
    clear_at_least: int = 0
    exclude_tools: frozenset[str] = frozenset()
    clear_inputs: bool | frozenset[str] = False  # True: every cleared use's input; a set: those tools'

    def triggered(self, input_tokens: int, tool_uses: int) -> bool:
        """Whether the prompt has reached the trigger (tokens as counted before this edit)."""
        kind, value = self.trigger
        return (input_tokens if kind == "input_tokens" else tool_uses) >= value


@dataclass(frozen=True, slots=True)
class ContextEdits:
    """The edits a request asks for, as this server applies them."""

    keep_thinking: ThinkingKeep | None  # None: no clear_thinking edit
    tool_uses: ClearToolUses | None = None  # None: no clear_tool_uses edit


def plan_context_edits(params: PromptParams, betas: Collection[str]) -> ContextEdits | None:
    """The request's edits, or None; an edit this server cannot apply is a 400."""
    config = params.context_management
    if config is None or not config.edits:
        return None
    if CONTEXT_MANAGEMENT_BETA not in betas:
        raise InvalidRequestError(
            f"context_management: requires the `anthropic-beta: {CONTEXT_MANAGEMENT_BETA}` header"
        )
    keep: ThinkingKeep | None = None
    tool_uses: ClearToolUses | None = None
    for i, edit in enumerate(config.edits):
        path = f"context_management.edits.{i}"
        fields = edit.model_extra or {}
        if edit.type == CLEAR_THINKING:
            if i != 0:  # the API's rule: thinking is cleared before anything else is measured
                raise InvalidRequestError(f"{path}: {CLEAR_THINKING} must be the first edit in the list")
            if params.thinking is None or params.thinking.type == "disabled":
                raise InvalidRequestError(f"{path}: {CLEAR_THINKING} requires thinking to be enabled")
            keep = _keep_thinking(fields, path)
        elif edit.type == CLEAR_TOOL_USES:
            if tool_uses is not None:
                raise InvalidRequestError(f"{path}: {CLEAR_TOOL_USES} may appear only once")
            tool_uses = _clear_tool_uses(fields, path)
        else:
            raise InvalidRequestError(f"{path}: {edit.type} is not supported by this server")
    return ContextEdits(keep_thinking=keep, tool_uses=tool_uses)


@dataclass(frozen=True, slots=True)
class ClearedThinking:
    """What clear_thinking cleared: turns, and the prompt's turns as they would have been without
    the edit (None: it cleared nothing)."""

    thinking_turns: int
    turns: tuple[Turn, ...] | None


Prompt = TypeVar("Prompt")


async def apply_tool_clearing(
    messages: Sequence[MessageParam],
    edit: ClearToolUses,
    prompt: Prompt,
    rebuild: Callable[[list[MessageParam]], Prompt],
    count: Callable[[Prompt], Awaitable[int]],
) -> tuple[Prompt, ClearToolUsesEdit | None]:
    """(the prompt the model reads, the edit's report, None when it did not apply).

    `prompt` is built from `messages` with every earlier edit applied; `rebuild` builds it again
    from other messages and `count` counts a prompt's input tokens: the trigger and
    `clear_at_least` are measured in the model's own tokens."""
    before = await count(prompt)
    if not edit.triggered(before, count_tool_uses(messages)):
        return prompt, None
    cleared_messages, cleared = clear_tool_uses(messages, edit)
    if not cleared:
        return prompt, None
    edited = rebuild(cleared_messages)
    saved = max(0, before - await count(edited))
    if saved < edit.clear_at_least:  # not worth breaking the cached prefix: leave it whole
        return prompt, None
    return edited, ClearToolUsesEdit(cleared_input_tokens=saved, cleared_tool_uses=cleared)


async def applied_edits(
    cleared: ClearedThinking | None,
    tool_uses: ClearToolUsesEdit | None,
    input_tokens: int,
    count: Callable[[tuple[Turn, ...]], Awaitable[int]],
) -> ContextManagementResponse:
    """The response's `context_management`: what each applied edit took out of the prompt the
    model read (`input_tokens`); `count` counts the prompt's tokens with other turns."""
    applied: list[ClearThinkingEdit | ClearToolUsesEdit] = []
    if cleared is not None:
        tokens = 0
        if cleared.turns is not None:
            tokens = max(0, await count(cleared.turns) - input_tokens)
        applied.append(
            ClearThinkingEdit(cleared_input_tokens=tokens, cleared_thinking_turns=cleared.thinking_turns)
        )
    if tool_uses is not None:
        applied.append(tool_uses)
    return ContextManagementResponse(applied_edits=applied)


def tokens_count(input_tokens: int, edits: ContextManagementResponse | None) -> MessageTokensCount:
    """count_tokens' answer; with edits applied, the prompt's tokens before them too."""
    if edits is None:
        return MessageTokensCount(input_tokens=input_tokens)
    original = input_tokens + sum(edit.cleared_input_tokens for edit in edits.applied_edits)
    return MessageTokensCount(
        input_tokens=input_tokens, context_management=CountContextManagement(original_input_tokens=original)
    )


def count_tool_uses(messages: Sequence[MessageParam]) -> int:
    return sum(
        isinstance(b, ToolUseBlockParam)
        for m in messages
        if not isinstance(m.content, str)
        for b in m.content
    )


def clear_tool_uses(messages: Sequence[MessageParam], edit: ClearToolUses) -> tuple[list[MessageParam], int]:
    """(the messages with the edit's tool uses cleared, how many tool uses were cleared).

    The `keep` most recent tool uses stay whole; of the older ones, those of `exclude_tools` too.
    A tool use counts as cleared when its result or its input was replaced."""
    uses = [
        b
        for m in messages
        if not isinstance(m.content, str)
        for b in m.content
        if isinstance(b, ToolUseBlockParam)
    ]
    older = uses[: max(0, len(uses) - edit.keep)]
    targets = {u.id: u for u in older if u.name not in edit.exclude_tools}
    if not targets:
        return list(messages), 0
    cleared: set[str] = set()
    out: list[MessageParam] = []
    for message in messages:
        if isinstance(message.content, str):
            out.append(message)
            continue
        blocks: list[Any] = []
        for block in message.content:
            if isinstance(block, ToolResultBlockParam) and block.tool_use_id in targets:
                block = block.model_copy(update={"content": CLEARED_TOOL_RESULT})
                cleared.add(block.tool_use_id)
            elif (
                isinstance(block, ToolUseBlockParam)
                and block.id in targets
                and _clears_input(edit, block.name)
            ):
                block = block.model_copy(update={"input": CLEARED_TOOL_INPUT})
                cleared.add(block.id)
            blocks.append(block)
        out.append(message.model_copy(update={"content": blocks}))
    return out, len(cleared)


def _clears_input(edit: ClearToolUses, name: str) -> bool:
    return edit.clear_inputs if isinstance(edit.clear_inputs, bool) else name in edit.clear_inputs


def _keep_thinking(fields: dict[str, Any], path: str) -> ThinkingKeep:
    _only(fields, {"keep"}, path)
    keep = fields.get("keep", {"type": "thinking_turns", "value": 1})
    if keep == "all" or keep == {"type": "all"}:
        return "all"
    if isinstance(keep, dict) and keep.get("type") == "thinking_turns" and set(keep) == {"type", "value"}:
        value = keep["value"]
        if _is_int(value) and value >= 1:
            return int(value)
    raise InvalidRequestError(
        f"{path}.keep: expected {{'type': 'thinking_turns', 'value': N >= 1}}, {{'type': 'all'}} or 'all'"
    )


def _clear_tool_uses(fields: dict[str, Any], path: str) -> ClearToolUses:
    _only(fields, {"trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs"}, path)
    edit = ClearToolUses()
    if (trigger := fields.get("trigger")) is not None:
        kind = trigger.get("type") if isinstance(trigger, dict) else None
        if kind not in ("input_tokens", "tool_uses"):
            raise InvalidRequestError(
                f"{path}.trigger: expected {{'type': 'input_tokens'|'tool_uses', 'value': N}}"
            )
        edit = replace(edit, trigger=(kind, _counted(trigger, kind, 1, f"{path}.trigger")))
    if (keep := fields.get("keep")) is not None:
        edit = replace(edit, keep=_counted(keep, "tool_uses", 0, f"{path}.keep"))
    if (least := fields.get("clear_at_least")) is not None:
        edit = replace(edit, clear_at_least=_counted(least, "input_tokens", 0, f"{path}.clear_at_least"))
    if (exclude := fields.get("exclude_tools")) is not None:
        edit = replace(edit, exclude_tools=frozenset(_names(exclude, f"{path}.exclude_tools")))
    inputs = fields.get("clear_tool_inputs")
    if isinstance(inputs, bool):
        edit = replace(edit, clear_inputs=inputs)
    elif inputs is not None:
        edit = replace(edit, clear_inputs=frozenset(_names(inputs, f"{path}.clear_tool_inputs")))
    return edit


def _counted(value: Any, kind: str, minimum: int, path: str) -> int:
    """The `value` of a `{"type": kind, "value": N}` object, N >= minimum."""
    if isinstance(value, dict) and value.get("type") == kind and set(value) == {"type", "value"}:
        number = value["value"]
        if _is_int(number) and number >= minimum:
            return int(number)
    raise InvalidRequestError(f"{path}: expected {{'type': '{kind}', 'value': N >= {minimum}}}")


def _names(value: Any, path: str) -> list[str]:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise InvalidRequestError(f"{path}: expected a list of tool names")


def _only(fields: dict[str, Any], known: set[str], path: str) -> None:
    unknown = set(fields) - known
    if unknown:
        raise InvalidRequestError(f"{path}.{sorted(unknown)[0]}: Extra inputs are not permitted")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
