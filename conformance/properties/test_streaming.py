"""STREAM-*: `stream: true` on the wire (strict SSE parser + grammar) and through the SDK."""

from __future__ import annotations

import itertools
from typing import Any

import pydantic
import pytest

from conformance.catalogue import Level, prop
from conformance.judging.checks import (
    Cases,
    ConformanceFailure,
    expect,
    expect_equal,
    expect_error,
    expect_json,
    expect_stop,
    not_judged,
    precondition,
    read,
    read_optional,
    stop_reason,
)
from conformance.wire.drivers import (
    COMMON_STOPS,
    LONG_ANSWER_PROMPT,
    StreamRun,
    create_json,
    expect_no_violations,
    expect_stream,
    expect_within_max_tokens,
    max_text_bytes,
    message_body,
    natural_end,
    sdk_call,
    stop_sequence_body,
    stream_raw,
    stream_usage_subject,
    total_input_tokens,
)
from conformance.wire.target import Target

STREAMING = "build-with-claude/streaming"
START = "message_start"
LAST_DELTA = "the last message_delta"


def streams(target: Target) -> list[StreamRun]:
    """The two streams most grammar properties judge: a plain answer and a stop-sequence hit."""
    return [
        expect_stream(stream_raw(target, message_body(target))),
        expect_stream(stream_raw(target, stop_sequence_body(target))),
    ]


def grammar(target: Target, codes: set[str], what: str, *, of: str | None = None) -> None:
    """No violation of `codes` in either stream. A rule about content blocks (`of`: the
    event it needs, `content_block_start` or `content_block_delta`) rests on at least one
    such event, a rule about the whole stream on a stream that began a message: streams
    without one have nothing to judge (SKIP), not a PASS."""
    runs = streams(target)
    for run in runs:
        expect_no_violations(run, codes, what)
    if of is not None:
        expect_evidence(runs, of)
    else:
        expect_begun(runs)


def _unjudged_by(runs: list[StreamRun]) -> tuple[str, str | None]:
    """Why streams hold nothing to judge, and whose finding that is: a stream that ended
    without message_stop or an error event is STREAM-009's, one ended by an error STREAM-019's."""
    reports = [run.report for run in runs if run.report is not None]
    if any(not (r.completed or r.ended_with_error) for r in reports):
        return " (a stream ended before message_stop)", "STREAM-009"
    if any(r.ended_with_error for r in reports):
        return " (a stream ended with an error event)", "STREAM-019"
    return "", None


def expect_evidence(runs: list[StreamRun], event: str) -> None:
    """SKIP, saying why, unless some stream holds an `event` to judge. A stream that ended
    before message_stop is STREAM-009's finding, one ended by an error event STREAM-019's."""
    if any(run.of_type(event) for run in runs):
        return
    why, judged_by = _unjudged_by(runs)
    not_judged(
        f"none of the {len(runs)} streams held a {event} event: nothing to judge{why}", judged_by=judged_by
    )


def expect_begun(runs: list[StreamRun]) -> None:
    """SKIP unless some stream began a message (an event other than a ping or an error): an
    empty stream, or one that is an error event alone, has no events for a stream-wide rule."""
    if any(run.report is not None and run.report.started for run in runs):
        return
    why, judged_by = _unjudged_by(runs)
    not_judged(f"none of the {len(runs)} streams began a message: nothing to judge{why}", judged_by=judged_by)


@prop(
    "STREAM-001",
    Level.MUST,
    "A stream is text/event-stream",
    url=f"{STREAMING}#event-types",
    requirement="With stream: true the response is 200 with Content-Type text/event-stream.",
    source='docs: build-with-claude/streaming — "you can set \\"stream\\": true to incrementally stream '
    'the response using server-sent events (SSE)"',
    invariant=55,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
    ),
)
def test_stream_001_content_type(target: Target) -> None:
    expect_stream(stream_raw(target, message_body(target, max_tokens=4)))


