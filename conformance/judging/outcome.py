"""A property's outcome, judged: what its test raised becomes a verdict with its evidence.

A ConformanceFailure is the target's (FAIL for a MUST, WARN for a SHOULD, or for a MUST whose
broken sub-cases are all SHOULDs); Unsupported an absent feature; NotJudged or a skip a SKIP; an
error status or a response the SDK refuses the target's too; a connection the target closed, or
an answer that never came while it answers other requests, the target's; anything else, or a
target that cannot be reached at all, an ERROR (never the target's fault).
"""

from __future__ import annotations

import json
import traceback

import anthropic
import httpx
import httpx2
import pytest

from conformance.catalogue import Property
from conformance.judging.answers import answer_key, answer_subject, request_label, request_route
from conformance.judging.checks import ConformanceFailure, NotJudged, Unsupported, take_notes
from conformance.judging.verdicts import Result, Verdict, verdict_for_breakage
from conformance.wire.target import Target

__all__ = ["exception_line", "judge", "timed_out"]


def judge(
    prop: Property, call: pytest.CallInfo[None], report: pytest.TestReport, target: Target | None
) -> Result:
    """The verdict of one property's outcome: what it raised, read by what raised it."""
    exchanges = target.recorder.exchanges if target else []
    result = Result(prop, Verdict.PASS, call.duration, notes=take_notes())
    if report.passed:
        return result
    excinfo = call.excinfo
    if report.skipped and (excinfo is None or not isinstance(excinfo.value, Unsupported)):
        result.verdict = Verdict.SKIP
        result.message = _skip_reason(report)
        return result
    assert excinfo is not None
    exc = _root_cause(excinfo.value)
    result.evidence = [exchange.as_evidence() for exchange in exchanges[-4:]]
    broken = verdict_for_breakage(prop.level)
    if isinstance(exc, Unsupported):
        result.verdict, result.message, result.evidence = Verdict.UNSUPPORTED, str(exc), []
    elif isinstance(exc, NotJudged):
        result.verdict, result.message, result.judged_by = Verdict.SKIP, str(exc), exc.judged_by
        result.evidence = []  # the evidence is the judging property's
    elif isinstance(exc, ConformanceFailure):
        result.verdict = verdict_for_breakage(exc.strongest(prop.level))
        result.reason, result.expected, result.actual = exc.reason, exc.expected, exc.actual
        result.subject, result.key = exc.subject, exc.key
        result.subcases = [b.as_dict() for b in exc.subcases]
    elif isinstance(exc, anthropic.APIStatusError):
        result.verdict = broken
        result.reason = "unexpected-error-status"
        result.expected = "a successful response to a valid request"
        result.actual = f"HTTP {exc.status_code}: {exc.message}"
        # Named and keyed by the body the SDK read, as the raw wire's answers are: one cause
        # whichever driver met it.
        content = _sdk_body(exc)
        label = request_label(exc.request)
        result.subject = f"{answer_subject(label, exc.status_code, content)}, through the SDK"
        result.key = answer_key(request_route(exc.request), exc.status_code, content)
    elif isinstance(exc, anthropic.APIResponseValidationError):
        result.verdict = broken
        result.reason = "sdk-rejected-response"
        result.expected = "a response the official SDK (strict) accepts"
        result.actual = str(exc)[:500]
    elif (transport := _transport_error(exc)) is not None:
        _judge_transport(result, transport, broken, target)
    elif isinstance(exc, AssertionError):
        result.verdict = broken
        result.reason = "assertion"
        result.actual = str(exc)[:500]
    else:
        result.verdict = Verdict.ERROR
        result.reason = "harness"
        result.message = exception_line(exc) + "\n" + "".join(traceback.format_exception(exc)[-6:])
    return result


def _sdk_body(exc: anthropic.APIStatusError) -> bytes:
    """The body of the error answer the SDK raised for: the bytes it read, else the body it
    parsed (`exc.body`: the JSON, or the text when it was not JSON)."""
    try:
        return bytes(exc.response.content)
    except Exception:  # a response closed before it was read
        body = exc.body
        return body.encode() if isinstance(body, str) else b"" if body is None else json.dumps(body).encode()


_UNREACHABLE = (httpx.ConnectError, httpx.ConnectTimeout, httpx2.ConnectError, httpx2.ConnectTimeout)
_CLOSED = (
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
    httpx2.RemoteProtocolError,
    httpx2.ReadError,
    httpx2.WriteError,
)
_SLOW = (httpx.ReadTimeout, httpx.WriteTimeout, httpx2.ReadTimeout, httpx2.WriteTimeout)


def timed_out(exc: BaseException) -> bool:
    """Whether a property's outcome is an answer that did not come in time (a timeout verdict)."""
    exc = _root_cause(exc)
    if isinstance(exc, ConformanceFailure):
        return exc.reason == "timeout"
    return isinstance(_transport_error(exc), (*_SLOW, anthropic.APITimeoutError))


def _transport_error(exc: BaseException) -> BaseException | None:
    """The transport exception behind `exc` (the SDK wraps httpx2's in APIConnectionError)."""
    if isinstance(exc, anthropic.APIConnectionError):
        return exc.__cause__ or exc
    if isinstance(exc, httpx.TransportError | httpx2.TransportError):
        return exc
    return None


def _judge_transport(result: Result, exc: BaseException, broken: Verdict, target: Target | None) -> None:
    """A target that accepted the connection and then closed it without an answer, or that
    answers other requests but not this one in time, fails the property; a target that cannot
    be reached at all, or no longer answers anything, is an ERROR (nobody's verdict)."""
    line = exception_line(exc)
    if isinstance(exc, _CLOSED):
        result.verdict, result.reason = broken, "connection-closed"
        result.expected = "an answer to the request"
        result.actual = f"the target closed the connection without a complete answer ({line})"
    elif isinstance(exc, (*_SLOW, anthropic.APITimeoutError)) and target is not None and target.alive():
        result.verdict, result.reason = broken, "timeout"
        result.expected = f"an answer within {target.config.timeout:g} s"
        result.actual = f"no complete answer in time, while the target answers other requests ({line})"
    else:
        result.verdict, result.reason = Verdict.ERROR, "transport"
        unreachable = isinstance(exc, _UNREACHABLE)
        result.message = f"{line} ({'the target is unreachable' if unreachable else 'transport failure'})"


def exception_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _root_cause(exc: BaseException) -> BaseException:
    """Hypothesis may raise an ExceptionGroup of distinct failures: judge by the first
    conformance failure in it."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if isinstance(_root_cause(inner), ConformanceFailure):
                return _root_cause(inner)
        return _root_cause(exc.exceptions[0])
    return exc


def _skip_reason(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return str(report.longrepr or "")
