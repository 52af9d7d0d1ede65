"""Worker side of vision models: loading an mlx-vlm model and generating from prompts with images.

Runs on the engine's worker thread only (imports MLX and mlx-vlm, after `blas.py` has run).

The language model is wrapped as a plain text model (`TextView`: tokens and a KV cache in,
logits out), so text-only requests on a vision model go through the normal batched path. A
request with images takes an exclusive path (`VisionScheduler`): one at a time, its prompt is
embedded once (the vision tower writes image features at the image tokens' places) and
prefilled in chunks from those embeddings; from then on it decodes token by token like any
sequence (sampling, grammar, end-of-turn, cancellation: worker._Sequence), beside the batch.
Prompts with images never touch the prefix cache: two different images render the same tokens.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import mlx.core as mx

from .jobs import PREFILL_CHUNK, Job, Scheduler
from .worker import _Sequence

if TYPE_CHECKING:
    from .sources import ModelSource
    from .tokenizer import ChatTokenizer
    from .vision import ImagePreparer

__all__ = ["CPU_IMAGE_EDGE", "TextView", "VisionScheduler", "load_vision"]

# Longest image edge on a CPU: the vision tower costs seconds per 512-pixel tile there, so one
# tile per image (SmolVLM's), not up to 16.
CPU_IMAGE_EDGE = 512


class TextView:
    """A vision model's language model as the engine's text model: `model(tokens, cache=...)`
    gives logits over the tokenizer's vocabulary (real checkpoints pad the embedding table
    past it; those ids could never be decoded, so they are cut off)."""

    def __init__(self, vlm: Any, vocab_size: int) -> None:
        """Wrap `vlm.language_model`; `vocab_size`: the tokenizer's."""
        self.vlm = vlm
        self.vocab_size = vocab_size

    @property
    def layers(self) -> Any:
        """The decoder layers (mlx-lm's prompt caches are made one per layer)."""
        return self.vlm.language_model.layers

    def __call__(self, tokens: Any, cache: Any = None, inputs_embeds: Any = None) -> Any:
        """Logits of `tokens` (or of `inputs_embeds` in their places)."""
        out = self.vlm.language_model(tokens, inputs_embeds=inputs_embeds, cache=cache)
        return out.logits[..., : self.vocab_size]


def load_vision(
    source: ModelSource, *, float32: bool, context_window: int | None, seed: int, default_context: int
) -> tuple[TextView, ChatTokenizer, int, ImagePreparer]:
    """A vision model's text view, tokenizer (list-of-parts content), context window and image
    preparer; tiny-random-vlm is written into the cache first. `float32`: for OpenBLAS on a CPU."""
    from mlx_vlm.utils import load

    from .tiny_vlm import write_tiny_vlm
    from .tokenizer import ChatTokenizer
    from .vision import ImagePreparer

    path = write_tiny_vlm(source.path, seed) if source.kind == "tiny-random-vlm" else source.path
    vlm, processor = load(str(path))
    if float32:
        vlm.set_dtype(mx.float32)
    tokenizer = ChatTokenizer.from_directory(path, parts_content=True)
    on_cpu = mx.default_device() == mx.cpu
    images = ImagePreparer(processor, tokenizer, max_edge=CPU_IMAGE_EDGE if on_cpu else None)
    config = vlm.config.text_config
    context = int(getattr(config, "max_position_embeddings", 0) or default_context)
    if context_window is not None:
        context = min(context, context_window)
    return TextView(vlm, tokenizer.vocab_size), tokenizer, context, images


class _VisionSequence(_Sequence):
    """A job with images: embeddings first (vision tower), then decoding as any sequence."""

    def __init__(self, job: Job, model: TextView, tokenizer: ChatTokenizer) -> None:
        super().__init__(job, model, tokenizer)
        self._view = model
        self._ids = mx.array(job.prompt, dtype=mx.uint32)[None]
        self._embeds: Any = None
        self._fed = 0

    def advance(self) -> bool:
        """Embed the prompt, then one prefill chunk per call, then one token per call."""
        last = int(self._ids.shape[1]) - 1
        if self._embeds is None and self._fed < last:
            arrays = {k: mx.array(v) for k, v in (self.job.vision or {}).items()}
            pixels = arrays.pop("pixel_values")
            out = self._view.vlm.get_input_embeddings(self._ids, pixels, **arrays)
            self._embeds = out.inputs_embeds
            mx.eval(self._embeds)
            return False
        if self._fed < last:
            end = min(self._fed + PREFILL_CHUNK, last)
            self._view(
                self._ids[:, self._fed : end],
                cache=self._cache,
                inputs_embeds=self._embeds[:, self._fed : end],
            )
            mx.eval([c.state for c in self._cache])
            self._fed = end
            if end == last:
                # The last prompt token (the generation prompt's end, never an image token) is
                # fed by id, as every decode step is.
                self._pending = self._ids[0, last:]
                self._embeds = None
            return False
        return super().advance()


class VisionScheduler:
    """The model's normal scheduler for text-only jobs, plus jobs with images one at a time."""

    def __init__(self, inner: Scheduler, model: TextView, tokenizer: ChatTokenizer) -> None:
        """`inner` serves text-only jobs of `model`."""
        self._inner = inner
        self._model = model
        self._tokenizer = tokenizer
        self._waiting: deque[Job] = deque()
        self._current: _VisionSequence | None = None

    @property
    def inner(self) -> Scheduler:
        """The scheduler of text-only jobs."""
        return self._inner

    def add(self, job: Job) -> None:
        """Queue `job` on the path its prompt needs."""
        if job.vision is None:
            self._inner.add(job)
        else:
            self._waiting.append(job)

    def step(self) -> None:
        """One step of the text jobs, and one of the current job with images."""
        if len(self._inner):
            self._inner.step()
        while self._current is None and self._waiting:
            job = self._waiting.popleft()
            if job.cancelled:
                continue
            try:
                self._current = _VisionSequence(job, self._model, self._tokenizer)
            except Exception as exc:  # this request fails, the worker carries on
                job.emit(exc)
        current = self._current
        if current is None:
            return
        if current.job.cancelled:
            done = True
        else:
            try:
                done = current.advance()
            except Exception as exc:  # a failed generation must not stop the others
                current.job.emit(exc)
                done = True
        if done:
            self._current = None
            if not len(self):
                mx.clear_cache()

    def fail_all(self, error: BaseException) -> None:
        """End every job, text or image, with `error`."""
        self._inner.fail_all(error)
        if self._current is not None:
            self._current.job.emit(error)
            self._current = None
        while self._waiting:
            self._waiting.popleft().emit(error)

    def __len__(self) -> int:
        """Active jobs on both paths."""
        return len(self._inner) + len(self._waiting) + (self._current is not None)
