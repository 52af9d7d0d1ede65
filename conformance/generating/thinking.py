"""Requests that ask for extended thinking on any model, and readers of what comes back (the
thinking twin of tooluse.py).

A property needs a thinking block, never a sensible one, so requests stay cheap on slow models:
adaptive thinking with a small `max_tokens`, and `output_config.effort: low` where the model's
capabilities say it takes it. Only where the model says it lacks adaptive thinking is `enabled`
sent, with the smallest budget the API takes (1024) and `max_tokens` just above it.

Thinking allows no temperature but 1 (the feature compatibility rules), so these requests send
none: they are sampled, and the properties judge structure and what the target verifies
(signatures), never a comparison with another answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conformance.wire.drivers import StreamRun, message_body
from conformance.wire.target import Target

__all__ = [
    "ENABLED_BUDGET",
    "FOLLOW_UP",
    "THINK_MAX_TOKENS",
    "THINK_PROMPT",
    "StreamedThinking",
    "adaptive_served",
    "effort_low",
    "follow_up_body",
    "streamed_thinking",
    "thinking_blocks",
    "thinking_body",
    "thinking_config",
]

THINK_MAX_TOKENS = 48
ENABLED_BUDGET = 1024  # the smallest budget the API takes
THINK_PROMPT = "What is two plus two? Answer in one word."
FOLLOW_UP = "Thank you. And three plus three?"


def _walk(data: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def effort_low(model_info: dict[str, Any] | None) -> bool:
    """Whether the model's capabilities say it takes `output_config.effort: low`."""
    return (
        _walk(model_info, "capabilities.effort.supported") is True
        and _walk(model_info, "capabilities.effort.low.supported") is True
    )


def adaptive_served(model_info: dict[str, Any] | None) -> bool:
    """Adaptive thinking, unless the capabilities say the model lacks it (and has `enabled`)."""
    types = "capabilities.thinking.types"
    return not (
        _walk(model_info, f"{types}.adaptive.supported") is False
        and _walk(model_info, f"{types}.enabled.supported") is not False
    )


def thinking_config(
    model_info: dict[str, Any] | None, display: str | None = None, *, way: str | None = None
) -> dict[str, Any]:
    """The cheapest thinking the model takes: `way` (`adaptive` or `enabled`: what the run's probe
    saw served, conformance/evidence.py), else adaptive unless the capabilities say the model
    lacks it, else enabled with the smallest budget."""
    if way is None:
        way = "adaptive" if adaptive_served(model_info) else "enabled"
    config: dict[str, Any] = (
        {"type": "adaptive"} if way == "adaptive" else {"type": "enabled", "budget_tokens": ENABLED_BUDGET}
    )
    if display is not None:
        config["display"] = display
    return config


def thinking_body(
    target: Target,
    model_info: dict[str, Any] | None,
    *,
    display: str | None = None,
    way: str | None = None,
    **changes: Any,
) -> dict[str, Any]:
    """A small create request with thinking on (no temperature: thinking allows only 1), set up
    the way the run found thinking served (`target.ways`), unless `way` says."""
    config = thinking_config(model_info, display, way=way or target.ways.get("thinking"))
    room = ENABLED_BUDGET if config["type"] == "enabled" else 0
    body = message_body(
        target,
        max_tokens=room + THINK_MAX_TOKENS,
        thinking=config,
        messages=[{"role": "user", "content": THINK_PROMPT}],
    )
    body.pop("temperature", None)
    if effort_low(model_info):
        body["output_config"] = {"effort": "low"}
    body.update(changes)
    return body


def thinking_blocks(message: Any) -> list[tuple[int, dict[str, Any]]]:
    """(index, block) of each `thinking` block of a Message's content."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [
        (n, block)
        for n, block in enumerate(content)
        if isinstance(block, dict) and block.get("type") == "thinking"
    ]


def follow_up_body(body: dict[str, Any], content: list[Any]) -> dict[str, Any]:
    """The next turn of `body`'s conversation: the assistant's `content` sent back as it is given,
    then a new user question (thinking still on, so the target verifies the history)."""
    messages = [*body["messages"], {"role": "assistant", "content": content}]
    return {**body, "messages": [*messages, {"role": "user", "content": FOLLOW_UP}]}


@dataclass(slots=True)
class StreamedThinking:
    """One streamed thinking block: its content_block_start and its deltas, in order."""

    index: int
    start: dict[str, Any]
    deltas: list[dict[str, Any]] = field(default_factory=list)
    stopped: bool = False

    @property
    def joined(self) -> str:
        """The thinking_delta texts, joined."""
        return "".join(
            d["thinking"]
            for d in self.deltas
            if d.get("type") == "thinking_delta" and isinstance(d.get("thinking"), str)
        )

    @property
    def signatures(self) -> list[Any]:
        return [d.get("signature") for d in self.deltas if d.get("type") == "signature_delta"]


def streamed_thinking(run: StreamRun) -> list[StreamedThinking]:
    """The thinking blocks of a stream, in order of their starts."""
    blocks: dict[int, StreamedThinking] = {}
    for event in run.events:
        index = event.get("index")
        if not isinstance(index, int):
            continue
        kind = event.get("type")
        started = event.get("content_block")
        if kind == "content_block_start" and isinstance(started, dict) and started.get("type") == "thinking":
            blocks[index] = StreamedThinking(index, started)
        elif index in blocks and kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            blocks[index].deltas.append(event["delta"])
        elif index in blocks and kind == "content_block_stop":
            blocks[index].stopped = True
    return list(blocks.values())
