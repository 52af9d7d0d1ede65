"""A deterministic fake engine for unit tests of protocol code. Never used by a default
command: `nox -s serve` and `nox -s conformance` run MLX.

One character is one token, so counts are easy to reason about in tests. Faults can be
injected: a delay before the first token (long prefill), a delay per token, and an
exception after N tokens (a mid-stream failure).

A request's `constraint` is validated exactly as the MLX engine compiles it (llguidance,
without a vocabulary), so an invalid grammar raises `GrammarError` before any delta; the reply
itself is NOT constrained: script a reply that matches the grammar.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime

from reference_server.engine.base import (
    EngineDelta,
    EngineRequest,
    Generation,
    ModelCard,
    PromptUsage,
    StartedGeneration,
)
from reference_server.engine.constraint import check_grammar
from reference_server.engine.errors import EngineOverloadedError
from reference_server.engine.toolformat import plain_turns


def render(request: EngineRequest) -> str:
    """The scripted "chat template" (tools in the built-in format); a final assistant turn is
    left open (prefill)."""
    turns = plain_turns(request.turns, request.tools)
    parts = [f"<{turn.role}>{turn.text}" for turn in turns]
    if turns and turns[-1].role != "assistant":
        parts.append("<assistant>")
    return "".join(parts)


class ScriptedEngine:
    """Replies with `reply(request)` one character at a time."""

    def __init__(
        self,
        reply: str | Callable[[EngineRequest], str] = "Hello from the scripted engine.",
        *,
        model_id: str = "scripted",
        context_window: int = 4096,
        first_token_delay: float = 0.0,
        token_delay: float = 0.0,
        fail_after: int | None = None,
        max_pending: int | None = None,
        vision: bool = False,
    ) -> None:
        """`vision`: the card says the model reads images (they reach `reply` as turns' images)."""
        self._reply = reply
        self._card = ModelCard(
            id=model_id,
            display_name="Scripted test engine",
            created_at=datetime(2026, 1, 1, tzinfo=UTC),
            context_window=context_window,
            max_output_tokens=context_window,
            vision=vision,
        )
        self.first_token_delay = first_token_delay
        self.token_delay = token_delay
        self.fail_after = fail_after
        # At most this many generations at once; the next one is refused as overloaded.
        self.max_pending = max_pending
        self.active = 0
        self.cancelled = 0
        self.requests: list[EngineRequest] = []

    def models(self) -> Sequence[ModelCard]:
        return [self._card]

    async def count_tokens(self, request: EngineRequest) -> int:
        return len(render(request))

    async def start(self, request: EngineRequest) -> Generation:
        if request.constraint is not None:
            check_grammar(request.constraint)
        if self.max_pending is not None and self.active >= self.max_pending:
            raise EngineOverloadedError(self.active, retry_after=1)
        return StartedGeneration(PromptUsage(await self.count_tokens(request)), self._deltas(request))

    async def generate(self, request: EngineRequest) -> AsyncIterator[EngineDelta]:
        generation = await self.start(request)
        async for delta in generation:
            yield delta

    async def _deltas(self, request: EngineRequest) -> AsyncIterator[EngineDelta]:
        self.requests.append(request)
        text = self._reply(request) if callable(self._reply) else self._reply
        self.active += 1
        finished = False
        try:
            if request.max_tokens == 0:
                finished = True
                yield EngineDelta("", 0, "length")
                return
            if self.first_token_delay:
                await asyncio.sleep(self.first_token_delay)
            for count, char in enumerate(text, start=1):
                if self.fail_after is not None and count > self.fail_after:
                    raise RuntimeError("injected engine failure")
                if self.token_delay:
                    await asyncio.sleep(self.token_delay)
                if count == request.max_tokens:
                    finished = True
                    yield EngineDelta(char, count, "length")
                    return
                yield EngineDelta(char, count)
            finished = True
            # The end-of-turn token counts as generated, like a real model's EOS.
            yield EngineDelta("", len(text) + 1, "stop")
        finally:
            self.active -= 1
            if not finished:
                self.cancelled += 1

    async def aclose(self) -> None:
        return None
