"""GGUF tensor names and metadata -> mlx-lm llama names and ModelArgs (no MLX needed)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from reference_server.engine.gguf import GGUFError, mlx_name, model_args_from_metadata


@pytest.mark.parametrize(
    ("gguf", "mlx"),
    [
        ("token_embd.weight", "model.embed_tokens.weight"),
        ("token_embd.scales", "model.embed_tokens.scales"),
        ("output_norm.weight", "model.norm.weight"),
        ("output.weight", "lm_head.weight"),
        ("output.biases", "lm_head.biases"),
        ("blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"),
        ("blk.3.attn_q.weight", "model.layers.3.self_attn.q_proj.weight"),
        ("blk.3.attn_k.scales", "model.layers.3.self_attn.k_proj.scales"),
        ("blk.3.attn_v.biases", "model.layers.3.self_attn.v_proj.biases"),
        ("blk.12.attn_output.weight", "model.layers.12.self_attn.o_proj.weight"),
        ("blk.29.ffn_norm.weight", "model.layers.29.post_attention_layernorm.weight"),
        ("blk.1.ffn_gate.weight", "model.layers.1.mlp.gate_proj.weight"),
        ("blk.1.ffn_up.weight", "model.layers.1.mlp.up_proj.weight"),
        ("blk.1.ffn_down.weight", "model.layers.1.mlp.down_proj.weight"),
    ],
)
def test_tensor_names_map_to_mlx_lm_llama(gguf: str, mlx: str) -> None:
    assert mlx_name(gguf) == mlx


def test_rope_frequency_table_is_skipped() -> None:
    assert mlx_name("rope_freqs.weight") is None


@pytest.mark.parametrize("name", ["blk.0.attn_qkv.weight", "mystery.weight", "blk.x.attn_q.weight"])
def test_unknown_tensors_are_rejected(name: str) -> None:
    with pytest.raises(GGUFError, match="unexpected tensor"):
        mlx_name(name)


SMOLLM2_META = {
    "general.architecture": "llama",
    "llama.embedding_length": 576,
    "llama.block_count": 30,
    "llama.feed_forward_length": 1536,
    "llama.attention.head_count": 9,
    "llama.attention.head_count_kv": 3,
    "llama.attention.layer_norm_rms_epsilon": 1e-5,
    "llama.vocab_size": 49152,
    "llama.rope.freq_base": 100000.0,
    "llama.context_length": 8192,
}


def test_model_args_from_metadata() -> None:
    args = model_args_from_metadata(SMOLLM2_META, tied=True)
    assert args == {
        "model_type": "llama",
        "hidden_size": 576,
        "num_hidden_layers": 30,
        "intermediate_size": 1536,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "rms_norm_eps": 1e-5,
        "vocab_size": 49152,
        "rope_theta": 100000.0,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
        # llama.cpp's converter permutes Q/K to the interleaved rotary layout.
        "rope_traditional": True,
    }


def test_qwen2_metadata_gives_qwen2_args() -> None:
    # Qwen2.5-Coder-0.5B's own figures; llama.cpp keeps qwen2's rotary halves (NEOX) unpermuted.
    meta = {
        "general.architecture": "qwen2",
        "qwen2.embedding_length": 896,
        "qwen2.block_count": 24,
        "qwen2.feed_forward_length": 4864,
        "qwen2.attention.head_count": 14,
        "qwen2.attention.head_count_kv": 2,
        "qwen2.attention.layer_norm_rms_epsilon": 1e-6,
        "qwen2.rope.freq_base": 1000000.0,
        "qwen2.context_length": 32768,
        "tokenizer.ggml.tokens": ["x"] * 151936,
    }
    args = model_args_from_metadata(meta, tied=False)
    assert args["model_type"] == "qwen2"
    assert args["rope_traditional"] is False
    assert (args["vocab_size"], args["rope_theta"], args["num_key_value_heads"]) == (151936, 1e6, 2)


def test_other_architectures_are_rejected() -> None:
    with pytest.raises(GGUFError, match="'gemma3' is not supported"):
        model_args_from_metadata({**SMOLLM2_META, "general.architecture": "gemma3"}, tied=True)


def test_missing_metadata_is_named() -> None:
    meta = {k: v for k, v in SMOLLM2_META.items() if k != "llama.block_count"}
    with pytest.raises(GGUFError, match=r"llama\.block_count"):
        model_args_from_metadata(meta, tied=False)


def _metadata_array(value: Any) -> Any:
    import mlx.core as mx

    if isinstance(value, bool):
        return mx.array(value)
    if isinstance(value, int):
        return mx.array(value, dtype=mx.uint32)
    if isinstance(value, float):
        return mx.array(value, dtype=mx.float32)
    if isinstance(value, list) and value and isinstance(value[0], int):
        return mx.array(value, dtype=mx.int32)
    return value


@pytest.mark.mlx
def test_llama_gguf_file_is_served(tmp_path: Path, smollm2_gguf: Path, collect: Any) -> None:
    import mlx.core as mx

    from reference_server.engine import EngineRequest, Sampling, Turn, load_engine
    from reference_server.engine.gguf import read_gguf

    _, meta = read_gguf(smollm2_gguf)
    tokenizer_meta = {k: v for k, v in meta.items() if k.startswith("tokenizer.")}
    shapes = {"token_embd": (49152, 64), "output": (49152, 64), "output_norm": (64,)}
    for layer in range(2):
        for part, shape in {
            "attn_norm": (64,),
            "attn_q": (64, 64),
            "attn_k": (32, 64),
            "attn_v": (32, 64),
            "attn_output": (64, 64),
            "ffn_norm": (64,),
            "ffn_gate": (128, 64),
            "ffn_up": (128, 64),
            "ffn_down": (64, 128),
        }.items():
            shapes[f"blk.{layer}.{part}"] = shape
    mx.random.seed(5)
    tensors = {f"{name}.weight": mx.random.normal(shape) * 0.5 for name, shape in shapes.items()}
    metadata = {
        **TINY_META,
        **tokenizer_meta,
        "general.name": "Tiny GGUF",
    }
    path = tmp_path / "Tiny-Llama.F32.gguf"
    mx.save_gguf(str(path), tensors, {k: _metadata_array(v) for k, v in metadata.items()})

    engine = load_engine(str(path))
    try:
        (card,) = engine.models()
        assert (card.id, card.context_window) == ("tiny-llama.f32", 256)
        req = EngineRequest("tiny-llama.f32", (Turn("user", "Hi"),), 8, Sampling(temperature=0))
        deltas = collect(engine, req)
        assert deltas == collect(engine, req)
        assert deltas[-1].finish in ("length", "stop")
    finally:
        asyncio.run(engine.aclose())


TINY_META = {
    "general.architecture": "llama",
    "llama.embedding_length": 64,
    "llama.block_count": 2,
    "llama.feed_forward_length": 128,
    "llama.attention.head_count": 4,
    "llama.attention.head_count_kv": 2,
    "llama.attention.layer_norm_rms_epsilon": 1e-5,
    "llama.vocab_size": 49152,
    "llama.rope.freq_base": 10000.0,
    "llama.context_length": 256,
}


@pytest.mark.mlx
@pytest.mark.smollm2
def test_quantized_and_dequantized_smollm2_agree(smollm2_gguf: Path, smollm2_tokenizer: Any) -> None:
    # The model keeps the file's quantization, bits and group size read per layer off the shapes
    # (4-bit layers, 8-bit embedding); precision f32 expands the same weights to float32.
    import mlx.core as mx

    from reference_server.engine.gguf import load_gguf_model
    from reference_server.engine.quantized import apply_precision

    ids = mx.array([smollm2_tokenizer.encode("The capital of France is")])
    quantized, _ = load_gguf_model(smollm2_gguf)
    expanded, _ = load_gguf_model(smollm2_gguf)
    apply_precision(expanded, "f32")
    layer = quantized.model.layers[0].self_attn.q_proj
    assert (layer.bits, layer.group_size) == (4, 32)
    assert (quantized.model.embed_tokens.bits, quantized.model.embed_tokens.group_size) == (8, 32)
    q_logits = quantized(ids)[0, -1].astype(mx.float32)
    f_logits = expanded(ids)[0, -1]
    assert expanded.model.embed_tokens.weight.dtype == mx.float32
    assert int(mx.argmax(q_logits)) == int(mx.argmax(f_logits))
    assert float(mx.max(mx.abs(q_logits - f_logits))) < 0.05 * float(mx.max(mx.abs(f_logits)))


def write_qwen2_gguf(path: Path, *, down: str = "Q5_0") -> dict[str, Any]:
    """A one-layer random qwen2 GGUF whose matrices are Q5_0 and Q8_0 (MLX reads neither Q5_0 nor
    the K-quants); returns the values each tensor holds, as llama.cpp's reader dequantizes them.
    `down`: ffn_down's type; a K-quant (Q4_K, Q5_K, Q6_K: the gguf package writes none) is random
    bytes with small scales, and the feed-forward width is then 256 (one super-block)."""
    import gguf
    import numpy as np
    from gguf.quants import dequantize, quantize

    rng = np.random.default_rng(0)
    k_quant = down.endswith("_K")
    hidden, heads, kv_heads, ffn, vocab = 64, 4, 2, 256 if k_quant else 128, 256
    dim = hidden // heads
    shapes = {
        "token_embd.weight": ((vocab, hidden), "Q8_0"),
        "output.weight": ((vocab, hidden), "Q8_0"),
        "output_norm.weight": ((hidden,), "F32"),
        "blk.0.attn_norm.weight": ((hidden,), "F32"),
        "blk.0.ffn_norm.weight": ((hidden,), "F32"),
        "blk.0.attn_q.weight": ((heads * dim, hidden), "Q5_0"),
        "blk.0.attn_k.weight": ((kv_heads * dim, hidden), "Q5_0"),
        "blk.0.attn_v.weight": ((kv_heads * dim, hidden), "Q8_0"),
        "blk.0.attn_q.bias": ((heads * dim,), "F32"),
        "blk.0.attn_k.bias": ((kv_heads * dim,), "F32"),
        "blk.0.attn_v.bias": ((kv_heads * dim,), "F32"),
        "blk.0.attn_output.weight": ((hidden, heads * dim), "Q4_0"),
        "blk.0.ffn_gate.weight": ((ffn, hidden), "Q5_0"),
        "blk.0.ffn_up.weight": ((ffn, hidden), "Q5_0"),
        "blk.0.ffn_down.weight": ((hidden, ffn), down),
    }
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_block_count(1)
    writer.add_context_length(512)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_vocab_size(vocab)
    values: dict[str, Any] = {}
    for name, (shape, kind) in shapes.items():
        data = rng.standard_normal(shape).astype(np.float32) * 0.1
        if kind == "F32":
            writer.add_tensor(name, data)
            values[name] = data
        else:
            qtype = gguf.GGMLQuantizationType[kind]
            packed = random_k_quant(rng, kind, shape) if kind.endswith("_K") else quantize(data, qtype)
            writer.add_tensor(name, packed, raw_shape=packed.shape, raw_dtype=qtype)
            values[name] = dequantize(packed, qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return values


def random_k_quant(rng: Any, kind: str, shape: tuple[int, int]) -> Any:
    """Raw rows of K-quant `kind` (Q4_K, Q5_K or Q6_K): random bytes, float16 scales small."""
    import numpy as np

    size, scale_at = {"Q4_K": (144, (0, 4)), "Q5_K": (176, (0, 4)), "Q6_K": (210, (208, 210))}[kind]
    rows, width = shape
    raw = rng.integers(0, 256, size=(rows * width // 256, size), dtype=np.uint8)
    count = (scale_at[1] - scale_at[0]) // 2
    raw[:, scale_at[0] : scale_at[1]] = (
        rng.uniform(1e-4, 1e-3, size=(raw.shape[0], count)).astype(np.float16).view(np.uint8)
    )
    return raw.reshape(rows, -1)


@pytest.mark.mlx
def test_a_file_mlx_cannot_decode_is_read_with_the_gguf_package(tmp_path: Path) -> None:
    # Issue 43: K-quant and Q5_0 files. The header's types choose the reader; the values are
    # llama.cpp's; under `auto` each layer is quantized again at its source's width, the fused
    # q/k/v at their widest (v is Q8_0 here).
    import mlx.core as mx
    import numpy as np

    from reference_server.engine.gguf import SOURCE_WIDTHS, load_gguf_model, requantize, tensor_types

    path = tmp_path / "tiny-qwen2.gguf"
    values = write_qwen2_gguf(path)
    assert tensor_types(path)["blk.0.attn_q.weight"] == "Q5_0"
    model, meta = load_gguf_model(path)
    assert type(model).__module__ == "mlx_lm.models.qwen2"
    attn = model.model.layers[0].self_attn
    assert np.array_equal(np.array(attn.q_proj.weight), values["blk.0.attn_q.weight"])
    assert np.array_equal(np.array(attn.k_proj.bias), values["blk.0.attn_k.bias"])
    assert np.array_equal(np.array(model.lm_head.weight), values["output.weight"])
    widths = meta[SOURCE_WIDTHS]
    assert widths["model.layers.0.self_attn.q_proj"] == 8  # Q5_0: more than 4 bits
    assert widths["model.layers.0.self_attn.o_proj"] == 4  # Q4_0
    requantize(model, widths)
    assert {attn[name].bits for name in ("q_proj", "k_proj", "v_proj")} == {8}
    assert attn.o_proj.bits == 4
    assert attn.q_proj.group_size == 32
    assert "bias" in attn.q_proj
    logits = model(mx.array([[1, 2, 3]]))
    assert logits.shape == (1, 3, 256)
