"""Hypothesis strategies for Messages requests: valid ones (content mixes, system forms,
stop sequences, sampling) and invalid ones (a valid request with exactly one constraint
broken), text-only by design; and small JSON schemas within a documented supported subset, for
the tool and structured-output properties (which run only on targets that serve those).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "BREAKERS",
    "EXTENDED_KEYWORDS",
    "PATTERNS",
    "PORTABLE_KEYWORDS",
    "example_of",
    "invalid_requests",
    "object_schemas",
    "uses_extended_keywords",
    "valid_requests",
]

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
def _messages(draw: st.DrawFn, prefill: bool) -> list[Body]:
    """1 to 4 turns starting with the user; same-role runs allowed (the API merges them); with
    `prefill`, the last may be an assistant prefill (never ending in whitespace), else the last
    turn is the user's."""
    count = draw(st.integers(1, 4))
    roles = ["user"] + [draw(st.sampled_from(["user", "assistant"])) for _ in range(count - 1)]
    if not prefill and roles[-1] == "assistant":
        roles.append("user")
    messages = [{"role": role, "content": draw(_content(cache=False))} for role in roles]
    if prefill and draw(st.booleans()):
        messages.append({"role": "assistant", "content": draw(TEXT).rstrip() or "Well"})
    return messages


@st.composite
def valid_requests(
    draw: st.DrawFn, model: str, *, max_tokens: int = 8, sampling: bool = True, prefill: bool = True
) -> Body:
    """A valid create request for `model`; at most one cache breakpoint, as the API caps them.
    `sampling`: may carry temperature, top_p and top_k (not where the target refuses them: the
    2026-10-21 version, the newest models); `prefill`: may end with an assistant turn."""
    body: Body = {
        "model": model,
        "max_tokens": draw(st.integers(1, max_tokens)),
        "messages": draw(_messages(prefill)),
    }
    system = draw(st.one_of(st.none(), TEXT, st.lists(_text_block(cache=True), min_size=1, max_size=1)))
    if system is not None:
        body["system"] = system
    if draw(st.booleans()):
        body["stop_sequences"] = draw(
            st.lists(st.sampled_from(["e", "the", ".", "END", "ü"]), min_size=1, max_size=3, unique=True)
        )
    if sampling:
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
def invalid_requests(
    draw: st.DrawFn, model: str, *, sampling: bool = True, prefill: bool = True
) -> tuple[str, Body]:
    """(what was broken, body): a valid request (valid_requests' `sampling`, `prefill`) with
    exactly one constraint broken."""
    body = draw(valid_requests(model, sampling=sampling, prefill=prefill))
    name = draw(st.sampled_from(sorted(BREAKERS)))
    return name, BREAKERS[name](body)


# ------------------------------------------------------------------ JSON schemas (tools, structured outputs)
#
# The supported subset: what constrained-decoding libraries such as llguidance compile, and
# what a forced call or a structured answer can be judged against. PORTABLE keywords are the
# ones the real API's strict mode also accepts; EXTENDED ones (numeric and length bounds,
# maxItems, minItems above 1) it refuses with a 400 ("For 'integer' type, property 'minimum' is
# not supported"), which the SDK's transform_schema works around by moving them into the
# description. A target may refuse a schema that uses EXTENDED keywords; it may not accept one
# and break it. Every string is bounded (an enum, a const, a bounded pattern or maxLength), so
# the constrained answer of any model, even a random one, stays a few dozen tokens.

PORTABLE_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "enum",
        "const",
        "items",
        "minItems",
        "anyOf",
        "pattern",
    }
)
EXTENDED_KEYWORDS = frozenset({"minimum", "maximum", "minLength", "maxLength", "maxItems"})

# Simple, bounded patterns (anchored, no look-around, no back-references), each with an example.
PATTERNS: dict[str, str] = {
    "^[a-z]{1,6}$": "sea",
    "^[A-Z][a-z]{1,5}$": "Harbo",
    "^[0-9]{2,4}$": "042",
    "^(yes|no|maybe)$": "maybe",
    "^[a-f0-9]{4}$": "0f3a",
    "^[a-z]{2}-[0-9]{1,3}$": "ab-7",
}
_NAMES = ["name", "city", "count", "colour", "tags", "size", "kind", "ok", "level", "code", "note", "score"]
_ENUM_WORDS = ["red", "green", "blue", "north", "south", "low", "high", "on", "off", "cat", "dog"]


