"""Llama-family models for mlx-lm: from a GGUF file, or seeded random weights for tests.

MLX reads GGUF itself: `mx.load(path, return_metadata=True)` gives Q4_0/Q4_1/Q8_0 tensors as
MLX affine-quantized triples (`weight`, `scales`, `biases`) under llama.cpp's names. We rename
them to `mlx_lm.models.llama` names, build `ModelArgs` from the `llama.*` metadata, and use
`rope_traditional=True` because llama.cpp's converter permutes Q/K rows to the interleaved
rotary layout.

The model keeps the file's quantization (bits and group size read off the shapes); the engine
then converts it to the precision it serves (precision.py, quantized.py).

MLX is imported inside the functions so that importing this module stays cheap and never
loads `libmlx.so` before `blas.enable_fast_blas` has run.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

__all__ = [
    "GGUFError",
    "llama_args_from_metadata",
    "load_gguf_model",
    "mlx_name",
    "random_llama",
    "read_gguf",
]

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
    """The GGUF file is not a llama-family model this loader understands."""


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
    """Load a GGUF file's tensors (MLX arrays) and metadata (plain Python values)."""
    import mlx.core as mx

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
    return tensors, meta


def llama_args_from_metadata(meta: dict[str, Any], *, tied: bool) -> dict[str, Any]:
    """`mlx_lm.models.llama.ModelArgs` keyword arguments from GGUF metadata."""
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise GGUFError(f"only llama-family GGUF models are supported, not {arch!r}")

    def get(key: str, default: Any = None) -> Any:
        value = meta.get(f"llama.{key}", default)
        if value is None:
            raise GGUFError(f"GGUF metadata lacks llama.{key}")
        return value

    heads = int(get("attention.head_count"))
    args: dict[str, Any] = {
        "model_type": "llama",
        "hidden_size": int(get("embedding_length")),
        "num_hidden_layers": int(get("block_count")),
        "intermediate_size": int(get("feed_forward_length")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(get("attention.head_count_kv", heads)),
        "rms_norm_eps": float(get("attention.layer_norm_rms_epsilon")),
        "vocab_size": int(meta.get("llama.vocab_size") or len(meta.get("tokenizer.ggml.tokens", []))),
        "rope_theta": float(get("rope.freq_base", 10000.0)),
        "max_position_embeddings": int(get("context_length")),
        "tie_word_embeddings": tied,
        "rope_traditional": True,
    }
    if "llama.attention.key_length" in meta:
        args["head_dim"] = int(meta["llama.attention.key_length"])
    if meta.get("llama.rope.scaling.type") == "linear":
        args["rope_scaling"] = {
            "type": "linear",
            "factor": float(meta["llama.rope.scaling.factor"]),
        }
    return args


def load_gguf_model(path: Path) -> tuple[Any, dict[str, Any]]:
    """Build an `mlx_lm` llama `Model` from a GGUF file; return it and the metadata.

    Quantized tensors become `QuantizedLinear` / `QuantizedEmbedding` layers of the file's bits and
    group size (read off the shapes); float tensors stay as the file has them.
    """
    import mlx.core as mx
    from mlx.nn.layers.quantized import quantize
    from mlx_lm.models import llama

    tensors, meta = read_gguf(path)
    weights: dict[str, Any] = {}
    for name, tensor in tensors.items():
        target = mlx_name(name)
        if target is None:
            _log.info("Skipping GGUF tensor %s (not used by mlx-lm's llama)", name)
        else:
            weights[target] = tensor
    model = llama.Model(
        llama.ModelArgs(**llama_args_from_metadata(meta, tied="lm_head.weight" not in weights))
    )

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
    mx.eval(model.parameters())
    model.eval()
    return model, meta


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
            hidden_size=64,
            num_hidden_layers=2,
            intermediate_size=128,
            num_attention_heads=4,
            num_key_value_heads=2,
            rms_norm_eps=1e-5,
            vocab_size=vocab_size,
            max_position_embeddings=context_window,
            tie_word_embeddings=False,
            rope_traditional=True,
        )
    )
    model.lm_head.weight = mx.random.normal(model.lm_head.weight.shape)
    mx.eval(model.parameters())
    model.eval()
    return model
