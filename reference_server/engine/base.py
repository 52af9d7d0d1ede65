"""The engine contract: neutral requests in, text deltas out.

Nothing here knows HTTP or Anthropic JSON. `serving.py` turns a Messages request into an
`EngineRequest` (turns, tools, sampling, limits, an optional grammar) and maps
`EngineDelta`/`FinishReason` back to the wire. Engines: `mlx.MLXEngine` (real) and
`scripted.ScriptedEngine` (unit tests only).

Tools are function-calling concepts any chat model knows, not Anthropic blocks: a `ToolSpec`
(name, description, JSON Schema of the arguments), assistant turns that made `ToolCall`s, and
`tool` turns that carry a call's result. The engine renders them into the prompt (the model's
own chat template where it takes tools, else the built-in format of `toolformat.py`). What the
model may generate is bounded by an optional `Grammar` (llguidance's Lark syntax), applied as
a logits mask; serving builds it and parses the text back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant", "tool"]

# Why an engine stopped on its own: "stop" = the model ended its turn (EOS / end-of-turn
# token); "length" = `max_tokens` generated. Stop *strings* are matched by serving, which
# then closes the stream; the engine sees that as a cancellation.
FinishReason = Literal["stop", "length"]
# How long a prompt-cache breakpoint keeps its prefix (the API's `cache_control.ttl`).
CacheTTL = Literal["5m", "1h"]
# `EngineRequest.priority` of interactive requests, and the highest priority that is background.
FOREGROUND_PRIORITY = 0
BACKGROUND_PRIORITY_MAX = -1


@dataclass(frozen=True, slots=True)
class CacheMark:
    """A prompt-cache breakpoint: the prompt up to `offset` characters into its turn's text is
    to be cached for `ttl`. The engine finds the token position of each mark as it renders."""

    offset: int
    ttl: CacheTTL = "5m"


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A function the model may call."""

    name: str
    description: str
    parameters: Mapping[str, Any]  # JSON Schema of the arguments (an object schema)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call an assistant turn made (after its text)."""

    id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image a turn shows the model: the encoded file, its media type (`image/png`...), its
    pixel size, and a digest of the bytes. Prompts are keyed by the digest wherever the image
    matters, since two different images render the very same prompt tokens."""

    data: bytes
    media_type: str
    width: int
    height: int
    digest: str


@dataclass(frozen=True, slots=True)
class Turn:
    """One conversation turn; consecutive same-role user/assistant turns are already merged.

    An assistant turn may end with `tool_calls`. A `tool` turn is the result of the call
    `tool_call_id` (named `name`), its text the result; `is_error` when the tool failed.
    `images` (user turns, vision models only) are shown to the model before the turn's text.
    """

    role: Role
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    cache_marks: tuple[CacheMark, ...] = ()
    images: tuple[ImagePart, ...] = ()


@dataclass(frozen=True, slots=True)
class Grammar:
    """What the generated text must match: a grammar in llguidance's Lark syntax (it may embed
    JSON Schemas with `%json {...}`). Generation stops, as "stop", once the grammar is complete
    and allows nothing more."""

    lark: str


@dataclass(frozen=True, slots=True)
class Sampling:
    """Sampling controls. `temperature == 0` means greedy. Sampling is reproducible too: each
    generation draws from its own random key, seeded from the engine's seed, the prompt, these
    controls and `seed` (engine/seeds.py), so the same request samples the same tokens."""

    temperature: float = 1.0
    top_p: float | None = None
    top_k: int | None = None
    # The caller's own seed, mixed into the key (OpenAI's `seed`); None: the request's alone.
    seed: int | None = None


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
    tools: tuple[ToolSpec, ...] = ()  # rendered into the prompt (and counted)
    constraint: Grammar | None = None  # bounds the generated text; never rendered
    # Scheduling priority: a higher one is prefilled and given a decode row first. A negative
    # one (at most BACKGROUND_PRIORITY_MAX) is background work, e.g. message batches: it leaves
    # one decode row free for foreground requests.
    priority: int = FOREGROUND_PRIORITY
    # Whose prompt cache entries it may read and leave (prefix_cache.py): requests of one scope
    # never see another's, not even as a cache hit (the API's cache is per workspace).
    cache_scope: str = ""


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
class PromptUsage:
    """How a generation's prompt was read: `tokens` in all, `cache_read` of them from prompt-cache
    entries that breakpoints wrote, `cache_write_5m` / `cache_write_1h` written to the cache for
    this request's breakpoints (by TTL). Prefix reuse without a breakpoint is not reported."""

    tokens: int
    cache_read: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0

    @property
    def cache_write(self) -> int:
        """Tokens written to the cache, both TTLs."""
        return self.cache_write_5m + self.cache_write_1h

    @property
    def uncached(self) -> int:
        """Prompt tokens neither read from nor written to the cache (the API's `input_tokens`)."""
        return self.tokens - self.cache_read - self.cache_write