@prop(
    "STREAM-002",
    Level.MUST,
    "Every event is named, and the name equals data.type",
    url=f"{STREAMING}#event-types",
    requirement="Each event uses an SSE event name (event: line) and includes the matching type "
    "in its data; the SDK silently drops events without a name.",
    source='docs: build-with-claude/streaming#event-types; api/versioning#version-history — "Each event '
    "will use an SSE event name (e.g. `event: message_stop`), and include the matching event "
    '`type` in its data."; versioning 2023-06-01: "All events are named events, rather than '
    'data-only events."',
    invariant=55,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:message_start",
        "event:content_block_start",
        "event:content_block_delta",
        "event:content_block_stop",
        "event:message_delta",
        "event:message_stop",
    ),
)
def test_stream_002_named_events(target: Target) -> None:
    grammar(target, {"missing-event-name", "event-name-mismatch"}, "every event named after data.type")


@prop(
    "STREAM-003",
    Level.MUST,
    "No data: [DONE]",
    url="api/versioning",
    requirement="Since 2023-06-01 the stream has no data: [DONE] terminator; message_stop ends it.",
    source='docs: api/versioning#version-history — 2023-06-01: "Removed unnecessary `data: [DONE]` event."',
    invariant=55,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:message_stop",
    ),
)
def test_stream_003_no_done_sentinel(target: Target) -> None:
    grammar(target, {"done-sentinel"}, "no [DONE] event")


@prop(
    "STREAM-004",
    Level.MUST,
    "message_start comes first, empty",
    url=f"{STREAMING}#event-types",
    requirement="The first event (pings aside) is message_start, once, carrying a Message with "
    "content [], stop_reason null and stop_sequence null.",
    source="docs and schema: build-with-claude/streaming#event-types; api/messages#response-stop-reason;"
    ' OpenAPI MessageStartEvent — "`message_start`: contains a `Message` object with empty '
    '`content`."; stop_reason: "In streaming mode, it is null in the `message_start` event and '
    'non-null otherwise."',
    invariant=56,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:message_start",
        "response:content",
        "response:stop_reason",
        "response:stop_sequence",
    ),
)
def test_stream_004_message_start_first(target: Target) -> None:
    grammar(
        target,
        {"first-not-message-start", "duplicate-message-start", "start-not-empty"},
        "message_start first, once, with an empty message",
    )


@prop(
    "STREAM-005",
    Level.MUST,
    "Block indices are 0, 1, 2… and every delta names a started block",
    url=f"{STREAMING}#content-block-delta-types",
    requirement="Each content block's index is its position in the final content array; deltas "
    "and stops refer only to blocks already started.",
    source="docs: build-with-claude/streaming#event-types; "
    'build-with-claude/streaming#content-block-delta-types — "Each content block will have an '
    '`index` that corresponds to its index in the final Message `content` array."; "Each '
    "`content_block_delta` event contains a `delta` of a type that updates the `content` block at"
    ' a given `index`."',
    invariant=57,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:content_block_start",
        "event:content_block_delta",
        "event:content_block_stop",
    ),
)
def test_stream_005_block_indices(target: Target) -> None:
    grammar(
        target,
        {"index-gap", "delta-unknown-block", "stop-unknown-block"},
        "contiguous block indices, deltas only for started blocks",
        of="content_block_start",
    )


@prop(
    "STREAM-006",
    Level.MUST,
    "Blocks are not interleaved",
    url=f"{STREAMING}#event-types",
    requirement="Each content block is started, filled and stopped before the next one starts.",
    source='docs: build-with-claude/streaming#full-http-stream-response — "A stream response is '
    "comprised of: 1. A `message_start` event 2. Potentially multiple content blocks, each of "
    "which contains: A `content_block_start` event, Potentially multiple `content_block_delta` "
    "events, A `content_block_stop` event …",
    invariant=57,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:content_block_start",
        "event:content_block_delta",
        "event:content_block_stop",
    ),
)
def test_stream_006_one_open_block(target: Target) -> None:
    grammar(target, {"interleaved-blocks"}, "one open block at a time", of="content_block_start")


@prop(
    "STREAM-007",
    Level.MUST,
    "Every block is stopped once, before message_delta",
    url=f"{STREAMING}#event-types",
    requirement="Each content_block_start has exactly one content_block_stop, and all blocks "
    "are stopped before message_delta.",
    source='docs: build-with-claude/streaming#event-types — "Each stream uses the following event flow: '
    "1. `message_start`: contains a `Message` object with empty `content`. 2. A series of content"
    " blocks, each of which have a `content_block_start`, one or more `content_block_delta` "
    "events, and a …",
    invariant=58,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:content_block_start",
        "event:content_block_stop",
        "event:message_delta",
    ),
)
def test_stream_007_blocks_stopped(target: Target) -> None:
    grammar(
        target,
        {"block-not-stopped", "double-stop", "block-after-message-delta"},
        "each block stopped exactly once before message_delta",
        of="content_block_start",
    )


