"""Running the code execution sub-tools in a container (`CodeExecutor.execute`): Python code,
bash commands and the text editor, each a sandboxed run (reference_server/sandbox/) in the
container's directory, answered with the API's result blocks.

- `code_execution` (`{code}`): the code run by the server's own Python (its packages: numpy,
  Pillow, pypdf ...) -> `code_execution_tool_result`;
- `bash_code_execution` (`{command}`): `bash -c` -> `bash_code_execution_tool_result`;
- `text_editor_code_execution` (`{command: view|create|str_replace, path, ...}`): editor_main.py
  run inside the sandbox too (a path is resolved where the code's own symlinks point, never on
  the host) -> `text_editor_code_execution_tool_result`.

Errors are the documented codes: `invalid_tool_input`, `execution_time_exceeded` (the wall-time
limit), `output_file_too_large` (bash output past the limit; Python's is cut and said so),
`file_not_found` (the editor), `unavailable` (the sandbox failed to start).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reference_server.protocol import (
    BashCodeExecutionToolResultBlock,
    CodeExecutionToolResultBlock,
    TextEditorCodeExecutionToolResultBlock,
)
from reference_server.sandbox import Completed, Limits, Policy, Sandbox

from .containers import Container, ContainerStore

__all__ = ["CodeExecutor", "CodeResult"]

CodeResult = (
    CodeExecutionToolResultBlock | BashCodeExecutionToolResultBlock | TextEditorCodeExecutionToolResultBlock
)
_EDITOR = (Path(__file__).parent / "editor_main.py").read_text(encoding="utf-8")


class CodeExecutor:
    """The server's code execution: its sandbox, its containers, the limits of one call."""

    def __init__(self, sandbox: Sandbox, containers: ContainerStore, limits: Limits | None = None) -> None:
        self.sandbox = sandbox
        self.containers = containers
        self.limits = limits or Limits()

    async def container(self, requested: str | None) -> Container:
        """The container a request names (`UnknownContainer`, `ContainerExpired`), or a new one."""
        if requested is not None:
            return await asyncio.to_thread(self.containers.use, requested)
        container = await asyncio.to_thread(self.containers.create)
        self.sandbox.claim(container.directory)
        return container

    async def execute(
        self, tool_use_id: str, name: str, arguments: Mapping[str, Any], container: Container
    ) -> CodeResult:
        """Run one call of sub-tool `name` in `container`."""
        policy = Policy(workdir=container.directory, env={"PATH": _path()})
        if name == "text_editor_code_execution":
            return await self._edit(tool_use_id, arguments, policy)
        bash = name == "bash_code_execution"
        source = arguments.get("command" if bash else "code")
        if not isinstance(source, str) or not source.strip():
            return _error(name, tool_use_id, "invalid_tool_input")
        command = ["bash", "-c", source] if bash else [sys.executable, "-c", source]
        done = await self.sandbox.run(command, policy, self.limits)
        if done.timed_out:
            return _error(name, tool_use_id, "execution_time_exceeded")
        if done.output_exceeded and bash:
            return _error(name, tool_use_id, "output_file_too_large")
        content = _ran(done, self.limits, prefix="bash_" if bash else "")
        if bash:
            return BashCodeExecutionToolResultBlock(tool_use_id=tool_use_id, content=content)
        return CodeExecutionToolResultBlock(tool_use_id=tool_use_id, content=content)

    async def _edit(self, tool_use_id: str, arguments: Mapping[str, Any], policy: Policy) -> CodeResult:
        name = "text_editor_code_execution"
        done = await self.sandbox.run(
            [sys.executable, "-I", "-S", "-c", _EDITOR],
            policy,
            self.limits,
            stdin=json.dumps(dict(arguments)).encode(),
        )
        if done.timed_out:
            return _error(name, tool_use_id, "execution_time_exceeded")
        try:
            content = json.loads(done.stdout)
        except ValueError:
            return _error(name, tool_use_id, "unavailable")
        return TextEditorCodeExecutionToolResultBlock(tool_use_id=tool_use_id, content=content)


def _path() -> str:
    # `python` in a command is the server's own interpreter (its packages), then the system's tools.
    return f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"


def _ran(done: Completed, limits: Limits, prefix: str) -> dict[str, Any]:
    stderr = done.stderr.decode("utf-8", errors="replace")
    if done.output_exceeded:
        stderr += f"\n[output past {limits.output_bytes} bytes: the run was stopped and its output cut]"
    return {
        "type": f"{prefix}code_execution_result",
        "stdout": done.stdout.decode("utf-8", errors="replace"),
        "stderr": stderr,
        "return_code": done.return_code,
        "content": [],
    }


def _error(name: str, tool_use_id: str, code: str) -> CodeResult:
    content: dict[str, str | None]
    if name == "bash_code_execution":
        content = {"type": "bash_code_execution_tool_result_error", "error_code": code}
        return BashCodeExecutionToolResultBlock(tool_use_id=tool_use_id, content=content)
    if name == "text_editor_code_execution":
        content = {
            "type": "text_editor_code_execution_tool_result_error",
            "error_code": code,
            "error_message": None,
        }
        return TextEditorCodeExecutionToolResultBlock(tool_use_id=tool_use_id, content=content)
    content = {"type": "code_execution_tool_result_error", "error_code": code}
    return CodeExecutionToolResultBlock(tool_use_id=tool_use_id, content=content)
