"""Llama-family blocks (llama, qwen2) on the CPU in far fewer MLX operations.

On the CPU, MLX's "fast" operations (RMS norm, rotary embedding) are built out of their
reference decompositions, so one SmolLM2 decode step was a graph of about 4,100 operations,
each paying microseconds of scheduling: once the quantized kernel made the products cheap, that
was most of the step. Each transformer block of an `mlx_lm` llama model is rebuilt so that
- the query, key and value projections are one product, as are the gate and up projections
  (the weights' rows concatenated, quantized ones included, so each output is computed exactly
  as before);
- a decode step (one token per row) is, per layer: the projection (with the kernel: one
  operation for norm, product, rotary embedding and layouts, cpu/projection.cpp; in float32 a
  compiled function), the KV-cache update (mlx-lm's), the attention over the cache (with the
  kernel: cpu/attention.cpp) and one compiled function for the rest, where the kernel's
  products take the RMS norm, SwiGLU and residual adds in (293 operations per step in all);
- the rotary embedding of a decode step reads cos/sin tables computed once at load with the
  same float32 formula as `mx.fast.rope`.
Prefill (several tokens per row) runs the same fused products uncompiled, with `mx.fast.rope`
and the architecture's attention (attention.py's). The caches are mlx-lm's, unchanged, so
batching and the prompt cache work as before. Installed on the CPU only (Metal has fused kernels
for these operations), for `mlx_lm.models.llama` blocks without projection biases and
`mlx_lm.models.qwen2` blocks (a llama block with biases on the query, key and value projections:
fused into one bias, added after the product and before the rotation, on every path); the
weights are taken as fixed once installed. Other architectures keep mlx-lm's own blocks.
"""

from __future__ import annotations

import logging
import math
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
from mlx.nn.layers.base import Module
from mlx.nn.layers.positional_encoding import RoPE
from mlx_lm.models import qwen2
from mlx_lm.models.base import create_attention_mask
from mlx_lm.models.cache import BatchKVCache, KVCache
from mlx_lm.models.llama import LlamaModel, Model, TransformerBlock

from .quantized import (
    concatenate_linears,
    cpu_kernel,
    float_matmul,
    input_bits,
    kernel_matmul,
    linear_parts,
)

__all__ = ["FastLlamaBlock", "FastLlamaModel", "chain_logits", "chain_ready", "install_fast_decode"]

_log = logging.getLogger(__name__)
# A linear layer's arrays, its kernel format (group size, bits; None: float), and the float32
# copy prefill uses (quantized.use_cpu_kernel keeps one; None in a compiled decode step).
Linear = tuple[tuple[mx.array, ...], tuple[int, int] | None, mx.array | None]


# The mlx-lm architectures rebuilt here: (model, inner model) classes.
_ARCHITECTURES = ((Model, LlamaModel), (qwen2.Model, qwen2.Qwen2Model))
_QKV = ("q_proj", "k_proj", "v_proj")


def install_fast_decode(model: Any) -> bool:
    """Rebuild the blocks of an `mlx_lm` llama or qwen2 `model` in place; False (nothing
    changed) when its architecture or layers are not the plain ones this handles."""
    inner = getattr(model, "model", None)
    if (type(model), type(inner)) not in _ARCHITECTURES or not model.model.layers:
        return False
    args = model.args
    rope = model.model.layers[0].self_attn.rope
    if (
        getattr(args, "attention_bias", False)
        or getattr(args, "mlp_bias", False)
        or type(rope) is not RoPE
        or rope.dims != _head_dim(model.model.layers[0].self_attn)
    ):
        return False
    if any(getattr(layer, "use_sliding", False) for layer in model.model.layers):
        return False
    for layer in model.model.layers:
        attn = layer.self_attn
        if len({"bias" in attn[name] for name in _QKV}) != 1:
            return False  # biases on some of q/k/v only
        formats = {}
        for name, linear in (*attn.children().items(), *layer.mlp.children().items()):
            if isinstance(linear, Module) and not isinstance(linear, RoPE):
                try:
                    formats[name] = linear_parts(linear, bias=name in _QKV)[1]
                except TypeError:
                    return False  # e.g. quantized layers without the CPU kernel
        if len({formats.get(n) for n in _QKV}) != 1 or formats.get("gate_proj") != formats.get("up_proj"):
            return False  # products to fuse differ in format
    for layer in model.model.layers:
        FastLlamaBlock.convert(layer)
    model.model.rope_tables = _rope_tables(rope, int(args.max_position_embeddings or 0))
    # Same parameters (some fused), another `__call__`.
    model.model.__class__ = FastLlamaModel
    mx.eval(model.parameters())
    return True


