"""A GGUF file's own blocks on the CPU kernel (engine/blocks.py, engine/cpu/blocks.cpp).

The product on each GGML block type is the input rows rounded to int8 per 32 values times the
file's values (the gguf package's dequantization), to float rounding; a row's result does not
depend on its batch; K-quants transcode to the _1 types within float16 rounding of their scales;
mixed fused layers become Q8_0, exactly from Q4_0 and Q5_0; and a qwen2 GGUF served on blocks
gives the float model's logits, in prefill and in the kernel's decode step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .test_engine_gguf import random_k_quant, write_qwen2_gguf

pytestmark = pytest.mark.mlx

KINDS = {"Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8}


def rounded(x: Any) -> Any:
    """Rows of x as the kernel rounds them: int8 per 32 values, scale max|x| / 127."""
    import numpy as np

    blocks = x.reshape(x.shape[0], -1, 32)
    step = np.abs(blocks).max(-1, keepdims=True) / 127
    return (np.rint(blocks / np.where(step == 0, 1, step)) * step).reshape(x.shape)


def product(kernel: Any, x: Any, rows: Any, kind: int, **options: Any) -> Any:
    import mlx.core as mx
    import numpy as np

    w = mx.array(rows)
    return np.array(kernel.quantized_matmul(mx.array(x), w, w, w, 0, kind, **options))


@pytest.mark.parametrize("name", [*KINDS, "Q5_0 pairs"])
@pytest.mark.parametrize("rows", [1, 3, 6])
def test_each_block_type_multiplies_the_files_values(kernel: Any, name: str, rows: int) -> None:
    import numpy as np

    from reference_server.engine.blocks import _paired, dequantize_rows, encode_rows

    rng = np.random.default_rng(len(name) * 10 + rows)
    kind = KINDS[name.split()[0]]
    weights = encode_rows(rng.normal(size=(37, 192)).astype(np.float32) * 0.05, kind)
    if name.endswith("pairs"):  # what Q5_0 rows of a width that is a multiple of 64 are served as
        weights, kind = _paired(weights), 106
    x = rng.normal(size=(rows, 192)).astype(np.float32)
    expected = rounded(x).astype(np.float64) @ dequantize_rows(weights, kind).T.astype(np.float64)
    got = product(kernel, x, weights, kind)
    assert np.abs(got - expected).max() <= 1e-5 * np.abs(expected).max()


def test_pairs_regroup_the_same_bytes() -> None:
    import numpy as np

    from reference_server.engine.blocks import _paired, _unpaired, encode_rows

    rows = encode_rows(np.random.default_rng(5).normal(size=(3, 128)).astype(np.float32), KINDS["Q5_0"])
    paired = _paired(rows)
    assert paired.shape == rows.shape
    assert not np.array_equal(paired, rows)
    assert np.array_equal(_unpaired(paired), rows)


@pytest.mark.parametrize("paired", [False, True])
def test_a_rows_result_does_not_depend_on_its_batch(kernel: Any, paired: bool) -> None:
    import numpy as np

    from reference_server.engine.blocks import _paired, encode_rows

    rng = np.random.default_rng(1)
    weights = encode_rows(rng.normal(size=(70, 256)).astype(np.float32), KINDS["Q5_0"])
    kind = KINDS["Q5_0"]
    if paired:
        weights, kind = _paired(weights), 106
    x = rng.normal(size=(7, 256)).astype(np.float32)
    batch = product(kernel, x, weights, kind)  # 70 weight rows: two chunks of the pool's work
    for m in range(7):
        assert np.array_equal(product(kernel, x[m : m + 1], weights, kind)[0], batch[m])


def test_norm_and_residual_apply_to_block_products(kernel: Any) -> None:
    import mlx.core as mx
    import numpy as np

    from reference_server.engine.blocks import dequantize_rows, encode_rows

    rng = np.random.default_rng(2)
    weights = encode_rows(rng.normal(size=(40, 128)).astype(np.float32), KINDS["Q8_0"])
    x = rng.normal(size=(2, 128)).astype(np.float32)
    norm = rng.normal(size=(128,)).astype(np.float32)
    residual = rng.normal(size=(2, 40)).astype(np.float32)
    normed = np.array(mx.fast.rms_norm(mx.array(x), mx.array(norm), 1e-5))
    expected = residual + rounded(normed) @ dequantize_rows(weights, KINDS["Q8_0"]).T
    got = product(
        kernel, x, weights, KINDS["Q8_0"], norm=mx.array(norm), eps=1e-5, residual=mx.array(residual)
    )
    assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max()


def test_bad_block_rows_are_refused(kernel: Any) -> None:
    import mlx.core as mx

    x = mx.zeros((1, 64))
    bad = ((4, 68, 5), (4, 67, 8), (4, 22, 106))  # no such type; not whole blocks; K not pairs of blocks
    for n, width, kind in bad:
        w = mx.zeros((n, width), dtype=mx.uint8)
        with pytest.raises(ValueError, match="plumbline qmm"):
            kernel.quantized_matmul(x, w, w, w, 0, kind)


@pytest.mark.parametrize("name", ["Q4_K", "Q5_K"])
def test_k_quants_keep_their_values_as_the_one_types(name: str) -> None:
    import numpy as np
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize

    from reference_server.engine.blocks import dequantize_rows, to_block_rows

    raw = random_k_quant(np.random.default_rng(3), name, (8, 512))
    values = dequantize(raw, GGMLQuantizationType[name])
    kind, rows = to_block_rows(name, raw, None)
    assert kind == (7 if name == "Q5_K" else 3)
    # Only the scale d * sc and offset -dmin * m are rounded (to float16).
    error = np.abs(dequantize_rows(rows, kind) - values)
    assert error.max() <= 2e-3 * np.abs(values).max()


@pytest.mark.parametrize("name", ["Q4_0", "Q5_0"])
def test_symmetric_types_become_q8_0_exactly(name: str) -> None:
    import numpy as np

    from reference_server.engine.blocks import _as_q8_0, dequantize_rows, encode_rows

    rows = encode_rows(np.random.default_rng(4).normal(size=(16, 96)).astype(np.float32), KINDS[name])
    widened = _as_q8_0(rows, KINDS[name])
    assert np.array_equal(dequantize_rows(widened, 8), dequantize_rows(rows, KINDS[name]))


def test_a_qwen2_gguf_is_served_on_its_blocks(kernel: Any, tmp_path: Path) -> None:
    import mlx.core as mx
    import numpy as np
    from mlx_lm.models.cache import make_prompt_cache

    from reference_server.engine.blocks import serve_blocks
    from reference_server.engine.gguf import RAW_BLOCKS, load_gguf_model
    from reference_server.engine.loading import prepare_text_model
    from reference_server.engine.quantized import BlockLinear

    path = tmp_path / "tiny-qwen2.gguf"
    write_qwen2_gguf(path)
    float_model, _ = load_gguf_model(path)
    model, meta = load_gguf_model(path)
    served = serve_blocks(model, meta[RAW_BLOCKS])
    assert "model.embed_tokens" not in served
    assert "lm_head" in served
    layer = model.model.layers[0]
    kinds = {name: layer.self_attn[name].kind for name in ("q_proj", "k_proj", "v_proj", "o_proj")}
    # v is Q8_0 beside Q5_0 q and k: the fused family is Q8_0; o keeps its Q4_0.
    assert kinds == {"q_proj": 8, "k_proj": 8, "v_proj": 8, "o_proj": 2}
    # Q5_0 of widths 64 and 128: served in pairs (106).
    assert (layer.mlp.gate_proj.kind, layer.mlp.down_proj.kind, model.lm_head.kind) == (106, 106, 8)
    assert isinstance(layer.self_attn.q_proj, BlockLinear)
    assert "bias" in layer.self_attn.q_proj
    prepare_text_model(model, kernel, cpu=True, fast_blas=True)
    assert type(model.model.layers[0]).__name__ == "FastLlamaBlock"
    assert model.model.layers[0]._fused is not None  # the kernel's whole-layer decode step

    tokens = mx.array([[5, 17, 99, 3, 42, 7]])
    expected = np.array(float_model(tokens)[0])
    prefill = np.array(model(tokens)[0])
    assert np.abs(prefill - expected).max() <= 0.03 * np.abs(expected).max()
    cache = make_prompt_cache(model)
    model(tokens[:, :5], cache=cache)
    step = np.array(model(tokens[:, 5:], cache=cache)[0, -1])
    assert np.abs(step - prefill[-1]).max() <= 1e-4 * np.abs(prefill[-1]).max()


def test_layers_served_from_their_bytes_are_never_dequantized(kernel: Any, tmp_path: Path) -> None:
    # load_gguf_model(blocks=True): zeros stand in for the weights blocks.py serves from the
    # file's bytes; the served model is the same, the embedding keeps the file's values.
    import mlx.core as mx
    import numpy as np

    from reference_server.engine.blocks import serve_blocks
    from reference_server.engine.gguf import RAW_BLOCKS, load_gguf_model
    from reference_server.engine.quantized import use_cpu_kernel

    path = tmp_path / "tiny-qwen2.gguf"
    values = write_qwen2_gguf(path)
    lean, lean_meta = load_gguf_model(path, blocks=True)
    assert float(mx.max(mx.abs(lean.model.layers[0].mlp.gate_proj.weight))) == 0.0  # not dequantized
    assert np.array_equal(np.array(lean.model.embed_tokens.weight), values["token_embd.weight"])
    full, full_meta = load_gguf_model(path)
    serve_blocks(lean, lean_meta[RAW_BLOCKS])
    serve_blocks(full, full_meta[RAW_BLOCKS])
    use_cpu_kernel(lean, kernel, dense=False)  # installs the kernel the block layers call
    tokens = mx.array([[3, 1, 4, 1, 5]])
    assert np.array_equal(np.array(lean(tokens)), np.array(full(tokens)))


@pytest.mark.parametrize("down", ["Q4_K", "Q6_K"])
def test_k_quant_layers_load_lean_and_serve_the_files_values(kernel: Any, tmp_path: Path, down: str) -> None:
    # ffn_down as a K-quant: Q4_K from its bytes (a zero stands in at load), Q6_K re-encoded as
    # Q8_0 from its values (dequantized at load); the served model follows the float one.
    import mlx.core as mx
    import numpy as np

    from reference_server.engine.blocks import serve_blocks
    from reference_server.engine.gguf import RAW_BLOCKS, load_gguf_model
    from reference_server.engine.quantized import use_cpu_kernel

    path = tmp_path / "tiny-qwen2-k.gguf"
    write_qwen2_gguf(path, down=down)
    float_model, _ = load_gguf_model(path)
    model, meta = load_gguf_model(path, blocks=True)
    placeholder = float(mx.max(mx.abs(model.model.layers[0].mlp.down_proj.weight)))
    assert (placeholder == 0.0) == (down == "Q4_K")
    serve_blocks(model, meta[RAW_BLOCKS])
    assert model.model.layers[0].mlp.down_proj.kind == (3 if down == "Q4_K" else 8)
    use_cpu_kernel(model, kernel, dense=False)
    tokens = mx.array([[7, 1, 8, 2, 8]])
    expected, got = np.array(float_model(tokens)), np.array(model(tokens))
    assert np.abs(got - expected).max() <= 0.03 * np.abs(expected).max()
