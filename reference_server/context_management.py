"""Context management (`context_management.edits`, beta `context-management-2025-06-27`).

`clear_thinking_20251015` is served: it says how many recent assistant turns keep their thinking
in the prompt (`keep`: `{"type": "thinking_turns", "value": N}`, default 1, or `"all"`); older
thinking is cleared, and the response reports what was cleared (`applied_edits`: turns and the
input tokens they would have taken). Without the edit this server keeps only the tool loop's
thinking (thinking/history.py). `clear_tool_uses_20250919` and `compact_20260112` are refused
with a 400 that says so, never ignored.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

from reference_server.errors import InvalidRequestError
from reference_server.protocol import PromptParams

__all__ = ["CONTEXT_MANAGEMENT_BETA", "ContextEdits", "ThinkingKeep", "plan_context_edits"]

CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
ThinkingKeep = int | Literal["all"]  # assistant turns, most recent first, whose thinking stays


@dataclass(frozen=True, slots=True)
class ContextEdits:
    """The edits a request asks for, as this server applies them."""

    keep_thinking: ThinkingKeep | None  # None: no clear_thinking edit


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
    for i, edit in enumerate(config.edits):
        path = f"context_management.edits.{i}"
        if edit.type != "clear_thinking_20251015":
            raise InvalidRequestError(f"{path}: {edit.type} is not supported by this server")
        if params.thinking is None or params.thinking.type == "disabled":
            raise InvalidRequestError(f"{path}: clear_thinking_20251015 requires thinking to be enabled")
        keep = _keep(edit.model_extra or {}, path)
    return ContextEdits(keep_thinking=keep)


def _keep(fields: dict[str, Any], path: str) -> ThinkingKeep:
    unknown = set(fields) - {"keep"}
    if unknown:
        raise InvalidRequestError(f"{path}.{sorted(unknown)[0]}: Extra inputs are not permitted")
    keep = fields.get("keep", {"type": "thinking_turns", "value": 1})
    if keep == "all" or keep == {"type": "all"}:
        return "all"
    if isinstance(keep, dict) and keep.get("type") == "thinking_turns" and set(keep) == {"type", "value"}:
        value = keep["value"]
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
    raise InvalidRequestError(
        f"{path}.keep: expected {{'type': 'thinking_turns', 'value': N >= 1}}, {{'type': 'all'}} or 'all'"
    )
