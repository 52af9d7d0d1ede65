"""Shared checks and accessors. Each raises a structured `ConformanceFailure` (Expected /
Actual) that the plugin turns into a verdict with evidence; properties contain no bare asserts.

Everything a property reads from the target goes through these accessors (`read`, `json_body`,
`expect_status`, ...): a missing key, a null, a wrong JSON type, a non-JSON body or an
unexpected status is the target's failure, never a `KeyError` in the suite (an ERROR)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

import httpx

from conformance import schemas

__all__ = [
    "ERROR_STATUS",
    "GA_STOP_REASONS",
    "Cases",
    "ConformanceFailure",
    "Unsupported",
    "expect",
    "expect_envelope",
    "expect_equal",
    "expect_error",
    "expect_json",
    "expect_no_schema_errors",
    "expect_status",
    "json_body",
    "json_object",
    "read",
    "read_optional",
    "stop_reason",
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
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


class ConformanceFailure(AssertionError):
    """The target broke the property. `reason` is a short machine-readable code."""

    def __init__(self, expected: str, actual: str, *, reason: str = "mismatch") -> None:
        super().__init__(f"Expected: {expected}\nActual:   {actual}")
        self.expected = expected
        self.actual = actual
        self.reason = reason


class Unsupported(Exception):
    """The target declares (or shows) that an optional feature is absent."""


def _short(value: Any, limit: int = 400) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"


def expect(condition: bool, expected: str, actual: Any, *, reason: str = "mismatch") -> None:
    if not condition:
        raise ConformanceFailure(expected, _short(actual), reason=reason)


def expect_equal(actual: Any, wanted: Any, what: str, *, reason: str = "mismatch") -> None:
    if actual != wanted:
        raise ConformanceFailure(f"{what} == {_short(wanted)}", _short(actual), reason=reason)


def expect_status(response: httpx.Response, wanted: int | Iterable[int]) -> None:
    allowed = {wanted} if isinstance(wanted, int) else set(wanted)
    if response.status_code not in allowed:
        raise ConformanceFailure(
            f"HTTP status {' or '.join(map(str, sorted(allowed)))}",
            f"HTTP {response.status_code}: {_short(response.text)}",
            reason="wrong-status",
        )


def json_body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ConformanceFailure(
            "a JSON body", _short(response.text or "<empty body>"), reason="not-json"
        ) from None


def json_object(response: httpx.Response, what: str) -> dict[str, Any]:
    """The body as a JSON object (any other JSON value is the target's failure)."""
    body = json_body(response)
    if not isinstance(body, dict):
        raise ConformanceFailure(f"{what}: a JSON object", _short(body), reason="wrong-type")
    return body


def expect_json(response: httpx.Response) -> Any:
    """Content-Type application/json (parameters ignored) and a JSON body."""
    media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    expect(
        media == "application/json",
        "Content-Type: application/json",
        media or "<no content-type>",
        reason="content-type",
    )
    return json_body(response)


def expect_no_schema_errors(errors: list[schemas.SchemaError], what: str) -> None:
    if errors:
        details = "; ".join(str(error) for error in errors[:5])
        raise ConformanceFailure(f"{what} valid against schemas/", details, reason="schema")


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
        raise ConformanceFailure(f"{where} with `{path}` ({wanted})", f"no `{path}`", reason="missing-field")
    if value is None and nullable:
        return None
    if value is None or not _is(value, kind):
        raise ConformanceFailure(
            f"{where}: `{path}` {wanted}",
            f"`{path}` is {_json_type_name(value)}: {_short(json.dumps(value, default=str), 120)}",
            reason="wrong-type",
        )
    return value


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
    )
    return value


class Cases:
    """Independent sub-cases of one property: every broken one is reported, not only the first.

    cases = Cases()
    for field in ("model", "messages"):
        with cases.case(f"missing {field}"):
            ...
    cases.check()
    """

    def __init__(self) -> None:
        self.broken: list[tuple[str, ConformanceFailure]] = []
        self.count = 0

    @contextlib.contextmanager
    def case(self, name: str) -> Iterator[None]:
        self.count += 1
        try:
            yield
        except ConformanceFailure as failure:
            self.broken.append((name, failure))

    def check(self) -> None:
        if not self.broken:
            return
        if len(self.broken) == 1 and self.count == 1:
            raise self.broken[0][1]
        expected = "\n".join(f"[{name}] {failure.expected}" for name, failure in self.broken)
        actual = "\n".join(f"[{name}] {failure.actual}" for name, failure in self.broken)
        summary = f"{len(self.broken)} of {self.count} sub-cases broken"
        raise ConformanceFailure(
            f"every sub-case holds; {expected}", f"{summary}: {actual}", reason=self.broken[0][1].reason
        )


# ------------------------------------------------------------------ errors


def _error_type(body: Any) -> Any:
    """`error.type` wherever a body puts it (the Anthropic envelope, or an OpenAI-shaped one)."""
    inner = body.get("error") if isinstance(body, dict) else None
    return inner.get("type") if isinstance(inner, dict) else None


def expect_error(response: httpx.Response, status: int | Iterable[int], error_type: str | None) -> Any:
    """The documented answer to a request the API refuses: the status, and `error.type` where the
    body states one. The envelope itself (`{"type":"error",...,"request_id"}`, the schema) is
    judged by `expect_envelope` in the properties whose rule it is (ERR-021, ERR-023), so one
    envelope bug is one failure, not one per error property."""
    expect_status(response, status)
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    kind = _error_type(body)
    if error_type is not None and kind is not None:
        expect_equal(kind, error_type, "error.type", reason="error-type")
    return body


def expect_envelope(
    response: httpx.Response, status: int | Iterable[int], error_type: str | None
) -> dict[str, Any]:
    """An Anthropic error in full: the status, a JSON envelope `{"type":"error","error":{"type",
    "message"},"request_id"}` valid against the schema, and the wanted `error.type`."""
    expect_status(response, status)
    body = expect_json(response)
    expect(
        isinstance(body, dict) and body.get("type") == "error" and isinstance(body.get("error"), dict),
        'an error envelope {"type":"error","error":{...}}',
        body,
        reason="envelope",
    )
    expect_no_schema_errors(schemas.validate_error(body), "the error envelope")
    if error_type is not None:
        expect_equal(body["error"].get("type"), error_type, "error.type", reason="error-type")
    return body  # type: ignore[no-any-return]