@prop(
    "STREAM-008",
    Level.MUST,
    "Delta types match block types; blocks start empty",
    url=f"{STREAMING}#content-block-delta-types",
    requirement="text blocks take text_delta, tool_use blocks input_json_delta, thinking blocks "
    "thinking_delta/signature_delta; a block's content_block_start is empty and deltas fill it "
    "(a SHOULD sub-case: the docs show empty starts, they do not state the rule).",
    source="docs: build-with-claude/streaming#content-block-delta-types — text_delta for `text` blocks; "
    '"The deltas for `tool_use` content blocks correspond to updates for the `input` field"; '
    'thinking_delta "correspond to the `thinking` field of the `thinking` content blocks"',
    invariant=59,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:content_block_start",
        "event:content_block_delta",
        "block:text",
        "delta:text_delta",
    ),
)
def test_stream_008_delta_types(target: Target) -> None:
    """The empty start of a block is what the docs show, not a rule they state: a SHOULD sub-case."""
    runs = streams(target)
    cases = Cases()
    with cases.case("delta types"):
        for run in runs:
            expect_no_violations(run, {"delta-type-mismatch"}, "deltas of the block's type")
    with cases.case("blocks start empty", level=Level.SHOULD):
        for run in runs:
            expect_no_violations(run, {"block-start-not-empty"}, "a content_block_start with an empty block")
    cases.check()
    expect_evidence(runs, "content_block_delta")


@prop(
    "STREAM-009",
    Level.MUST,
    "message_delta, then one final message_stop",
    url=f"{STREAMING}#event-types",
    requirement="After the blocks come one or more message_delta events and a single final "
    "message_stop; nothing follows message_stop.",
    source='docs: build-with-claude/streaming#event-types — "3. One or more `message_delta` events, '
    "indicating top-level changes to the final `Message` object. 4. A final `message_stop` "
    'event."',
    invariant=61,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:message_delta",
        "event:message_stop",
    ),
)
def test_stream_009_stream_end(target: Target) -> None:
    """A stream with no event at all ends without message_stop too. One ended by an error event
    has no message_stop by rule: judged by STREAM-019, not here."""
    runs = streams(target)
    for run in runs:
        expect_no_violations(
            run,
            {"no-message-delta", "no-message-stop", "event-after-stop"},
            "message_delta, then message_stop last",
        )
    if all(run.report is not None and run.report.ended_with_error for run in runs):
        not_judged(
            f"each of the {len(runs)} streams ended with an error event: no end to judge",
            judged_by="STREAM-019",
        )


@prop(
    "STREAM-010",
    Level.MUST,
    "SSE framing and event data are well formed",
    url=f"{STREAMING}#event-types",
    requirement="Events are UTF-8 SSE blocks ended by a blank line whose data is one JSON object "
    "with the fields its type needs (and no leading byte order mark: a SHOULD sub-case, since the "
    "SSE standard allows one, which the Python SDK's decoder does not).",
    source='docs: build-with-claude/streaming#event-types; WHATWG HTML §9.2.5 — "Each server-sent event '
    'includes a named event type and associated JSON data."',
    invariant=55,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:message_start",
        "event:content_block_start",
        "event:content_block_delta",
        "event:content_block_stop",
        "event:message_delta",
        "event:message_stop",
    ),
)
def test_stream_010_framing(target: Target) -> None:
    """A leading BOM is allowed by the SSE standard (one is ignored) but breaks the Python SDK's
    decoder: a SHOULD sub-case."""
    runs = streams(target)
    cases = Cases()
    with cases.case("framing and JSON data"):
        codes = {"invalid-json", "data-not-object", "unterminated-event", "invalid-utf8", "malformed-event"}
        for run in runs:
            expect_no_violations(run, codes, "well-formed SSE with JSON object data")
    with cases.case("no leading BOM", level=Level.SHOULD):
        for run in runs:
            expect_no_violations(run, {"leading-bom"}, "a stream without a byte order mark")
    cases.check()
    expect_begun(runs)


