"""What a request's server tools need during its turn (`ServerToolPlan`): serving builds it,
prepared.py carries it, the server-tool loop (loop.py) reads it. A leaf: it imports none of
those, so they all read top-down.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reference_server.code_execution.containers import Container
from reference_server.protocol import ServerToolResultBlock
from reference_server.tools.definitions import ToolDefinition
from reference_server.workspaces.keys import DEFAULT_WORKSPACE

from .pieces import ProgrammaticCall

__all__ = ["ServerToolPlan"]


@dataclass(frozen=True, slots=True)
class ServerToolPlan:
    """What a request's server tools need during its turn."""

    tools: tuple[ToolDefinition, ...]  # every tool of the request
    loaded: frozenset[str]  # deferred tools found earlier in the conversation
    parallel: bool
    output_schema: Mapping[str, Any] | None
    context_window: int
    # The result of a server_tool_use the client sent back unanswered (a turn paused before the
    # server ran it): run before generating, shown first. (tool name, result block)
    resumed: tuple[tuple[str, ServerToolResultBlock], ...] = ()
    documents: int = 0  # the request's documents: a page fetched to cite is numbered after them
    special: frozenset[str] = frozenset()  # the call tags the model holds as one token (ModelCard)
    # The code execution container the request named (checked to exist); None: one is made at
    # the turn's first call of a code execution sub-tool.
    container: Container | None = None
    workspace: str = DEFAULT_WORKSPACE  # the request's: a container made for it is this one's
    # Code prepare resumed (or ran) called client tools again: the answer is these calls, with
    # no generation (programmatic tool calling).
    paused: tuple[ProgrammaticCall, ...] = ()

    def tool(self, name: str) -> ToolDefinition | None:
        return next((tool for tool in self.tools if tool.name == name), None)

    def callable(self, loaded: set[str]) -> tuple[ToolDefinition, ...]:
        """The tools a later generation of the turn may call: deferred ones once found."""
        return tuple(t for t in self.tools if not t.deferred or t.name in loaded)
