"""Continuous batching: one forward pass advances every decoding generation.

Runs on the engine's worker thread (imports `mlx.core`). A new job is prefilled on its own, in
chunks of `PREFILL_CHUNK` tokens, one chunk per step between batched decode steps, so running
streams keep flowing while a long prompt is read. When only its last prompt token is left, its
KV cache joins the decode batch (`mlx_lm`'s left-padded `BatchKVCache`, one per layer) and that
token becomes its row's next input. Each decode step computes logits for all rows at once,
masks the rows that carry a grammar, samples per row (one `argmax` for all greedy rows; a
sampled row draws from its own key, sampler.py, never from its neighbours'), and feeds each
row's `TokenOutput`; finished and cancelled rows leave the batch before the next step.
While a step computes, the next one is already built and started from its still-lazy tokens
(`LOOKAHEAD`), unless a grammar or a joining prefill needs this step's tokens read first.

Padding positions are masked out of attention (their weight is exactly zero), so a row's
logits do not depend on its neighbours beyond floating-point summation order;
`tests/reference_server/test_batching.py` proves greedy output equal to a solo run.

A row decoding alone, with nothing waiting, is decoded speculatively where it repeats itself
(speculative.py): a draft from the sequence's own tokens is verified in one pass over the
weights (decode.py's `chain_logits`), its tokens exactly the plain steps' (a draft token the
grammar refuses ends the draft), the rejected positions trimmed from the cache.

A prompt whose prefix is held in the `PrefixCache` starts from a copy of that KV state and
prefills only the rest; the prefix of every finished prefill is offered back to the cache.

Waiting jobs are prefilled in priority order (`EngineRequest.priority`, arrival order among
equals), so an interactive request that arrives behind queued batch work is read on the next
step. Background jobs (negative priority) also leave `BACKGROUND_RESERVED_ROWS` decode rows
free: a foreground request finds a row at once and its first token comes one decode step after
its prefill, however much background work runs.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import mlx.core as mx
import numpy as np
from mlx_lm.models.cache import BatchKVCache, KVCache, make_prompt_cache

from .base import BACKGROUND_PRIORITY_MAX, EngineDelta
from .decode import chain_logits, chain_ready
from .jobs import PREFILL_CHUNK, Job, Scheduler, TokenOutput
from .sampler import JobSampler
from .speculative import Drafter
from .worker import RoundRobinScheduler

if TYPE_CHECKING:
    from .prefix_cache import PrefixCache
    from .tokenizer import ChatTokenizer

__all__ = ["BACKGROUND_RESERVED_ROWS", "BatchScheduler", "batchable", "make_scheduler"]

# Decode rows that background jobs never take, so foreground requests always find one.
BACKGROUND_RESERVED_ROWS = 1
# Start each decode step before reading the last one's tokens (`BatchScheduler._decode`); off
# only to measure what it gains, or to prove it changes no token (test_batching.py).
LOOKAHEAD = True


def batchable(model: Any) -> bool:
    """True when every layer of `model` uses a plain `KVCache` (what `BatchKVCache` batches);
    sliding-window or quantized caches keep the round-robin scheduler."""
    return all(type(cache) is KVCache for cache in make_prompt_cache(model))


class _Prefill:
    """A job reading its prompt: its own KV cache and the prompt tokens still to feed."""

    def __init__(self, job: Job, model: Any, prefix: PrefixCache | None) -> None:
        self.job = job
        self.cache: list[Any] = make_prompt_cache(model)
        start = 0
        if prefix is not None and job.cache_plan is not None:
            start = prefix.restore(job.cache_plan, self.cache)
        self.fed = start  # prompt tokens already in `cache`

    @property
    def ready(self) -> bool:
        """All prompt tokens but the last are in the cache: the job can join the batch."""
        return self.fed >= len(self.job.prompt) - 1

    def chunk(self, model: Any) -> None:
        """Feed the next chunk of the prompt (never its last token)."""
        stop = min(self.fed + PREFILL_CHUNK, len(self.job.prompt) - 1)
        tokens = mx.array(self.job.prompt[self.fed : stop], dtype=mx.uint32)
        # Only the cache matters: the logits of these positions (lazy in MLX) are never computed.
        model(tokens[None], cache=self.cache)
        mx.eval([c.state for c in self.cache])
        self.fed = stop


class _Row:
    """One decoding generation: its output, sampler, grammar and drafter (when speculating)."""

    def __init__(self, job: Job, tokenizer: ChatTokenizer, *, speculative: bool) -> None:
        self.job = job
        self.output = TokenOutput(job, tokenizer)
        self.sampler = JobSampler(job.sampling, tokenizer.vocab_size, job.seed)
        self.greedy = self.sampler.greedy
        # The sequence so far, its next input (the last token) included.
        self.drafter = Drafter(job.prompt) if speculative else None
        self.last = job.prompt[-1]


class BatchScheduler:
    """Batched decoding of up to `max_batch` rows, prefill interleaved a chunk per step."""

    def __init__(
        self,
        model: Any,
        tokenizer: ChatTokenizer,
        *,
        max_batch: int,
        prefix_cache: PrefixCache | None = None,
        speculative: bool = True,
    ) -> None:
        """Schedule generations of `model`; `prefix_cache` lends and keeps prompt KV states;
        `speculative`: verify prompt-lookup drafts where the model can (`chain_ready`)."""
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self._model = model
        self._tokenizer = tokenizer
        self._max_batch = max_batch
        self._prefix = prefix_cache
        self._speculative = speculative and chain_ready(model)
        # Verifications run, draft tokens verified, draft tokens kept (the bench and tests read it).
        self.speculation = [0, 0, 0]
        self._eos = frozenset(tokenizer.eos_token_ids)
        self._waiting: deque[_Prefill] = deque()
        self._rows: list[_Row] = []
        self._cache: list[BatchKVCache] = []
        self._inputs: Any = None  # (rows,) uint32: each row's next input token
        # The next step's tokens, already computing (lazy, `async_eval`'d): see `_decode`.
        self._ahead: Any = None

    def add(self, job: Job) -> None:
        """Queue `job` behind every waiting job of its priority or higher; its prefill starts on a
        later step."""
        try:
            prefill = _Prefill(job, self._model, self._prefix)
        except Exception as exc:  # this request fails, the worker carries on
            self._release(job)
            job.emit(exc)
            return
        # A partly prefilled job that a higher priority overtakes keeps its cache and resumes later.
        waiting = self._waiting
        index = next((i for i, p in enumerate(waiting) if p.job.priority < job.priority), len(waiting))
        waiting.insert(index, prefill)

    def step(self) -> None:
        """One batched decode step for every row, then one prefill chunk for the first waiting job
        (the highest priority, then the oldest)."""
        self._drop_cancelled()
        if self._rows:
            try:
                self._decode()
            except Exception as exc:  # a failed step fails its rows, never the worker
                for row in self._rows:
                    row.job.emit(exc)
                self._keep([])
        if self._waiting and len(self._rows) < self._row_limit(self._waiting[0].job):
            prefill = self._waiting[0]
            try:
                if not prefill.ready:
                    prefill.chunk(self._model)
                if prefill.ready:
                    self._waiting.popleft()
                    self._join(prefill)
            except Exception as exc:
                self._waiting.popleft()
                self._release(prefill.job)
                prefill.job.emit(exc)
        if not self._rows and not self._waiting:
            # Idle: give cached buffers back rather than hold the peak of the last burst.
            mx.clear_cache()

    def _row_limit(self, job: Job) -> int:
        """Rows that may be decoding when `job` joins the batch (background jobs leave some free)."""
        if job.priority <= BACKGROUND_PRIORITY_MAX:
            return max(1, self._max_batch - BACKGROUND_RESERVED_ROWS)
        return self._max_batch

    def fail_all(self, error: BaseException) -> None:
        """End every job with `error` (engine shutdown)."""
        for prefill in self._waiting:
            self._release(prefill.job)
            prefill.job.emit(error)
        for row in self._rows:
            row.job.emit(error)
        self._waiting.clear()
        self._keep([])

    def __len__(self) -> int:
        """Jobs prefilling or decoding."""
        return len(self._waiting) + len(self._rows)

    @property
    def decoding(self) -> int:
        """Rows in the decode batch."""
        return len(self._rows)

    def _join(self, prefill: _Prefill) -> None:
        # No step runs ahead while a job waits to join (`_decode`): the batch may change here.
        assert self._ahead is None
        job = prefill.job
        if self._prefix is not None:
            self._prefix.keep(job, prefill.cache)
        self._release(job)
        if job.max_tokens == 0:  # a cache pre-warm: the prompt is read, nothing generated
            job.emit(EngineDelta("", 0, "length"))
            return
        merged = [BatchKVCache.merge([layer]) for layer in prefill.cache]  # type: ignore[no-untyped-call]
        token = mx.array(job.prompt[-1:], dtype=mx.uint32)
        if self._rows:
            for mine, theirs in zip(self._cache, merged, strict=True):
                mine.extend(theirs)  # type: ignore[no-untyped-call]
            self._inputs = mx.concatenate([self._inputs, token])
        else:
            self._cache, self._inputs = merged, token
        self._rows.append(_Row(job, self._tokenizer, speculative=self._speculative))

    def _decode(self) -> None:
        if self._ahead is None and self._alone() is not None and self._speculate():
            return
        tokens = self._ahead if self._ahead is not None else self._sample(self._inputs)
        self._ahead = None
        # One step ahead: while MLX computes this step, build the next one's graph from its
        # still-lazy tokens and start it, so the host's work per token (graph building, reading
        # the tokens, detokenizing, handing deltas over) overlaps the arithmetic, as mlx-lm's
        # generate_step does. Only when the next step's rows are this step's rows: a grammar
        # needs the token consumed before its next mask, and a prefill joins between steps. A
        # row that ends on this token has computed one token too many, never read.
        if (
            LOOKAHEAD
            and not self._waiting
            and all(row.job.constraint is None for row in self._rows)
            and not self._draft_likely()
        ):
            self._ahead = self._sample(tokens)
            mx.async_eval(self._ahead)  # type: ignore[no-untyped-call]
        keep: list[int] = []
        values: list[int] = tokens.tolist()  # waits for this step only
        for i, (row, token) in enumerate(zip(self._rows, values, strict=True)):
            row.last = token
            if row.drafter is not None:
                row.drafter.extend((token,))
            if not self._feed(row, token):
                keep.append(i)
        self._inputs = tokens
        if len(keep) < len(self._rows):
            self._keep(keep)

    def _alone(self) -> _Row | None:
        """The only row, when it may decode speculatively (nothing waits to join the batch)."""
        if len(self._rows) != 1 or self._waiting:
            return None
        row = self._rows[0]
        return row if row.drafter is not None else None

    def _draft_likely(self) -> bool:
        # Whether the next step would rather verify a draft than run ahead: the sequence's
        # suffix (as far as it is known) occurred before, and the drafter is not resting.
        row = self._alone()
        drafter = row.drafter if row is not None else None
        return drafter is not None and not drafter.resting and drafter.match() is not None

    def _speculate(self) -> bool:
        """Verify a draft for the lone row; False (nothing done) when there is none."""
        row = self._rows[0]
        drafter = row.drafter
        assert drafter is not None
        # The output's room left after this step's own token.
        draft = drafter.draft(row.job.max_tokens - row.output.count - 1)
        draft = draft[: next((i for i, t in enumerate(draft) if t in self._eos), len(draft))]
        constraint = row.job.constraint
        masks = None
        if draft and constraint is not None:
            # The logits' width: a chain-ready model is mlx-lm's llama or qwen2 (decode.py).
            draft, masks = constraint.draft_masks(draft, int(self._model.args.vocab_size))
        if not draft:
            return False
        logits = chain_logits(self._model, mx.array([row.last, *draft], dtype=mx.uint32), self._cache)
        if masks is not None:
            allowed = mx.array(np.stack(masks))
            logits = mx.where(allowed, logits, mx.array(-mx.inf, dtype=logits.dtype))
        # Each position as `_sample` treats a lone row's logits (log-probabilities when sampled).
        rows = [logits[j : j + 1] for j in range(logits.shape[0])]
        if not row.greedy:
            rows = [r - mx.logsumexp(r, axis=-1, keepdims=True) for r in rows]
        drawn, keys = row.sampler.chain(rows)
        values: list[int] = mx.concatenate([t.reshape(1) for t in drawn]).tolist()  # type: ignore[assignment]
        # The model's token after the kept ones is its own: values has one more than the draft.
        accepted = next((j for j, guess in enumerate(draft) if values[j] != guess), len(draft))
        drafter.kept(len(draft), accepted)
        self.speculation[0] += 1
        self.speculation[1] += len(draft)
        self.speculation[2] += accepted
        if accepted < len(draft):
            for layer in self._cache:
                layer.trim(len(draft) - accepted)  # type: ignore[no-untyped-call]
        if keys:
            row.sampler.resume(keys[accepted])
        tokens = values[: accepted + 1]
        for token in tokens:
            row.last = token
            drafter.extend((token,))
            if self._feed(row, token):
                self._keep([])
                return True
        self._inputs = mx.array([row.last], dtype=mx.uint32)
        return True

    def _sample(self, inputs: Any) -> Any:
        """The tokens of one decode step from each row's input token (lazy)."""
        logits = self._model(inputs[:, None], cache=self._cache)[:, -1, :]
        constrained = [i for i, row in enumerate(self._rows) if row.job.constraint is not None]
        if constrained:
            # Start the forward pass, so llguidance computes the masks while MLX computes logits.
            mx.async_eval(logits)  # type: ignore[no-untyped-call]
            vocab = int(logits.shape[-1])
            masks = [
                mx.array(row.job.constraint.allowed(vocab)) if row.job.constraint is not None else None
                for row in self._rows
            ]
            full = mx.ones((vocab,), dtype=mx.bool_)
            allowed = mx.stack([full if m is None else m for m in masks])
            logits = mx.where(allowed, logits, mx.array(-mx.inf, dtype=logits.dtype))
        greedy = mx.argmax(logits, axis=-1)
        if all(row.greedy for row in self._rows):
            return greedy.astype(mx.uint32)
        sampled: list[Any] = []
        for i, row in enumerate(self._rows):
            if row.greedy:
                sampled.append(greedy[i : i + 1])
            else:
                row_logits = logits[i : i + 1]
                row_logits = row_logits - mx.logsumexp(row_logits, axis=-1, keepdims=True)
                sampled.append(row.sampler(row_logits).reshape(1))
        return mx.concatenate(sampled).astype(mx.uint32)

    @staticmethod
    def _feed(row: _Row, token: int) -> bool:
        constraint = row.job.constraint
        if constraint is None or token in row.output.eos_token_ids:
            # With a grammar, end-of-turn is only offered once it is complete: nothing to consume.
            return row.output.feed(token)
        constraint.consume(token)
        return row.output.feed(token, complete=constraint.done)

    def _drop_cancelled(self) -> None:
        if any(p.job.cancelled for p in self._waiting):
            for prefill in [p for p in self._waiting if p.job.cancelled]:
                self._release(prefill.job)
            self._waiting = deque(p for p in self._waiting if not p.job.cancelled)
        keep = [i for i, row in enumerate(self._rows) if not row.job.cancelled]
        if len(keep) < len(self._rows):
            self._keep(keep)

    def _keep(self, indices: list[int]) -> None:
        """Keep only these rows (in order); the rest leave the batch and free their KV."""
        self._rows = [self._rows[i] for i in indices]
        if not indices:
            self._cache, self._inputs, self._ahead = [], None, None
            return
        selected = mx.array(indices, dtype=mx.int32)
        for layer in self._cache:
            layer.filter(selected)  # type: ignore[no-untyped-call]
        self._inputs = self._inputs[selected]
        if self._ahead is not None:
            self._ahead = self._ahead[selected]

    def _release(self, job: Job) -> None:
        plan = job.cache_plan
        if self._prefix is not None and plan is not None and plan.reuse is not None:
            self._prefix.release(plan.reuse)
            plan.reuse = None


def make_scheduler(
    model: Any,
    tokenizer: ChatTokenizer,
    *,
    max_batch: int,
    prefix_cache: PrefixCache | None = None,
    batching: bool = True,
    speculative: bool = True,
) -> Scheduler:
    """The worker's scheduler: continuous batching for models whose layers all use a plain KV
    cache, else (or when `batching` is off) round robin (worker.py): one sequence per step, no
    prefix reuse."""
    if batching and batchable(model):
        return BatchScheduler(
            model, tokenizer, max_batch=max_batch, prefix_cache=prefix_cache, speculative=speculative
        )
    return RoundRobinScheduler(model, tokenizer)
