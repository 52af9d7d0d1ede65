"""Shared checks. Each raises a structured `ConformanceFailure` (Expected / Actual) that the
plugin turns into a verdict with evidence; properties contain no bare asserts."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from conformance import schemas

__all__ = [
    "ERROR_STATUS",
    "ConformanceFailure",
    "Unsupported",
    "expect",
    "expect_equal",
    "expect_error",
    "expect_json",
    "expect_no_schema_errors",
    "expect_status",
    "json_body",
]

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


def expect_error(
    response: httpx.Response, status: int | Iterable[int], error_type: str | None
) -> Mapping[str, Any]:
    """An Anthropic error: the status, a JSON envelope `{"type":"error","error":{"type",
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
