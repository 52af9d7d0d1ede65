"""Llama-family models for mlx-lm (llama, qwen2): from a GGUF file, or seeded random weights for
tests.

Two readers, chosen by the tensor types the file's header lists (`tensor_types`). MLX reads
GGUF itself: `mx.load(path, return_metadata=True)` gives Q4_0/Q4_1/Q8_0 tensors as MLX
affine-quantized triples (`weight`, `scales`, `biases`), and the model keeps the file's
quantization (bits and group size read off the shapes). The files people have are mostly
K-quants (Q4_K_M mixes Q4_K, Q5_0, Q6_K and Q8_0), which MLX cannot decode: it refuses some
(Q5_0: `gguf_tensor_to_f16 failed`) and, worse, returns others (Q4_K, Q6_K) as float16 values
that are wrong (Qwen2.5-Coder-1.5B's Q4_K_M: off by up to 1.9 where weights average 0.017; the
model wrote gibberish). Those files are read with
the `gguf` package (llama.cpp's own Python reader) and dequantized to float32 (the file's values
exactly). Under `--precision auto` with the CPU kernel, the linear layers are then served on the
file's own blocks (`RAW_BLOCKS` in the metadata; blocks.py): a decode step reads 5.5 bits a
Q5_0 weight, not 8 and a float32 scale and bias. Without the kernel (Metal), `SOURCE_WIDTHS`
gives each layer the width it is requantized at (`requantize`, groups of 32): 4 bits where the
file has 4 bits or fewer, 8 elsewhere; the embeddings always so. All at 4 bits lost 0.12 nats per
token on Qwen2.5-Coder-0.5B's Q4_K_M (q4 from Q5_0 and Q6_K), outside the quality bound of 0.05
(tests/reference_server/engine/test_quality_qwen.py); another `--precision` converts it as any
other model.

Tensors are renamed from llama.cpp's names to mlx-lm's, and `ModelArgs` built from the
architecture's metadata. llama.cpp's converter permutes llama's Q/K rows to the interleaved
rotary layout (`rope_traditional=True`); qwen2 keeps the halves layout (llama.cpp's NEOX rope).

MLX is imported inside the functions so that importing this module stays cheap and never
loads `libmlx.so` before `blas.enable_fast_blas` has run.
"""

from __future__ import annotations

import logging
import mmap
import re
import struct
from pathlib import Path
from typing import Any

__all__ = [
    "ARCHITECTURES",
    "FOUR_BITS",
    "RAW_BLOCKS",
    "SOURCE_WIDTHS",
    "GGUFError",
    "load_gguf_model",
    "mlx_name",
    "model_args_from_metadata",
    "random_llama",
    "random_qwen2",
    "read_gguf",
    "read_metadata",
    "requantize",
]

# GGUF architectures and the mlx-lm module that models each.
ARCHITECTURES = {"llama": "llama", "qwen2": "qwen2"}
# In the metadata of a file the gguf package read: {mlx-lm layer path: bits to serve it at}.
SOURCE_WIDTHS = "plumbline.source_widths"
# ... and {mlx-lm layer path: (type name, the file's raw rows)} of its quantized tensors, which
# blocks.py serves as they are.
RAW_BLOCKS = "plumbline.raw_blocks"
# Source types of 4 bits or fewer per weight: requantized at 4 bits (the rest at 8); blocks.py
# re-encodes the ones it does not keep as Q4_1.
FOUR_BITS = frozenset(
    {
        "Q4_0",
        "Q4_1",
        "Q4_K",
        "Q3_K",
        "Q2_K",
        "IQ4_NL",
        "IQ4_XS",
        "IQ3_S",
        "IQ3_XXS",
        "IQ2_S",
        "IQ2_XS",
        "IQ2_XXS",
        "IQ1_S",
    }
)
_FLOAT_TYPES = {"F32", "F16", "BF16", "F64"}
# What MLX's own reader decodes right.
_MLX_READS = {"F32", "F16", "Q4_0", "Q4_1", "Q8_0"}

_log = logging.getLogger(__name__)

_TOP_LEVEL = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}
_PER_BLOCK = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
# `rope_freqs` (Llama 3.1 frequency factors) has no counterpart in mlx-lm's llama weights.
_IGNORED = {"rope_freqs"}
_PARAM = ("weight", "scales", "biases", "bias")
_BLOCK = re.compile(r"blk\.(\d+)\.(\w+)\.(\w+)")


class GGUFError(ValueError):
    """The GGUF file is not a model this loader understands."""


