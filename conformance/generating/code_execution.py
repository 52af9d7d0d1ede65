"""Requests that make a target run code (the code execution server tool), whatever its model:
a turn paused before the target ran a call, sent back with the call at its end (the target runs
it first, as it does a `pause_turn` sent back), so the command is the harness's own and its
output is known; and the documented codes of each sub-tool's error block."""

from __future__ import annotations

from typing import Any

from conformance.wire.drivers import message_body
from conformance.wire.target import Target

__all__ = [
    "BASH_ERROR_CODES",
    "CODE_EXECUTION",
    "CODE_EXECUTION_STATEFUL",
    "EDITOR_ERROR_CODES",
    "PAUSED_MAX_TOKENS",
    "PYTHON_ERROR_CODES",
    "paused_call",
]

# The version every current model takes (bash and the text editor; code-execution-tool docs).
CODE_EXECUTION = {"type": "code_execution_20250825", "name": "code_execution"}
# A version whose Python keeps its state between calls in a container (SDK 2.17's 2026 types).
CODE_EXECUTION_STATEFUL = {"type": "code_execution_20260120", "name": "code_execution"}
# Error codes each result block may carry (code-execution-tool docs, "Errors"; the SDK's enums).
PYTHON_ERROR_CODES = frozenset(
    {"invalid_tool_input", "unavailable", "too_many_requests", "execution_time_exceeded"}
)
BASH_ERROR_CODES = PYTHON_ERROR_CODES | {"output_file_too_large"}
EDITOR_ERROR_CODES = PYTHON_ERROR_CODES | {"file_not_found"}
PAUSED_MAX_TOKENS = 32  # the answer after the call is not judged


def paused_call(
    target: Target,
    name: str,
    tool_input: dict[str, Any],
    tool_id: str,
    tool: dict[str, Any] = CODE_EXECUTION,
    **changes: Any,
) -> dict[str, Any]:
    """A request whose last assistant message ends with a `server_tool_use` of sub-tool `name`
    (`bash_code_execution`, `text_editor_code_execution`, `code_execution`: Python) of the code
    execution `tool` not yet answered."""
    call = {"type": "server_tool_use", "id": tool_id, "name": name, "input": tool_input}
    messages = [
        {"role": "user", "content": "Run this in the code execution container."},
        {"role": "assistant", "content": [call]},
    ]
    return message_body(target, max_tokens=PAUSED_MAX_TOKENS, tools=[tool], messages=messages, **changes)
