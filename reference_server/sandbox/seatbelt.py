"""The macOS sandbox profile (`sandbox-exec -p`): deny by default, as Anthropic's
sandbox-runtime does; read the runtime, read and write the run's directory and temporary files,
no network unless the policy opens it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .policy import Policy

__all__ = ["seatbelt_profile"]

# What any process needs to start on macOS (the dynamic linker's caches, system frameworks).
_SYSTEM = (
    "/usr",
    "/bin",
    "/System",
    "/Library/Frameworks",
    "/private/var/db/dyld",
    "/dev/null",
    "/dev/urandom",
)


def _quote(path: Path | str) -> str:
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def seatbelt_profile(policy: Policy, runtime: Sequence[Path]) -> str:
    reads: list[Path | str] = [*_SYSTEM, *runtime, *policy.read_only]
    lines = [
        "(version 1)",
        "(deny default)",
        "(allow process-fork)",
        "(allow process-exec)",
        "(allow signal (target same-sandbox))",
        "(allow sysctl-read)",
        "(allow file-read-metadata)",
        "(allow file-read* " + " ".join(f"(subpath {_quote(p)})" for p in reads) + ")",
        f"(allow file-read* file-write* (subpath {_quote(policy.workdir.resolve())})"
        ' (subpath "/private/tmp"))',
    ]
    lines.append("(allow network*)" if policy.network else "(deny network*)")
    return "\n".join(lines)
