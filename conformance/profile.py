"""Target profiles (TOML): what a target declares about itself.

```toml
name = "my-server"                 # report directory name (default: host-port)
deterministic = true               # the same request gets identical answers (stream ≡ non-stream);
                                   # unset: probed at the start of the run; false: never judged
generated_budget_seconds = 60      # wall-clock budget of each generated-input property
baseline = "baselines/my-server.toml"  # expected failures, relative to this file
max_silence_seconds = 15           # longest gap a stream may leave without an event
batch_wait_seconds = 300           # longest wait for a Message Batch to end (BATCH-*); a batch
                                   # still processing then fails the property that waits
[features]                         # optional features: true served, false absent; a feature
                                   # not listed is read from /v1/models capabilities, or probed
tools = false
thinking = false
images = false
documents = false
batches = false
structured_outputs = false
citations = false                  # citations on documents (capabilities.citations)
context_management = false         # context_management.edits (beta), and each edit:
clear_thinking = false             #   clear_thinking_20251015
clear_tool_uses = false            #   clear_tool_uses_20250919
compaction = false                 #   compact_20260112
tool_search = false                # Anthropic's own tools: tool search (server tool),
web_fetch = false                  #   web fetch (server tool),
web_search = false                 #   web search (server tool),
builtin_tools = false              #   bash and text_editor (client tools),
computer_use = false               #   computer use (a client tool, beta),
code_execution = false             #   code execution (server tool: containers, a sandbox),
mcp = false                        #   the MCP connector (beta; the profile alone says it)
files = false                      # the Files API (beta; else probed: GET /v1/files)
skills = false                     # the Skills API (beta; else probed: GET /v1/skills)
workspaces = false                 # two workspaces' keys (else: judged when --second-api-key is given)
sampling_parameters = false        # temperature 0 taken at the version judged (else probed)
prefill = false                    # a final assistant turn continued (else probed)
rate_limits = false                # rate limits (else probed: anthropic-ratelimit-* headers)
[aliases]                          # model names the target also answers to
"claude-sonnet-4-5" = "my-model"
```
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["FEATURES", "Profile", "load_profile"]

FEATURES = (
    "tools",
    "thinking",
    "images",
    "documents",
    "batches",
    "structured_outputs",
    "citations",
    "context_management",
    "clear_thinking",
    "clear_tool_uses",
    "compaction",
    "tool_search",  # tool_search_tool_regex / _bm25 (server tools)
    "web_fetch",  # web_fetch_20250910 and later (a server tool)
    "web_search",  # web_search_20250305 and later (a server tool; needs a search provider)
    "builtin_tools",  # Anthropic-defined client tools: bash, text_editor
    "computer_use",  # computer_20250124 / _20251124 (a client tool): probed by a forced call
    "code_execution",  # code_execution_20250825 and the others (a server tool run in a sandbox)
    "mcp",  # the MCP connector (beta): declared by the profile only (a probe needs an MCP server)
    "files",  # the Files API (beta): probed by GET /v1/files
    "skills",  # the Skills API (beta): probed by GET /v1/skills
    "workspaces",  # keys of two workspaces: judged with --second-api-key (ISO-*)
    "rate_limits",  # rate limits: probed by the anthropic-ratelimit-* headers of one tiny answer
    "sampling_parameters",  # temperature 0 taken at the version judged (2026-10-21 removes it)
    "prefill",  # a final assistant turn continued (the newest models refuse it with a 400)
)


@dataclass(frozen=True, slots=True)
class Profile:
    name: str | None = None
    deterministic: bool | None = None  # None: probe at the start of the run
    baseline: Path | None = None
    max_silence_seconds: float = 15.0
    generated_budget_seconds: float = 60.0
    batch_wait_seconds: float = 300.0  # sized for a slow CPU server
    features: frozenset[str] = frozenset()  # declared served (`true`)
    absent: frozenset[str] = frozenset()  # declared absent (`false`)
    aliases: dict[str, str] = field(default_factory=dict)
    source: Path | None = None

    def supports(self, feature: str) -> bool:
        """Whether the profile declares `feature` served (absent or not said: False)."""
        return feature in self.features

    def declares(self, feature: str) -> bool | None:
        """The profile's word on `feature`: True (served), False (absent), None (not said)."""
        if feature in self.features:
            return True
        if feature in self.absent:
            return False
        return None


def load_profile(path: Path) -> Profile:
    """Read and check a profile; unknown keys are errors, so typos do not pass silently."""
    data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    known = {
        "name",
        "deterministic",
        "baseline",
        "max_silence_seconds",
        "generated_budget_seconds",
        "batch_wait_seconds",
        "features",
        "aliases",
    }
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"{path}: unknown profile keys {sorted(unknown)}")
    features = data.get("features", {})
    bad = set(features) - set(FEATURES)
    if bad:
        raise ValueError(f"{path}: unknown features {sorted(bad)}; known: {', '.join(FEATURES)}")
    baseline = data.get("baseline")
    return Profile(
        name=data.get("name"),
        deterministic=None if "deterministic" not in data else bool(data["deterministic"]),
        baseline=(path.parent / baseline).resolve() if baseline else None,
        max_silence_seconds=float(data.get("max_silence_seconds", 15.0)),
        generated_budget_seconds=float(data.get("generated_budget_seconds", 60.0)),
        batch_wait_seconds=float(data.get("batch_wait_seconds", 300.0)),
        features=frozenset(name for name, on in features.items() if on),
        absent=frozenset(name for name, on in features.items() if not on),
        aliases={str(k): str(v) for k, v in data.get("aliases", {}).items()},
        source=path,
    )
