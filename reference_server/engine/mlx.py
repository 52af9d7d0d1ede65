"""The real engine: an MLX model served by one worker thread.

The worker thread owns every MLX call, model loading included. Requests reach it through a
thread-safe queue; deltas come back to asyncio through a per-request `asyncio.Queue` fed with
`loop.call_soon_threadsafe`, errors crossing as values that the async iterator re-raises.
Closing an iterator marks its job cancelled; the worker drops it before its next step.

A request's grammar is compiled (`constraint.GrammarCompiler`, built once per model at load)
in a thread off the event loop and off the worker before the job is queued, so an invalid
grammar fails the request with `GrammarError` before any token.

Nothing here imports `mlx.core` at module level: `load_engine` first lets `blas.py` put an
optimized BLAS in place, which only works before MLX's library is loaded.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .base import (
    EngineDelta,
    EngineLoad,
    EngineRequest,
    Generation,
    Grammar,
    ModelCard,
    PromptUsage,
    StartedGeneration,
)
from .blas import BlasMode, enable_fast_blas
from .cache_plan import CachePoint
from .errors import (
    EngineClosedError,
    EngineOverloadedError,
    GrammarError,
    PromptTooLongError,
    TokenizerError,
    UnknownModelError,
)
from .jobs import Job, Scheduler
from .loading import LoadedModel, load_model
from .precision import PrecisionChoice
from .prefix_cache import DEFAULT_BUDGET_BYTES, DEFAULT_MIN_TOKENS, PrefixCache
from .seeds import sampling_seed
from .sources import ModelSource, resolve_model
from .toolformat import TAGS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    from .base import CacheTTL
    from .constraint import Constraint, GrammarCompiler
    from .tokenizer import ChatTokenizer
    from .vision import VisionPrompt

__all__ = [
    "EngineClosedError",
    "MLXEngine",
    "PromptTooLongError",
    "ServingLimits",
    "UnknownModelError",
    "load_engine",
]

_log = logging.getLogger(__name__)
# Rows decoded together. Aggregate decode on two cores grows up to about 16 rows for SmolLM2
# (the weights are read once per step for every row); beyond, each row's attention dominates.
DEFAULT_MAX_BATCH = 16
# Generations admitted at once (decoding, prefilling or queued); the next is refused with 529.
DEFAULT_MAX_PENDING = 128
# Seconds a refused client is told to wait (`retry-after`): about one decode burst here.
RETRY_AFTER_S = 1


@dataclass(frozen=True, slots=True)
class ServingLimits:
    """How the worker schedules: decode batch size, admission bound, prompt cache size."""

    max_batch: int = DEFAULT_MAX_BATCH
    max_pending: int = DEFAULT_MAX_PENDING
    cache_budget_bytes: int = DEFAULT_BUDGET_BYTES
    cache_min_tokens: int = DEFAULT_MIN_TOKENS
    # False: the round-robin scheduler (one sequence per forward pass), the benchmark's "before".
    batching: bool = True
    # Prompt-lookup drafts verified when one row decodes alone (speculative.py); False: plain.
    speculative: bool = True


def load_engine(
    model: str = "smollm2-135m-instruct",
    *,
    blas: BlasMode = "auto",
    seed: int = 0,
    context_window: int | None = None,
    limits: ServingLimits | None = None,
    precision: PrecisionChoice = "auto",
) -> MLXEngine:
    """Load `model` and return a running engine (synchronous and slow: call it in a thread).

    `model`: `smollm2-135m-instruct`, `qwen2.5-coder-0.5b-instruct`, `tiny-random`,
    `tiny-random-qwen`, `tiny-random-vlm`, an mlx-lm or mlx-vlm (with image input) model
    directory or a llama or qwen2 `.gguf` file. `blas`: see `blas.enable_fast_blas`, which runs
    first, before MLX is imported.
    `seed`: seeds tiny-random's weights and every sampled generation's own key (seeds.py).
    `context_window`: tiny-random's window (default `TINY_RANDOM_CONTEXT`); for other models a
    cap on their own (a larger value is ignored, with a warning).
    `limits`: batching, admission and prompt-cache settings (`ServingLimits()` by default).
    `precision`: the weights served, `auto`, `f32`, `q8` or `q4` (see precision.py).
    """
    if context_window is not None and context_window < 1:
        raise ValueError("context_window must be >= 1")
    started = time.perf_counter()
    in_use = enable_fast_blas(blas)
    source = resolve_model(model)
    engine = MLXEngine(
        source,
        lambda: load_model(source, in_use, seed, context_window, precision),
        limits or ServingLimits(),
        seed=seed,
    )
    _log.info(
        "Loaded %s (%s) in %.1f s with BLAS %s",
        source.id,
        source.kind,
        time.perf_counter() - started,
        in_use,
    )
    return engine


class MLXEngine:
    """An `Engine` serving one MLX model. Create it with `load_engine`; close with `aclose`."""

    def __init__(
        self,
        source: ModelSource,
        loader: Callable[[], LoadedModel],
        limits: ServingLimits | None = None,
        *,
        seed: int = 0,
    ) -> None:
        """Start the worker thread, run `loader` on it and wait until the model is ready;
        `seed` enters every sampled generation's key (seeds.py)."""
        self.limits = limits or ServingLimits()
        self._seed = seed
        if self.limits.max_pending < 1:
            raise ValueError("max_pending must be >= 1")
        # Dropped by the worker when the model's scheduler cannot batch (no prefix reuse there).
        self._prefix: PrefixCache | None = PrefixCache(
            budget_bytes=self.limits.cache_budget_bytes, min_tokens=self.limits.cache_min_tokens
        )
        self._batching = False
        self._inbox: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        # Jobs put in the inbox, and jobs the worker has since moved into its scheduler (or
        # failed): each written by one side only, so no update is lost (see active_requests).
        self._submitted = 0
        self._moved = 0
        self._scheduler: Scheduler | None = None
        # Guards `_closed` together with queueing, so no job lands behind the stop marker.
        self._lock = threading.Lock()
        self._closed = False
        ready: queue.SimpleQueue[LoadedModel | BaseException] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run, args=(loader, ready), name=f"mlx-engine-{source.id}", daemon=True
        )
        self._thread.start()
        loaded = ready.get()
        if isinstance(loaded, BaseException):
            self._thread.join()
            raise loaded
        # Only the worker thread keeps the model, so it is freed when the worker ends.
        self._tokenizer = loaded.tokenizer
        self._grammars = loaded.grammars
        self._grammar_problem = loaded.grammar_problem
        self._images = loaded.images
        self._card = ModelCard(
            id=source.id,
            display_name=loaded.display_name,
            created_at=source.created_at,
            context_window=loaded.context_window,
            max_output_tokens=loaded.context_window,
            vision=loaded.images is not None,
            precision=loaded.precision or None,
            special_tags=self._grammars.special(TAGS) if self._grammars is not None else frozenset(),
        )

    @property
    def tokenizer(self) -> ChatTokenizer:
        """The model's tokenizer and chat template (thread-safe, no MLX)."""
        return self._tokenizer

    @property
    def prefix_cache(self) -> PrefixCache | None:
        """The prompt cache (None when this model's scheduler cannot reuse prefixes)."""
        return self._prefix

    @property
    def batching(self) -> bool:
        """True when the worker decodes generations in one batch (batching.py)."""
        return self._batching

    @property
    def active_requests(self) -> int:
        """Generations submitted and not yet finished or dropped by the worker."""
        # `_moved` is read before the scheduler's size, and the worker adds a job to the
        # scheduler before counting it moved: a job between the two is counted twice for an
        # instant, never missed (qsize() + len() missed a job the worker had just taken).
        moved = self._moved
        scheduler = self._scheduler
        return self._submitted - moved + (len(scheduler) if scheduler is not None else 0)

    @property
    def speculation(self) -> tuple[int, int, int]:
        """Speculative verifications run, draft tokens verified and draft tokens kept since the
        engine started (zeros when it does not speculate)."""
        scheduler = self._scheduler
        inner = getattr(scheduler, "inner", scheduler)
        counts = getattr(inner, "speculation", None) or (0, 0, 0)
        return counts[0], counts[1], counts[2]

    def load(self) -> EngineLoad:
        """Generations waiting in the inbox and in the scheduler, and the prompt cache's size."""
        moved = self._moved  # read first, as in active_requests
        scheduler = self._scheduler
        cache = self._prefix
        _, drafted, kept = self.speculation
        return EngineLoad(
            queued=max(self._submitted - moved, 0),
            running=len(scheduler) if scheduler is not None else 0,
            cache_entries=len(cache) if cache is not None else 0,
            cache_bytes=cache.nbytes if cache is not None else 0,
            drafted=drafted,
            kept=kept,
        )

    def models(self) -> Sequence[ModelCard]:
        """The one served model."""
        return [self._card]

    async def count_tokens(self, request: EngineRequest) -> int:
        """Prompt tokens of `request`, exactly as `generate` feeds them to the model."""
        return len((await self._prompt(request))[0])

    async def generate(self, request: EngineRequest) -> AsyncIterator[EngineDelta]:
        """Stream deltas; closing or cancelling the iterator stops generation within a step.

        Raises `GrammarError` before any delta if `request.constraint` is invalid.
        """
        generation = await self.start(request)
        try:
            async for delta in generation:
                yield delta
        finally:
            await generation.aclose()

    async def start(self, request: EngineRequest) -> Generation:
        """Tokenize, compile the grammar, plan the prompt cache and queue the job.

        Raises `GrammarError` for an invalid grammar and `EngineOverloadedError` when
        `limits.max_pending` generations are already admitted, both before any work is queued.
        """
        if request.max_tokens < 0:
            raise ValueError("max_tokens must be >= 0")
        prompt, marks, vision = await self._prompt(request)
        # The KV cache cannot grow past the context window: stop there as if max_tokens.
        budget = min(request.max_tokens, self._card.context_window - len(prompt))
        constraint: Constraint | None = None
        if request.constraint is not None:
            # Off the loop and off the worker: a large grammar can take a second to compile.
            constraint = await asyncio.to_thread(self._compiler().compile, request.constraint)
        self._admit()
        # Never cached: a prompt with images has the same tokens whatever the images are.
        prefix = self._prefix if vision is None else None
        points = [CachePoint(p, ttl) for p, ttl in marks]
        plan = prefix.plan(prompt, points, request.cache_scope) if prefix is not None else None
        usage = plan.usage if plan is not None else PromptUsage(len(prompt))
        if budget <= 0 and (plan is None or not plan.writes):
            if plan is not None and plan.reuse is not None and prefix is not None:
                prefix.release(plan.reuse)
            return StartedGeneration(usage, _finished())
        job = Job(
            prompt=prompt,
            max_tokens=max(budget, 0),  # 0: a cache pre-warm, the prompt is only read
            sampling=request.sampling,
            loop=asyncio.get_running_loop(),
            queue=asyncio.Queue(),
            constraint=constraint,
            cache_plan=plan,
            cache_scope=request.cache_scope,
            priority=request.priority,
            vision=vision.arrays if vision is not None else None,
            seed=self._job_seed(prompt, request),
        )
        with self._lock:
            if self._closed:
                raise EngineClosedError("the engine is closed")
            self._inbox.put(job)
            self._submitted += 1
        return StartedGeneration(usage, self._deltas(job), on_close=job.cancel)

    def _job_seed(self, prompt: list[int], request: EngineRequest) -> int:
        """The seed of the job's own random key: the same for the same prompt, images and sampling."""
        if request.sampling.temperature <= 0:
            return 0  # greedy: nothing is drawn
        images = [image.digest for turn in request.turns for image in turn.images]
        return sampling_seed(self._seed, prompt, request.sampling, images)

    def _admit(self) -> None:
        # Runs on the event loop with no await before the job is queued, so the count is exact
        # between admissions (the worker only lowers it).
        pending = self.active_requests
        if pending >= self.limits.max_pending:
            raise EngineOverloadedError(pending, RETRY_AFTER_S)

    async def check_grammar(self, grammar: Grammar) -> None:
        """Raise `GrammarError` if `grammar` cannot constrain this model (special tokens checked
        against its vocabulary); runs off the event loop."""
        await asyncio.to_thread(self._compiler().check, grammar)

    async def aclose(self) -> None:
        """Stop the worker (active generations end with `EngineClosedError`); idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._inbox.put(None)
        await asyncio.to_thread(self._thread.join)

    async def _prompt(
        self, request: EngineRequest
    ) -> tuple[list[int], list[tuple[int, CacheTTL]], VisionPrompt | None]:
        if self._closed:
            raise EngineClosedError("the engine is closed")
        if request.model != self._card.id:
            raise UnknownModelError(f"this engine serves {self._card.id!r}, not {request.model!r}")
        # Tokenizing is CPU work without MLX: off the event loop, and off the worker too.
        vision: VisionPrompt | None = None
        if any(turn.images for turn in request.turns):
            vision = await asyncio.to_thread(self._vision_prompt, request)
            tokens, marks = vision.tokens, list[tuple[int, "CacheTTL"]]()
        else:
            tokens, marks = await asyncio.to_thread(
                self._tokenizer.encode_marked, request.turns, request.tools
            )
        if len(tokens) > self._card.context_window:
            raise PromptTooLongError(len(tokens), self._card.context_window)
        return tokens, marks, vision

    def _vision_prompt(self, request: EngineRequest) -> VisionPrompt:
        # render() itself refuses images when the model has no vision tower.
        text = self._tokenizer.render(request.turns, request.tools)
        if self._images is None:
            raise TokenizerError("this model does not read images (it has no vision tower)")
        images = [image for turn in request.turns for image in turn.images]
        return self._images.prepare(text, images)

    @staticmethod
    async def _deltas(job: Job) -> AsyncIterator[EngineDelta]:
        try:
            while True:
                item = await job.queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if item.finish is not None:
                    return
        finally:
            # Normal end, consumer's aclose(), cancellation or error: the worker drops the job
            # (and its KV cache) before its next step.
            job.cancelled = True

    def _compiler(self) -> GrammarCompiler:
        if self._grammars is None:
            raise GrammarError(self._grammar_problem)
        return self._grammars

    def _run(self, loader: Callable[[], LoadedModel], ready: queue.SimpleQueue[Any]) -> None:
        try:
            loaded = loader()
            from .batching import make_scheduler

            scheduler = make_scheduler(
                loaded.model,
                loaded.tokenizer,
                max_batch=self.limits.max_batch,
                prefix_cache=self._prefix,
                batching=self.limits.batching,
                speculative=self.limits.speculative,
            )
            if loaded.images is not None:
                from .vision_worker import VisionScheduler

                scheduler = VisionScheduler(scheduler, loaded.model, loaded.tokenizer)
        except BaseException as exc:
            ready.put(exc)
            return
        self._scheduler = scheduler
        from .batching import BatchScheduler
        from .vision_worker import VisionScheduler

        inner = scheduler.inner if isinstance(scheduler, VisionScheduler) else scheduler
        self._batching = isinstance(inner, BatchScheduler)
        if not self._batching:
            self._prefix = None
        ready.put(loaded)
        del loaded
        try:
            self._serve(scheduler)
        except BaseException as exc:
            _log.exception("MLX worker crashed")
            scheduler.fail_all(EngineClosedError(f"the MLX worker crashed: {exc!r}"))
            raise
        finally:
            self._drain(EngineClosedError("the engine is closed"))
            self._scheduler = None
            del scheduler
            import mlx.core as mx

            mx.clear_cache()

    def _serve(self, scheduler: Scheduler) -> None:
        while True:
            # Block only when idle; otherwise take whatever arrived since the last step.
            items = self._take(block=len(scheduler) == 0)
            for index, item in enumerate(items):
                if item is None:
                    error = EngineClosedError("the engine is closed")
                    scheduler.fail_all(error)
                    for late in items[index + 1 :]:
                        if late is not None:
                            late.emit(error)
                            self._moved += 1
                    return
                scheduler.add(item)
                self._moved += 1
            scheduler.step()

    def _take(self, *, block: bool) -> list[Job | None]:
        items: list[Job | None] = []
        try:
            items.append(self._inbox.get(block=block))
            while True:
                items.append(self._inbox.get_nowait())
        except queue.Empty:
            pass
        return items

    def _drain(self, error: BaseException) -> None:
        # Jobs queued behind the stop marker (or a crash) would otherwise wait forever.
        with self._lock:
            self._closed = True
        for item in self._take(block=False):
            if item is not None:
                item.emit(error)
                self._moved += 1


async def _finished() -> AsyncIterator[EngineDelta]:
    # No room (or no wish) to generate, and nothing to write to the cache.
    yield EngineDelta("", 0, "length")