def mlx_name(gguf_name: str) -> str | None:
    """Map a llama.cpp tensor name to mlx-lm's llama name; None for tensors to skip.

    `blk.3.attn_q.weight` -> `model.layers.3.self_attn.q_proj.weight`,
    `token_embd.scales` -> `model.embed_tokens.scales`. Raises `GGUFError` if unknown.
    """
    if match := _BLOCK.fullmatch(gguf_name):
        index, part, param = match.groups()
        if part in _PER_BLOCK and param in _PARAM:
            return f"model.layers.{index}.{_PER_BLOCK[part]}.{param}"
    else:
        base, _, param = gguf_name.rpartition(".")
        if base in _IGNORED:
            return None
        if base in _TOP_LEVEL and param in _PARAM:
            return f"{_TOP_LEVEL[base]}.{param}"
    raise GGUFError(f"unexpected tensor {gguf_name!r} for a llama-family model")


def read_gguf(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Load a GGUF file's tensors (MLX arrays) and metadata (plain Python values): MLX's reader
    where it decodes every tensor (quantized ones as affine triples), else the `gguf` package's,
    every tensor dequantized to float32."""
    tensors, meta, _ = _read(path)
    return tensors, meta


def _read(path: Path, blocks: bool = False) -> tuple[dict[str, Any], dict[str, Any], dict[str, int] | None]:
    """(tensors, metadata, and for a file the gguf package read, the width each quantized
    tensor is to have: 4 or 8 bits). `blocks`: the linear layers will be served on the file's
    blocks (blocks.py), so those it keeps or transcodes are not dequantized (see
    `_read_with_gguf`)."""
    import mlx.core as mx

    try:
        kinds = set(tensor_types(path).values())
    except (OSError, ValueError, struct.error) as exc:
        raise GGUFError(f"cannot read {path} as GGUF: {exc}") from exc
    if not kinds <= _MLX_READS:
        _log.info(
            "%s holds %s tensors: reading it with the gguf package",
            path,
            ", ".join(sorted(kinds - _MLX_READS)),
        )
        return _read_with_gguf(path, blocks)
    try:
        loaded: Any = mx.load(str(path), return_metadata=True)
        tensors, raw = loaded
    except (RuntimeError, ValueError) as exc:
        raise GGUFError(f"MLX cannot read {path}: {exc}") from exc
    meta: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, mx.array):
            meta[key] = value.item() if value.ndim == 0 else value.tolist()
        else:
            meta[key] = value
    return tensors, meta, None


def tensor_types(path: Path) -> dict[str, str]:
    """Each tensor's type name (`Q4_K`, `F32`, ...) from the file's header, the metadata skipped
    over (GGUFReader parses all of it: 3 s for SmolLM2's, 9 s for Qwen's vocabulary)."""
    from gguf.constants import GGUF_MAGIC, GGMLQuantizationType, GGUFValueType

    sizes = {
        GGUFValueType.UINT8: 1, GGUFValueType.INT8: 1, GGUFValueType.BOOL: 1,
        GGUFValueType.UINT16: 2, GGUFValueType.INT16: 2,
        GGUFValueType.UINT32: 4, GGUFValueType.INT32: 4, GGUFValueType.FLOAT32: 4,
        GGUFValueType.UINT64: 8, GGUFValueType.INT64: 8, GGUFValueType.FLOAT64: 8,
    }  # fmt: skip
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        magic, version, tensors, pairs = struct.unpack_from("<IIQQ", data, 0)
        if magic != GGUF_MAGIC or version < 2:
            raise ValueError("not a GGUF file of version 2 or later")
        at = 24

        def skip(kind: int, at: int) -> int:
            if kind == GGUFValueType.STRING:
                length: int = struct.unpack_from("<Q", data, at)[0]
                return at + 8 + length
            if kind == GGUFValueType.ARRAY:
                inner: int
                count: int
                inner, count = struct.unpack_from("<IQ", data, at)
                at += 12
                if inner in sizes:
                    return at + count * sizes[GGUFValueType(inner)]
                for _ in range(count):
                    at = skip(inner, at)
                return at
            return at + sizes[GGUFValueType(kind)]

        for _ in range(pairs):
            at = skip(GGUFValueType.STRING, at)  # the key
            (kind,) = struct.unpack_from("<I", data, at)
            at = skip(kind, at + 4)
        types: dict[str, str] = {}
        for _ in range(tensors):
            (length,) = struct.unpack_from("<Q", data, at)
            name = bytes(data[at + 8 : at + 8 + length]).decode()
            (dims,) = struct.unpack_from("<I", data, at + 8 + length)
            at += 8 + length + 4 + 8 * dims
            (kind,) = struct.unpack_from("<I", data, at)
            types[name] = GGMLQuantizationType(kind).name
            at += 4 + 8  # the type, the data offset
        return types


# Types blocks.py serves from the file's bytes alone (kept, or transcoded).
_FROM_BYTES = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K"}


def _read_with_gguf(
    path: Path, blocks: bool = False
) -> tuple[dict[str, Any], dict[str, Any], dict[str, int]]:
    import mlx.core as mx
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize

    try:
        reader = GGUFReader(path)
    except (ValueError, OSError) as exc:
        raise GGUFError(f"cannot read {path} as GGUF: {exc}") from exc
    meta = _fields(reader)
    tensors: dict[str, Any] = {}
    widths: dict[str, int] = {}
    raw: dict[str, tuple[str, Any]] = {}
    for tensor in reader.tensors:
        kind = tensor.tensor_type.name
        if kind not in _FLOAT_TYPES:
            widths[tensor.name] = 4 if kind in FOUR_BITS else 8
            raw[tensor.name] = (kind, tensor.data)
        if blocks and kind in _FROM_BYTES and tensor.name != "token_embd.weight" and len(tensor.shape) == 2:
            # Served from its bytes: a zero of its shape (a broadcast scalar, no memory) stands in
            # until blocks.py replaces the layer. Dequantizing the 0.5B's took 8 s and 2 GB.
            rows, columns = (int(n) for n in reversed(tensor.shape))
            tensors[tensor.name] = mx.broadcast_to(mx.array(0.0), (rows, columns))
            continue
        try:
            values = dequantize(tensor.data, tensor.tensor_type)
        except NotImplementedError as exc:
            raise GGUFError(f"{path}: the gguf package cannot decode {tensor.name} ({kind})") from exc
        tensors[tensor.name] = mx.array(np.ascontiguousarray(values, dtype=np.float32))
    meta[RAW_BLOCKS] = raw
    return tensors, meta, widths


def read_metadata(path: Path) -> dict[str, Any]:
    """A GGUF file's metadata alone (the tokenizer, the architecture), tensors left unmapped: a
    file cut after its header (the first of a model's split parts) reads too."""
    from gguf import GGUFReader

    class HeaderReader(GGUFReader):
        def _build_tensors(self, start_offs: int, fields: list[Any]) -> None:
            self.tensors = []

    try:
        return _fields(HeaderReader(path))
    except (ValueError, OSError) as exc:
        raise GGUFError(f"cannot read {path} as GGUF: {exc}") from exc


def _fields(reader: Any) -> dict[str, Any]:
    return {key: field.contents() for key, field in reader.fields.items() if not key.startswith("GGUF.")}


def model_args_from_metadata(meta: dict[str, Any], *, tied: bool) -> dict[str, Any]:
    """The mlx-lm `ModelArgs` keyword arguments (`model_type` names the module) from GGUF
    metadata of one of `ARCHITECTURES`."""
    arch = meta.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise GGUFError(
            f"GGUF architecture {arch!r} is not supported (only {', '.join(ARCHITECTURES)}); "
            "convert the model to an mlx-lm directory instead"
        )

    def get(key: str, default: Any = None) -> Any:
        value = meta.get(f"{arch}.{key}", default)
        if value is None:
            raise GGUFError(f"GGUF metadata lacks {arch}.{key}")
        return value

    heads = int(get("attention.head_count"))
    args: dict[str, Any] = {
        "model_type": ARCHITECTURES[arch],
        "hidden_size": int(get("embedding_length")),
        "num_hidden_layers": int(get("block_count")),
        "intermediate_size": int(get("feed_forward_length")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(get("attention.head_count_kv", heads)),
        "rms_norm_eps": float(get("attention.layer_norm_rms_epsilon")),
        "vocab_size": int(meta.get(f"{arch}.vocab_size") or len(meta.get("tokenizer.ggml.tokens", []))),
        "rope_theta": float(get("rope.freq_base", 10000.0)),
        "max_position_embeddings": int(get("context_length")),
        "tie_word_embeddings": tied,
        "rope_traditional": arch == "llama",
    }
    if arch == "llama" and "llama.attention.key_length" in meta:
        args["head_dim"] = int(meta["llama.attention.key_length"])
    if meta.get(f"{arch}.rope.scaling.type") == "linear":
        args["rope_scaling"] = {
            "type": "linear",
            "factor": float(meta[f"{arch}.rope.scaling.factor"]),
        }
    return args


def load_gguf_model(path: Path, *, blocks: bool = False) -> tuple[Any, dict[str, Any]]:
    """Build an `mlx_lm` llama or qwen2 `Model` from a GGUF file; return it and the metadata.

    Tensors MLX reads quantized become `QuantizedLinear` / `QuantizedEmbedding` layers of the
    file's bits and group size (read off the shapes); float tensors stay as the file has them.
    Tensors of a file the gguf package read are float32, their source widths under
    `SOURCE_WIDTHS` in the metadata (see `requantize`), their raw rows under `RAW_BLOCKS`; with
    `blocks` (the caller serves the linear layers with blocks.py's `serve_blocks` next), those
    that blocks.py serves from their bytes alone are not dequantized: zeros stand in.
    """
    import importlib

    import mlx.core as mx
    from mlx.nn.layers.quantized import quantize

    tensors, meta, widths = _read(path, blocks)
    weights: dict[str, Any] = {}
    for name, tensor in tensors.items():
        target = mlx_name(name)
        if target is None:
            _log.info("Skipping GGUF tensor %s (not used by mlx-lm's model)", name)
        else:
            weights[target] = tensor
    args = model_args_from_metadata(meta, tied="lm_head.weight" not in weights)
    module: Any = importlib.import_module(f"mlx_lm.models.{args['model_type']}")
    model = module.Model(module.ModelArgs(**args))

    modules = dict(model.named_modules())
    quantized: dict[str, dict[str, int]] = {}
    for name in [n for n in weights if n.endswith(".scales")]:
        path_ = name.removesuffix(".scales")
        in_features = int(modules[path_].weight.shape[-1])
        packed = weights[f"{path_}.weight"]
        quantized[path_] = {
            "group_size": in_features // int(weights[name].shape[-1]),
            "bits": int(packed.shape[-1]) * 32 // in_features,
        }
    quantize(model, class_predicate=lambda p, _m: quantized.get(p, False))
    model.load_weights(list(weights.items()), strict=True)
    if widths is not None:
        meta[SOURCE_WIDTHS] = {
            target.removesuffix(".weight"): width
            for name, width in widths.items()
            if (target := mlx_name(name)) is not None and target.endswith(".weight")
        }
        meta[RAW_BLOCKS] = {
            target.removesuffix(".weight"): found
            for name, found in meta[RAW_BLOCKS].items()
            if (target := mlx_name(name)) is not None and target.endswith(".weight")
        }
    mx.eval(model.parameters())
    model.eval()
    return model, meta


def requantize(model: Any, bits: dict[str, int]) -> None:
    """Quantize `model`'s float layers named in `bits` (its `SOURCE_WIDTHS`) in groups of 32 at
    their widths; float parameters (norms, biases) stay float32. The layers the engine fuses
    into one product (decode.py: q/k/v, gate/up) take the widest width among them (Q4_K_M
    files keep v at Q6_K beside Q4_K q and k)."""
    import mlx.core as mx
    from mlx.nn.layers.quantized import quantize

    bits = dict(bits)
    fused: dict[str, list[str]] = {}
    for path in bits:
        block, _, name = path.rpartition(".")
        if name in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"):
            fused.setdefault(f"{block}.{name in ('gate_proj', 'up_proj')}", []).append(path)
    for group in fused.values():
        widest = max(bits[path] for path in group)
        bits.update(dict.fromkeys(group, widest))

    def predicate(path: str, module: Any) -> Any:
        if path not in bits or int(module.weight.shape[-1]) % 32:
            return False  # a width that is no multiple of 32 stays float
        return {"group_size": 32, "bits": bits[path]}

    quantize(model, class_predicate=predicate)
    mx.eval(model.parameters())


# The shape of the tiny random models (tests only).
_TINY: dict[str, Any] = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "tie_word_embeddings": False,
}


def random_llama(*, seed: int, vocab_size: int, context_window: int) -> Any:
    """A small randomly initialised llama (2 layers, hidden 64), reproducible for a seed.

    Its output head is separate and scaled up so that greedy decoding wanders through the
    vocabulary with clear margins between candidates, instead of repeating one token.
    """
    import mlx.core as mx
    from mlx_lm.models import llama

    mx.random.seed(seed)
    model = llama.Model(
        llama.ModelArgs(
            model_type="llama",
            rms_norm_eps=1e-5,
            vocab_size=vocab_size,
            max_position_embeddings=context_window,
            rope_traditional=True,
            **_TINY,
        )
    )
    model.lm_head.weight = mx.random.normal(model.lm_head.weight.shape)
    mx.eval(model.parameters())
    model.eval()
    return model


def random_qwen2(*, seed: int, vocab_size: int, context_window: int) -> Any:
    """A small randomly initialised qwen2 (2 layers, hidden 64, biases on the query, key and
    value projections), reproducible for a seed; its output head as `random_llama`'s."""
    import mlx.core as mx
    from mlx_lm.models import qwen2

    mx.random.seed(seed)
    model = qwen2.Model(
        qwen2.ModelArgs(
            model_type="qwen2",
            rms_norm_eps=1e-6,
            vocab_size=vocab_size,
            max_position_embeddings=context_window,
            **_TINY,
        )
    )
    for layer in model.model.layers:  # visible biases, so a path that drops them changes the output
        for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
            proj.bias = mx.random.normal(proj.bias.shape)
    model.lm_head.weight = mx.random.normal(model.lm_head.weight.shape)
    mx.eval(model.parameters())
    model.eval()
    return model
