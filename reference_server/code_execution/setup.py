"""The server's code execution from its settings: the sandbox found, the containers opened."""

from __future__ import annotations

import logging

from reference_server.sandbox import SandboxUnavailable, find_sandbox
from reference_server.sandbox.egress import EgressProxy
from reference_server.server_tools.addresses import is_public
from reference_server.settings import Settings

from .containers import ContainerStore
from .executor import OFF, CodeExecutor

__all__ = ["code_executor"]

log = logging.getLogger("reference_server.code_execution")


def code_executor(settings: Settings) -> tuple[CodeExecutor | None, str]:
    """The executor, or None and why the tool is refused (off, or no sandbox on this host)."""
    if not settings.code_execution:
        return None, OFF
    try:
        sandbox = find_sandbox()
    except SandboxUnavailable as exc:
        log.warning("code execution is refused: no sandbox here: %s", exc)
        return None, f"this host has no sandbox for code execution: {exc}"
    store = ContainerStore(settings.resolved_data_dir(), idle=settings.container_idle_s)
    store.sweep()
    log.info("code execution on: %s (%s)", sandbox.kind, sandbox.program)
    egress = None
    if settings.code_execution_hosts:
        if not sandbox.mounts:  # the proxy's socket is bound into the sandbox
            log.warning("--code-execution-allow-host needs bubblewrap: code execution has no network")
        else:
            egress = EgressProxy(settings.code_execution_hosts, is_public)
    return CodeExecutor(sandbox, store, egress=egress), ""