@prop(
    "STREAM-011",
    Level.MUST,
    "Every event matches its schema",
    url=f"{STREAMING}#event-types",
    requirement="Each event's data is valid against the API's schema for its type "
    "(message_start, content_block_*, message_delta, message_stop, ping, error).",
    source="schema: OpenAPI MessageStreamEvent (MessageStartEvent, ContentBlockStartEvent, "
    "ContentBlockDeltaEvent, ContentBlockStopEvent, MessageDeltaEvent, MessageStopEvent, Ping); "
    "OpenAPI MessageDeltaUsage — MessageDeltaEvent required [delta, type, usage]; "
    'MessageDeltaUsage required includes output_tokens (integer); stop_reason "non-null '
    'otherwise" after message_start',
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:message_start",
        "event:content_block_start",
        "event:content_block_delta",
        "event:content_block_stop",
        "event:message_delta",
        "event:message_stop",
        "block:text",
        "delta:text_delta",
        "response:id",
        "response:type",
        "response:role",
        "response:content",
        "response:model",
        "response:stop_reason",
        "response:stop_sequence",
        "response:usage",
        "response:usage.input_tokens",
        "response:usage.output_tokens",
    ),
)
def test_stream_011_event_schemas(target: Target) -> None:
    grammar(
        target,
        {"schema-invalid", "missing-output-tokens", "stop-reason-null"},
        "schema-valid events",
        of="content_block_delta",  # a stream of its frame alone leaves the blocks' events unjudged
    )


@prop(
    "STREAM-012",
    Level.SHOULD,
    "The streamed message equals the non-streamed one",
    url=f"{STREAMING}",
    requirement="On a deterministic target (the same request gets the same answer) "
    "the message the SDK accumulates from "
    "the stream has the same content, stop_reason, stop_sequence and usage as the same request "
    "made without streaming."
    " Two calls agree only on a deterministic target, and the docs say temperature 0 is not fully "
    "deterministic: a SHOULD, judged only where the run found the target deterministic.",
    invariant=64,
    compares=True,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "request:stop_sequences",
        "response:content",
        "response:stop_reason",
        "response:stop_sequence",
        "response:usage.input_tokens",
        "response:usage.output_tokens",
        "stop_reason:max_tokens",
        "stop_reason:stop_sequence",
    ),
)
def test_stream_012_stream_equals_create(target: Target) -> None:
    if not target.deterministic:
        pytest.skip("the target is not deterministic (by its profile, or by the run's probe)")
    client = target.sdk()
    for extra in ({"max_tokens": 12}, {"max_tokens": 16, "stop_sequences": COMMON_STOPS}):
        request: dict[str, Any] = {
            "model": target.model,
            "messages": [{"role": "user", "content": LONG_ANSWER_PROMPT}],
            "extra_body": target.greedy_fields(),
            **extra,
        }
        plain = sdk_call("messages.create", client.messages.create, **request)
        _expect_streamed_equal(sdk_streamed(target, request), plain, ("input_tokens", "output_tokens"))


@prop(
    "STREAM-023",
    Level.SHOULD,
    "A stream that ends by itself equals the non-streamed answer",
    url=f"{STREAMING}",
    requirement="On a deterministic target (the same request gets the same answer) "
    "a turn the model ends by itself "
    "(end_turn) streams the same message as it is answered without streaming: the message the "
    "official SDK accumulates has the same content, stop_reason, stop_sequence and usage (the "
    "last delta of a natural end is not lost, and the stream's end is the turn's end)."
    " Two calls agree only on a deterministic target, and the docs say temperature 0 is not fully "
    "deterministic: a SHOULD, judged only where the run found the target deterministic.",
    invariant=64,
    compares=True,
    covers=(
        "endpoint:POST /v1/messages",
        "response:content",
        "response:stop_reason",
        "response:usage.output_tokens",
    ),
)
def test_stream_023_natural_end_equals_create(target: Target) -> None:
    """Finds a question the model answers in a few words and ends by itself, then streams it
    through the SDK's stream helper and compares with the plain answer. (SDK-004 does the same
    through the TypeScript SDK, whose finalMessage() stops at message_stop.)"""
    if not target.deterministic:
        pytest.skip("the target is not deterministic (by its profile, or by the run's probe)")
    client = target.sdk()

    def sdk_request(body: dict[str, Any]) -> dict[str, Any]:
        return {
            "model": body["model"],
            "max_tokens": body["max_tokens"],
            "messages": body["messages"],
            "extra_body": target.greedy_fields(),
        }

    def create(body: dict[str, Any]) -> Any:
        return sdk_call("messages.create", client.messages.create, **sdk_request(body))

    body, plain = natural_end(
        target, create, lambda plain: plain.stop_reason == "end_turn" and bool(plain.content)
    )
    streamed = sdk_streamed(target, sdk_request(body))
    _expect_streamed_equal(streamed, plain, ("output_tokens",), of=" of a turn that ended by itself")


