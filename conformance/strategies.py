"""Hypothesis strategies for Messages requests: valid ones (content mixes, system forms,
stop sequences, sampling) and invalid ones (a valid request with exactly one constraint
broken). Text-only by design: optional features enter only when a profile declares them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

__all__ = ["BREAKERS", "invalid_requests", "valid_requests"]

Body = dict[str, Any]

# Words keep prompts short in tokens (fast on CPU targets) and free of lone whitespace.
_WORDS = st.sampled_from(
    [
        "sea",
        "light",
        "keeper",
        "wave",
        "storm",
        "ship",
        "harbour",
        "night",
        "morning",
        "stone",
        "bell",
        "gull",
        "rope",
        "salt",
        "Ümlaut",
        "naïve",
        "café",
        "東京",
        "🙂",
        "42",
        "3.14",
        "?",
        "!",
        ",",
        ".",
    ]
)
TEXT = st.lists(_WORDS, min_size=1, max_size=8).map(" ".join)
CACHE = st.sampled_from([None, {"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}])


@st.composite
def _text_block(draw: st.DrawFn, cache: bool = False) -> Body:
    block: Body = {"type": "text", "text": draw(TEXT)}
    control = draw(CACHE) if cache else None
    if control is not None:
        block["cache_control"] = control
    return block


def _content(cache: bool) -> st.SearchStrategy[Any]:
    return st.one_of(TEXT, st.lists(_text_block(cache), min_size=1, max_size=3))


@st.composite
def _messages(draw: st.DrawFn) -> list[Body]:
    """1 to 4 turns starting with the user; same-role runs allowed (the API merges them); the
    last may be an assistant prefill (never ending in whitespace)."""
    count = draw(st.integers(1, 4))
    roles = ["user"] + [draw(st.sampled_from(["user", "assistant"])) for _ in range(count - 1)]
    messages = [{"role": role, "content": draw(_content(cache=False))} for role in roles]
    if draw(st.booleans()):
        messages.append({"role": "assistant", "content": draw(TEXT).rstrip() or "Well"})
    return messages


@st.composite
def valid_requests(draw: st.DrawFn, model: str, *, max_tokens: int = 8) -> Body:
    """A valid create request for `model`; at most one cache breakpoint, as the API caps them."""
    body: Body = {
        "model": model,
        "max_tokens": draw(st.integers(1, max_tokens)),
        "messages": draw(_messages()),
    }
    system = draw(st.one_of(st.none(), TEXT, st.lists(_text_block(cache=True), min_size=1, max_size=1)))
    if system is not None:
        body["system"] = system
    if draw(st.booleans()):
        body["stop_sequences"] = draw(
            st.lists(st.sampled_from(["e", "the", ".", "END", "ü"]), min_size=1, max_size=3, unique=True)
        )
    body["temperature"] = draw(st.sampled_from([0.0, 0.0, 0.5, 1.0]))
    if draw(st.booleans()):
        body["top_p"] = draw(st.sampled_from([0.5, 0.9, 1.0]))
    if draw(st.booleans()):
        body["top_k"] = draw(st.integers(0, 50))
    if draw(st.booleans()):
        body["metadata"] = {"user_id": draw(st.sampled_from(["u-1", "3f1c9b0e", None]))}
    return body


def _drop(field: str) -> Callable[[Body], Body]:
    def apply(body: Body) -> Body:
        return {k: v for k, v in body.items() if k != field}

    return apply


def _set(field: str, value: Any) -> Callable[[Body], Body]:
    def apply(body: Body) -> Body:
        return {**body, field: value}

    return apply


def _first_block(change: Body) -> Callable[[Body], Body]:
    def apply(body: Body) -> Body:
        first = {"role": "user", "content": [{"type": "text", "text": "Hi", **change}]}
        return {**body, "messages": [first, *body["messages"][1:]]}

    return apply


# Each breaks exactly one documented constraint of the request schema.
BREAKERS: dict[str, Callable[[Body], Body]] = {
    "missing model": _drop("model"),
    "missing messages": _drop("messages"),
    "missing max_tokens": _drop("max_tokens"),
    "unknown top-level field": _set("plumbline_extra", 1),
    "model not a string": _set("model", 42),
    "max_tokens negative": _set("max_tokens", -3),
    "max_tokens a string": _set("max_tokens", "8"),
    "max_tokens fractional": _set("max_tokens", 1.5),
    "temperature above 1": _set("temperature", 1.01),
    "temperature a string": _set("temperature", "hot"),
    "top_p above 1": _set("top_p", 2),
    "top_k negative": _set("top_k", -2),
    "stream not a boolean": _set("stream", "yes"),
    "messages not a list": _set("messages", {"role": "user", "content": "Hi"}),
    "messages empty": _set("messages", []),
    "role unknown": _set("messages", [{"role": "narrator", "content": "Hi"}]),
    "message without content": _set("messages", [{"role": "user"}]),
    "empty text block": _first_block({"text": ""}),
    "unknown block field": _first_block({"plumbline_extra": True}),
    "unknown block type": _set(
        "messages", [{"role": "user", "content": [{"type": "hologram", "text": "Hi"}]}]
    ),
    "bad cache_control ttl": _first_block({"cache_control": {"type": "ephemeral", "ttl": "10m"}}),
    "system not text": _set("system", 7),
    "stop_sequences not strings": _set("stop_sequences", [1, 2]),
    "metadata.user_id too long": _set("metadata", {"user_id": "x" * 600}),
    "service_tier unknown": _set("service_tier", "platinum"),
    "thinking budget too small": _set("thinking", {"type": "enabled", "budget_tokens": 10}),
}


@st.composite
def invalid_requests(draw: st.DrawFn, model: str) -> tuple[str, Body]:
    """(what was broken, body): a valid request with exactly one constraint broken."""
    body = draw(valid_requests(model))
    name = draw(st.sampled_from(sorted(BREAKERS)))
    return name, BREAKERS[name](body)
