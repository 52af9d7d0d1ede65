"""A GGUF file's linear layers served as its own blocks (cpu/blocks.cpp), not requantized.

A decode step reads every weight once, so on the CPU its time is the bytes it reads. Requantized
to MLX's affine layout (4 or 8 bits and a float32 scale and bias per 32 weights),
Qwen2.5-Coder-0.5B's Q4_K_M read 590 MB a token against the 392 MB llama.cpp reads of the same
file. Here each layer keeps a GGML block type the kernel multiplies directly:
- Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: the file's bytes as they are (exact; Q5_0 rows with each two
  blocks' bytes regrouped, which the kernel unpacks with fewer instructions);
- Q4_K and Q5_K: each 32-weight sub-block becomes a Q4_1 / Q5_1 block (scale d * sc and offset
  -dmin * m rounded to float16: 1/2048 of the scale at most; the quantized values exact);
- anything else (Q6_K, Q3_K, IQ types, float): Q8_0 from the file's values, or Q4_1 where the
  source has 4 bits or fewer.
Layers the engine fuses into one product (q/k/v, gate/up) must share a type: mixed ones become
Q8_0, exactly so from Q4_0 and Q5_0 (same scale, q - 8 or q - 16 as the int8).

Imports MLX: import it only after `blas.enable_fast_blas` (loading.py does, lazily).
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
import numpy as np

from .gguf import FOUR_BITS
from .quantized import BlockLinear

__all__ = ["BLOCK_BYTES", "dequantize_rows", "encode_rows", "serve_blocks", "to_block_rows"]

# GGML type id -> bytes per 32-weight block (cpu/qmm.h's BlockKind); 106 is ours: Q5_0 with each
# two blocks' bytes regrouped (scales, fifth bits, nibbles: cpu/blocks.cpp's tile_pairs), what
# Q5_0 rows of a width that is a multiple of 64 are served as.
BLOCK_BYTES = {2: 18, 3: 20, 6: 22, 7: 24, 8: 34, 106: 22}
_Q5_0_PAIRS = 106
_NAMES = {"Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8}
_Q8_0 = 8
# The product families the engine fuses (decode.py), by the layer's last name.
_FUSED = {"q_proj": "qkv", "k_proj": "qkv", "v_proj": "qkv", "gate_proj": "mlp", "up_proj": "mlp"}


def _qtype(name: str) -> Any:
    from gguf.constants import GGMLQuantizationType

    return GGMLQuantizationType[name]


def _paired(rows: np.ndarray) -> np.ndarray:
    """Q5_0 rows with each two blocks regrouped: both scales, both words of fifth bits, both
    blocks' nibbles (44 bytes)."""
    pairs = rows.reshape(rows.shape[0], -1, 2, 22)
    fields = [pairs[..., 0:2], pairs[..., 2:6], pairs[..., 6:22]]
    grouped = [field.reshape(rows.shape[0], pairs.shape[1], -1) for field in fields]
    return np.ascontiguousarray(np.concatenate(grouped, axis=-1).reshape(rows.shape[0], -1))


def _unpaired(rows: np.ndarray) -> np.ndarray:
    pairs = rows.reshape(rows.shape[0], -1, 44)
    scales = pairs[..., 0:4].reshape(*pairs.shape[:2], 2, 2)
    bits = pairs[..., 4:12].reshape(*pairs.shape[:2], 2, 4)
    nibbles = pairs[..., 12:44].reshape(*pairs.shape[:2], 2, 16)
    return np.concatenate([scales, bits, nibbles], axis=-1).reshape(rows.shape[0], -1)


def dequantize_rows(rows: np.ndarray, kind: int) -> np.ndarray:
    """The float32 (N, K) values of block rows of GGML type `kind`."""
    if kind == _Q5_0_PAIRS:
        rows, kind = _unpaired(rows), _NAMES["Q5_0"]
    return _dequantized(next(n for n, k in _NAMES.items() if k == kind), rows)


def _dequantized(type_name: str, raw: np.ndarray) -> np.ndarray:
    from gguf.quants import dequantize

    values: np.ndarray = dequantize(raw, _qtype(type_name)).astype(np.float32, copy=False)
    return values


def encode_rows(values: np.ndarray, kind: int) -> np.ndarray:
    """Float (N, K) values as block rows of GGML type `kind` (the gguf package's quantizer)."""
    from gguf.quants import quantize

    name = next(n for n, k in _NAMES.items() if k == kind)
    rows: np.ndarray = quantize(np.ascontiguousarray(values, dtype=np.float32), _qtype(name))
    return rows