def chain_ready(model: Any) -> bool:
    """True when `chain_logits` can run on `model`: its blocks are rebuilt here, every one runs
    as one operation of the kernel (all products quantized), and the kernel is loaded."""
    inner = getattr(model, "model", None)
    return (
        type(inner) is FastLlamaModel
        and inner.rope_tables is not None
        and cpu_kernel() is not None
        and all(layer._fused is not None for layer in inner.layers)
    )


def chain_logits(model: Any, tokens: mx.array, cache: list[Any]) -> mx.array:
    """The logits (T, vocab) after each of `tokens` (T,), consecutive tokens of the one sequence
    in `cache` (a `KVCache` or a one-row `BatchKVCache` per layer, float32), which advances by T:
    every position computed exactly as a decode step there computes it (cpu/layer.cpp's `chain`
    mode), in one pass over the weights. What speculative decoding verifies drafts with; the
    caller checks `chain_ready` first."""
    inner: FastLlamaModel = model.model
    inner.chain = True
    try:
        logits: mx.array = model(tokens[None], cache=cache)[0]
    finally:
        inner.chain = False
    return logits


def _head_dim(attn: Any) -> int:
    # qwen2's attention keeps no `head_dim`: its rotation covers the whole head.
    return int(getattr(attn, "head_dim", None) or attn.rope.dims)


def _rope_tables(rope: RoPE, positions: int) -> tuple[mx.array, mx.array, mx.array] | None:
    """Per position, the cos and signed sin of each of a head's dimensions, and the permutation
    that pairs each dimension with the one it rotates with, so that a rotary embedding is
    `x * cos + (x @ pairs) * sin`. Angles as `mx.fast.rope` computes them on the CPU (float32,
    (position * scale) * exp(-i * log(base) / half)), so the two agree exactly."""
    if positions <= 0:
        return None
    half = rope.dims // 2
    inv_freqs = mx.exp(mx.arange(0, -half, -1, dtype=mx.float32) * mx.array(math.log(rope.base) / half))
    theta = (mx.arange(positions, dtype=mx.float32) * mx.array(rope.scale, dtype=mx.float32))[
        :, None
    ] * inv_freqs
    cos, sin = mx.cos(theta), mx.sin(theta)
    index = mx.arange(rope.dims)
    if rope.traditional:  # pairs (2i, 2i + 1)
        cos_full = mx.repeat(cos, 2, axis=1)
        sin_full = mx.stack([-sin, sin], axis=-1).reshape(positions, rope.dims)
        partner = index + 1 - 2 * (index % 2)
    else:  # pairs (i, i + half)
        cos_full = mx.concatenate([cos, cos], axis=1)
        sin_full = mx.concatenate([-sin, sin], axis=1)
        partner = (index + half) % rope.dims
    pairs = (partner[:, None] == index[None, :]).astype(mx.float32)  # x @ pairs: x[partner[j]]
    mx.eval(cos_full, sin_full, pairs)
    return cos_full, sin_full, pairs


@dataclass(frozen=True, slots=True)
class _Angles:
    """A decode step's rotary embedding: per row cos, signed sin and the pairing (for the
    compiled float path), and the positions and whole tables (for the kernel's projection)."""

    rows: tuple[mx.array, mx.array, mx.array]
    positions: mx.array
    cos: mx.array
    sin: mx.array


