"""STRUCT-*: structured outputs (`output_config.format` json_schema): the answer's text is JSON
valid against the schema, raw, streamed, through the SDK's `messages.parse`, and for generated
schemas. Each runs only on a target that serves structured outputs (the profile, the model's
`capabilities.structured_outputs`, or one probe request: conformance/features.py).

The format itself forces the behaviour, so any model is judged; the schemas are small and
bounded (enums, booleans), so a constrained answer is a few dozen tokens.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from hypothesis import given, note
from pydantic import BaseModel, ValidationError

from conformance.catalogue import Level, prop
from conformance.generating.budget import Tally, budgeted
from conformance.generating.strategies import object_schemas, uses_extended_keywords
from conformance.generating.tooluse import (
    COLOUR_SCHEMA,
    STRUCTURED_PROMPT,
    TOOL_MAX_TOKENS,
    expect_valid_instance,
    parse_json_text,
    streamed_text_blocks,
    structured_body,
    text_blocks,
)
from conformance.judging.checks import (
    Cases,
    ConformanceFailure,
    expect,
    expect_status,
    json_object,
    stop_reason,
)
from conformance.wire.drivers import STRUCTURED_IGNORED, create_json, expect_stream, sdk_call, stream_raw
from conformance.wire.target import Target

STRUCTURED = "build-with-claude/structured-outputs"
MESSAGE = "the Message"
# Stops after which the docs do not promise a complete, schema-valid answer.
INCOMPLETE = frozenset({"max_tokens", "refusal"})


@contextlib.contextmanager
def format_kept() -> Iterator[None]:
    """An answer that is not the JSON the format asks for (not JSON, not valid against the
    schema, or refused by the SDK's parse) is one named bug, however it shows."""
    try:
        yield
    except ConformanceFailure as failure:
        if failure.reason != "sdk-rejected-response" or isinstance(failure.__cause__, ValidationError):
            failure.subject, failure.key = STRUCTURED_IGNORED, None
        raise


def expect_json_texts(texts: list[str], schema: dict[str, Any], what: str, *, stop: str | None) -> None:
    """At least one text block, and each one's text is one JSON value valid against `schema`
    (the SDK's messages.parse parses every text block)."""
    expect(bool(texts), f"{what}: a text block holding the JSON", "no text block", reason="no-text")
    for n, text in enumerate(texts):
        with format_kept():
            value = parse_json_text(text, f"{what}, text block {n}", stop=stop)
            expect_valid_instance(schema, value, f"{what}, text block {n}", reason="output-schema")


@prop(
    "STRUCT-001",
    Level.MUST,
    "Structured output is JSON valid against the schema",
    url=f"{STRUCTURED}#json-outputs",
    requirement="With output_config.format {type: json_schema, schema} the answer's text is one "
    "JSON value valid against the schema, with nothing around it (no prose, no code fence), "
    "streamed or not.",
    source="docs: build-with-claude/structured-outputs#json-outputs — \"JSON outputs control Claude's "
    'response format, ensuring Claude returns valid JSON matching your schema."; "Structured '
    "outputs guarantee schema-compliant responses through constrained decoding: Always valid: No "
    'more JSON.parse() errors"',
    invariant=43,
    requires=("structured_outputs",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:output_config",
        "request:output_config.format",
        "request:output_config.format.type",
        "request:output_config.format.schema",
        "request:stream",
        "response:content",
        "block:text",
        "delta:text_delta",
    ),
)
def test_struct_001_json_valid(target: Target) -> None:
    """The schema is bounded (enums, a boolean, a nested object): its longest valid answer is a
    few dozen tokens, so max_tokens (200) never excuses an invalid one (a target that ignores
    the format and writes prose until max_tokens fails)."""
    body = structured_body(target, COLOUR_SCHEMA)
    cases = Cases()
    with cases.case("plain"):
        message = create_json(target, body)
        expect_json_texts(
            text_blocks(message), COLOUR_SCHEMA, "the answer", stop=stop_reason(message, where=MESSAGE)
        )
    with cases.case("streamed"):
        run = expect_stream(stream_raw(target, body))
        deltas = run.of_type("message_delta")
        last = (
            stop_reason(deltas[-1], "delta.stop_reason", where="the last message_delta") if deltas else None
        )
        expect_json_texts(streamed_text_blocks(run), COLOUR_SCHEMA, "the streamed answer", stop=last)
    cases.check()


class Sky(BaseModel):
    """What messages.parse asks for (the SDK turns it into output_config.format)."""

    colour: Literal["red", "green", "blue"]
    clear: bool


@prop(
    "STRUCT-002",
    Level.MUST,
    "The SDK's messages.parse gets its typed object",
    url=f"{STRUCTURED}#json-outputs",
    requirement="messages.parse(output_format=<type>) of the official SDK sends the type's schema "
    "as output_config.format and validates every text block as that type: it succeeds and "
    "gives the parsed object, plain and streamed.",
    source='docs: build-with-claude/structured-outputs#json-outputs (SDK helpers) — "Python: '
    'client.messages.parse() with Pydantic models"; SDK lib/_parse validates each text block',
    invariant=43,
    requires=("structured_outputs",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:output_config",
        "request:output_config.format",
        "request:output_config.format.type",
        "request:output_config.format.schema",
        "request:stream",
        "response:content",
        "block:text",
        "delta:text_delta",
    ),
)
def test_struct_002_sdk_parse(target: Target) -> None:
    client = target.sdk()
    request: dict[str, Any] = {
        "model": target.model,
        "max_tokens": TOOL_MAX_TOKENS,
        "messages": [{"role": "user", "content": STRUCTURED_PROMPT}],
        "output_format": Sky,
        "extra_body": target.greedy_fields(),
    }
    cases = Cases()
    with cases.case("messages.parse"), format_kept():
        parsed = sdk_call("messages.parse", client.messages.parse, **request)
        expect(
            isinstance(parsed.parsed_output, Sky), "a parsed Sky", parsed.parsed_output, reason="sdk-parse"
        )

    def streamed() -> Any:
        with client.messages.stream(**request) as stream:
            return stream.get_final_message()

    with cases.case("messages.stream"), format_kept():
        final = sdk_call("messages.stream with output_format", streamed)
        expect(isinstance(final.parsed_output, Sky), "a parsed Sky", final.parsed_output, reason="sdk-parse")
    cases.check()


@prop(
    "STRUCT-003",
    Level.MUST,
    "Generated schemas: structured output validates",
    url=f"{STRUCTURED}#json-schema-limitations",
    requirement="For any schema within the supported subset (nested objects, arrays, enums, const, "
    "anyOf, required and optional properties, bounded patterns; numeric and length bounds) the "
    "answer's text is JSON valid against it. A schema using keywords the real API does not take "
    "(bounds) may instead be refused with a 400; an answer cut by max_tokens or refused is "
    "incomplete by the docs and not judged.",
    source="docs: build-with-claude/structured-outputs#json-schema-limitations — guarantee as "
    'STRUCT-001; "If you use an unsupported feature, you\'ll receive a 400 error with details"',
    invariant=43,
    requires=("structured_outputs",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:output_config.format.type",
        "request:output_config.format.schema",
        "response:content",
        "response:stop_reason",
        "block:text",
    ),
)
def test_struct_003_generated_schemas(target: Target) -> None:
    """Unlike STRUCT-001's bounded schema, a generated one may admit answers longer than
    max_tokens (an unbounded array or number that a weak model keeps extending): such a cut
    answer is not judged. SKIP when no answer could be judged, never PASS."""
    tally = Tally()

    @given(schema=object_schemas())
    @budgeted(target.config.profile.generated_budget_seconds)
    def check(schema: dict[str, Any]) -> None:
        tally.next_example()
        note(f"schema: {json.dumps(schema)}")
        response = target.request("POST", "/v1/messages", json_body=structured_body(target, schema))
        if response.status_code == 400 and uses_extended_keywords(schema):
            return  # refused, as the real API refuses numeric and length bounds (a cheap answer)
        expect_status(response, 200)
        message = json_object(response, MESSAGE)
        stop = stop_reason(message, where=MESSAGE)
        if stop in INCOMPLETE:
            tally.unjudged += 1
            return
        tally.judged += 1
        expect_json_texts(text_blocks(message), schema, "the answer", stop=stop)

    check()
    if not tally.judged:
        pytest.skip(tally.skip_reason("schemas (each answer was refused or cut by max_tokens)"))
