"""Thinking blocks sent back in history: verified, then dropped or kept.

With thinking on, every thinking or redacted_thinking block must carry a signature this server
made for this model, and the text it was returned with (a changed text or signature is a 400
naming the block). The assistant message of the tool loop in progress (the last one, when it
called tools and the user answered with their results) must start with its thinking, as the API
requires, and that thinking is kept in the prompt, rendered as it was generated (its text, a
blank line, the answer), restored from the signature when it was returned `omitted`. Thinking
of earlier turns is dropped from the prompt, as the API documents. With thinking off, thinking
blocks are dropped unread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from reference_server.errors import InvalidRequestError
from reference_server.protocol import (
    MessageParam,
    RedactedThinkingBlockParam,
    ThinkingBlockParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
)

from .signatures import ThinkingSigner

__all__ = ["HistoryThinking", "kept_thinking"]

BlockKey = tuple[int, int]  # (message index, block index)


@dataclass(frozen=True, slots=True)
class HistoryThinking:
    """The verified thinking of a history: what stays in the prompt, what all of it was, and how
    many assistant turns lost theirs."""

    kept: Mapping[BlockKey, str]
    verified: Mapping[BlockKey, str]
    cleared_turns: int


def kept_thinking(
    messages: Sequence[MessageParam],
    signer: ThinkingSigner,
    model: str,
    *,
    enabled: bool,
    keep: int | Literal["all"] | None = None,
) -> HistoryThinking:
    """The thinking to keep in the prompt, by block position; every other thinking block is
    dropped. `keep` (context management's clear_thinking): the most recent assistant turns with
    thinking that keep it; None keeps only the tool loop's. Raises InvalidRequestError for a block
    that does not verify or a missing one."""
    if not enabled:
        return HistoryThinking({}, {}, 0)
    if messages and messages[-1].role == "assistant" and messages[-1].content:
        raise InvalidRequestError(
            f"messages.{len(messages) - 1}: prefilling the assistant's answer is not supported with"
            " thinking enabled"
        )
    loop = _tool_loop(messages)
    verified: dict[BlockKey, str] = {}
    for i, message in enumerate(messages):
        if isinstance(message.content, str):
            continue
        for j, block in enumerate(message.content):
            if not isinstance(block, ThinkingBlockParam | RedactedThinkingBlockParam):
                continue
            path = f"messages.{i}.content.{j}"
            if message.role != "assistant":
                raise InvalidRequestError(
                    f"{path}: {block.type} blocks may only appear in assistant messages"
                )
            verified[(i, j)] = _verified(block, path, signer, model)
    if loop is not None:
        first = messages[loop].content[0]
        if not isinstance(first, ThinkingBlockParam | RedactedThinkingBlockParam):
            found = first.type if not isinstance(first, str) else "text"
            raise InvalidRequestError(
                f"messages.{loop}.content.0.type: Expected `thinking` or `redacted_thinking`, but found"
                f" `{found}`. When `thinking` is enabled, a final `assistant` message must start with a"
                " thinking block (preceding the lastmost set of `tool_use` and `tool_result` blocks)."
                " Pass back the thinking blocks of previous turns, or disable `thinking`."
            )
    thinking_turns = sorted({i for i, _ in verified})
    if keep is None:
        keeping = {loop} if loop is not None else set()
    elif keep == "all":
        keeping = set(thinking_turns)
    else:
        keeping = set(thinking_turns[-keep:]) | ({loop} if loop is not None else set())
    kept = {key: text for key, text in verified.items() if key[0] in keeping}
    return HistoryThinking(kept, verified, len(set(thinking_turns) - keeping))


def _tool_loop(messages: Sequence[MessageParam]) -> int | None:
    """The index of the assistant message whose tool calls the last user message answers."""
    if len(messages) < 2 or messages[-1].role != "user" or isinstance(messages[-1].content, str):
        return None
    if not any(isinstance(block, ToolResultBlockParam) for block in messages[-1].content):
        return None
    previous = messages[-2]
    if previous.role != "assistant" or isinstance(previous.content, str):
        return None
    return len(messages) - 2 if any(isinstance(b, ToolUseBlockParam) for b in previous.content) else None


def _verified(
    block: ThinkingBlockParam | RedactedThinkingBlockParam, path: str, signer: ThinkingSigner, model: str
) -> str:
    """The thinking a block stands for, as generated."""
    if isinstance(block, RedactedThinkingBlockParam):
        sealed = signer.open(model, block.data)
        if sealed is None or sealed.kind == "web_search":
            raise InvalidRequestError(f"{path}.data: Invalid `data` in `redacted_thinking` block")
        return sealed.thinking
    sealed = signer.open(model, block.signature)
    if sealed is None or sealed.kind == "web_search":
        raise InvalidRequestError(f"{path}.signature: Invalid `signature` in `thinking` block")
    shown = sealed.thinking if sealed.kind == "summarized" else ""
    if block.thinking != shown:
        raise InvalidRequestError(
            f"{path}.thinking: the thinking was modified; thinking blocks must be passed back unchanged"
        )
    return sealed.thinking
