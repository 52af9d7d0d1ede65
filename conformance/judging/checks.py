"""Shared checks and accessors. Each raises a structured `ConformanceFailure` (Expected /
Actual) that the plugin turns into a verdict with evidence; properties contain no bare asserts.

Everything a property reads from the target goes through these accessors (`read`, `json_body`,
`expect_status`, ...): a missing key, a null, a wrong JSON type, a non-JSON body or an
unexpected status is the target's failure, never a `KeyError` in the suite (an ERROR)."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

import httpx

from conformance.catalogue import Level
from conformance.judging import schemas
from conformance.judging.answers import (
    answer_key,
    body_shape,
    refusal_key,
    request_label,
    request_of,
    request_route,
    status_key,
    status_subject,
)

__all__ = [
    "ERROR_STATUS",
    "GA_STOP_REASONS",
    "Breakage",
    "Cases",
    "ConformanceFailure",
    "NotJudged",
    "Unsupported",
    "body_shape",
    "expect",
    "expect_envelope",
    "expect_equal",
    "expect_error",
    "expect_id_prefix",
    "expect_json",
    "expect_no_schema_errors",
    "expect_status",
    "expect_stop",
    "json_body",
    "json_object",
    "not_judged",
    "note",
    "precondition",
    "read",
    "read_optional",
    "request_label",
    "status_key",
    "status_subject",
    "stop_reason",
    "take_notes",
]

# The GA stop reasons (SDK types/stop_reason.py); model_context_window_exceeded is GA since 0.119.
GA_STOP_REASONS = frozenset(
    {
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
    }
)

# The documented status for each wire error type (errors page, "HTTP errors").
ERROR_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "conflict_error": 409,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


@dataclass(frozen=True, slots=True)
class Breakage:
    """One broken rule: a property's, or one of its sub-cases' (`case`). `subject` says what the
    target did, in words every property it broke shares (the reports group failures by it);
    `key`, where the check knows better than those words, what groups it (an answer's route,
    status and normalised message, whatever the transport; the request that should have been
    refused), never shown."""

    expected: str
    actual: str
    reason: str
    subject: str | None = None
    case: str | None = None
    level: Level | None = None  # a sub-case weaker than its property (a SHOULD inside a MUST)
    key: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        return {
            "case": self.case,
            "level": None if self.level is None else self.level.value,
            "expected": self.expected,
            "actual": self.actual,
            "reason": self.reason,
            "subject": self.subject,
            "key": self.key,
        }


class ConformanceFailure(AssertionError):
    """The target broke the property. `reason` is a short machine-readable code; `subject` what
    the target did (for grouping causes) and `key` what groups it where the words do not
    (Breakage.key); `subcases` every broken sub-case, when there are some."""

    def __init__(
        self,
        expected: str,
        actual: str,
        *,
        reason: str = "mismatch",
        subject: str | None = None,
        subcases: Iterable[Breakage] = (),
        level: Level | None = None,
        key: str | None = None,
    ) -> None:
        super().__init__(f"Expected: {expected}\nActual:   {actual}")
        self.expected = expected
        self.actual = actual
        self.reason = reason
        self.subject = subject
        self.key = key
        self.subcases = tuple(subcases)
        self.level = level  # None: the property's own level

    def breakages(self) -> list[Breakage]:
        """Each broken rule on its own: the sub-cases, or the failure itself."""
        if self.subcases:
            return list(self.subcases)
        return [
            Breakage(self.expected, self.actual, self.reason, self.subject, level=self.level, key=self.key)
        ]

    def strongest(self, level: Level) -> Level:
        """The strongest level broken, for a property of `level`: a MUST property whose broken
        sub-cases are all SHOULDs is broken as a SHOULD (a WARN)."""
        broken = {b.level or level for b in self.breakages()}
        return next(rank for rank in (Level.MUST, Level.SHOULD, Level.MAY) if rank in broken)


class Unsupported(Exception):
    """The target declares (or shows) that an optional feature is absent."""


class NotJudged(Exception):
    """The property cannot be judged on this target: what it builds on did not hold. That is
    the rule of another property (`judged_by`), which gives the verdict; this one is SKIP."""

    def __init__(self, reason: str, judged_by: str | None = None) -> None:
        super().__init__(reason if judged_by is None else f"{reason} ({judged_by} judges that)")
        self.reason = reason
        self.judged_by = judged_by


def not_judged(reason: str, *, judged_by: str | None = None) -> NoReturn:
    raise NotJudged(reason, judged_by)


@contextlib.contextmanager
def precondition(what: str, *, judged_by: str) -> Iterator[None]:
    """What the property builds on, judged by another property: a failure inside is not this
    property's (SKIP, naming `judged_by`), so one cause is one failure."""
    try:
        yield
    except ConformanceFailure as failure:
        raise NotJudged(f"{what} did not hold: {_first(failure.actual)}", judged_by) from None


