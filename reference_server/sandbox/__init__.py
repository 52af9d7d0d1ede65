"""Running untrusted code: deny by default (bubblewrap on Linux, sandbox-exec on macOS).

Code execution (reference_server/code_execution/) runs every command through `Sandbox.run`: a
container's own directory is the only writable place, the host's files beyond a read-only
runtime (the system's /usr and the server's own Python) are absent, the network is off, and
CPU time, wall time, memory, processes, file size and output are bounded; when a call ends or
times out, every process it started is gone. No sandbox on this host: `find_sandbox` raises
`SandboxUnavailable` with the reason, and the tool is refused; code is never run unsandboxed.
"""

from __future__ import annotations

from .policy import Completed, Limits, Policy, SandboxUnavailable
from .runner import Running, Sandbox, find_sandbox

__all__ = ["Completed", "Limits", "Policy", "Running", "Sandbox", "SandboxUnavailable", "find_sandbox"]