def _leaf(extended: bool) -> st.SearchStrategy[Body]:
    portable: list[st.SearchStrategy[Body]] = [
        st.lists(st.sampled_from(_ENUM_WORDS), min_size=1, max_size=4, unique=True).map(
            lambda words: {"type": "string", "enum": words}
        ),
        st.lists(st.integers(-5, 99), min_size=1, max_size=4, unique=True).map(
            lambda values: {"type": "integer", "enum": values}
        ),
        st.sampled_from(_ENUM_WORDS).map(lambda word: {"const": word}),
        st.sampled_from(sorted(PATTERNS)).map(lambda pattern: {"type": "string", "pattern": pattern}),
        st.just({"type": "boolean"}),
        st.just({"type": "integer"}),
        st.just({"type": "number"}),
    ]
    if not extended:
        return st.one_of(portable)
    bounded: list[st.SearchStrategy[Body]] = [
        st.tuples(st.integers(-50, 50), st.integers(0, 100)).map(
            lambda t: {"type": "integer", "minimum": t[0], "maximum": t[0] + t[1]}
        ),
        st.tuples(st.sampled_from([-10, -1.5, 0, 0.5, 2]), st.sampled_from([1, 2.5, 10, 100])).map(
            lambda t: {"type": "number", "minimum": t[0], "maximum": t[0] + t[1]}
        ),
        st.tuples(st.integers(0, 3), st.integers(0, 5)).map(
            lambda t: {"type": "string", "minLength": t[0], "maxLength": t[0] + t[1] + 1}
        ),
    ]
    return st.one_of(*portable, *bounded)


def _any_of(extended: bool) -> st.SearchStrategy[Body]:
    second = st.sampled_from([{"type": "null"}, {"type": "boolean"}, {"const": "none"}])
    return st.tuples(_leaf(extended), second).map(lambda pair: {"anyOf": [pair[0], pair[1]]})


@st.composite
def _array(draw: st.DrawFn, items: st.SearchStrategy[Body], extended: bool) -> Body:
    schema: Body = {"type": "array", "items": draw(items)}
    if extended and draw(st.booleans()):
        least = draw(st.integers(0, 2))
        schema["minItems"], schema["maxItems"] = least, least + draw(st.integers(0, 2))
    elif draw(st.booleans()):
        schema["minItems"] = draw(st.integers(0, 1))
    return schema


@st.composite
def _object(draw: st.DrawFn, depth: int, extended: bool, least: int = 1) -> Body:
    names = draw(st.lists(st.sampled_from(_NAMES), min_size=least, max_size=3 if depth else 4, unique=True))
    values: list[st.SearchStrategy[Body]] = [
        _leaf(extended),
        _any_of(extended),
        _array(_leaf(extended), extended),
    ]
    if depth < 1:
        values.append(_object(depth + 1, extended))
        values.append(_array(_object(depth + 1, extended), extended))
    properties = {name: draw(st.one_of(values)) for name in names}
    required = [name for name in names if draw(st.booleans())]
    schema: Body = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def object_schemas(*, extended: bool = True) -> st.SearchStrategy[Body]:
    """Small object schemas within the supported subset: nested objects (two levels), arrays,
    enums, consts, anyOf, required and optional properties, bounded patterns, and (extended)
    numeric and length bounds. Fit for a tool's input_schema and for output_config.format."""
    return _object(0, extended)


def uses_extended_keywords(schema: Any) -> bool:
    """Whether a schema uses a keyword outside the portable subset (the real API refuses those)."""
    if isinstance(schema, list):
        return any(uses_extended_keywords(item) for item in schema)
    if not isinstance(schema, dict):
        return False
    if EXTENDED_KEYWORDS & set(schema) or schema.get("minItems", 0) > 1:
        return True
    nested = [*schema.get("properties", {}).values(), *schema.get("anyOf", []), schema.get("items")]
    return any(uses_extended_keywords(item) for item in nested)


def example_of(schema: Body) -> Any:
    """A small instance valid against a schema of `object_schemas` (proof that each is
    satisfiable; also what a scripted target can answer)."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return example_of(schema["anyOf"][0])
    kind = schema.get("type")
    if kind == "object":
        return {name: example_of(sub) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return [example_of(schema["items"]) for _ in range(max(1, schema.get("minItems", 0)))][
            : schema.get("maxItems", 1)
        ]
    if kind == "string":
        if "pattern" in schema:
            return PATTERNS[schema["pattern"]]
        return "a" * schema.get("minLength", 1)
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return True
    return None
