"""Which weights the engine serves (precision.py, quantized.py), and that it says so."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from reference_server.engine.precision import choose_precision


@pytest.mark.parametrize(
    ("requested", "kind", "cpu", "kernel", "expected"),
    [
        ("auto", "gguf", True, True, "q4"),
        ("auto", "mlx-dir", True, True, "q4"),
        ("auto", "gguf", True, False, "f32"),  # no kernel: float32 on OpenBLAS, as before
        ("auto", "tiny-random", True, True, "f32"),
        ("auto", "vlm-dir", True, True, "f32"),
        ("auto", "gguf", False, False, None),  # Metal: the weights as loaded
        ("q8", "tiny-random", True, True, "q8"),
        ("q4-int8", "gguf", True, True, "q4"),  # q4 weights (int8 input rows: loading.py)
        ("f32", "gguf", False, False, "f32"),
    ],
)
def test_choose_precision(requested: Any, kind: str, cpu: bool, kernel: bool, expected: str | None) -> None:
    assert choose_precision(requested, kind=kind, cpu=cpu, kernel=kernel) == expected


@pytest.fixture
def tiny_model(smollm2_tokenizer: Any) -> Any:
    from reference_server.engine.gguf import random_llama

    return random_llama(seed=0, vocab_size=smollm2_tokenizer.vocab_size, context_window=512)


@pytest.mark.mlx
def test_q8_and_q4_quantize_what_they_say(tiny_model: Any) -> None:
    from mlx.nn.layers.quantized import QuantizedEmbedding, QuantizedLinear

    from reference_server.engine.quantized import apply_precision, describe_precision

    assert describe_precision(tiny_model) == "f32"
    apply_precision(tiny_model, "q4")
    attn = tiny_model.model.layers[0].self_attn
    assert isinstance(attn.q_proj, QuantizedLinear)
    assert (attn.q_proj.bits, attn.q_proj.group_size) == (4, 32)
    # The embedding and the (untied) output projection stay at 8 bits.
    assert isinstance(tiny_model.model.embed_tokens, QuantizedEmbedding)
    assert tiny_model.model.embed_tokens.bits == 8
    assert tiny_model.lm_head.bits == 8
    assert describe_precision(tiny_model) == "q4"
    apply_precision(tiny_model, "q8")
    assert attn.q_proj.bits == 8
    assert describe_precision(tiny_model) == "q8"
    apply_precision(tiny_model, "f32")
    assert describe_precision(tiny_model) == "f32"


@pytest.mark.mlx
@pytest.mark.smollm2
def test_q4_serves_the_gguf_tensors_as_they_are(smollm2_gguf: Any) -> None:
    # SmolLM2's file holds Q4_1 layers and a Q8_0 embedding: q4 keeps them, f32 expands them.
    import mlx.core as mx

    from reference_server.engine.gguf import load_gguf_model
    from reference_server.engine.quantized import apply_precision

    as_read, _ = load_gguf_model(smollm2_gguf)
    served, _ = load_gguf_model(smollm2_gguf)
    apply_precision(served, "q4")
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        read, kept = (
            getattr(as_read.model.layers[3].self_attn, name),
            getattr(served.model.layers[3].self_attn, name),
        )
        assert mx.array_equal(read.weight, kept.weight)
        assert mx.array_equal(read.scales.astype(mx.float32), kept.scales)
    assert mx.array_equal(as_read.model.embed_tokens.weight, served.model.embed_tokens.weight)


@pytest.mark.mlx
def test_the_card_and_the_model_list_say_which_weights(smollm2_gguf: Any) -> None:
    from reference_server.catalog import ModelCatalog
    from reference_server.engine import load_engine

    engine = load_engine("tiny-random", seed=0, precision="q8")
    try:
        card = engine.models()[0]
        assert card.precision == "q8"
        info = ModelCatalog([card]).info(card.id)
        assert info.display_name == f"{card.display_name} (q8)"
    finally:
        asyncio.run(engine.aclose())
