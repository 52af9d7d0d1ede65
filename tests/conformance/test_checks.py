"""The accessors every property reads target data through: whatever the target sends, a
property ends in a ConformanceFailure (FAIL/WARN), never a KeyError or TypeError (ERROR)."""

from __future__ import annotations

import httpx
import pytest

from conformance.checks import (
    Cases,
    ConformanceFailure,
    expect_envelope,
    expect_error,
    json_object,
    read,
    read_optional,
    stop_reason,
)

MESSAGE = {
    "stop_reason": "end_turn",
    "usage": {"output_tokens": 3, "flag": True},
    "content": [{"text": "hi"}],
}


def failure(call, *args, **kwargs) -> ConformanceFailure:
    with pytest.raises(ConformanceFailure) as caught:
        call(*args, **kwargs)
    return caught.value


def test_read_follows_dotted_paths_through_objects_and_arrays():
    assert read(MESSAGE, "usage.output_tokens", int, where="m") == 3
    assert read(MESSAGE, "content.0.text", str, where="m") == "hi"


@pytest.mark.parametrize(
    ("data", "path", "kind", "reason", "actual"),
    [
        ({}, "usage.output_tokens", int, "missing-field", "no `usage.output_tokens`"),
        ({"usage": None}, "usage.output_tokens", int, "missing-field", "no `usage.output_tokens`"),
        ({"usage": []}, "usage.output_tokens", int, "missing-field", "no `usage.output_tokens`"),
        ({"x": None}, "x", int, "wrong-type", "`x` is null: null"),
        ({"x": "3"}, "x", int, "wrong-type", '`x` is a string: "3"'),
        ({"x": True}, "x", int, "wrong-type", "`x` is a boolean: true"),  # JSON true is no number
        ({"x": 1.5}, "x", int, "wrong-type", "`x` is a number: 1.5"),
        ({"x": {}}, "x", list, "wrong-type", "`x` is an object: {}"),
        ({"c": []}, "c.0", dict, "missing-field", "no `c.0`"),
    ],
)
def test_read_turns_what_the_target_got_wrong_into_a_failure(data, path, kind, reason, actual):
    caught = failure(read, data, path, kind, where="the Message")
    assert (caught.reason, caught.actual) == (reason, actual)
    assert "the Message" in caught.expected


def test_read_optional_tolerates_absence_but_not_a_wrong_type():
    assert read_optional({}, "stop_sequence", str, where="m") is None
    assert read_optional({"stop_sequence": None}, "stop_sequence", str, where="m", default="d") == "d"
    assert read_optional({"stop_sequence": ""}, "stop_sequence", str, where="m") == ""
    assert (
        failure(read_optional, {"stop_sequence": 5}, "stop_sequence", str, where="m").reason == "wrong-type"
    )


def test_stop_reason_must_be_a_documented_value():
    assert stop_reason(MESSAGE, where="m") == "end_turn"
    assert failure(stop_reason, {"stop_reason": "stop"}, where="m").reason == "stop-reason"
    assert failure(stop_reason, {"stop_reason": None}, where="m").reason == "wrong-type"
    assert (
        stop_reason({"delta": {"stop_reason": "max_tokens"}}, "delta.stop_reason", where="d") == "max_tokens"
    )


def test_cases_report_every_broken_sub_case():
    cases = Cases()
    for name in ("a", "b", "c"):
        with cases.case(name):
            if name != "b":
                raise ConformanceFailure(f"{name} ok", f"{name} broken", reason=f"r-{name}")
    caught = failure(cases.check)
    assert caught.actual.splitlines() == ["2 of 3 sub-cases broken: [a] a broken", "[c] c broken"]
    assert caught.reason == "r-a"
    Cases().check()  # nothing broken: nothing raised


def response(status: int, body: bytes, content_type: str = "application/json") -> httpx.Response:
    return httpx.Response(status, content=body, headers={"content-type": content_type})


def test_json_object_refuses_other_bodies():
    assert failure(json_object, response(200, b"<html>"), "the Message").reason == "not-json"
    assert failure(json_object, response(200, b"[1]"), "the Message").reason == "wrong-type"


def test_error_status_is_judged_without_the_envelope_and_the_envelope_on_its_own():
    openai = response(400, b'{"error": {"type": "invalid_request_error", "message": "no"}}')
    expect_error(openai, 400, "invalid_request_error")  # the status and type are right
    assert failure(expect_envelope, openai, 400, "invalid_request_error").reason == "envelope"
    expect_error(response(400, b"Bad Request", "text/plain"), 400, "invalid_request_error")
    assert failure(expect_error, response(422, b"{}"), 400, None).reason == "wrong-status"
    wrong_type = response(400, b'{"type": "error", "error": {"type": "api_error", "message": "x"}}')
    assert failure(expect_error, wrong_type, 400, "invalid_request_error").reason == "error-type"
