"""The rebuilt llama and qwen2 blocks (decode.py) compute what mlx-lm's compute.

The same weights are run through mlx-lm's own forward and through the fused, compiled one:
prefill, then greedy decode steps, alone (a per-sequence KV cache) and batched (a left-padded
batch cache), past the KV cache's 256-position growth step. Float32 on OpenBLAS and the
quantized kernel (when it can be built) both. qwen2 (random, visible q/k/v biases) on each path:
a path that dropped the biases would differ from mlx-lm's qwen2.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.mlx

PROMPTS = [[(7 * i) % 997 + 10 for i in range(250)], [(11 * i) % 991 + 20 for i in range(31)], [5, 6]]


ARCHITECTURES = ["llama", "qwen2"]


def pair(
    tokenizer: Any, precision: str, *, dense: bool = True, int8: bool = False, arch: str = "llama"
) -> tuple[Any, Any]:
    """(mlx-lm's model, the rebuilt one) with the same weights at `precision`; `dense`: float32
    copies for prefill (OpenBLAS), else the kernel computes prefill too; `int8`: the kernel's
    products on int8 input rows (precision `q4-int8`, where the CPU has VNNI)."""
    import mlx.core as mx

    from reference_server.engine.decode import install_fast_decode
    from reference_server.engine.gguf import random_llama, random_qwen2
    from reference_server.engine.quantized import apply_precision, use_cpu_kernel

    models = []
    for _ in range(2):
        build = random_qwen2 if arch == "qwen2" else random_llama
        model = build(seed=3, vocab_size=tokenizer.vocab_size, context_window=1024)
        apply_precision(model, precision)  # type: ignore[arg-type]
        if precision != "f32":
            from reference_server.engine.kernels import load_kernel

            kernel = load_kernel()
            if kernel is None:
                pytest.skip("the CPU kernel cannot be built here")
            use_cpu_kernel(model, kernel, dense=dense, activations=8 if int8 else 0)
        models.append(model)
    assert install_fast_decode(models[1])
    mx.eval(models[0].parameters(), models[1].parameters())
    return models[0], models[1]


def decode(model: Any, batched: bool, steps: int) -> list[Any]:
    import mlx.core as mx
    from mlx_lm.models.cache import BatchKVCache, make_prompt_cache

    caches = []
    for prompt in PROMPTS:
        cache = make_prompt_cache(model)
        model(mx.array([prompt[:-1]]), cache=cache)
        mx.eval([c.state for c in cache])
        caches.append(cache)
    logits = []
    if batched:
        cache = [BatchKVCache.merge([c[i] for c in caches]) for i in range(len(caches[0]))]
        tokens = mx.array([[p[-1]] for p in PROMPTS])
        for _ in range(steps):
            out = model(tokens, cache=cache)[:, -1, :]
            logits.append(out)
            tokens = mx.argmax(out, axis=-1)[:, None]
        return logits
    for cache, prompt in zip(caches, PROMPTS, strict=True):
        tokens = mx.array([[prompt[-1]]])
        for _ in range(steps):
            out = model(tokens, cache=cache)[:, -1, :]
            logits.append(out)
            tokens = mx.argmax(out, axis=-1)[:, None]
    return logits


@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.parametrize("precision", ["f32", "q8", "q4"])
@pytest.mark.parametrize("batched", [False, True])
def test_rebuilt_blocks_compute_what_mlx_lm_computes(
    smollm2_tokenizer: Any, precision: str, batched: bool, arch: str
) -> None:
    import mlx.core as mx

    # Float input rows (the default): with int8 ones (`q4-int8`) a last-bit difference in a norm
    # computed by MLX or by the kernel can round a value to the next int8 step, so the two would
    # differ by more than summation order. The int8 rounding is tested exactly in
    # test_kernels.py, and its effect on answers in test_quality.py.
    reference, fast = pair(smollm2_tokenizer, precision, arch=arch)
    # 250 + 10 positions cross the cache's 256-position growth step.
    expected, got = decode(reference, batched, 10), decode(fast, batched, 10)
    for want, have in zip(expected, got, strict=True):
        assert mx.array_equal(mx.argmax(want, axis=-1), mx.argmax(have, axis=-1))
        assert float(mx.max(mx.abs(want - have))) < 1e-3 * max(1.0, float(mx.max(mx.abs(want))))


@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.parametrize("int8", [False, True])
@pytest.mark.parametrize("batched", [False, True])
def test_the_whole_layer_step_computes_what_the_separate_operations_compute(
    smollm2_tokenizer: Any, monkeypatch: pytest.MonkeyPatch, int8: bool, batched: bool, arch: str
) -> None:
    # cpu/layer.cpp (one operation a layer, the KV written in place) against the projection,
    # mlx-lm's cache update, attention and compiled rest it replaces: the same numbers, past the
    # cache's growth step, alone and in a left-padded batch.
    import mlx.core as mx

    from reference_server.engine import decode as fast_decode
    from reference_server.engine.quantized import cpu_kernel, input_bits

    _, fast = pair(smollm2_tokenizer, "q4", int8=int8, arch=arch)
    kernel = cpu_kernel()
    if int8 and not input_bits():
        pytest.skip("no int8 products on this CPU (AVX-512 VNNI or AVX2)")
    calls = []
    layer_step = kernel.decode_layer
    monkeypatch.setattr(kernel, "decode_layer", lambda *a, **k: calls.append(1) or layer_step(*a, **k))
    whole = decode(fast, batched, 10)
    assert len(calls) == 10 * len(fast.model.layers) * (1 if batched else len(PROMPTS))
    monkeypatch.setattr(fast_decode, "_owns_room", lambda cache, count=1: False)
    separate = decode(fast, batched, 10)
    assert len(calls) == 10 * len(fast.model.layers) * (1 if batched else len(PROMPTS))
    for a, b in zip(whole, separate, strict=True):
        assert mx.array_equal(a, b)


@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.parametrize("padded", [False, True])
def test_a_chain_computes_each_position_exactly_as_its_decode_step(
    smollm2_tokenizer: Any, arch: str, padded: bool
) -> None:
    # chain_logits (what speculative decoding verifies drafts with) against one decode step
    # per token: the same logits bit for bit, across the cache's 256-position growth step,
    # then trimmed back two positions (rejected drafts) and chained on, as the scheduler does.
    # `padded`: the one row left of a batch whose longer row left (left padding > 0).
    import mlx.core as mx
    from mlx_lm.models.cache import BatchKVCache, make_prompt_cache

    from reference_server.engine.decode import chain_logits, chain_ready

    _, fast = pair(smollm2_tokenizer, "q4", arch=arch)
    assert chain_ready(fast)
    prompt, other = PROMPTS[0], PROMPTS[1]
    tokens = [(3 * i) % 900 + 7 for i in range(12)]

    def prefilled() -> list[Any]:
        caches = []
        for text in (prompt, other + other * padded * 8):
            cache = make_prompt_cache(fast)
            fast(mx.array([text]), cache=cache)
            mx.eval([c.state for c in cache])
            caches.append(cache)
        merged = [BatchKVCache.merge([a, b]) for a, b in zip(*caches, strict=True)]
        for layer in merged:
            layer.filter(mx.array([0]))
        return merged

    stepwise = prefilled()
    expected = [fast(mx.array([[t]]), cache=stepwise)[0, -1] for t in tokens]
    chained = prefilled()
    first = chain_logits(fast, mx.array(tokens[:5]), chained)
    for layer in chained:
        layer.trim(2)
    rest = chain_logits(fast, mx.array(tokens[3:]), chained)
    got = [first[i] for i in range(3)] + [rest[i] for i in range(rest.shape[0])]
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert mx.array_equal(a, b)
    assert chained[0]._idx == stepwise[0]._idx


def test_a_restored_prefix_is_never_written_through(smollm2_tokenizer: Any) -> None:
    # The whole-layer step writes the cache in place: a prompt cache restored from a prefix
    # entry (PrefixCache.restore: views of the entry's arrays, no spare room) must grow into a
    # buffer of its own before the first write, leaving the entry as it was.
    import mlx.core as mx
    import numpy as np
    from mlx_lm.models.cache import make_prompt_cache

    _, fast = pair(smollm2_tokenizer, "q4")
    prompt = PROMPTS[0]
    cache = make_prompt_cache(fast)
    fast(mx.array([prompt[:100]]), cache=cache)
    entry = [(mx.contiguous(c.keys[..., :100, :]), mx.contiguous(c.values[..., :100, :])) for c in cache]
    mx.eval(entry)
    snapshot = [(np.array(k), np.array(v)) for k, v in entry]  # copies
    restored = make_prompt_cache(fast)
    for layer, (keys, values) in zip(restored, entry, strict=True):
        layer.keys, layer.values, layer.offset = keys[..., :60, :], values[..., :60, :], 60
    tokens = mx.array([[prompt[60]]])
    for _ in range(5):
        tokens = mx.argmax(fast(tokens, cache=restored)[:, -1, :], axis=-1)[:, None]
    mx.eval(tokens, [c.keys for c in restored])
    for (keys, values), (k0, v0) in zip(entry, snapshot, strict=True):
        assert np.array_equal(np.array(keys), k0)
        assert np.array_equal(np.array(values), v0)


def test_other_architectures_are_left_alone(smollm2_tokenizer: Any) -> None:
    from mlx_lm.models import llama

    from reference_server.engine.decode import install_fast_decode

    biased = llama.Model(
        llama.ModelArgs(
            model_type="llama",
            hidden_size=64,
            num_hidden_layers=1,
            intermediate_size=128,
            num_attention_heads=4,
            num_key_value_heads=2,
            rms_norm_eps=1e-5,
            vocab_size=100,
            attention_bias=True,
        )
    )
    assert not install_fast_decode(biased)
    assert not install_fast_decode(object())