def _k_quant_as_blocks(raw: np.ndarray, fifth: bool) -> np.ndarray:
    """Q4_K (Q5_K with `fifth`) rows as Q4_1 (Q5_1) rows: each 32-weight sub-block of a 256-weight
    super-block keeps its quantized values; its scale d * sc and offset -dmin * m go to float16."""
    from gguf.quants import Q4_K

    rows = raw.shape[0]
    per_row = raw.shape[1] // (176 if fifth else 144)
    blocks = raw.reshape(rows * per_row, -1)
    d = blocks[:, 0:2].view(np.float16).astype(np.float32)
    dmin = blocks[:, 2:4].view(np.float16).astype(np.float32)
    sc, m = Q4_K.get_scale_min(blocks[:, 4:16])
    at = 16
    high = None
    if fifth:
        high = blocks[:, at : at + 32]
        at += 32
    halves = np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    qs = blocks[:, at : at + 128].reshape(-1, 4, 1, 32) >> halves
    sub_blocks = (qs & 0x0F).reshape(-1, 8, 32)  # (super-blocks, sub-block, value)
    if high is not None:
        bits = (high.reshape(-1, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) & 1
        sub_blocks = sub_blocks | (bits << 4)
    scale = (d * sc.astype(np.float32)).astype(np.float16).reshape(-1, 1)
    offset = (-dmin * m.astype(np.float32)).astype(np.float16).reshape(-1, 1)
    q = sub_blocks.reshape(-1, 32)
    nibbles = (q[:, :16] & 0x0F) | ((q[:, 16:] & 0x0F) << 4)
    parts = [scale.view(np.uint8), offset.view(np.uint8)]
    if fifth:
        fifth_bits = np.packbits((q >> 4).astype(np.uint8), axis=-1, bitorder="little")
        parts.append(fifth_bits)
    parts.append(nibbles.astype(np.uint8))
    out: np.ndarray = np.concatenate(parts, axis=-1).reshape(rows, -1)
    return out


def to_block_rows(type_name: str, raw: np.ndarray, values: np.ndarray | None) -> tuple[int, np.ndarray]:
    """(GGML type, block rows) serving a tensor of `type_name` whose raw rows are `raw`; `values`
    (its float32 values) are read only where a type is re-encoded."""
    if type_name in _NAMES:
        return _NAMES[type_name], np.ascontiguousarray(raw, dtype=np.uint8)
    if type_name in ("Q4_K", "Q5_K"):
        fifth = type_name == "Q5_K"
        return (7 if fifth else 3), _k_quant_as_blocks(np.asarray(raw, dtype=np.uint8), fifth)
    if values is None:
        raise ValueError(f"{type_name} needs its values to be re-encoded")
    kind = 3 if type_name in FOUR_BITS else _Q8_0
    return kind, encode_rows(values, kind)


def _as_q8_0(rows: np.ndarray, kind: int) -> np.ndarray:
    """Block rows as Q8_0: exact from Q4_0 / Q5_0 (the same scale, the values less their offset)."""
    if kind == _Q8_0:
        return rows
    values = dequantize_rows(rows, kind)
    if kind not in (2, 6):
        return encode_rows(values, _Q8_0)
    blocks = rows.reshape(-1, BLOCK_BYTES[kind])
    scale = blocks[:, 0:2].view(np.float16).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(scale == 0, 0, np.rint(values.reshape(-1, 32) / scale))
    out: np.ndarray = np.concatenate([blocks[:, 0:2], q.astype(np.int8).view(np.uint8)], axis=-1)
    return out.reshape(rows.shape[0], -1)


def serve_blocks(model: Any, tensors: dict[str, tuple[str, np.ndarray]]) -> set[str]:
    """Replace `model`'s float linear layers named in `tensors` ({layer path: (GGUF type name, the
    file's raw rows)}; the layers hold the file's values) by `BlockLinear` layers; return the
    paths replaced. Embeddings are left alone (a lookup reads one row a token)."""
    from mlx.nn.layers.linear import Linear
    from mlx.utils import tree_unflatten

    modules = dict(model.named_modules())
    chosen: dict[str, tuple[int, np.ndarray]] = {}
    for path, (type_name, raw) in tensors.items():
        layer = modules.get(path)
        if type(layer) is not Linear:
            continue  # an embedding: requantized by the caller (a lookup reads one row a token)
        if int(layer.weight.shape[-1]) % 32:
            # GGML blocks are 32 wide or more: no such file exists; and a layer loaded lean
            # (gguf.py) holds zeros until served here.
            raise ValueError(f"{path}: {type_name} rows of width {layer.weight.shape[-1]}")
        from_bytes = type_name in _NAMES or type_name in ("Q4_K", "Q5_K")
        chosen[path] = to_block_rows(type_name, raw, None if from_bytes else np.array(layer.weight))
    families: dict[str, list[str]] = {}
    for path in chosen:
        block, _, name = path.rpartition(".")
        if name in _FUSED:
            families.setdefault(f"{block.rpartition('.')[0]}:{_FUSED[name]}", []).append(path)
    for paths in families.values():
        if len({chosen[p][0] for p in paths}) > 1:
            for p in paths:
                type_name, raw = tensors[p]
                if type_name in ("Q4_K", "Q5_K"):  # from the file's values, not the transcoded ones
                    chosen[p] = (_Q8_0, encode_rows(_dequantized(type_name, raw), _Q8_0))
                else:
                    chosen[p] = (_Q8_0, _as_q8_0(chosen[p][1], chosen[p][0]))
    replaced = []
    for path, (kind, rows) in chosen.items():
        if kind == _NAMES["Q5_0"] and rows.shape[1] % 44 == 0:
            kind, rows = _Q5_0_PAIRS, _paired(rows)
        bias = modules[path].get("bias")
        float_bias = None if bias is None else bias.astype(mx.float32)
        replaced.append((path, BlockLinear(mx.array(rows), kind, float_bias)))
    model.update_modules(tree_unflatten(replaced))
    mx.eval(model.parameters())
    return set(chosen)
