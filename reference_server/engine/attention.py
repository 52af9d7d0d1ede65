"""Prefill attention on the CPU with NumPy's vectorised `exp`.

MLX's CPU backend computes `exp` one element at a time (about 12 ns each here), and attention
over a long prompt is mostly `exp`: heads x prompt x context of them. For a 2,048-token prompt
on SmolLM2 that was half the prefill time (7.6 of 15 s). NumPy's SIMD `exp` is ~20x faster, so
when the score matrix is large this computes the softmax in NumPy and the two matmuls in MLX
(on the BLAS that blas.py installed): the same prefill took 8.5 s, with the same logits to 1e-6.

Installed per model architecture module (`mlx_lm.models.llama`, ...) by wrapping the
`scaled_dot_product_attention` that mlx-lm's attention layers call; anything this path does not
handle (quantized KV cache, attention sinks, non-float32, small score matrices such as decode
steps) goes to the original. Used only on the CPU fast path; runs on the engine's worker thread.
"""

from __future__ import annotations

import sys
from typing import Any

import mlx.core as mx
import numpy as np

__all__ = ["NUMPY_MIN_SCORES", "install_numpy_softmax", "numpy_softmax_attention"]

# Below about a million scores (a decode step is heads x context, at most ~74k for SmolLM2)
# the copy to NumPy and back costs more than MLX's slow exp.
NUMPY_MIN_SCORES = 1 << 20
_MARK = "_plumbline_numpy_softmax"


def numpy_softmax_attention(queries: Any, keys: Any, values: Any, *, scale: float, mask: Any) -> Any:
    """softmax(q k^T * scale + mask) v, like `mx.fast.scaled_dot_product_attention`.

    `queries` (B, H, L, D); `keys`, `values` (B, KV, S, D) with H a multiple of KV (grouped-query
    heads h use KV head h // (H // KV)); `mask`: None, "causal" (aligned to the last query and
    key), or a boolean (True = attend) or additive array broadcastable to (B, H, L, S).
    """
    batch, heads, length, dim = queries.shape
    kv_heads, context = keys.shape[1], keys.shape[2]
    group = heads // kv_heads
    # Query heads sharing a KV head become extra rows of one matmul: no copies of K or V.
    scores = (queries * scale).reshape(batch, kv_heads, group * length, dim) @ keys.swapaxes(-1, -2)
    grid = np.array(scores).reshape(batch, kv_heads, group, length, context)
    if isinstance(mask, str):  # "causal": query i sees keys up to context - length + i
        upper = np.triu(np.full((length, length), -np.inf, dtype=np.float32), k=1)
        tail = grid[..., context - length :]
        np.add(tail, upper, out=tail)
    elif mask is not None:
        extra = np.broadcast_to(np.array(mask), (batch, heads, length, context)).reshape(grid.shape)
        if extra.dtype == np.bool_:
            grid[~extra] = -np.inf
        else:
            grid += extra
    peak = grid.max(axis=-1, keepdims=True)
    peak[~np.isfinite(peak)] = 0.0  # a fully masked row stays all zeros instead of NaN
    grid -= peak
    np.exp(grid, out=grid)
    total = grid.sum(axis=-1, keepdims=True)
    grid *= np.reciprocal(total, where=total > 0, out=np.zeros_like(total))
    weights = mx.array(grid).reshape(batch, kv_heads, group * length, context)
    return (weights @ values).reshape(batch, heads, length, values.shape[-1])


def install_numpy_softmax(model: Any) -> bool:
    """Route large attention computations of `model`'s architecture through NumPy's softmax.

    Returns False when the architecture's module does not call mlx-lm's shared
    `scaled_dot_product_attention` (then nothing changes).
    """
    module = sys.modules.get(type(model).__module__)
    original = getattr(module, "scaled_dot_product_attention", None)
    if module is None or original is None:
        return False
    if getattr(original, _MARK, False):
        return True

    def attention(
        queries: Any,
        keys: Any,
        values: Any,
        cache: Any,
        scale: float,
        mask: Any,
        sinks: Any = None,
    ) -> Any:
        batch, heads, length, _ = queries.shape
        if (
            sinks is None
            and not hasattr(cache, "bits")  # quantized KV cache
            and queries.dtype == mx.float32
            and (mask is None or isinstance(mask, mx.array) or (isinstance(mask, str) and mask == "causal"))
            and batch * heads * length * keys.shape[2] >= NUMPY_MIN_SCORES
        ):
            return numpy_softmax_attention(queries, keys, values, scale=scale, mask=mask)
        return original(queries, keys, values, cache=cache, scale=scale, mask=mask, sinks=sinks)

    setattr(attention, _MARK, True)
    vars(module)["scaled_dot_product_attention"] = attention
    return True