@dataclass(frozen=True, slots=True)
class EngineLoad:
    """What an engine holds now, for /metrics: generations waiting to start, generations being
    decoded (the batch), the prompt cache's entries and bytes, and since it started, the draft
    tokens speculative decoding verified and kept."""

    queued: int
    running: int
    cache_entries: int = 0
    cache_bytes: int = 0
    drafted: int = 0
    kept: int = 0


class Generation(Protocol):
    """A started generation: its prompt usage, known before the first delta, and its deltas."""

    @property
    def usage(self) -> PromptUsage:
        """How the prompt was read."""
        ...

    def __aiter__(self) -> AsyncIterator[EngineDelta]:
        """The deltas; closing the iterator stops generation within a step."""
        ...

    async def aclose(self) -> None:
        """Stop generating (idempotent)."""
        ...


class StartedGeneration:
    """A `Generation` over an async iterator of deltas (what both engines return)."""

    def __init__(
        self,
        usage: PromptUsage,
        deltas: AsyncIterator[EngineDelta],
        on_close: Callable[[], None] | None = None,
    ) -> None:
        """`deltas` is closed when this generation is, and `on_close` called (even when no
        delta was ever asked for, when closing an unstarted generator runs none of its code)."""
        self._usage = usage
        self._deltas = deltas
        self._on_close = on_close

    @property
    def usage(self) -> PromptUsage:
        """How the prompt was read."""
        return self._usage

    def __aiter__(self) -> AsyncIterator[EngineDelta]:
        """The deltas (one pass)."""
        return self._deltas

    async def aclose(self) -> None:
        """Stop generating."""
        if self._on_close is not None:
            self._on_close()
        aclose = getattr(self._deltas, "aclose", None)
        if aclose is not None:
            await aclose()


@dataclass(frozen=True, slots=True)
class ModelCard:
    """What an engine serves: the facts `/v1/models` and validation need."""

    id: str
    display_name: str
    created_at: datetime
    context_window: int
    max_output_tokens: int
    # The model reads images (`Turn.images`); a text-only model's engine refuses them.
    vision: bool = False
    # What the served weights are (`q4`, `q8`, `f32`, ...); None when the engine does not say.
    precision: str | None = None
    # The tool-call format's tags (toolformat.TAGS) the vocabulary holds as one special token:
    # grammars name those as the token (tools/grammar.py).
    special_tags: frozenset[str] = frozenset()


@runtime_checkable
class Engine(Protocol):
    """A loaded model (or models) ready to generate. Created by a factory, closed once."""

    def models(self) -> Sequence[ModelCard]:
        """The served models, newest first."""
        ...

    async def count_tokens(self, request: EngineRequest) -> int:
        """Prompt tokens of `request`, rendered exactly as `generate` renders it."""
        ...

    async def start(self, request: EngineRequest) -> Generation:
        """Admit `request` and return its generation (raises before any delta if it cannot
        run: an invalid grammar, an engine at capacity)."""
        ...

    def generate(self, request: EngineRequest) -> AsyncIterator[EngineDelta]:
        """Stream deltas. Closing or cancelling the iterator stops generation within a step."""
        ...

    async def aclose(self) -> None:
        """Stop the worker and free the model."""
        ...
