"""What a code execution call's answer must hold, for the properties that send one (CODE-*,
SKILL-004): the result block answering the call, its documented error codes, bash's and
Python's results, what a run printed."""

from __future__ import annotations

import re
from typing import Any

from conformance.generating.code_execution import BASH_ERROR_CODES, PYTHON_ERROR_CODES
from conformance.judging.checks import expect, expect_equal, read

__all__ = [
    "MESSAGE",
    "RFC3339",
    "documented_error",
    "expect_bash_result",
    "expect_printed",
    "expect_python_result",
    "result_for",
]

MESSAGE = "the Message"
# RFC 3339, as the API's timestamps (a date, T, a time, an offset or Z).
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def result_for(message: Any, tool_id: str, kind: str) -> dict[str, Any]:
    """The result block of type `kind` that answers the call `tool_id` sent back."""
    content = read(message, "content", list, where=MESSAGE)
    answers = [b for b in content if isinstance(b, dict) and b.get("tool_use_id") == tool_id]
    kinds = [b.get("type") for b in content if isinstance(b, dict)]
    expect(
        len(answers) == 1,
        f"one result block answering the call sent back ({tool_id})",
        f"{len(answers)} blocks with that tool_use_id; content types {kinds}",
        reason="unanswered",
    )
    expect_equal(answers[0].get("type"), kind, "the result block's type", reason="result-type")
    result: dict[str, Any] = read(answers[0], "content", dict, where=f"a {kind}")
    return result


def documented_error(result: dict[str, Any], tool: str, codes: frozenset[str]) -> str:
    """The type of a `<tool>_tool_result`'s content; when it is the error, its error_code must be
    one of `codes` (the documented ones)."""
    kind: str = read(result, "type", str, where=f"a {tool}_tool_result's content")
    if kind == f"{tool}_tool_result_error":
        code = read(result, "error_code", str, where=f"a {tool}_tool_result_error")
        expect(
            code in codes,
            f"a documented error_code ({', '.join(sorted(codes))})",
            code,
            reason="error-code",
        )
    return kind


def _expect_ran(result: dict[str, Any], tool: str, codes: frozenset[str]) -> dict[str, Any] | None:
    """A `<tool>_tool_result`'s content: a `<tool>_result` with its fields, or an error with a
    documented code (None)."""
    kind = documented_error(result, tool, codes)
    if kind == f"{tool}_tool_result_error":
        return None
    expect_equal(kind, f"{tool}_result", "the content's type", reason="content-type")
    for field, kind_of in (("stdout", str), ("stderr", str), ("return_code", int), ("content", list)):
        read(result, field, kind_of, where=f"a {tool}_result")
    return result


def expect_bash_result(result: dict[str, Any]) -> dict[str, Any] | None:
    """A bash_code_execution_tool_result's content: a result with its fields, or an error with
    a documented code (None)."""
    return _expect_ran(result, "bash_code_execution", BASH_ERROR_CODES)


def expect_python_result(result: dict[str, Any]) -> dict[str, Any] | None:
    """A code_execution_tool_result's content: a result with its fields, or an error with a
    documented code (None)."""
    return _expect_ran(result, "code_execution", PYTHON_ERROR_CODES)


def expect_printed(found: dict[str, Any] | None, stdout: str, what: str, reason: str) -> None:
    """A run's result (None: an error) printed exactly `stdout`."""
    expect(
        found is not None and found["stdout"] == stdout,
        what,
        found if found is None else {k: found[k] for k in ("stdout", "stderr", "return_code")},
        reason=reason,
    )
