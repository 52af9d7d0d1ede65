"""Loading a model for the engine: weights at a precision, CPU set-up, warm-up, grammars.

Runs on the engine's worker thread (mlx.py), after `blas.enable_fast_blas`: it imports MLX.
`load_model` reads the source (sources.py: SmolLM2's GGUF, tiny-random, an mlx-lm or mlx-vlm
directory), converts the weights to the precision served (precision.py, quantized.py), and on
the CPU puts the quantized layers on the kernels of kernels.py and rebuilds llama blocks
(decode.py); then pays one-off costs (first passes, fused-kernel compilation) before any
request, and builds the model's grammar compiler.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .blas import BlasInUse
from .precision import Precision, PrecisionChoice, choose_precision, input_rows
from .sources import TINY_RANDOM_CONTEXT, ModelSource

if TYPE_CHECKING:
    from .constraint import GrammarCompiler
    from .tokenizer import ChatTokenizer
    from .vision import ImagePreparer

__all__ = ["DEFAULT_CONTEXT", "LoadedModel", "load_model", "prepare_text_model"]

_log = logging.getLogger(__name__)
# Context window for mlx-lm directories whose config does not state one.
DEFAULT_CONTEXT = 2048


@dataclass(frozen=True, slots=True)
class LoadedModel:
    """A model ready to serve, with what the engine needs alongside it."""

    model: Any
    tokenizer: ChatTokenizer
    context_window: int
    display_name: str
    # None when llguidance cannot handle this tokenizer; `grammar_problem` says why.
    grammars: GrammarCompiler | None
    grammar_problem: str
    # Vision models only: prepares prompts with images (vision.py).
    images: ImagePreparer | None = None
    # What the weights are (precision.describe_precision): `q4`, `f32`, ...
    precision: str = ""


def load_model(
    source: ModelSource,
    blas: BlasInUse,
    seed: int,
    context_window: int | None,
    precision: PrecisionChoice = "auto",
) -> LoadedModel:
    """Load `source` at `precision` (see mlx.load_engine); runs on the engine's worker thread."""
    import mlx.core as mx

    from .gguf import (
        RAW_BLOCKS,
        SOURCE_WIDTHS,
        load_gguf_model,
        random_llama,
        random_qwen2,
        read_gguf,
        read_metadata,
        requantize,
    )
    from .tokenizer import ChatTokenizer

    mx.random.seed(seed)
    cpu = mx.default_device() == mx.cpu
    fast_cpu = blas == "openblas" and cpu
    if source.kind in ("vlm-dir", "tiny-random-vlm"):
        if precision not in ("auto", "f32"):
            _log.warning(
                "--precision %s is not available for vision models; serving them as before", precision
            )
        return _load_vision(source, fast_cpu, context_window, seed)
    chosen, kernel = _choose_precision(precision, source, cpu=cpu, fast_blas=fast_cpu)
    if source.kind == "gguf":
        # The file's own quantization where MLX reads it (Q4_0/Q4_1/Q8_0 as affine 4- and 8-bit),
        # else float32 from the gguf package (K-quants); converted to `chosen` below.
        blocks = kernel is not None and precision == "auto"  # the file's own blocks (blocks.py)
        model, meta = load_gguf_model(source.path, blocks=blocks)
        if SOURCE_WIDTHS in meta and precision == "auto":
            widths = meta[SOURCE_WIDTHS]
            if blocks:
                # The file's own blocks on the kernel (blocks.py says why); embeddings requantized.
                from .blocks import serve_blocks

                as_blocks = serve_blocks(model, meta.pop(RAW_BLOCKS))
                widths = {path: bits for path, bits in widths.items() if path not in as_blocks}
            requantize(model, widths)  # 4 and 8 bits as the file's: gguf.py says why
            meta.pop(RAW_BLOCKS, None)  # the file's mapping, no longer needed
            chosen = None
        context = int(meta[f"{meta['general.architecture']}.context_length"])
        tokenizer = ChatTokenizer.from_gguf(meta)
    elif source.kind in ("tiny-random", "tiny-random-qwen"):
        qwen = source.kind == "tiny-random-qwen"
        meta = read_metadata(source.path) if qwen else read_gguf(source.path)[1]
        tokenizer = ChatTokenizer.from_gguf(meta)
        context = context_window or TINY_RANDOM_CONTEXT
        build = random_qwen2 if qwen else random_llama
        model = build(seed=seed, vocab_size=tokenizer.vocab_size, context_window=context)
    else:
        from mlx_lm.utils import load_model as load_directory

        model, config = load_directory(source.path)
        tokenizer = ChatTokenizer.from_directory(source.path)
        context = int(
            config.get("max_position_embeddings") or config.get("max_sequence_length") or DEFAULT_CONTEXT
        )
    if context_window is not None and source.kind not in ("tiny-random", "tiny-random-qwen"):
        if context_window > context:
            _log.warning("context window %d exceeds the model's own %d; keeping it", context_window, context)
        context = min(context, context_window)
    from .quantized import apply_precision, describe_precision

    if chosen is not None:
        apply_precision(model, chosen)
    prepare_text_model(model, kernel, cpu=cpu, fast_blas=fast_cpu, activations=input_rows(precision))
    _warm_up(model)
    grammars, problem = _grammar_compiler(tokenizer)
    served = describe_precision(model)
    _log.info("Serving %s with %s weights%s", source.id, served, " on the CPU kernel" if kernel else "")
    return LoadedModel(model, tokenizer, context, source.display_name, grammars, problem, precision=served)


