"""Quantized weights keep SmolLM2's answers honest (issue 19: a quantized default must keep
greedy answers coherent).

- Log-likelihood: the mean log-probability per token of a fixed assistant answer, teacher-forced
  through decode steps (one token at a time: the path the CPU kernel serves), is within
  `TOLERANCE` nats of float32's for the default precision and for q8. The float32 reference is
  one prefill pass over the same weights.
- The check can fail: the same weights requantized at 4 bits in groups of 64 (a plausible but
  lossy conversion, through the very same kernel) land about 0.19 nats per token below float32,
  outside the tolerance.
- Stop reasons: on prompts SmolLM2 answers in a sentence, the default precision ends its turn
  ("stop", the API's end_turn) exactly where float32 does. `q4-int8` (int8 input rows, as
  llama.cpp multiplies) is within the log-likelihood tolerance but fails this one, as llama.cpp
  does on the same file: "What is the capital of France?" starts "L'Étoile, la ..." and loops
  to the token limit instead of answering "Paris" (the first token is a near tie); hence opt-in.

Measured on the reference machine: float32 -2.37956 nats/token over the answer's 92 tokens, q4
(the GGUF's own weights) -2.37956, q8 -2.38252, the broken 4-bit/64 conversion -2.57401, 3-bit
-2.92486, 2-bit -9.21784. q4-int8 (2026-12-06, another machine): -2.37057 against float32's
-2.37894 there.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from reference_server.engine.base import EngineRequest, Sampling, Turn

# One worker runs this module (pytest-xdist): SmolLM2's float32 reference is built once.
pytestmark = [pytest.mark.mlx, pytest.mark.smollm2, pytest.mark.xdist_group("quality")]

# Nats per token: about 5% of perplexity. q8 is 0.003 away, the broken conversion 0.19.
TOLERANCE = 0.05
QUESTION = "How does the water cycle work?"
ANSWER = (
    "The water cycle moves water between the oceans, the air and the land. The sun warms the surface of "
    "the sea, and some of the water evaporates into vapour. As the warm, moist air rises it cools, and the "
    "vapour condenses into tiny droplets that form clouds. When the droplets grow heavy enough they fall as "
    "rain or snow. Rivers carry much of that water back to the sea, while some soaks into the ground and "
    "feeds plants and wells."
)
END_TURN_PROMPTS = ["Say hello in one short sentence.", "What is the capital of France?", "Name one colour."]


def served(gguf: Any, precision: str | None, *, broken: bool = False) -> Any:
    """SmolLM2 as the engine serves it at `precision` (None: as read, then `broken` applies)."""
    import mlx.core as mx
    from mlx.nn.layers.linear import Linear
    from mlx.nn.layers.quantized import quantize

    from reference_server.engine.blas import enable_fast_blas
    from reference_server.engine.gguf import load_gguf_model
    from reference_server.engine.kernels import load_kernel
    from reference_server.engine.loading import prepare_text_model
    from reference_server.engine.precision import choose_precision, input_rows
    from reference_server.engine.quantized import apply_precision

    model, _ = load_gguf_model(gguf)
    apply_precision(
        model, "f32" if broken else choose_precision(precision or "auto", kind="gguf", cpu=True, kernel=True)
    )  # type: ignore[arg-type]
    if broken:
        quantize(model, group_size=64, bits=4, class_predicate=lambda _p, m: isinstance(m, Linear))
    cpu = mx.default_device() == mx.cpu
    kernel = load_kernel() if cpu and (broken or precision != "f32") else None
    blas = enable_fast_blas("auto") == "openblas"
    prepare_text_model(model, kernel, cpu=cpu, fast_blas=blas, activations=input_rows(precision or "auto"))
    return model


def tokens(tokenizer: Any) -> tuple[list[int], int]:
    prompt = tokenizer.encode_turns((Turn("user", QUESTION),))
    full = tokenizer.encode_turns((Turn("user", QUESTION), Turn("assistant", ANSWER)))
    assert full[: len(prompt)] == prompt
    return full, len(prompt)


def decoded_log_likelihood(model: Any, ids: list[int], start: int) -> float:
    """Mean log-probability of ids[start:], each predicted by a decode step."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    cache = make_prompt_cache(model)
    model(mx.array([ids[: start - 1]]), cache=cache)
    scores = []
    for position in range(start, len(ids)):
        logits = model(mx.array([[ids[position - 1]]]), cache=cache)[0, -1]
        scores.append((logits - mx.logsumexp(logits))[ids[position]])
    return float(mx.mean(mx.stack(scores)))


def prefilled_log_likelihood(model: Any, ids: list[int], start: int) -> float:
    import mlx.core as mx

    logits = model(mx.array([ids]))[0, start - 1 : -1]
    scores = mx.take_along_axis(
        logits - mx.logsumexp(logits, axis=-1, keepdims=True), mx.array(ids[start:])[:, None], -1
    )
    return float(mx.mean(scores))


@pytest.fixture(scope="module")
def reference(smollm2_gguf: Any, smollm2_tokenizer: Any) -> float:
    ids, start = tokens(smollm2_tokenizer)
    return prefilled_log_likelihood(served(smollm2_gguf, "f32"), ids, start)


# None: the default, auto (q4 on the kernel); q4-int8: on int8 input rows where the CPU has VNNI.
@pytest.mark.parametrize("precision", [None, "q8", "q4-int8"])
def test_quantized_log_likelihood_is_within_tolerance_of_float32(
    smollm2_gguf: Any, smollm2_tokenizer: Any, reference: float, precision: str | None
) -> None:
    ids, start = tokens(smollm2_tokenizer)
    value = decoded_log_likelihood(served(smollm2_gguf, precision), ids, start)
    assert abs(value - reference) <= TOLERANCE, (value, reference)


def test_a_broken_quantization_fails_the_check(
    smollm2_gguf: Any, smollm2_tokenizer: Any, reference: float
) -> None:
    ids, start = tokens(smollm2_tokenizer)
    value = decoded_log_likelihood(served(smollm2_gguf, None, broken=True), ids, start)
    assert abs(value - reference) > TOLERANCE, (value, reference)


def test_the_default_ends_its_turns_where_float32_does(smollm2_gguf: Any) -> None:
    from reference_server.engine import load_engine

    async def finishes(precision: Any) -> list[tuple[str | None, int]]:
        engine = await asyncio.to_thread(load_engine, "smollm2-135m-instruct", precision=precision)
        try:
            out = []
            for prompt in END_TURN_PROMPTS:
                request = EngineRequest(
                    engine.models()[0].id, (Turn("user", prompt),), 96, Sampling(temperature=0)
                )
                last = [delta async for delta in engine.generate(request)][-1]
                out.append((last.finish, last.output_tokens))
            return out
        finally:
            await engine.aclose()

    default, float32 = asyncio.run(finishes("auto")), asyncio.run(finishes("f32"))
    assert [finish for finish, _ in default] == ["stop"] * len(END_TURN_PROMPTS)
    assert [finish for finish, _ in default] == [finish for finish, _ in float32]
