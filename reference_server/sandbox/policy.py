"""What a sandboxed run may do (`Policy`, `Limits`) and what it did (`Completed`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["EGRESS_PORT", "EGRESS_SOCKET", "Completed", "Limits", "Policy", "SandboxUnavailable"]

# Where a container's directory appears inside the sandbox (its working directory and HOME).
WORKSPACE = "/workspace"
# Where the egress proxy's socket is inside the sandbox, and the loopback port serving it.
EGRESS_SOCKET = "/run/plumbline-egress.sock"
EGRESS_PORT = 3128


class SandboxUnavailable(RuntimeError):
    """No sandbox can run on this host; the message says why."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds of one run. Every one is enforced by the kernel (rlimits) or by the runner."""

    wall_s: float = 60.0  # then every process of the run is killed
    cpu_s: int = 60  # RLIMIT_CPU, per process
    memory_bytes: int = 2 << 30  # RLIMIT_AS, per process
    processes: int = 64  # RLIMIT_NPROC: processes and threads of the run's own user
    file_bytes: int = 256 << 20  # RLIMIT_FSIZE: the largest file a process may write
    output_bytes: int = 1 << 20  # stdout and stderr, each; past it the run is stopped
    # A container's files in all (code_execution/executor.py watches it: past it the run is
    # stopped, and a run starts with no file larger than the room left).
    disk_bytes: int = 1 << 30
    tmp_bytes: int = 256 << 20  # the run's own /tmp (memory: a tmpfs of this size, bubblewrap)


@dataclass(frozen=True, slots=True)
class Policy:
    """What one run sees: `workdir` read-write at WORKSPACE, `read_only` host paths at their own
    place (beside the runtime every run has), `mounts` host directories read-only at another
    path (host, path inside; bubblewrap only: `Sandbox.mounts`), the network only when
    `network` is True (an operator's choice; the tests open it to prove the refusal is the
    sandbox's)."""

    workdir: Path
    read_only: tuple[Path, ...] = ()
    mounts: tuple[tuple[Path, str], ...] = ()
    network: bool = False
    # The egress proxy's socket (egress.py): the run reaches the hosts it allows through
    # HTTP(S)_PROXY on its own loopback, and nothing else (bubblewrap only).
    egress: Path | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Completed:
    """A run's end: its output (cut at the limit) and why it ended."""

    stdout: bytes
    stderr: bytes
    return_code: int
    timed_out: bool = False  # the wall-time limit was reached and the run killed
    output_exceeded: bool = False  # stdout or stderr passed the limit and the run was stopped
    stopped: str | None = None  # why a bound the caller watched stopped it (`Running.stop`)