def prepare_text_model(
    model: Any, kernel: ModuleType | None, *, cpu: bool, fast_blas: bool, activations: int = 0
) -> None:
    """Set a text model's weights up for serving, as converted: quantized layers on the CPU
    kernel (on input rows rounded to `activations` bits, precision.py's `input_rows`), llama
    blocks rebuilt for the CPU (decode.py), large attention through NumPy on the OpenBLAS path
    (attention.py). Nothing on a GPU."""
    if kernel is not None:
        from .quantized import use_cpu_kernel

        # No float32 copies for prefill: the kernel carries it, at 0.93x OpenBLAS's speed on
        # those copies (1024 SmolLM2 tokens in chunks: 174-211 against 208-223 tok/s,
        # alternating, 2026-12-06), and they were 425 MB, more than the whole served model.
        use_cpu_kernel(model, kernel, dense=False, activations=activations)
    if cpu:
        from .decode import install_fast_decode

        install_fast_decode(model)
    if fast_blas:
        from .attention import install_numpy_softmax

        install_numpy_softmax(model)


def _choose_precision(
    requested: PrecisionChoice, source: ModelSource, *, cpu: bool, fast_blas: bool
) -> tuple[Precision | None, ModuleType | None]:
    """The precision to convert to (None: as loaded) and the CPU kernel its layers will use."""
    chosen = choose_precision(requested, kind=source.kind, cpu=cpu, kernel=True)
    if not cpu or chosen not in ("q8", "q4"):
        return chosen, None
    from .kernels import load_kernel

    kernel = load_kernel()
    if kernel is not None:
        return chosen, kernel
    if requested == "auto":
        # Without the kernel: float32 on OpenBLAS, else MLX's own (scalar) quantized kernel,
        # which still beats the reference BLAS on float32 weights.
        return ("f32" if fast_blas else None), None
    _log.warning("--precision %s without the CPU kernel runs on MLX's own, much slower, kernel", requested)
    return chosen, None


def _load_vision(source: ModelSource, fast_cpu: bool, context_window: int | None, seed: int) -> LoadedModel:
    # Runs on the worker thread, after blas.py (mlx-vlm imports mlx.core).
    from .vision_worker import load_vision

    model, tokenizer, context, images = load_vision(
        source, float32=fast_cpu, context_window=context_window, seed=seed, default_context=DEFAULT_CONTEXT
    )
    _warm_up(model)
    grammars, problem = _grammar_compiler(tokenizer)
    from .quantized import describe_precision

    return LoadedModel(
        model,
        tokenizer,
        context,
        source.display_name,
        grammars,
        problem,
        images,
        describe_precision(model.vlm),
    )


def _grammar_compiler(tokenizer: ChatTokenizer) -> tuple[GrammarCompiler | None, str]:
    # Built once per model: llguidance preprocesses the whole vocabulary. A tokenizer it
    # cannot read leaves the model usable, only without constrained decoding.
    from .constraint import GrammarCompiler

    try:
        return GrammarCompiler(tokenizer), ""
    except Exception as exc:
        _log.warning("Constrained decoding is unavailable for this model: %s", exc)
        return None, f"constrained decoding is unavailable for this model ({exc})"


def _warm_up(model: Any) -> None:
    # The first forward passes pay one-off setup; pay it at load, not on a client's request.
    import mlx.core as mx
    from mlx_lm.models.cache import KVCache, make_prompt_cache

    cache = make_prompt_cache(model)
    mx.eval(model(mx.array([[1, 2, 3, 4, 5, 6, 7, 8]]), cache=cache))
    mx.eval(model(mx.array([[9]]), cache=cache))
    # Batched decode steps too (rows of different lengths, so left-padded): on the CPU, MLX
    # compiles a fused kernel with the C++ compiler the first time it meets each layout (about
    # a second each, cached on disk), which a client's first batched token would otherwise wait.
    from mlx_lm.models.cache import BatchKVCache

    if all(type(layer) is KVCache for layer in cache):
        for rows in (2, 3):
            caches = []
            for row in range(rows):
                single = make_prompt_cache(model)
                mx.eval(model(mx.array([list(range(1, 3 + 2 * row))]), cache=single))
                caches.append(single)
            batch = [BatchKVCache.merge([c[i] for c in caches]) for i in range(len(cache))]  # type: ignore[no-untyped-call]
            mx.eval(model(mx.array([[9]] * rows), cache=batch))
    mx.clear_cache()
