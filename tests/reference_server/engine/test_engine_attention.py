"""NumPy-softmax attention equals MLX's scaled_dot_product_attention."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def mx() -> Any:
    return pytest.importorskip("mlx.core")


def reference(mx: Any, q: Any, k: Any, v: Any, scale: float, mask: Any) -> Any:
    return mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)


@pytest.mark.parametrize(
    ("batch", "heads", "kv_heads", "length", "context", "mask_kind"),
    [
        (1, 9, 3, 40, 100, "causal"),  # grouped-query heads, a chunk after 60 cached tokens
        (1, 4, 4, 16, 16, "causal"),
        (2, 6, 2, 8, 24, None),
        (2, 4, 2, 8, 24, "bool"),
        (1, 4, 1, 8, 24, "additive"),
        (1, 9, 3, 150, 400, "causal"),  # several row blocks, the last one partial
        (1, 4, 2, 130, 130, "bool"),
        (2, 4, 2, 140, 200, None),
    ],
)
def test_matches_mlx(
    mx: Any, batch: int, heads: int, kv_heads: int, length: int, context: int, mask_kind: str | None
) -> None:
    from reference_server.engine.attention import numpy_softmax_attention

    mx.random.seed(0)
    q = mx.random.normal((batch, heads, length, 32))
    k = mx.random.normal((batch, kv_heads, context, 32))
    v = mx.random.normal((batch, kv_heads, context, 32))
    mask: Any = mask_kind
    if mask_kind == "bool":
        mask = mx.random.uniform(shape=(batch, 1, length, context)) > 0.3
        mask[..., 0] = True  # every row attends to something
    elif mask_kind == "additive":
        mask = mx.random.normal((length, context))
    got = numpy_softmax_attention(q, k, v, scale=32**-0.5, mask=mask)
    want = reference(mx, q, k, v, 32**-0.5, mask)
    assert got.shape == want.shape
    assert mx.allclose(got, want, atol=1e-5, rtol=1e-5).item()


def test_installed_for_llama_and_used_for_large_prefills(mx: Any) -> None:
    from mlx_lm.models import base, llama

    from reference_server.engine import attention
    from reference_server.engine.gguf import random_llama

    model = random_llama(seed=0, vocab_size=512, context_window=2048)
    assert attention.install_numpy_softmax(model)
    assert attention.install_numpy_softmax(model)  # idempotent
    wrapped = llama.scaled_dot_product_attention
    assert getattr(wrapped, "_plumbline_numpy_softmax", False)

    calls: list[int] = []
    original = attention.numpy_softmax_attention

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0].shape[2])
        return original(*args, **kwargs)

    tokens = mx.array([[i % 500 for i in range(600)]])
    try:
        attention.numpy_softmax_attention = spy
        patched = model(tokens)[0, -1]
    finally:
        attention.numpy_softmax_attention = original
    assert calls == [600, 600]  # both layers, the whole prompt at once
    try:
        llama.scaled_dot_product_attention = base.scaled_dot_product_attention
        plain = model(tokens)[0, -1]
    finally:
        llama.scaled_dot_product_attention = wrapped
    assert mx.allclose(patched, plain, atol=1e-4, rtol=1e-4).item()


@pytest.mark.parametrize(
    ("batch", "heads", "kv_heads", "masked"), [(1, 9, 3, None), (4, 9, 3, 30), (3, 4, 4, 5)]
)
def test_decode_attention_matches_mlx(
    mx: Any, batch: int, heads: int, kv_heads: int, masked: int | None
) -> None:
    """One query per row, the batch's left padding masked out (as BatchKVCache masks it)."""
    from reference_server.engine.attention import decode_attention

    mx.random.seed(1)
    context = 70
    q = mx.random.normal((batch, heads, 1, 32))
    k = mx.random.normal((batch, kv_heads, context, 32))
    v = mx.random.normal((batch, kv_heads, context, 32))
    mask = None
    if masked is not None:
        mask = mx.ones((batch, 1, 1, context), dtype=mx.bool_)
        mask[0, ..., :masked] = False
    got = decode_attention(q, k, v, scale=32**-0.5, mask=mask)
    want = reference(mx, q, k, v, 32**-0.5, mask)
    assert got.shape == want.shape
    assert mx.allclose(got, want, atol=1e-6, rtol=1e-6).item()