def _first(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


# Notes of the running property (a sub-case not judged, ...): the plugin takes them per property.
_NOTES: list[str] = []


def note(text: str) -> None:
    """Say something about the running property's verdict (shown with it, even on a PASS)."""
    _NOTES.append(text)


def take_notes() -> list[str]:
    taken = list(_NOTES)
    _NOTES.clear()
    return taken


def _short(value: Any, limit: int = 400) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"


def expect(
    condition: bool,
    expected: str,
    actual: Any,
    *,
    reason: str = "mismatch",
    subject: str | None = None,
    key: str | None = None,
) -> None:
    if not condition:
        raise ConformanceFailure(expected, _short(actual), reason=reason, subject=subject, key=key)


def expect_equal(
    actual: Any, wanted: Any, what: str, *, reason: str = "mismatch", subject: str | None = None
) -> None:
    if actual != wanted:
        expected = f"{what} == {_short(wanted)}"
        raise ConformanceFailure(expected, _short(actual), reason=reason, subject=subject)


def expect_id_prefix(value: str, prefix: str, what: str) -> None:
    """An id with its documented prefix (`msg_`, `toolu_`, `msgbatch_`, `req_`)."""
    expect(
        value.startswith(prefix),
        f"{what} starting with {prefix}",
        value,
        reason="id-prefix",
        subject=f"ids without their documented {prefix} prefix ({value[:12]}…)",
    )


def expect_status(response: httpx.Response, wanted: int | Iterable[int]) -> None:
    allowed = {wanted} if isinstance(wanted, int) else set(wanted)
    status = response.status_code
    if status not in allowed:
        refusal = bool(allowed) and 400 <= min(allowed) < 500
        if refusal and status // 100 in (2, 5):
            # Not refused (verdicts: answered, or crashed on): keyed by what was sent.
            key = refusal_key(request_of(response))
        elif refusal and status // 100 == 4 and status not in (404, 405):
            # Refused, with another status: the message says what is wrong with each request
            # (one per property); the status a refusal gets instead of the documented one is
            # the cause (a 422 for every validation error), so it is keyed without the words.
            route = request_route(request_of(response))
            documented = " or ".join(map(str, sorted(allowed)))
            key = f"{answer_key(route, status, response.content, words=False)} for HTTP {documented}"
        else:
            key = status_key(response)
        raise ConformanceFailure(
            f"HTTP status {' or '.join(map(str, sorted(allowed)))}",
            f"HTTP {response.status_code}: {_short(response.text)}",
            reason="wrong-status",
            subject=status_subject(response),
            key=key,
        )


def json_body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ConformanceFailure(
            "a JSON body",
            _short(response.text or "<empty body>"),
            reason="not-json",
            subject=f"{request_label(request_of(response))} answered HTTP {response.status_code} "
            f"with {body_shape(response)}",
            key=status_key(response),
        ) from None


def json_object(response: httpx.Response, what: str) -> dict[str, Any]:
    """The body as a JSON object (any other JSON value is the target's failure)."""
    body = json_body(response)
    if not isinstance(body, dict):
        raise ConformanceFailure(
            f"{what}: a JSON object", _short(body), reason="wrong-type", subject=f"{what} is not an object"
        )
    return body


def expect_json(response: httpx.Response) -> Any:
    """Content-Type application/json (parameters ignored) and a JSON body."""
    media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    expect(
        media == "application/json",
        "Content-Type: application/json",
        media or "<no content-type>",
        reason="content-type",
        subject=f"{request_label(request_of(response))} answered Content-Type {media or 'none'}",
    )
    return json_body(response)


def expect_no_schema_errors(errors: list[schemas.SchemaError], what: str) -> None:
    """No schema error; a newer field left out (schemas.NEWER_FIELDS: required by the schema,
    optional in the official SDKs) is a SHOULD sub-case of its own, one per field."""
    if not errors:
        return
    newer = {error: schemas.newer_field(error) for error in errors}
    older = [error for error, field in newer.items() if field is None]
    breakages = []
    if older:
        details = "; ".join(str(error) for error in older[:5])
        breakages.append(
            Breakage(f"{what} valid against schemas/", details, "schema", subject=f"{what}: {older[0]}")
        )
    for field in dict.fromkeys(f for f in newer.values() if f is not None):
        missing = [error for error, name in newer.items() if name == field]
        breakages.append(
            Breakage(
                f"{what}: `{field}` where the schema requires it ({schemas.NEWER_FIELDS[field]}; the "
                "official SDKs read it as optional)",
                "; ".join(str(error) for error in missing[:5]),
                "schema",
                subject=f"`{field}` left out (a newer field the official SDKs read as optional)",
                case=f"the newer field {field}",
                level=Level.SHOULD,
            )
        )
    first = breakages[0]
    raise ConformanceFailure(
        first.expected,
        first.actual,
        reason="schema",
        subject=first.subject,
        subcases=breakages if len(older) < len(errors) else (),
    )


# ------------------------------------------------------------------ accessors

_MISSING = object()
_JSON_TYPES: dict[type, str] = {
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    dict: "an object",
    list: "an array",
}


def _json_type_name(value: Any) -> str:
    if value is None:
        return "null"
    for kind, name in _JSON_TYPES.items():
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _is(value: Any, kind: type) -> bool:
    if kind is object:
        return True
    if kind in (int, float) and isinstance(value, bool):
        return False  # JSON true is not a number
    if kind is float:
        return isinstance(value, int | float)
    return isinstance(value, kind)


def _walk(data: Any, path: str) -> Any:
    """The value at a dotted path (`usage.output_tokens`, `content.0.text`), or _MISSING."""
    value = data
    for key in path.split("."):
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return _MISSING
    return value


def read(data: Any, path: str, kind: type = object, *, where: str, nullable: bool = False) -> Any:
    """The target's value at `path` in `data` (`where` names it for the report). A missing key,
    a null (unless `nullable`) or another JSON type than `kind` is the target's failure."""
    wanted = _JSON_TYPES.get(kind, "a value") + (" or null" if nullable else "")
    value = _walk(data, path)
    if value is _MISSING:
        raise ConformanceFailure(
            f"{where} with `{path}` ({wanted})",
            f"no `{path}`",
            reason="missing-field",
            subject=f"{where} has no `{_generic(path)}`",
        )
    if value is None and nullable:
        return None
    if value is None or not _is(value, kind):
        raise ConformanceFailure(
            f"{where}: `{path}` {wanted}",
            f"`{path}` is {_json_type_name(value)}: {_short(json.dumps(value, default=str), 120)}",
            reason="wrong-type",
            subject=f"{where}: `{_generic(path)}` is {_json_type_name(value)}",
        )
    return value


def _generic(path: str) -> str:
    """`content.0.text` -> `content[].text`: the field, whichever element broke it."""
    return re.sub(r"\.(\d+)(?=\.|$)", "[]", path)


def read_optional(data: Any, path: str, kind: type = object, *, where: str, default: Any = None) -> Any:
    """Like `read`, but a missing key or a null gives `default`: for fields whose presence the
    schema properties judge, so this property judges only its own rule."""
    value = _walk(data, path)
    if value is _MISSING or value is None:
        return default
    return read(data, path, kind, where=where)


def stop_reason(data: Any, path: str = "stop_reason", *, where: str) -> str:
    """A stop_reason the suite sees anywhere: a string, and one of the documented values."""
    value: str = read(data, path, str, where=where)
    expect(
        value in GA_STOP_REASONS,
        f"{where}: `{path}` one of {sorted(GA_STOP_REASONS)}",
        value,
        reason="stop-reason",
        subject=f"stop_reason {value!r}, not a documented value",
    )
    return value


def expect_stop(got: str, wanted: str, what: str = "stop_reason") -> None:
    """The stop reason a turn must report, named by the case: "a stop sequence hit reported as
    end_turn" is one cause wherever it shows (plain, streamed, any property)."""
    cases = {
        "stop_sequence": "a stop sequence hit",
        "max_tokens": "a max_tokens cut",
        "tool_use": "a tool call",
    }
    cases["end_turn"] = "a natural end"
    expect_equal(
        got, wanted, what, reason="stop-reason", subject=f"{cases.get(wanted, wanted)} reported as {got}"
    )


class Cases:
    """Independent sub-cases of one property: every broken one is reported, not only the first.

    cases = Cases()
    for field in ("model", "messages"):
        with cases.case(f"missing {field}"):
            ...
    cases.check()

    A sub-case whose precondition fails (`precondition`, `not_judged`) is not judged: the
    others still are, and the property is SKIP only when none could be.
    """

    def __init__(self) -> None:
        self.broken: list[tuple[str, ConformanceFailure]] = []
        self.unjudged: list[tuple[str, NotJudged]] = []
        self.count = 0

    @contextlib.contextmanager
    def case(self, name: str, *, level: Level | None = None) -> Iterator[None]:
        """One sub-case; `level` makes it weaker than the property (a SHOULD clause of a MUST:
        the docs show it by example, or the live API was only observed doing it)."""
        self.count += 1
        try:
            yield
        except ConformanceFailure as failure:
            if level is not None and failure.level is None:
                failure.level = level
            self.broken.append((name, failure))
        except NotJudged as skipped:
            self.unjudged.append((name, skipped))

    def check(self) -> None:
        unjudged = "; ".join(f"[{name}] {skipped}" for name, skipped in self.unjudged)
        if self.broken:
            if len(self.broken) == 1 and self.count == 1:
                raise self.broken[0][1]
            subcases = [
                Breakage(
                    b.expected,
                    b.actual,
                    b.reason,
                    b.subject,
                    f"{name} / {b.case}" if b.case else name,
                    b.level or failure.level,
                    b.key,
                )
                for name, failure in self.broken
                for b in failure.breakages()
            ]
            expected = "\n".join(f"[{b.case}] {b.expected}" for b in subcases)
            actual = "\n".join(f"[{b.case}] {b.actual}" for b in subcases)
            summary = f"{len(self.broken)} of {self.count} sub-cases broken"
            if self.unjudged:
                summary += f" ({len(self.unjudged)} not judged: {unjudged})"
            raise ConformanceFailure(
                f"every sub-case holds; {expected}",
                f"{summary}: {actual}",
                reason=subcases[0].reason,
                subject=subcases[0].subject,
                subcases=subcases,
                key=subcases[0].key,
            )
        if self.unjudged and len(self.unjudged) == self.count:
            first = self.unjudged[0][1]
            if self.count == 1:
                raise first
            raise NotJudged(f"no sub-case could be judged: {unjudged}", first.judged_by)
        if self.unjudged:
            judges = sorted({skipped.judged_by for _, skipped in self.unjudged if skipped.judged_by})
            by = f" ({', '.join(judges)} judges them)" if judges else ""
            note(f"{len(self.unjudged)} of {self.count} sub-cases not judged{by}: {unjudged}")


# ------------------------------------------------------------------ errors


def expect_error(response: httpx.Response, status: int | Iterable[int], error_type: str | None) -> Any:
    """The documented answer to a request the API refuses: the status, and a body in the error
    envelope (`{"type":"error","error":{"type","message"}}`) with the wanted `error.type`. The
    rest of the envelope's schema (`request_id`) is the rule of ERR-021 and ERR-023."""
    expect_status(response, status)
    body = _envelope(response)
    if error_type is not None:
        expect_equal(
            body["error"].get("type"),
            error_type,
            "error.type",
            reason="error-type",
            subject=f"HTTP {response.status_code} with error.type {body['error'].get('type')!r}",
        )
    return body


def _envelope(response: httpx.Response) -> dict[str, Any]:
    """The error body as the docs shape it: a JSON object with type "error" and an `error`
    object holding a string `type` and `message`."""
    body = json_body(response)
    inner = body.get("error") if isinstance(body, dict) else None
    expect(
        isinstance(body, dict)
        and body.get("type") == "error"
        and isinstance(inner, dict)
        and isinstance(inner.get("type"), str)
        and isinstance(inner.get("message"), str),
        'an error envelope {"type":"error","error":{"type","message"}}',
        body,
        reason="envelope",
        # The envelope is the cause, whatever each error says: keyed by the body's shape alone.
        subject=f"an error answered with {body_shape(response, words=False)}, not the Anthropic envelope",
    )
    return body  # type: ignore[no-any-return]


def expect_envelope(
    response: httpx.Response, status: int | Iterable[int], error_type: str | None
) -> dict[str, Any]:
    """An Anthropic error in full: the status, Content-Type application/json, the envelope valid
    against the schema (`request_id` included), and the wanted `error.type`."""
    expect_status(response, status)
    expect_json(response)
    body: dict[str, Any] = expect_error(response, response.status_code, error_type)
    expect_no_schema_errors(schemas.validate_error(body), "the error envelope")
    return body
