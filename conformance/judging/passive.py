"""Judged from what a whole run meets: the error statuses the suite cannot provoke.

A target answers 429 (rate limited), 500 (its own fault), 504 (a timeout) and 529 (overloaded)
when it must, not when asked, so no property can send a request that gets one. But a run sends
hundreds of requests, and a target that meets trouble during it answers them. Every exchange of
every property is looked at where it was made (the process that ran the property): each of those
statuses is judged against the documented error for it (the envelope, and the error type the
errors page gives that status), and what was found rides on the property's test report. The
passive property (ERR-031, `@prop(passive=True)`) gets its verdict last, in the process that
gives the verdicts, from everything met: FAIL when one was not the documented error, PASS when
some were met and all were, else its own result (SKIP: none met).

One cause, one failure: an error met by a property that wanted that request refused with a 4xx,
and FAILed or WARNed because it got this status instead, is that property's finding (a 500 for a
request without a key is AUTH-001's); the passive property judges the others, and where those
were all, it is SKIP naming the first.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from conformance.judging.verdicts import Result, Verdict, breakages_of, expects_refusal
from conformance.wire.target import Exchange

__all__ = ["DOCUMENTED_TYPES", "MetError", "errors_met", "judge_met", "owned", "problem_of"]

# docs: api/errors#http-errors — the status, and the error type its body carries.
DOCUMENTED_TYPES = {429: "rate_limit_error", 500: "api_error", 504: "timeout_error", 529: "overloaded_error"}


@dataclass(frozen=True)
class MetError:
    """One of those statuses, as a property met it: `problem` is None when it was documented."""

    property_id: str | None
    status: int
    problem: str | None
    evidence: dict[str, Any] = field(default_factory=dict)
    owned: bool = False  # the property that met it failed on it: its finding, not the passive one's

    def as_wire(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> MetError:
        return cls(**data)


def problem_of(status: int, body: bytes) -> str | None:
    """What is wrong with an error answer of `status`, or None: the envelope
    {"type": "error", "error": {"type": <the status's>, "message": <string>}}."""
    expected = DOCUMENTED_TYPES[status]
    try:
        data = json.loads(body)
    except ValueError:
        return f"the body is not JSON: {body[:120]!r}"
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("type") != "error" or not isinstance(error, dict):
        shown = json.dumps(data)[:200]
        return f'the body is not the error envelope {{"type": "error", "error": {{...}}}}: {shown}'
    if error.get("type") != expected:
        return f"error.type is {error.get('type')!r}, where HTTP {status} is {expected!r}"
    if not isinstance(error.get("message"), str):
        return f"error.message is not a string: {error.get('message')!r}"
    return None


def errors_met(property_id: str | None, exchanges: Iterable[Exchange]) -> list[MetError]:
    """Each answer among `exchanges` with one of the statuses, judged."""
    return [
        MetError(
            property_id,
            exchange.status,
            problem := problem_of(exchange.status, bytes(exchange.response_body)),
            exchange.as_evidence() if problem else {},
        )
        for exchange in exchanges
        if exchange.status in DOCUMENTED_TYPES
    ]


def owned(met: Sequence[MetError], result: Result) -> list[MetError]:
    """`met` (what `result`'s property met), each error marked as the property's own where its
    failure is that the request, which it wanted refused with a 4xx, got this status instead
    (a 500 for a request without a key is AUTH-001's), or that a feature's probe, which it
    judges, got it (a 500 for GET /v1/skills is SKILL-001's). A property that wanted a success
    and met a 529 leaves the 529's shape to the passive property."""
    said = " ".join(
        f"{b.get('actual')} {b.get('subject')}"
        for b in breakages_of(result)
        if expects_refusal(b) or b.get("reason") == "feature-probe"
    )
    return [replace(error, owned=f"HTTP {error.status}" in said) for error in met]


def judge_met(own: Result, met: Sequence[MetError]) -> Result:
    """The passive property's verdict from everything the run met (its own result otherwise)."""
    broken = [error for error in met if error.problem is not None and not error.owned]
    theirs = [error for error in met if error.problem is not None and error.owned]
    if not broken and theirs:
        first = theirs[0]
        owners = ", ".join(dict.fromkeys(f"{e.property_id} (HTTP {e.status})" for e in theirs))
        return replace(
            own,
            verdict=Verdict.SKIP,
            message=f"the undocumented errors met were the findings of those that met them: {owners}",
            judged_by=first.property_id,
            reason=None,
            expected=None,
            actual=None,
            evidence=[],
        )
    if broken:
        first = broken[0]
        where = f"{first.property_id or 'a request'} met HTTP {first.status}"
        documented = DOCUMENTED_TYPES[first.status]
        return replace(
            own,
            verdict=Verdict.FAIL,
            reason="undocumented-error",
            expected=f"HTTP {first.status}: the error envelope with error.type {documented!r}",
            actual=f"{where}: {first.problem}",
            message=f"{len(broken)} of {len(met)} such answers met in the run were not the documented error",
            evidence=[error.evidence for error in broken[:4]],
            subject=f"HTTP {first.status}",
        )
    if met:
        statuses = sorted({e.status for e in met})
        counts = ", ".join(f"HTTP {s} {sum(e.status == s for e in met)} times" for s in statuses)
        return replace(
            own,
            verdict=Verdict.PASS,
            message=f"met in the run: {counts}, each the documented error",
            reason=None,
            expected=None,
            actual=None,
            evidence=[],
        )
    return own
