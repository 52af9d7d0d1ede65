"""The stream grammar flags exactly the broken rule; the accumulator rebuilds the SDK's Message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from anthropic.lib.streaming._messages import accumulate_event

from conformance.judging.grammar import VIOLATION_CODES, check_stream
from conformance.wire.accumulate import AccumulationError, accumulate, accumulate_transcript
from conformance.wire.sse import parse_sse

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "streams"
EXPECTED: dict[str, dict[str, Any]] = json.loads((FIXTURES / "expected.json").read_text())
GOOD = sorted(n for n in EXPECTED if n.removesuffix(".sse").endswith("good"))
BAD = sorted(n for n in EXPECTED if n.endswith("__bad.sse"))
SDK_EVENTS = {
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
}


def _check(name: str, *, schemas: bool = True) -> set[str]:
    report = check_stream(parse_sse((FIXTURES / name).read_bytes()), validate_schemas=schemas)
    return {v.code for v in report.violations}


def _sse(*events: dict[str, Any] | str) -> bytes:
    out = ""
    for event in events:
        if isinstance(event, str):
            out += event
        else:
            out += f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
    return out.encode()


START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": 2},
    },
}
DELTA = {
    "type": "message_delta",
    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
    "usage": {"output_tokens": 7, "input_tokens": None, "cache_read_input_tokens": 3},
}
STOP = {"type": "message_stop"}


def test_expected_json_covers_every_fixture() -> None:
    assert set(EXPECTED) == {p.name for p in FIXTURES.glob("*.sse")}
    assert set(GOOD) | set(BAD) == set(EXPECTED)


@pytest.mark.parametrize("name", GOOD)
def test_good_fixtures_have_no_violations(name: str) -> None:
    assert _check(name) == set()
    assert EXPECTED[name]["violations"] == []


@pytest.mark.parametrize("name", BAD)
def test_each_bad_fixture_yields_exactly_its_code(name: str) -> None:
    (code,) = EXPECTED[name]["violations"]
    report = check_stream(parse_sse((FIXTURES / name).read_bytes()), validate_schemas=True)
    assert {v.code for v in report.violations} == {code}
    assert len(report.violations) == 1, report.violations


def test_bad_fixture_slugs_name_their_rule() -> None:
    aliases = {"missing_event_line": "missing-event-name", "error_then_stop": "event-after-error"}
    for name in BAD:
        slug = name.removesuffix("__bad.sse")
        assert EXPECTED[name]["violations"] == [aliases.get(slug, slug.replace("_", "-"))]


def test_every_violation_code_has_a_bad_fixture() -> None:
    covered = {code for name in BAD for code in EXPECTED[name]["violations"]}
    assert covered == set(VIOLATION_CODES)


def test_schema_violations_only_when_asked() -> None:
    assert _check("schema_invalid__bad.sse", schemas=False) == set()


@pytest.mark.parametrize("name", [n for n in GOOD if "message" in EXPECTED[n]])
def test_accumulator_rebuilds_the_sdk_message(name: str) -> None:
    transcript = parse_sse((FIXTURES / name).read_bytes())
    assert accumulate_transcript(transcript) == EXPECTED[name]["message"]
    # and the installed SDK agrees (expected.json was recorded from it)
    snapshot: Any = None
    buffers: dict[int, bytes] = {}
    for event in transcript.events:
        if event.event in SDK_EVENTS:
            snapshot = accumulate_event(event=event.json, current_snapshot=snapshot,
                                        json_bufs=buffers)  # fmt: skip
    assert snapshot.to_dict(mode="json") == EXPECTED[name]["message"]


# --- grammar edge cases -------------------------------------------------------------------------


def test_pings_anywhere_before_the_end_are_fine() -> None:
    ping = {"type": "ping"}
    report = check_stream(parse_sse(_sse(ping, START, ping, DELTA, ping, STOP)))
    assert report.ok
    assert report.pings == 3
    assert report.completed


def test_an_error_first_is_a_legal_stream() -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    report = check_stream(parse_sse(_sse(error)))
    assert report.ok
    assert report.ended_with_error
    assert not report.completed
    assert not report.started  # nothing for the stream-wide rules to judge (STREAM-019's)


def test_several_message_deltas_are_fine() -> None:
    assert check_stream(parse_sse(_sse(START, DELTA, DELTA, STOP))).ok


def test_unknown_event_names_are_recorded_not_judged() -> None:
    report = check_stream(parse_sse(_sse(START, {"type": "message_progress"}, DELTA, STOP)))
    assert report.ok
    assert report.unknown_events == (1,)


def test_a_missing_type_is_a_mismatch_but_the_name_still_counts() -> None:
    report = check_stream(parse_sse(_sse(START, DELTA, "event: message_stop\ndata: {}\n\n")))
    assert [v.code for v in report.violations] == ["event-name-mismatch"]
    assert report.completed


def test_truncated_streams() -> None:
    # An empty stream never began: its missing end is the one violation (STREAM-009's), not a
    # wrong first event.
    empty = check_stream(parse_sse(b""))
    assert [v.code for v in empty.violations] == ["no-message-stop"]
    assert not empty.started
    assert [v.code for v in check_stream(parse_sse(_sse({"type": "ping"}))).violations] == ["no-message-stop"]
    only_start = check_stream(parse_sse(_sse(START)))
    assert [v.code for v in only_start.violations] == ["no-message-delta", "no-message-stop"]
    assert all(v.event_index is None for v in only_start.violations)


def test_violations_point_at_the_event() -> None:
    (violation,) = check_stream(parse_sse(_sse(START, DELTA, STOP, STOP))).violations
    assert (violation.code, violation.event_index) == ("event-after-stop", 3)
    assert "message_stop" in violation.message


# --- accumulator --------------------------------------------------------------------------------


def test_usage_merges_as_the_sdk_does() -> None:
    message = accumulate([START, DELTA, STOP])
    assert message["usage"] == {"input_tokens": 5, "output_tokens": 7, "cache_read_input_tokens": 3}
    assert (message["stop_reason"], message["stop_sequence"]) == ("end_turn", None)


def test_tool_input_stays_empty_without_fragments_and_parses_when_joined() -> None:
    tool = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
    events: list[dict[str, Any]] = [
        START,
        {"type": "content_block_start", "index": 0, "content_block": tool},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {**tool, "id": "toolu_2"}},
    ]
    for fragment in ("", '{"a": [1,', " 2]}", ""):
        delta = {"type": "input_json_delta", "partial_json": fragment}
        events.append({"type": "content_block_delta", "index": 1, "delta": delta})
    message = accumulate(events)
    assert [b["input"] for b in message["content"]] == [{}, {"a": [1, 2]}]


def test_accumulator_refuses_what_the_sdk_refuses() -> None:
    with pytest.raises(AccumulationError):
        accumulate([DELTA])
    with pytest.raises(AccumulationError):
        accumulate([{"type": "ping"}])
    bad_index = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}}
    with pytest.raises(AccumulationError):
        accumulate([START, bad_index])