class FastLlamaModel(LlamaModel):
    """`LlamaModel` whose decode steps gather the rotary tables once for all layers."""

    rope_tables: tuple[mx.array, mx.array, mx.array] | None
    # Set by `chain_logits` for one call: the tokens are one sequence's next ones, not a prefill.
    chain = False

    @property
    def pipeline_layers(self) -> list[Any]:
        """Every layer: qwen2's `Model.layers` reads its inner model's pipeline slice."""
        layers: list[Any] = self.layers
        return layers

    def __call__(
        self, inputs: mx.array, cache: Any = None, input_embeddings: mx.array | None = None
    ) -> mx.array:
        h = input_embeddings if input_embeddings is not None else self.embed_tokens(inputs)
        if cache is None:
            cache = [None] * len(self.layers)
        angles = self._angles(h, cache[0])
        # A decode step's attention masks the batch's left padding itself (`_attend`).
        mask = create_attention_mask(h, cache[0]) if angles is None else None
        blocks: list[Any] = self.layers  # FastLlamaBlock, once converted
        for layer, layer_cache in zip(blocks, cache, strict=True):
            h = layer(h, mask, layer_cache, angles)
        if angles is not None and type(cache[0]) is BatchKVCache:
            # Every layer's cache advanced its own `offset` by one (a lazy add); all are equal,
            # and only the first one's is read (for the positions), so the others would grow a
            # chain of unevaluated adds, one more per step. Share the first one's.
            for layer_cache in cache[1:]:
                layer_cache.offset = cache[0].offset
        out: mx.array = self.norm(h)
        return out

    def _angles(self, h: mx.array, cache: Any) -> _Angles | None:
        # Only for a decode step (or a chain) on the caches mlx-lm batches or keeps per sequence.
        tokens = h.shape[1]
        if self.rope_tables is None or type(cache) not in (KVCache, BatchKVCache):
            return None
        if tokens != 1 and not (self.chain and h.shape[0] == 1):
            return None
        cos, sin, pairs = self.rope_tables
        # The furthest position any row is at (a batch's rows are left-padded up to `_idx`).
        furthest = cache._idx if type(cache) is BatchKVCache else cache.offset
        if furthest + tokens > cos.shape[0]:
            if self.chain:
                raise ValueError("a chain past the rotary tables")
            return None  # past the tables: mx.fast.rope computes it
        offset = cache.offset
        positions = offset if isinstance(offset, mx.array) else mx.array([offset])
        if self.chain:  # one sequence's consecutive positions
            positions = positions[:1] + mx.arange(tokens, dtype=positions.dtype)
        # (rows, 1, head_dim): broadcast over the heads of each row (the compiled float path;
        # lazy, so never computed when the kernel's projection reads the tables itself).
        rows = cos[positions][:, None, :], sin[positions][:, None, :], pairs
        return _Angles(rows, positions, cos, sin)