def _expect_streamed_equal(streamed: Any, plain: Any, usage: tuple[str, ...], of: str = "") -> None:
    """The message the SDK accumulated from a stream has the create answer's content, stop
    reason, stop sequence and the `usage` counts named."""
    for field in ("content", "stop_reason", "stop_sequence"):
        expect_equal(
            _plain(getattr(streamed, field)),
            _plain(getattr(plain, field)),
            f"streamed {field}{of}",
            reason="stream-diff",
        )
    for field in usage:
        got, want = getattr(streamed.usage, field), getattr(plain.usage, field)
        expect_equal(
            got,
            want,
            f"streamed usage.{field}{of}",
            reason="stream-diff",
            subject=stream_usage_subject(got, want),
        )


def sdk_streamed(target: Target, request: dict[str, Any]) -> Any:
    """The message the SDK's stream helper accumulates for `request` (its get_final_message)."""

    def accumulate() -> Any:
        with target.sdk().messages.stream(**request) as stream:
            return stream.get_final_message()

    return sdk_call("messages.stream", accumulate)


def _plain(value: Any) -> Any:
    """An SDK object as plain data, without the keys the server sent beyond what the SDK's type
    declares: those (a `cache_control: null` on a streamed text block, seen on OGX) are the
    schema properties' to judge, not a difference between stream and create."""
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json", exclude=set(value.__pydantic_extra__ or ()))
    return value


@prop(
    "STREAM-013",
    Level.MUST,
    "message_delta usage is cumulative",
    url=f"{STREAMING}#event-types",
    requirement="The token counts in message_delta usage are cumulative: output_tokens never "
    "decreases and the last value is the total.",
    source="docs: build-with-claude/streaming#event-types; api/messages (MessageDeltaUsage docstrings) —"
    ' "The token counts shown in the `usage` field of the `message_delta` event are '
    '*cumulative*."; output_tokens: "The cumulative number of output tokens which were used."',
    invariant=63,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:message_start",
        "event:message_delta",
        "response:usage.output_tokens",
    ),
)
def test_stream_013_usage_cumulative(target: Target) -> None:
    """Judged on the counts the streams report (message_start's and each message_delta's), never
    on one filled in: a missing count is the schema property's (STREAM-011). A rule about
    growing counts rests on a stream with text and at least two counts; without one, SKIP."""
    runs = streams(target)
    judged = counted = 0
    for run in runs:
        events = [(START, "message.usage.output_tokens", e) for e in run.of_type(START)]
        events += [("message_delta", "usage.output_tokens", e) for e in run.of_type("message_delta")]
        reported = [read_optional(event, path, int, where=where) for where, path, event in events]
        counts = [count for count in reported if count is not None]
        if len(counts) < 2:
            continue
        counted += 1
        expect(
            all(a <= b for a, b in itertools.pairwise(counts)),
            "output_tokens non-decreasing from message_start through every message_delta",
            counts,
            reason="usage",
        )
        if run.text:
            judged += 1
            expect(
                counts[-1] > 0,
                "final output_tokens > 0 for a non-empty answer",
                counts,
                reason="usage",
                subject=stream_usage_subject(counts[-1]),
            )
    why, judged_by = _unjudged_by(runs)
    if not counted:
        not_judged(
            "no stream reported usage.output_tokens twice (message_start, then message_delta)" + why,
            judged_by=judged_by or "STREAM-011",
        )
    if not judged:
        not_judged(
            f"none of the {len(runs)} streams carried text: no tokens to count{why}", judged_by=judged_by
        )


