"""Code execution, the server tool: containers (containers.py) and the sub-tools run in the
sandbox (executor.py). The server-tool loop (server_tools/loop.py) calls it."""

from __future__ import annotations

from .containers import Container, ContainerExpired, ContainerStore, UnknownContainer
from .executor import OFF, CodeExecutor, CodeResult
from .programmatic import Paused, StaleResults, ToolRequest

__all__ = [
    "OFF",
    "CodeExecutor",
    "CodeResult",
    "Container",
    "ContainerExpired",
    "ContainerStore",
    "Paused",
    "StaleResults",
    "ToolRequest",
    "UnknownContainer",
]