class FastLlamaBlock(TransformerBlock):
    """A llama block with fused projections; see the module docstring."""

    qkv: Module
    qkv_bias: mx.array  # qwen2's; absent on llama blocks
    gate_up: Module
    _layout: tuple[_Config, tuple[mx.array, mx.array], tuple[Linear, ...], tuple[Any, ...], mx.array | None]
    # The module whose `scaled_dot_product_attention` prefill calls (attention.py may wrap it).
    _attention_module: str
    # For the kernel's whole-layer step (cpu/layer.cpp): its weights in order and the products'
    # (group size, bits); None when a product is not quantized.
    _fused: tuple[list[mx.array], list[int]] | None

    @classmethod
    def convert(cls, block: TransformerBlock) -> None:
        """Fuse `block`'s projections in place and make it a `FastLlamaBlock`."""
        attn, mlp = block.self_attn, block.mlp
        architecture = type(block).__module__
        if "bias" in attn.q_proj:
            block.qkv_bias = mx.concatenate([attn[name]["bias"].astype(mx.float32) for name in _QKV])
            for name in _QKV:
                del attn[name]["bias"]
        if not hasattr(attn, "head_dim"):
            attn.head_dim = _head_dim(attn)
        block.qkv = concatenate_linears([attn.q_proj, attn.k_proj, attn.v_proj])
        block.gate_up = concatenate_linears([mlp.gate_proj, mlp.up_proj])
        block.o_proj, block.down_proj = attn.o_proj, mlp.down_proj
        # The fused products replace these; keeping them would hold the weights twice.
        for module, names in (
            (attn, ("q_proj", "k_proj", "v_proj", "o_proj")),
            (mlp, ("gate_proj", "up_proj", "down_proj")),
        ):
            for name in names:
                del module[name]
        block.__class__ = cls
        object.__setattr__(block, "_attention_module", architecture)
        block.freeze_layout()

    def freeze_layout(self) -> None:
        """Gather what every call needs once (the weights are fixed once served): working it
        out per layer and step cost a decode step about a millisecond of Python."""
        attn = self.self_attn
        kv_heads = attn.n_kv_heads or attn.n_heads
        config = _Config(attn.n_heads, kv_heads, attn.head_dim, self.args.rms_norm_eps, attn.scale)
        linears = tuple(
            (*linear_parts(layer), layer.get("dense"))
            for layer in (self.qkv, self.o_proj, self.gate_up, self.down_proj)
        )
        norms = (self.input_layernorm.weight, self.post_attention_layernorm.weight)
        bias = self.get("qkv_bias")
        decode = (
            config,
            tuple(linear[1] for linear in linears),
            (norms[0], *linears[0][0]),
            (norms[1], *linears[1][0], *linears[2][0], *linears[3][0]),
        )
        # Plain attributes, outside the parameter tree (Module keeps arrays and tuples there).
        object.__setattr__(self, "_layout", (config, norms, linears, decode, bias))
        formats = [linear[1] for linear in linears]
        fused = None
        if all(f is not None for f in formats):
            qkv, o_proj, gate_up, down = (list(linear[0]) for linear in linears)
            flat = [value for f in formats if f is not None for value in f]
            fused = ([norms[0], *qkv, *o_proj, norms[1], *gate_up, *down], flat)
        object.__setattr__(self, "_fused", fused)

    def __call__(
        self,
        x: mx.array,
        mask: Any = None,
        cache: Any = None,
        angles: _Angles | None = None,
    ) -> mx.array:
        config, norms, linears, (_, formats, first, second), bias = self._layout
        if angles is None or cache is None:
            return self._prefill(x, mask, cache, config, norms, linears, bias)
        kernel = cpu_kernel()
        tokens = x.shape[1]
        if self._fused is not None and kernel is not None and _owns_room(cache, tokens):
            return self._layer_step(x, cache, angles, kernel, config, tokens)
        if tokens != 1:
            raise ValueError("a chain needs the kernel's whole-layer step (chain_ready)")
        before, after = _compiled(config, *formats, biased=bias is not None)
        if formats[0] is not None and formats[0][0] != 0 and kernel is not None and bias is None:
            # One operation for norm, product, rotation and layouts (cpu/projection.cpp).
            group_size, bits = formats[0]
            queries, keys, values = kernel.decode_projection(
                x,
                *first[1:],
                group_size,
                bits,
                first[0],
                config.eps,
                angles.cos,
                angles.sin,
                angles.positions,
                config.heads,
                config.kv_heads,
                config.dim,
                self.self_attn.rope.traditional,
                config.scale,
                input_bits(),
            )
        else:
            queries, keys, values = before(x, *angles.rows, *first, *(() if bias is None else (bias,)))
        cache.update_and_fetch(keys, values)
        out = _attend(queries, cache)
        result: mx.array = after(x, out, *second)
        return result

    def _layer_step(
        self, x: mx.array, cache: Any, angles: _Angles, kernel: Any, config: _Config, tokens: int = 1
    ) -> mx.array:
        """The whole layer as one operation of the kernel (cpu/layer.cpp), which writes this
        token's keys and values into the cache's spare capacity in place (`_owns_room`); with
        `tokens` > 1, a chain of one sequence's next tokens (`chain_logits`)."""
        assert self._fused is not None
        weights, formats = self._fused
        bias = self._layout[4]
        batched = type(cache) is BatchKVCache
        length = cache._idx if batched else cache.offset
        arrays = [x, *weights, angles.cos, angles.sin, angles.positions, cache.keys, cache.values]
        if batched:
            arrays.append(cache.left_padding)
        if bias is not None:
            arrays.append(bias)
        h, cache.keys, cache.values = kernel.decode_layer(
            arrays,
            formats,
            config.eps,
            config.heads,
            config.kv_heads,
            config.dim,
            self.self_attn.rope.traditional,
            config.scale,
            length,
            input_bits(),
            bias is not None,
            tokens > 1,
        )
        # A new array, as mlx-lm does: `+=` would change the positions array in place, and this
        # step's later layers read it.
        cache.offset = cache.offset + tokens
        if batched:
            cache._idx += tokens
        out: mx.array = h
        return out

    def _prefill(
        self,
        x: mx.array,
        mask: Any,
        cache: Any,
        config: _Config,
        norms: tuple[mx.array, mx.array],
        linears: tuple[Linear, ...],
        bias: mx.array | None,
    ) -> mx.array:
        # Several tokens per row: mlx-lm's arithmetic on the fused products, uncompiled.
        qkv, o_proj, gate_up, down = linears
        batch, length, _ = x.shape
        heads, kv_heads, dim = config.heads, config.kv_heads, config.dim
        y = _linear(x, qkv, norms[0], config.eps)
        if bias is not None:
            y = y + bias
        q, k, v = mx.split(y, [heads * dim, (heads + kv_heads) * dim], axis=-1)
        q = q.reshape(batch, length, heads, dim).transpose(0, 2, 1, 3)
        k = k.reshape(batch, length, kv_heads, dim).transpose(0, 2, 1, 3)
        v = v.reshape(batch, length, kv_heads, dim).transpose(0, 2, 1, 3)
        rope = self.self_attn.rope
        offset = cache.offset if cache is not None else 0
        q, k = rope(q, offset=offset), rope(k, offset=offset)
        if cache is not None:
            k, v = cache.update_and_fetch(k, v)
        # The architecture module's attention, which attention.py may have wrapped.
        attend = sys.modules[self._attention_module].scaled_dot_product_attention
        out = attend(q, k, v, cache=cache, scale=config.scale, mask=mask)
        out = out.transpose(0, 2, 1, 3).reshape(batch, length, -1)
        return _finish(x, out, norms[1], o_proj, gate_up, down, config.eps)