@prop(
    "STREAM-014",
    Level.SHOULD,
    "message_start reports the real input_tokens",
    url=f"{STREAMING}#event-types",
    requirement="message_start's usage.input_tokens is the prompt's true token count (clients "
    "use it for context accounting): positive, and the same total input (cache counters "
    "included) as the non-streamed answer to the same request."
    " message_delta's usage may carry the cumulative input count, so the docs do not require "
    "message_start to hold the final one; clients read it there (peers catalogue #29): a SHOULD.",
    invariant=51,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:message_start",
        "response:usage.input_tokens",
        "response:usage.cache_creation_input_tokens",
        "response:usage.cache_read_input_tokens",
    ),
)
def test_stream_014_start_input_tokens(target: Target) -> None:
    """Compared with the non-streamed usage of the same request, which counts the same prompt
    exactly; count_tokens, an estimate by the docs, is judged against usage by TOKENS-001/007."""
    body = message_body(target, max_tokens=4)
    plain = total_input_tokens(
        read(create_json(target, body), "usage", dict, where="the Message"), where="usage"
    )
    run = expect_stream(stream_raw(target, body))
    usage = read(run.first(START), "message.usage", dict, where=START)
    streamed = total_input_tokens(usage, where="message_start's usage")
    expect(
        streamed > 0,
        "message_start input tokens > 0",
        streamed,
        reason="usage",
        subject=stream_usage_subject(streamed, plain),
    )
    expect_equal(
        streamed, plain, "message_start input tokens (incl. cache) vs non-streamed usage", reason="usage"
    )


@prop(
    "STREAM-015",
    Level.MUST,
    "A stop sequence hit is reported in message_delta",
    url=f"{STREAMING}#event-types",
    requirement="When a stop sequence ends a streamed turn, message_delta carries stop_reason "
    "'stop_sequence' and the matched stop_sequence (and, a SHOULD sub-case inferred as MSG-005 is, "
    "no delta contains it).",
    source="docs: api/messages#body-stop-sequences; build-with-claude/streaming#event-types — "
    'stop_sequences: "the response `stop_reason` value will be `\\"stop_sequence\\"` and the '
    'response `stop_sequence` value will contain the matched stop sequence"; message_delta '
    'carries "top-level changes to the final Message"',
    invariant=33,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "request:stop_sequences",
        "event:message_delta",
        "delta:text_delta",
        "response:stop_reason",
        "response:stop_sequence",
        "stop_reason:stop_sequence",
    ),
)
def test_stream_015_stop_sequence_in_stream(target: Target) -> None:
    run = expect_stream(stream_raw(target, stop_sequence_body(target)))
    last = run.last("message_delta")
    expect_stop(stop_reason(last, "delta.stop_reason", where=LAST_DELTA), "stop_sequence", "stop_reason")
    sequence = read(last, "delta.stop_sequence", str, where=LAST_DELTA)
    expect(sequence in COMMON_STOPS, f"stop_sequence in {COMMON_STOPS}", sequence, reason="stop-sequence")
    cases = Cases()
    with cases.case("the match left out of the text", level=Level.SHOULD):  # as MSG-005: inferred
        expect(
            sequence not in run.text,
            "streamed text without the stop sequence",
            run.text,
            reason="stop-sequence-in-text",
        )
    cases.check()


