"""GGUF tensor names and metadata -> mlx-lm llama names and ModelArgs (no MLX needed)."""

from __future__ import annotations

import pytest

from reference_server.engine.gguf import GGUFError, llama_args_from_metadata, mlx_name


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
    args = llama_args_from_metadata(SMOLLM2_META, tied=True)
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


def test_other_architectures_are_rejected() -> None:
    with pytest.raises(GGUFError, match="llama-family"):
        llama_args_from_metadata({**SMOLLM2_META, "general.architecture": "qwen2"}, tied=True)


def test_missing_metadata_is_named() -> None:
    meta = {k: v for k, v in SMOLLM2_META.items() if k != "llama.block_count"}
    with pytest.raises(GGUFError, match=r"llama\.block_count"):
        llama_args_from_metadata(meta, tied=False)
