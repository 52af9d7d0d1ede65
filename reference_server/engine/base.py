"""The engine contract: neutral requests in, text deltas out.

Nothing here knows HTTP or Anthropic JSON. `serving.py` turns a Messages request into an
`EngineRequest` (turns, sampling, limits) and maps `EngineDelta`/`FinishReason` back to the
wire. Engines: `mlx.MLXEngine` (real) and `scripted.ScriptedEngine` (unit tests only).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant"]

# Why an engine stopped on its own: "stop" = the model ended its turn (EOS / end-of-turn
# token); "length" = `max_tokens` generated. Stop *strings* are matched by serving, which
# then closes the stream; the engine sees that as a cancellation.
FinishReason = Literal["stop", "length"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One conversation turn as plain text; consecutive same-role turns are already merged."""

    role: Role
    text: str


@dataclass(frozen=True, slots=True)
class Sampling:
    """Sampling controls. `temperature == 0` means greedy and reproducible."""

    temperature: float = 1.0
    top_p: float | None = None
    top_k: int | None = None


@dataclass(frozen=True, slots=True)
class EngineRequest:
    """A generation request.

    `turns` may start with one or more `system` turns and may end with an `assistant` turn,
    which is a prefill: the prompt ends inside that turn and generation continues it.
    """

    model: str
    turns: tuple[Turn, ...]
    max_tokens: int
    sampling: Sampling = field(default_factory=Sampling)


@dataclass(frozen=True, slots=True)
class EngineDelta:
    """New text since the previous delta (whole characters only) and the running count.

    `output_tokens` is the cumulative number of generated tokens, the end-of-turn token
    included. The final delta of a generation that stopped on its own carries `finish`;
    its `text` may be empty.
    """

    text: str
    output_tokens: int
    finish: FinishReason | None = None


@dataclass(frozen=True, slots=True)
class ModelCard:
    """What an engine serves: the facts `/v1/models` and validation need."""

    id: str
    display_name: str
    created_at: datetime
    context_window: int
    max_output_tokens: int


@runtime_checkable
class Engine(Protocol):
    """A loaded model (or models) ready to generate. Created by a factory, closed once."""

    def models(self) -> Sequence[ModelCard]:
        """The served models, newest first."""
        ...

    async def count_tokens(self, request: EngineRequest) -> int:
        """Prompt tokens of `request`, rendered exactly as `generate` renders it."""
        ...

    def generate(self, request: EngineRequest) -> AsyncIterator[EngineDelta]:
        """Stream deltas. Closing or cancelling the iterator stops generation within a step."""
        ...

    async def aclose(self) -> None:
        """Stop the worker and free the model."""
        ...