@prop(
    "STREAM-016",
    Level.MUST,
    "max_tokens is reported in message_delta",
    url=f"{STREAMING}#event-types",
    requirement="A streamed turn cut by max_tokens stops there: no more text than max_tokens "
    "allows (measured, and by the target's own count), output_tokens <= max_tokens, and the "
    "last message_delta says stop_reason 'max_tokens'.",
    source='docs: api/messages#body-max-tokens; api/messages#response-stop-reason — "This parameter only'
    ' specifies the absolute maximum number of tokens to generate."; max_tokens: "we exceeded the'
    " requested `max_tokens` or the model's maximum\"",
    invariant=35,
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:POST /v1/messages/count_tokens",
        "request:stream",
        "request:max_tokens",
        "event:message_delta",
        "delta:text_delta",
        "response:stop_reason",
        "response:usage.output_tokens",
        "stop_reason:max_tokens",
    ),
)
def test_stream_016_max_tokens_in_stream(target: Target) -> None:
    """Judged by what was streamed: reading stops once the text is longer than 2 tokens can be
    (or after --timeout), so a target that ignores max_tokens fails here for that, with what it
    sent, instead of running into the suite's timeout."""
    limit = 2
    body = message_body(target, max_tokens=limit, messages=[{"role": "user", "content": LONG_ANSWER_PROMPT}])
    run = expect_stream(stream_raw(target, body, max_text=max_text_bytes(limit)))
    last = None if run.truncated else run.last("message_delta")
    reported = None if last is None else read_optional(last, "usage.output_tokens", int, where=LAST_DELTA)
    expect_within_max_tokens(target, run.text, reported, limit, where="the streamed answer")
    if last is None:
        raise ConformanceFailure(
            f"a stream of at most {limit} tokens that ends within {target.config.timeout:g} s",
            f"still streaming after {target.config.timeout:g} s ({len(run.text.encode())} bytes of text)",
            reason="timeout",
        )
    expect_stop(stop_reason(last, "delta.stop_reason", where=LAST_DELTA), "max_tokens", "stop_reason")


@prop(
    "STREAM-017",
    Level.SHOULD,
    "Silence is filled with ping events",
    url=f"{STREAMING}#ping-events",
    requirement="While the model is silent (a long prefill) the stream keeps the connection "
    "alive with ping events; clients such as Claude Code give up after about 15 s of silence "
    "and ignore SSE comments. The profile's max_silence_seconds is the limit, with the slack a "
    "timer needs (1 s or 10 %, whichever is more): a ping sent every 15 s arrives 15.0x s apart.",
    alone=True,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:ping",
    ),
    unobserved={
        "event:ping": "pings fill silences longer than the ping interval; the reference's short "
        "answers have none",
    },
)
def test_stream_017_no_long_silence(target: Target) -> None:
    """One short streamed answer: no wait for an event, from the request to the stream's close,
    longer than the limit (and its slack). A stream without events is STREAM-009's finding."""
    limit = target.config.profile.max_silence_seconds
    allowed = limit + max(1.0, limit / 10)  # a ping timer at exactly the limit is not a silence
    run = expect_stream(stream_raw(target, message_body(target, max_tokens=8)))
    if not run.arrivals:
        not_judged("the stream held no event: no silence between events to judge", judged_by="STREAM-009")
    silence = run.longest_silence()
    expect(
        silence <= allowed,
        f"no gap between events longer than {limit:g} s (+{allowed - limit:g} s slack)",
        f"{silence:.1f} s",
        reason="silence",
    )


@prop(
    "STREAM-018",
    Level.MUST,
    "Errors before the stream starts are plain JSON errors",
    url=f"{STREAMING}#error-events",
    requirement="A stream: true request that is invalid gets an ordinary HTTP error with a JSON "
    "error body, not a 200 event stream.",
    source='docs: api/errors#http-errors; api/errors#error-shapes — "When receiving a streaming response'
    " over server-sent events (SSE), an error can occur after the API returns a 200 response. In "
    'that case, error handling doesn\'t follow these standard mechanisms."; "The API always '
    'returns errors as JSON"',
    invariant=66,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "request:messages",
        "error:invalid_request_error",
    ),
)
def test_stream_018_early_errors_are_json(target: Target) -> None:
    """Streams a request its schema refuses (no max_tokens: `required`). A target that accepts
    it without streaming too breaks ERR-001's rule, not this one (SKIP)."""
    invalid = {k: v for k, v in message_body(target).items() if k != "max_tokens"}
    with precondition("the request, not streamed, refused with 400", judged_by="ERR-001"):
        expect_error(target.request("POST", "/v1/messages", json_body=invalid), 400, "invalid_request_error")
    run = stream_raw(target, invalid)
    expect(
        run.transcript is None,
        "an HTTP error, not an event stream",
        f"HTTP {run.status} stream",
        reason="wrong-status",
    )
    response = target.request("POST", "/v1/messages", json_body={**invalid, "stream": True})
    expect_error(response, 400, "invalid_request_error")
    expect_json(response)


