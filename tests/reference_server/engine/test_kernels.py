"""The CPU primitives of engine/cpu/ (kernels.py builds them) against MLX's own arithmetic.

Every option of the quantized product (bits, group sizes, float16 or float32 scales, strided
inputs, the RMS-norm and SwiGLU input transforms, the residual) and the decode attention (left
padding, strided caches, a row with nothing to attend to) is compared with the same sum written
in MLX operations; the answers are independent of the thread count. Skipped where the kernel
cannot be built (not Linux x86-64, no compiler, no nanobind): the engine then serves float32.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.mlx


def reference(x: Any, w: Any, scales: Any, biases: Any, group: int, bits: int) -> Any:
    import mlx.core as mx

    dense = mx.dequantize(
        w, scales.astype(mx.float32), biases.astype(mx.float32), group_size=group, bits=bits
    )
    return x @ dense.T


def close(a: Any, b: Any, tolerance: float = 1e-4) -> bool:
    import mlx.core as mx

    scale = max(1.0, float(mx.max(mx.abs(b))))
    return float(mx.max(mx.abs(a - b))) <= tolerance * scale


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("rows", [1, 3, 4, 8, 13, 33])
@pytest.mark.parametrize("half", [False, True])
def test_quantized_matmul_matches_mlx(kernel: Any, bits: int, group: int, rows: int, half: bool) -> None:
    import mlx.core as mx

    key = mx.random.key(bits * 1000 + group * 10 + rows)
    w = mx.random.normal((133, 256), key=key)  # 133 rows: chunks and tiles with remainders
    x = mx.random.normal((rows, 256), key=mx.random.key(rows))
    q, scales, biases = mx.quantize(w, group_size=group, bits=bits)
    if half:
        scales, biases = scales.astype(mx.float16), biases.astype(mx.float16)
    got = kernel.quantized_matmul(x, q, scales, biases, group, bits)
    assert got.shape == (rows, 133)
    assert close(got, reference(x, q, scales, biases, group, bits))


def rounded(x: Any) -> Any:
    """x with each 32 values rounded to int8 steps of their own (max |x| / 127), as the int8
    products (cpu/qmm_int8.cpp) round their input rows."""
    import mlx.core as mx

    blocks = x.reshape(-1, 32)
    step = mx.max(mx.abs(blocks), axis=-1, keepdims=True) / 127.0
    inverse = mx.where(step > 0, 1.0 / mx.where(step > 0, step, 1.0), 0.0)
    return (mx.round(blocks * inverse) * step).reshape(x.shape)


@pytest.fixture
def int8(kernel: Any) -> Any:
    if not kernel.vnni():
        pytest.skip("the int8 products are not built for this CPU (AVX-512 VNNI or AVX2)")
    return kernel


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("group", [32, 64, 128])
@pytest.mark.parametrize("rows", [1, 3, 4, 8, 13])
@pytest.mark.parametrize("width", [256, 384])  # 384: a last 4-bit superblock of 128 values
def test_int8_products_are_the_rounded_rows_times_the_weights(
    int8: Any, bits: int, group: int, rows: int, width: int
) -> None:
    import mlx.core as mx

    key = mx.random.key(bits * 1000 + group * 10 + rows + width)
    w = mx.random.normal((133, width), key=key)
    x = mx.random.normal((rows, width), key=mx.random.key(rows + 100))
    q, scales, biases = mx.quantize(w, group_size=group, bits=bits)
    half_scales, half_biases = scales.astype(mx.float16), biases.astype(mx.float16)
    for s, b in ((scales, biases), (half_scales, half_biases)):
        got = int8.quantized_matmul(x, q, s, b, group, bits, activations=8)
        if bits == 8 and not int8.int8_eight_bit():  # AVX2: 8-bit weights stay on floats
            assert mx.array_equal(got, int8.quantized_matmul(x, q, s, b, group, bits))
            continue
        # Exactly the rounded x times the weights (float summation order aside) ...
        assert close(got, reference(rounded(x), q, s, b, group, bits), 2e-5)
        # ... which is off the float product by the rounding only: a wrong block, lane or
        # scale would be off by the size of the values themselves.
        error = float(mx.max(mx.abs(got - reference(x, q, s, b, group, bits))))
        assert 0 < error < 0.05 * float(mx.max(mx.abs(got)))


def test_int8_rows_do_not_depend_on_their_batch(int8: Any) -> None:
    import mlx.core as mx

    w = mx.random.normal((200, 576), key=mx.random.key(12))
    q, scales, biases = mx.quantize(w, group_size=32, bits=4)
    x = mx.random.normal((7, 576), key=mx.random.key(13))
    norm = mx.random.normal((576,), key=mx.random.key(14))
    batch = int8.quantized_matmul(x, q, scales, biases, 32, 4, norm, 1e-5, activations=8)
    for i in range(7):
        alone = int8.quantized_matmul(x[i : i + 1], q, scales, biases, 32, 4, norm, 1e-5, activations=8)
        assert mx.array_equal(alone, batch[i : i + 1])


def test_inputs_are_read_through_their_strides(kernel: Any) -> None:
    import mlx.core as mx

    w = mx.random.normal((64, 128), key=mx.random.key(1))
    q, scales, biases = mx.quantize(w, group_size=32, bits=4)
    wide = mx.random.normal((128, 6), key=mx.random.key(2))
    x = wide.T  # (6, 128), not row contiguous
    batched = mx.random.normal((2, 3, 128), key=mx.random.key(3))[:, ::2, :]
    assert close(kernel.quantized_matmul(x, q, scales, biases, 32, 4), reference(x, q, scales, biases, 32, 4))
    got = kernel.quantized_matmul(batched, q, scales, biases, 32, 4)
    assert got.shape == (2, 2, 64)
    assert close(got, reference(batched, q, scales, biases, 32, 4))


def test_norm_swiglu_and_residual_are_applied(kernel: Any) -> None:
    import mlx.core as mx
    from mlx.nn.layers.activations import silu

    w = mx.random.normal((96, 64), key=mx.random.key(4))
    q, scales, biases = mx.quantize(w, group_size=32, bits=8)
    x = mx.random.normal((5, 64), key=mx.random.key(5))
    gain = mx.random.normal((64,), key=mx.random.key(6))
    residual = mx.random.normal((5, 96), key=mx.random.key(7))
    normed = mx.fast.rms_norm(x, gain, 1e-5)
    got = kernel.quantized_matmul(x, q, scales, biases, 32, 8, gain, 1e-5)
    assert close(got, reference(normed, q, scales, biases, 32, 8))
    gate_up = mx.random.normal((5, 128), key=mx.random.key(8))
    fused = silu(gate_up[:, :64]) * gate_up[:, 64:]
    got = kernel.quantized_matmul(gate_up, q, scales, biases, 32, 8, swiglu=True, residual=residual)
    assert close(got, residual + reference(fused, q, scales, biases, 32, 8))
    # A residual that is a view (not row contiguous) is read through its strides too.
    transposed = mx.random.normal((96, 5), key=mx.random.key(9)).T
    got = kernel.quantized_matmul(x, q, scales, biases, 32, 8, residual=transposed)
    assert close(got, transposed + reference(x, q, scales, biases, 32, 8))


def test_answers_do_not_depend_on_the_thread_count(kernel: Any) -> None:
    import mlx.core as mx

    w = mx.random.normal((1000, 192), key=mx.random.key(10))
    q, scales, biases = mx.quantize(w, group_size=64, bits=4)
    x = mx.random.normal((8, 192), key=mx.random.key(11))
    threads = kernel.threads()
    try:
        kernel.set_threads(1)
        one = kernel.quantized_matmul(x, q, scales, biases, 64, 4)
        mx.eval(one)
        kernel.set_threads(2)
        two = kernel.quantized_matmul(x, q, scales, biases, 64, 4)
        mx.eval(two)
    finally:
        kernel.set_threads(threads)
    assert mx.array_equal(one, two)


def test_bad_arguments_are_refused(kernel: Any) -> None:
    import mlx.core as mx

    w = mx.random.normal((32, 64), key=mx.random.key(12))
    q, scales, biases = mx.quantize(w, group_size=32, bits=4)
    with pytest.raises(ValueError, match="shapes"):
        kernel.quantized_matmul(mx.zeros((1, 96)), q, scales, biases, 32, 4)
    with pytest.raises(ValueError, match="bits"):
        kernel.quantized_matmul(mx.zeros((1, 64)), q, scales, biases, 32, 3)
    with pytest.raises(ValueError, match="float32"):
        kernel.quantized_matmul(mx.zeros((1, 64), dtype=mx.float16), q, scales, biases, 32, 4)


def attention_reference(queries: Any, keys: Any, values: Any, length: int, padding: list[int]) -> Any:
    import mlx.core as mx

    k, v = keys[..., :length, :], values[..., :length, :]
    scores = queries @ k.swapaxes(-1, -2)
    attend = mx.arange(length)[None, None, None, :] >= mx.array(padding)[:, None, None, None]
    scores = mx.where(attend, scores, mx.array(-mx.inf))
    return mx.softmax(scores, axis=-1) @ v


def test_decode_attention_matches_mlx(kernel: Any) -> None:
    import mlx.core as mx

    queries = mx.random.normal((3, 2, 3, 64), key=mx.random.key(13)) * 0.125
    buffer = mx.random.normal((3, 2, 48, 64), key=mx.random.key(14))
    values = mx.random.normal((3, 2, 48, 64), key=mx.random.key(15))
    got = kernel.decode_attention(queries, buffer, values, 37, mx.array([0, 5, 20]))
    assert close(got, attention_reference(queries, buffer, values, 37, [0, 5, 20]), 1e-5)
    # No padding (one sequence), and a cache that is a view of a larger buffer (prefix reuse).
    strided_k, strided_v = buffer[:, :, 4:, :], values[:, :, 4:, :]
    got = kernel.decode_attention(queries, strided_k, strided_v, 30)
    assert close(got, attention_reference(queries, strided_k, strided_v, 30, [0, 0, 0]), 1e-5)


def test_a_row_with_nothing_to_attend_to_gives_zeros(kernel: Any) -> None:
    import mlx.core as mx

    queries = mx.ones((2, 1, 1, 64))
    keys = mx.ones((2, 1, 8, 64))
    got = kernel.decode_attention(queries, keys, keys, 8, mx.array([0, 8]))
    assert float(mx.max(mx.abs(got[1]))) == 0.0
    assert close(got[0], mx.ones((1, 1, 64)))


def test_an_unbuildable_kernel_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from reference_server.engine import kernels

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "nanobind" else real(name, *a)
    )
    with pytest.raises(kernels.KernelUnavailableError, match="nanobind"):
        kernels.build_kernel()


def test_resizing_the_pool_never_hangs(kernel: Any) -> None:
    # A helper created just before the next resize must still see that resize's stop. (MLX work
    # stays on this thread: MLX evaluates a graph only on the thread that built it.)
    import threading

    import mlx.core as mx

    w = mx.random.normal((256, 64), key=mx.random.key(16))
    q, scales, biases = mx.quantize(w, group_size=32, bits=8)
    x = mx.random.normal((2, 64), key=mx.random.key(17))
    expected = kernel.quantized_matmul(x, q, scales, biases, 32, 8)
    mx.eval(expected)
    threads = kernel.threads()
    worker = threading.Thread(target=lambda: [kernel.set_threads(1 + n % 3) for n in range(200)], daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "set_threads hung"
    kernel.set_threads(threads)
    assert mx.array_equal(kernel.quantized_matmul(x, q, scales, biases, 32, 8), expected)


@pytest.mark.parametrize("traditional", [True, False])
def test_decode_projection_matches_mlx(kernel: Any, traditional: bool) -> None:
    # Norm, the fused q/k/v product and the rotary embedding, against mx.fast.rope itself.
    import mlx.core as mx
    from mlx.nn.layers.positional_encoding import RoPE

    from reference_server.engine.decode import _rope_tables

    heads, kv_heads, dim, hidden = 4, 2, 64, 128
    w = mx.random.normal(((heads + 2 * kv_heads) * dim, hidden), key=mx.random.key(18))
    q, scales, biases = mx.quantize(w, group_size=32, bits=4)
    x = mx.random.normal((3, 1, hidden), key=mx.random.key(19))
    norm = mx.random.normal((hidden,), key=mx.random.key(20))
    rope = RoPE(dim, traditional=traditional, base=10000.0)
    tables = _rope_tables(rope, 64)
    assert tables is not None
    positions = mx.array([0, 7, 40])
    queries, keys, values = kernel.decode_projection(
        x,
        q,
        scales,
        biases,
        32,
        4,
        norm,
        1e-5,
        tables[0],
        tables[1],
        positions,
        heads,
        kv_heads,
        dim,
        traditional,
        0.125,
    )
    y = reference(mx.fast.rms_norm(x, norm, 1e-5), q, scales, biases, 32, 4).reshape(
        3, heads + 2 * kv_heads, 1, dim
    )
    rotated = mx.concatenate([rope(y[i : i + 1], offset=int(positions[i])) for i in range(3)])
    assert queries.shape == (3, kv_heads, heads // kv_heads, dim)
    assert close(queries, rotated[:, :heads].reshape(3, kv_heads, heads // kv_heads, dim) * 0.125)
    assert close(keys, rotated[:, heads : heads + kv_heads].reshape(3, kv_heads, 1, dim))
    assert close(values, y[:, heads + kv_heads :].reshape(3, kv_heads, 1, dim))
