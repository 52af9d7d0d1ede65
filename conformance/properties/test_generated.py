"""Generated requests (hypothesis): many valid requests must satisfy the invariants, and
every request with one constraint broken must get a 400 envelope, never a 5xx."""

from __future__ import annotations

from typing import Any

from hypothesis import given, note
from hypothesis import strategies as st

from conformance.budget import budgeted
from conformance.catalogue import Level, prop
from conformance.checks import expect, expect_equal, expect_error, read_optional, stop_reason
from conformance.drivers import (
    create_json,
    expect_no_violations,
    expect_stream,
    expect_within_max_tokens,
    stream_raw,
    text_of,
)
from conformance.strategies import invalid_requests, valid_requests
from conformance.target import Target

MESSAGES = "api/messages"
MESSAGE = "the Message"
LAST_DELTA = "the last message_delta"
# Judged by the schema property STREAM-011, not again by the grammar here.
SCHEMA_CODES = frozenset({"schema-invalid", "missing-output-tokens", "stop-reason-null"})


def check_message_invariants(target: Target, body: dict[str, Any], message: dict[str, Any]) -> None:
    """The invariants every non-streaming answer keeps, whatever the request."""
    reason = stop_reason(message, where=MESSAGE)
    stops = body.get("stop_sequences") or []
    sequence = read_optional(message, "stop_sequence", str, where=MESSAGE)
    if reason == "stop_sequence":
        expect(sequence in stops, f"stop_sequence in {stops}", sequence, reason="stop-sequence")
        expect(
            sequence not in text_of(message),
            "text without the stop sequence",
            text_of(message),
            reason="stop-sequence-in-text",
        )
    else:
        expect_equal(sequence, None, "stop_sequence", reason="stop-sequence")
    reported = read_optional(message, "usage.output_tokens", int, where=MESSAGE)
    expect_within_max_tokens(
        target, text_of(message), reported, body["max_tokens"], where=MESSAGE, count=False
    )


@prop(
    "MSG-020",
    Level.MUST,
    "Generated valid requests get valid Messages",
    url=f"{MESSAGES}#body",
    requirement="Any valid text request (string or block content, same-role runs, prefill, "
    "system forms, stop sequences, sampling) gets 200 with a schema-valid Message whose "
    "stop_reason, stop_sequence and usage keep the documented invariants.",
    covers=(
        "endpoint:POST /v1/messages",
        "request:max_tokens",
        "request:system",
        "request:stop_sequences",
        "request:temperature",
        "request:top_p",
        "request:top_k",
        "request:metadata.user_id",
        "response:stop_reason",
        "response:stop_sequence",
        "response:usage.output_tokens",
    ),
)
def test_msg_020_generated_valid_requests(target: Target) -> None:
    @given(body=valid_requests(target.model))
    @budgeted(target.config.profile.generated_budget_seconds)
    def check(body: dict[str, Any]) -> None:
        note(f"request: {body}")
        check_message_invariants(target, body, create_json(target, body))

    check()


@prop(
    "STREAM-022",
    Level.MUST,
    "Generated valid requests stream by the grammar",
    url="build-with-claude/streaming#event-types",
    requirement="Streaming any valid text request yields a grammatical event stream; on a "
    "deterministic target at temperature 0 it carries the same text, stop_reason, "
    "stop_sequence and output_tokens as the non-streamed answer.",
    invariant=64,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "request:max_tokens",
        "request:system",
        "request:stop_sequences",
        "request:temperature",
        "request:top_p",
        "request:top_k",
        "request:metadata.user_id",
        "event:message_delta",
        "delta:text_delta",
        "response:stop_reason",
        "response:stop_sequence",
        "response:usage.output_tokens",
    ),
)
def test_stream_022_generated_streams(target: Target) -> None:
    deterministic = target.deterministic

    @given(body=valid_requests(target.model))
    @budgeted(target.config.profile.generated_budget_seconds)
    def check(body: dict[str, Any]) -> None:
        note(f"request: {body}")
        run = expect_stream(stream_raw(target, body))
        codes = {v.code for v in run.report.violations} - SCHEMA_CODES if run.report else set()
        expect_no_violations(run, codes, "a grammatical stream")
        if not (deterministic and body.get("temperature") == 0):
            return
        plain = create_json(target, body)
        last = run.last("message_delta")
        expect_equal(run.text, text_of(plain), "streamed text", reason="stream-diff")
        for field in ("stop_reason", "stop_sequence"):
            expect_equal(
                read_optional(last, f"delta.{field}", str, where=LAST_DELTA),
                read_optional(plain, field, str, where=MESSAGE),
                f"streamed {field}",
                reason="stream-diff",
            )
        streamed_tokens = read_optional(last, "usage.output_tokens", int, where=LAST_DELTA)
        plain_tokens = read_optional(plain, "usage.output_tokens", int, where=MESSAGE)
        if streamed_tokens is not None and plain_tokens is not None:  # absent: the schemas' to judge
            expect_equal(streamed_tokens, plain_tokens, "streamed output_tokens", reason="stream-diff")

    check()


@prop(
    "ERR-028",
    Level.MUST,
    "Each broken constraint is a 400, never a 5xx",
    url="api/errors#http-errors",
    requirement="A request that breaks one constraint of the request schema (a missing or "
    "unknown field, a wrong type, a value out of range, an empty or unknown block) gets 400 "
    "invalid_request_error in the error envelope.",
    covers=(
        "endpoint:POST /v1/messages",
        "request:max_tokens",
        "request:temperature",
        "error:invalid_request_error",
    ),
)
def test_err_028_generated_invalid_requests(target: Target) -> None:
    @given(case=invalid_requests(target.model), stream=st.booleans())
    @budgeted(target.config.profile.generated_budget_seconds)
    def check(case: tuple[str, dict[str, Any]], stream: bool) -> None:
        broken, body = case
        note(f"broken: {broken}; request: {body}")
        if stream:
            body = {**body, "stream": True} if "stream" not in body else body
        expect_error(target.request("POST", "/v1/messages", json_body=body), 400, "invalid_request_error")

    check()
