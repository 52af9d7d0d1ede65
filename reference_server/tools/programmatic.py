"""Programmatic tool calling, the tools' side: who may call a tool (`allowed_callers`).

A custom tool is called by the model (`direct`, the default), by code (a code execution
version), or both. A tool code may call becomes an async function of the code execution tool's
Python (code_execution/repl_main.py), described to the model in that tool's description; a tool
only code may call is not offered to the model at all. Code calls tools in the versions whose
Python keeps its state (20260120, 20260521: the docs' "requires code_execution_20260120 or
later"); `code_execution_20250825` runs bash and the text editor here, no Python.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from reference_server.engine.base import ToolSpec
from reference_server.errors import InvalidRequestError
from reference_server.server_tools.definitions import STATEFUL_CODE_TYPES

__all__ = ["DIRECT", "allowed_callers", "code_description", "code_versions"]

DIRECT = "direct"


def allowed_callers(raw: Mapping[str, Any], path: str, *, custom: bool) -> frozenset[str]:
    """A tool's callers (`direct` when it names none). Code calls custom tools only: another
    tool that code alone may call is a 400 (offering it to the model would do what the client
    ruled out)."""
    callers = raw.get("allowed_callers")
    if not isinstance(callers, list):
        return frozenset({DIRECT})  # absent; a wrong type is the schema's 400
    if not callers:
        raise InvalidRequestError(f"{path}.allowed_callers: at least one caller is required")
    found = frozenset(str(caller) for caller in callers)
    if not custom and DIRECT not in found:
        raise InvalidRequestError(
            f"{path}.allowed_callers: programmatic tool calling (a tool called from code execution"
            f' only: {callers}) is served for custom tools; list "direct" to offer this tool to the'
            " model"
        )
    return found


def code_versions(callers: Collection[str], versions: Collection[str], path: str) -> frozenset[str]:
    """The request's code execution versions whose code may call a tool with these callers; a
    400 when a caller names none of them."""
    served: set[str] = set()
    for caller in sorted(set(callers) - {DIRECT}):
        if caller not in STATEFUL_CODE_TYPES:
            raise InvalidRequestError(
                f"{path}: {caller!r}: programmatic tool calling is served with "
                f"{' and '.join(sorted(STATEFUL_CODE_TYPES))} (their Python calls the tools; this"
                " server's code_execution_20250825 runs bash and the text editor only)"
            )
        found = {version for version in versions if version in STATEFUL_CODE_TYPES}
        if not found:
            raise InvalidRequestError(
                f"{path}: {caller!r} names a code execution tool this request does not have (add"
                f' {{"type": "{caller}", "name": "code_execution"}} to `tools`)'
            )
        served |= found
    return frozenset(served)


def code_description(base: str, tools: Sequence[ToolSpec]) -> str:
    """The Python sub-tool's description with the client tools its code may call."""
    listed = "\n".join(
        f"- {_function(tool.name)}(input: dict) -> str: {tool.description or tool.name}. Input schema: "
        f"{json.dumps(dict(tool.parameters), ensure_ascii=False)}"
        for tool in tools
    )
    return (
        f"{base} The code may call these tools as async functions: each takes one dict (the tool's"
        " input) and returns the tool's result as text; `await` them at the top level, and"
        " `asyncio.gather` several at once:\n" + listed
    )


def _function(name: str) -> str:
    return name.replace("-", "_")  # what repl_main.py defines
