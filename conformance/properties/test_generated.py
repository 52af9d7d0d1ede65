"""Generated requests (hypothesis): many valid requests must satisfy the invariants, and
every request with one constraint broken must get a 400 envelope, never a 5xx."""

from __future__ import annotations

from typing import Any

from hypothesis import given, note
from hypothesis import strategies as st

from conformance.catalogue import Level, prop
from conformance.checks import expect, expect_equal, expect_error
from conformance.drivers import (
    GA_STOP_REASONS,
    create_json,
    expect_no_violations,
    expect_stream,
    stream_raw,
    text_of,
)
from conformance.strategies import invalid_requests, valid_requests
from conformance.target import Target

MESSAGES = "api/messages"


def check_message_invariants(body: dict[str, Any], message: dict[str, Any]) -> None:
    """The invariants every non-streaming answer keeps, whatever the request."""
    reason = message["stop_reason"]
    expect(reason in GA_STOP_REASONS, "a documented stop_reason", reason, reason="stop-reason")
    stops = body.get("stop_sequences") or []
    if reason == "stop_sequence":
        expect(
            message["stop_sequence"] in stops,
            f"stop_sequence in {stops}",
            message["stop_sequence"],
            reason="stop-sequence",
        )
        expect(
            message["stop_sequence"] not in text_of(message),
            "text without the stop sequence",
            text_of(message),
            reason="stop-sequence-in-text",
        )
    else:
        expect_equal(message["stop_sequence"], None, "stop_sequence", reason="stop-sequence")
    expect(
        message["usage"]["output_tokens"] <= body["max_tokens"],
        f"output_tokens <= max_tokens ({body['max_tokens']})",
        message["usage"]["output_tokens"],
        reason="usage",
    )


@prop(
    "MSG-020",
    Level.MUST,
    "Generated valid requests get valid Messages",
    url=f"{MESSAGES}#body",
    requirement="Any valid text request (string or block content, same-role runs, prefill, "
    "system forms, stop sequences, sampling) gets 200 with a schema-valid Message whose "
    "stop_reason, stop_sequence and usage keep the documented invariants.",
)
def test_msg_020_generated_valid_requests(target: Target) -> None:
    @given(body=valid_requests(target.model))
    def check(body: dict[str, Any]) -> None:
        note(f"request: {body}")
        check_message_invariants(body, create_json(target, body))

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
)
def test_stream_022_generated_streams(target: Target) -> None:
    deterministic = target.config.profile.deterministic

    @given(body=valid_requests(target.model))
    def check(body: dict[str, Any]) -> None:
        note(f"request: {body}")
        run = expect_stream(stream_raw(target, body))
        assert run.report is not None
        expect_no_violations(run, {v.code for v in run.report.violations}, "a grammatical stream")
        if not (deterministic and body.get("temperature") == 0):
            return
        plain = create_json(target, body)
        last = run.of_type("message_delta")[-1]
        expect_equal(run.text, text_of(plain), "streamed text", reason="stream-diff")
        expect_equal(
            last["delta"]["stop_reason"],
            plain["stop_reason"],
            "streamed stop_reason",
            reason="stream-diff",
        )
        expect_equal(
            last["delta"]["stop_sequence"],
            plain["stop_sequence"],
            "streamed stop_sequence",
            reason="stream-diff",
        )
        expect_equal(
            last["usage"]["output_tokens"],
            plain["usage"]["output_tokens"],
            "streamed output_tokens",
            reason="stream-diff",
        )

    check()


@prop(
    "ERR-028",
    Level.MUST,
    "Each broken constraint is a 400, never a 5xx",
    url="api/errors#http-errors",
    requirement="A request that breaks one constraint of the request schema (a missing or "
    "unknown field, a wrong type, a value out of range, an empty or unknown block) gets 400 "
    "invalid_request_error in the error envelope.",
)
def test_err_028_generated_invalid_requests(target: Target) -> None:
    @given(case=invalid_requests(target.model), stream=st.booleans())
    def check(case: tuple[str, dict[str, Any]], stream: bool) -> None:
        broken, body = case
        note(f"broken: {broken}; request: {body}")
        if stream:
            body = {**body, "stream": True} if "stream" not in body else body
        expect_error(target.request("POST", "/v1/messages", json_body=body), 400, "invalid_request_error")

    check()
