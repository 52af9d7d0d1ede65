"""What the engine's worker thread works on: a generation request as a `Job`, its output as
deltas (`TokenOutput`), and the `Scheduler` protocol the worker loop drives. No MLX here: the
event loop builds jobs (mlx.py), the schedulers (worker.py, batching.py) and the prompt cache
(prefix_cache.py) consume them, and none of those import one another for these types. A job's
cache plan is cache_plan.py's, a leaf below both this module and prefix_cache.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .base import EngineDelta, Sampling
from .cache_plan import CachePlan

if TYPE_CHECKING:
    import asyncio

    from .constraint import Constraint
    from .tokenizer import ChatTokenizer

__all__ = ["PREFILL_CHUNK", "Job", "Scheduler", "TokenOutput"]

# Prompt tokens fed per step: long prompts are prefilled in chunks so that other generations
# keep streaming and a cancelled request stops within about a second, at little cost to
# prefill speed (BLAS is already efficient at 256 rows).
PREFILL_CHUNK = 256


@dataclass(eq=False, slots=True)
class Job:
    """One generation request as the worker sees it, and the way back to its consumer."""

    prompt: list[int]
    max_tokens: int  # > 0, already capped to what the context window allows
    sampling: Sampling
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[EngineDelta | BaseException]
    # What the generated text must match; this job's own matcher state.
    constraint: Constraint | None = None
    # Set from the event loop when the consumer goes away; the worker checks it every step.
    cancelled: bool = False
    # What the prompt cache lends this job and what it is to write (prefix_cache.py).
    cache_plan: CachePlan | None = None
    cache_scope: str = ""  # the request's (EngineRequest.cache_scope): where its prefixes are kept
    # `EngineRequest.priority`: the batching scheduler serves higher ones first.
    priority: int = 0
    # A prompt with images: the vision processor's pixel arrays (vision_worker.py); None else.
    vision: dict[str, Any] | None = None
    # Seeds this job's own random key when it samples (seeds.py, sampler.py).
    seed: int = 0

    def cancel(self) -> None:
        """Called from the event loop: the worker drops this job before its next step."""
        self.cancelled = True

    def emit(self, item: EngineDelta | BaseException) -> None:
        """Hand a delta or an error to the consumer's event loop (thread-safe)."""
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            self.cancelled = True


class TokenOutput:
    """Turns one job's sampled tokens into deltas.

    Counts every generated token (an end-of-turn token included), ends with "stop" on an
    end-of-turn token (its text not emitted) or when the job's grammar is complete, or
    "length" at `max_tokens`, and emits only whole characters.
    """

    def __init__(self, job: Job, tokenizer: ChatTokenizer) -> None:
        """Start the output of `job`."""
        self._job = job
        self.eos_token_ids = tokenizer.eos_token_ids
        self._decoder = tokenizer.stream_decoder()
        self.count = 0

    def feed(self, token: int, *, complete: bool = False) -> bool:
        """Account for one sampled token; return True when the generation is finished.

        `complete`: the grammar allows nothing more after `token`, so this is the last token
        (a "stop" even at `max_tokens`: the text is whole).
        """
        self.count += 1
        if token in self.eos_token_ids:
            self._job.emit(EngineDelta(self._decoder.flush(), self.count, "stop"))
            return True
        text = self._decoder.push(token)
        if complete:
            self._job.emit(EngineDelta(text + self._decoder.flush(), self.count, "stop"))
            return True
        if self.count >= self._job.max_tokens:
            self._job.emit(EngineDelta(text + self._decoder.flush(), self.count, "length"))
            return True
        if text:
            self._job.emit(EngineDelta(text, self.count))
        return False


class Scheduler(Protocol):
    """How the worker loop drives generation; see the module docstring."""

    def add(self, job: Job) -> None:
        """Start generating for `job`."""
        ...

    def step(self) -> None:
        """Do one unit of work for every active job; drop finished and cancelled ones."""
        ...

    def fail_all(self, error: BaseException) -> None:
        """End every active job with `error` (engine shutdown)."""
        ...

    def __len__(self) -> int:
        """Number of active jobs."""
        ...