@dataclass(frozen=True, slots=True)
class _Config:
    heads: int
    kv_heads: int
    dim: int
    eps: float
    scale: float


def _linear(
    x: mx.array,
    linear: Linear,
    norm: mx.array | None = None,
    eps: float = 0.0,
    *,
    swiglu: bool = False,
    residual: mx.array | None = None,
) -> mx.array:
    weights, quantized, dense = linear
    if quantized is None:
        return float_matmul(x, weights[0], norm=norm, eps=eps, swiglu=swiglu, residual=residual)
    weight, scales, biases = weights
    group_size, bits = quantized
    return kernel_matmul(
        x,
        weight,
        scales,
        biases,
        group_size,
        bits,
        norm=norm,
        eps=eps,
        swiglu=swiglu,
        residual=residual,
        dense=dense,
    )


def _owns_room(cache: Any, count: int = 1) -> bool:
    """Make room in `cache` (mlx-lm's `KVCache` or `BatchKVCache`, float32) for `count` more
    positions as its `update_and_fetch` would, and say whether the kernel may write them in
    place: True unless the cache is empty or not float32.

    In place is safe because the buffer's positions from the cache's length on are its own:
    mlx-lm allocates spare capacity only in a fresh buffer (`mx.zeros`, concatenated), and every
    other array sharing a buffer (a prefix-cache entry, a prompt cache restored from one with no
    spare room, the views `update_and_fetch` returns) covers positions below that length."""
    keys = cache.keys
    if keys is None or keys.dtype != mx.float32 or cache.values.dtype != mx.float32:
        return False
    length = cache._idx if type(cache) is BatchKVCache else cache.offset
    if length + count <= keys.shape[2]:
        return True
    batch, kv_heads, _, dim = keys.shape
    if length != keys.shape[2]:  # a trimmed chain, or a length between steps
        cache.keys, cache.values = keys[..., :length, :], cache.values[..., :length, :]
    room = (batch, kv_heads, -(-count // cache.step) * cache.step, dim)
    cache.keys = mx.concatenate([cache.keys, mx.zeros(room, mx.float32)], axis=2)
    cache.values = mx.concatenate(
        [cache.values, mx.zeros((*room[:3], cache.values.shape[3]), mx.float32)], axis=2
    )
    return True


def _attend(queries: mx.array, cache: Any) -> mx.array:
    """One query per row, its grouped heads (B, KV, G, D) already scaled, against the cache just
    updated: the kernel's attention when it is loaded, else the arithmetic of attention.py's
    `decode_attention` on mlx-lm's view of the cache."""
    batched = type(cache) is BatchKVCache
    length = cache._idx if batched else cache.offset
    kernel = cpu_kernel()
    if kernel is not None:
        out: mx.array = kernel.decode_attention(
            queries, cache.keys, cache.values, length, cache.left_padding if batched else None
        )
        return out
    keys, values = cache.keys[..., :length, :], cache.values[..., :length, :]
    scores = queries @ keys.swapaxes(-1, -2)
    if batched:
        attend = mx.arange(length)[None, None, None, :] >= cache.left_padding[:, None, None, None]
        scores = mx.where(attend, scores, mx.array(-mx.inf, dtype=scores.dtype))
    weighted: mx.array = mx.softmax(scores, axis=-1) @ values
    return weighted


def _finish(
    x: mx.array,
    attention: mx.array,
    norm: mx.array,
    o_proj: Linear,
    gate_up: Linear,
    down: Linear,
    eps: float,
) -> mx.array:
    h = _linear(attention, o_proj, residual=x)
    return _linear(_linear(h, gate_up, norm, eps), down, swiglu=True, residual=h)


# Per thread: MLX binds a compiled function's graph to the streams of the thread that traced
# it, and each engine runs its model on a worker thread of its own.
_COMPILED = threading.local()


def _compiled(
    config: _Config,
    qkv: tuple[int, int] | None,
    o_proj: tuple[int, int] | None,
    gate_up: tuple[int, int] | None,
    down: tuple[int, int] | None,
    *,
    biased: bool = False,
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The compiled halves of a decode step for one layer configuration (shared by all layers
    that have it: their weights are arguments; with `biased`, the q/k/v bias comes last)."""
    # input_bits() is read while tracing: part of the key.
    key = (config, qkv, o_proj, gate_up, down, biased, input_bits())
    cache: dict[tuple[Any, ...], tuple[Callable[..., Any], Callable[..., Any]]] = vars(_COMPILED).setdefault(
        "functions", {}
    )
    if key in cache:
        return cache[key]
    o_count = 1 if o_proj is None else 3
    gate_up_count = 1 if gate_up is None else 3
    heads, kv_heads, dim = config.heads, config.kv_heads, config.dim
    # Queries are scaled for attention here, fused with the rotation.
    head_scale = mx.array([config.scale] * heads + [1.0] * kv_heads)[:, None]

    def before(
        x: mx.array, cos: mx.array, sin: mx.array, pairs: mx.array, norm: mx.array, *weights: mx.array
    ) -> Any:
        batch = x.shape[0]
        products, bias = (weights[:-1], weights[-1]) if biased else (weights, None)
        y = _linear(x, (products, qkv, None), norm, config.eps)
        if bias is not None:
            y = y + bias
        y = y.reshape(batch, heads + 2 * kv_heads, dim)
        qk = y[:, : heads + kv_heads]
        rotated = (qk * cos + (qk @ pairs) * sin) * head_scale
        queries = rotated[:, :heads].reshape(batch, kv_heads, heads // kv_heads, dim)
        keys = rotated[:, heads:].reshape(batch, kv_heads, 1, dim)
        values = y[:, heads + kv_heads :].reshape(batch, kv_heads, 1, dim)
        return queries, keys, values

    def after(x: mx.array, attention: mx.array, norm: mx.array, *weights: mx.array) -> mx.array:
        o_w = weights[:o_count]
        gate_up_w = weights[o_count : o_count + gate_up_count]
        down_w = weights[o_count + gate_up_count :]
        flat = attention.reshape(x.shape[0], 1, heads * dim)
        linears = (o_w, o_proj, None), (gate_up_w, gate_up, None), (down_w, down, None)
        return _finish(x, flat, norm, *linears, config.eps)

    cache[key] = (mx.compile(before), mx.compile(after))
    return cache[key]
