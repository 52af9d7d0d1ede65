"""What the prompt cache decides when a generation is admitted (`CachePlan`), and what it is made
of: breakpoints (`CachePoint`) and stored prefixes (`Entry`). jobs.py carries a plan on each
`Job`, prefix_cache.py makes and fulfils them. A leaf: no MLX, and it imports neither of those,
so both read top-down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .base import CacheTTL, PromptUsage

__all__ = ["CachePlan", "CachePoint", "Entry"]


@dataclass(frozen=True, slots=True)
class CachePoint:
    """A breakpoint at a token position of the prompt."""

    position: int
    ttl: CacheTTL


@dataclass(eq=False)
class Entry:
    """The KV state of `tokens` (per layer: keys, values of shape (1, heads, len, dim))."""

    tokens: tuple[int, ...]
    kv: list[tuple[Any, Any]]
    nbytes: int
    last_used: float
    # Monotonic time until which a breakpoint's write keeps it readable; 0 = never written by one.
    written_until: float = 0.0
    pins: int = 0
    scope: str = ""  # only requests of this cache scope read or reuse it


@dataclass(slots=True)
class CachePlan:
    """What admitting a prompt decided: the usage to report, the entry lent (pinned) and how
    much of it to use, and the breakpoint prefixes the worker is to write."""

    usage: PromptUsage
    reuse: Entry | None = None
    reuse_tokens: int = 0
    writes: list[CachePoint] = field(default_factory=list)
