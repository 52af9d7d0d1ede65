"""The accessors every property reads target data through: whatever the target sends, a
property ends in a ConformanceFailure (FAIL/WARN), never a KeyError or TypeError (ERROR)."""

from __future__ import annotations

import httpx
import pytest

from conformance.judging.checks import (
    Cases,
    ConformanceFailure,
    NotJudged,
    expect_envelope,
    expect_error,
    expect_status,
    json_object,
    precondition,
    read,
    read_optional,
    stop_reason,
    take_notes,
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
    # Each broken sub-case is kept on its own, for the console and the causes.
    assert [(b.case, b.actual, b.reason) for b in caught.breakages()] == [
        ("a", "a broken", "r-a"),
        ("c", "c broken", "r-c"),
    ]
    Cases().check()  # nothing broken: nothing raised


def response(status: int, body: bytes, content_type: str = "application/json") -> httpx.Response:
    return httpx.Response(status, content=body, headers={"content-type": content_type})


def test_json_object_refuses_other_bodies():
    assert failure(json_object, response(200, b"<html>"), "the Message").reason == "not-json"
    assert failure(json_object, response(200, b"[1]"), "the Message").reason == "wrong-type"


def test_an_error_is_judged_by_its_status_and_its_body_and_the_full_envelope_on_its_own():
    right = response(400, b'{"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}')
    expect_error(right, 400, "invalid_request_error")
    # The status and the body's envelope and type: an OpenAI-shaped or a plain-text body is the
    # target's failure in every error property, named by what the body is.
    openai = response(400, b'{"error": {"type": "invalid_request_error", "message": "no"}}')
    caught = failure(expect_error, openai, 400, "invalid_request_error")
    assert (caught.reason, caught.subject) == (
        "envelope",
        "an error answered with a body with keys error, not the Anthropic envelope",
    )
    assert failure(expect_error, response(400, b"Bad Request", "text/plain"), 400, None).reason == "not-json"
    assert failure(expect_error, response(422, b"{}"), 400, None).reason == "wrong-status"
    wrong_type = response(400, b'{"type": "error", "error": {"type": "api_error", "message": "x"}}')
    assert failure(expect_error, wrong_type, 400, "invalid_request_error").reason == "error-type"
    # The full envelope (schema, request_id) is judged by expect_envelope alone.
    assert failure(expect_envelope, right, 400, "invalid_request_error").reason == "schema"


def test_a_wrong_status_names_the_request_and_what_came_back():
    request = httpx.Request("POST", "http://t/v1/messages?beta=true", json={"stream": True, "model": "m"})
    answer = httpx.Response(500, json={"type": "error", "error": {"type": "api_error", "message": "boom"}})
    answer.request = request
    caught = failure(expect_status, answer, 200)
    assert caught.subject == "POST /v1/messages (stream) answered HTTP 500 (api_error: boom)"
    fastapi = httpx.Response(422, json={"detail": [{"loc": ["body", "model"]}]}, request=request)
    assert failure(expect_status, fastapi, 400).subject.endswith("HTTP 422 (a body with keys detail)")


def test_sub_cases_whose_precondition_fails_are_not_judged():
    cases = Cases()
    with cases.case("judged"):
        pass
    with cases.case("built on another rule"), precondition("max_tokens 0 accepted", judged_by="MSG-011"):
        raise ConformanceFailure("HTTP 200", "HTTP 400: no")
    cases.check()  # the judged one holds: no failure, and a note says what was not judged
    assert take_notes() == [
        "1 of 2 sub-cases not judged (MSG-011 judges them): [built on another rule] max_tokens 0 "
        "accepted did not hold: HTTP 400: no (MSG-011 judges that)"
    ]
    alone = Cases()
    with alone.case("only"), precondition("a tool call", judged_by="TOOL-001"):
        raise ConformanceFailure("a tool_use block", "none")
    with pytest.raises(NotJudged) as skipped:
        alone.check()
    assert skipped.value.judged_by == "TOOL-001"
