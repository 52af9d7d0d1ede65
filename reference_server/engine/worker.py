"""Worker side of `MLXEngine`: everything here runs on the engine's single worker thread.

Importing this module imports `mlx.core`, so it is imported only inside the worker thread,
after `blas.enable_fast_blas` has run.

`RoundRobinScheduler` advances each active generation by one unit of work in turn (a prefill
chunk or one decoded token), each with its own KV cache, for models whose caches cannot be
batched; `batching.make_scheduler` picks it or continuous batching. Token accounting,
end-of-turn handling and detokenisation live in `jobs.TokenOutput`, shared by both.

A job may carry a grammar `Constraint` (compiled before the job is queued). Its state is the
job's own: each decode step masks that job's logits with `apply_constraint`, samples, and
advances the constraint with the sampled token; a batching scheduler does the same per row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

from .jobs import PREFILL_CHUNK, Job, TokenOutput
from .sampler import JobSampler

if TYPE_CHECKING:
    from .constraint import Constraint
    from .tokenizer import ChatTokenizer

__all__ = ["RoundRobinScheduler", "apply_constraint"]


class _Sequence:
    """One job's model state: its KV cache, the tokens still to feed and its sampler."""

    def __init__(self, job: Job, model: Any, tokenizer: ChatTokenizer) -> None:
        self.job = job
        self.output = TokenOutput(job, tokenizer)
        self._model = model
        self._cache = make_prompt_cache(model)
        self._pending = mx.array(job.prompt, dtype=mx.uint32)
        self._sampler = JobSampler(job.sampling, tokenizer.vocab_size, job.seed)
        self._constraint = job.constraint

    def advance(self) -> bool:
        """Feed one prefill chunk or decode one token; return True when finished."""
        remaining = int(self._pending.shape[0])
        if remaining > 1:
            # All prompt tokens but the last: only the cache matters, so the logits of these
            # positions (lazy in MLX) are never computed.
            n = min(PREFILL_CHUNK, remaining - 1)
            self._model(self._pending[None, :n], cache=self._cache)
            mx.eval([c.state for c in self._cache])
            self._pending = self._pending[n:]
            return False
        logits = self._model(self._pending[None], cache=self._cache)[:, -1, :]
        if self._constraint is not None:
            logits = apply_constraint(self._constraint, logits)
        if not self._sampler.greedy:
            logits = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
        token = self._sampler(logits)
        mx.eval(token)
        self._pending = token.astype(mx.uint32)
        sampled = int(token.item())
        if self._constraint is None:
            return self.output.feed(sampled)
        if sampled in self.output.eos_token_ids:
            # Only offered once the grammar is complete; it ends the turn, nothing to consume.
            return self.output.feed(sampled)
        self._constraint.consume(sampled)
        return self.output.feed(sampled, complete=self._constraint.done)


def apply_constraint(constraint: Constraint, logits: Any) -> Any:
    """`logits` (1, vocab) with every token the grammar disallows next set to -inf.

    The forward pass is started first (`async_eval`), so llguidance computes the mask while
    MLX computes the logits; the mask is then one `where` over the vocabulary, no Python loop.
    """
    mx.async_eval(logits)  # type: ignore[no-untyped-call]
    allowed = mx.array(constraint.allowed(int(logits.shape[-1])))
    return mx.where(allowed, logits, mx.array(-mx.inf, dtype=logits.dtype))


class RoundRobinScheduler:
    """Advances active jobs one step each in turn, each with its own KV cache."""

    def __init__(self, model: Any, tokenizer: ChatTokenizer) -> None:
        """Schedule generations of `model`, detokenised with `tokenizer`."""
        self._model = model
        self._tokenizer = tokenizer
        self._active: list[_Sequence] = []

    def add(self, job: Job) -> None:
        """Start generating for `job` (it gets its first step on the next `step`)."""
        try:
            self._active.append(_Sequence(job, self._model, self._tokenizer))
        except Exception as exc:  # this request fails, the worker carries on
            job.emit(exc)

    def step(self) -> None:
        """One prefill chunk or one token for every active job, in arrival order."""
        for seq in list(self._active):
            if seq.job.cancelled:
                done = True
            else:
                try:
                    done = seq.advance()
                except Exception as exc:  # a failed generation must not stop the others
                    seq.job.emit(exc)
                    done = True
            if done:
                self._active.remove(seq)
        if not self._active:
            # Idle: give cached buffers back rather than hold the peak of the last burst.
            mx.clear_cache()

    def fail_all(self, error: BaseException) -> None:
        """End every active job with `error` (engine shutdown)."""
        for seq in self._active:
            seq.job.emit(error)
        self._active.clear()

    def __len__(self) -> int:
        """Number of active jobs."""
        return len(self._active)