@prop(
    "STREAM-019",
    Level.MUST,
    "An error event is well formed and ends the stream",
    url=f"{STREAMING}#error-events",
    requirement="A failure after the stream started is an event: error with "
    '{"type":"error","error":{"type","message"}} (and, a SHOULD sub-case: inferred, not stated, '
    "nothing follows it, no message_stop).",
    source='docs: build-with-claude/streaming#error-events — "We may occasionally send errors in the '
    'event stream." example: event: error / data: {"type": "error", "error": {"type": '
    '"overloaded_error", "message": "Overloaded"}}',
    invariant=67,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:error",
    ),
    unobserved={
        "event:error": "judged when a stream fails; the reference's streams do not (its fault in "
        "tests/conformance/faults.py sends one)",
    },
)
def test_stream_019_error_event(target: Target) -> None:
    """That nothing follows an error event is inferred, not stated: a SHOULD sub-case. Judged on
    the error events the streams carry; none can be provoked, so without one it is SKIP."""
    runs = streams(target)
    errors = [error for run in runs for error in run.of_type("error")]
    if not errors and not any(run.report is not None and run.report.ended_with_error for run in runs):
        not_judged(f"none of the {len(runs)} streams carried an error event: nothing to judge")
    cases = Cases()
    with cases.case("error events well formed"):
        for run in runs:
            for error in run.of_type("error"):
                inner = error.get("error")
                expect(
                    isinstance(inner, dict)
                    and isinstance(inner.get("type"), str)
                    and isinstance(inner.get("message"), str),
                    'an error event {"type":"error","error":{"type","message"}}',
                    error,
                    reason="envelope",
                )
    with cases.case("nothing after an error event", level=Level.SHOULD):
        for run in runs:
            expect_no_violations(run, {"event-after-error"}, "nothing after an error event")
    cases.check()


@prop(
    "STREAM-020",
    Level.SHOULD,
    "Text deltas are not empty",
    url=f"{STREAMING}#content-block-delta-types",
    requirement="A text_delta carries text; empty deltas waste events and confuse translators.",
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:content_block_delta",
        "delta:text_delta",
    ),
)
def test_stream_020_no_empty_deltas(target: Target) -> None:
    runs = streams(target)
    for run in runs:
        deltas = [e.get("delta") for e in run.of_type("content_block_delta")]
        empty = [
            d for d in deltas if isinstance(d, dict) and d.get("type") == "text_delta" and not d.get("text")
        ]
        expect(not empty, "no empty text_delta", empty[:3], reason="empty-delta")
    expect_evidence(runs, "content_block_delta")


@prop(
    "STREAM-021",
    Level.MUST,
    "The SDK's stream helper yields the whole message",
    url=f"{STREAMING}",
    requirement="messages.stream() of the official SDK sees every event: its text stream "
    "concatenates to the final message's text, which has a stop_reason.",
    source="docs: api/errors#long-requests; "
    'build-with-claude/streaming#get-the-final-message-without-handling-events — "the SDKs can '
    "consume the stream for you and return the complete `Message` object, identical to what a "
    'non-streaming call returns" (errors page, Long requests; the streaming page says the same of'
    " .get_final_message() / .finalMessage())",
    invariant=62,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "response:content",
        "response:stop_reason",
        "block:text",
        "delta:text_delta",
    ),
)
def test_stream_021_sdk_stream(target: Target) -> None:
    def run() -> tuple[str, Any]:
        with target.sdk().messages.stream(
            model=target.model,
            max_tokens=16,
            messages=[{"role": "user", "content": LONG_ANSWER_PROMPT}],
            extra_body=target.greedy_fields(),
        ) as stream:
            text = "".join(stream.text_stream)
            return text, stream.get_final_message()

    text, final = sdk_call("messages.stream", run)
    expect(
        final.stop_reason is not None,
        "a stop_reason on the accumulated message",
        final.stop_reason,
        reason="sdk-stream",
    )
    joined = "".join(block.text for block in final.content if block.type == "text")
    expect_equal(text, joined, "text_stream joined vs final text", reason="sdk-stream")
    expect(bool(text), "some streamed text", text, reason="sdk-stream")
