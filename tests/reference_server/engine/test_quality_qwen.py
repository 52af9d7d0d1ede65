"""A K-quant GGUF served within the quality bound (issue 43): Qwen2.5-Coder-0.5B-Instruct's
Q4_K_M (Q4_K, Q5_0, Q6_K and Q8_0 tensors), read with the gguf package.

As test_quality.py for SmolLM2: the mean log-probability per token of a fixed answer, teacher-
forced through decode steps as served (`--precision auto`: the file's own blocks on the CPU
kernel with int8 input rows, blocks.py), is within `TOLERANCE` of float32 on the file's own
values; the same turns end where float32 ends them. The check can fail: the same file at 4 bits
throughout (`--precision q4`) lands outside it.

Measured (2026-12-07, 2 cores): float32 -2.6353 nats/token over the answer's 99 tokens; auto on
blocks -2.6352 (requantized at 4 and 8 bits, before blocks: -2.6338); q8 -2.6338; q4 throughout
-2.7502 (0.115 away). Needs the whole model (six packages): `nox -s deep`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from reference_server.engine.base import EngineRequest, Sampling, Turn

from .test_quality import TOLERANCE, decoded_log_likelihood, prefilled_log_likelihood, tokens

pytestmark = [pytest.mark.mlx, pytest.mark.slow, pytest.mark.deep]
MODEL = "qwen2.5-coder-0.5b-instruct"
END_TURN_PROMPTS = ["Say hello in one short sentence.", "What is the capital of France?", "Name one colour."]


@pytest.fixture(scope="module")
def source() -> Any:
    from reference_server.engine.sources import ModelNotFoundError, resolve_model

    try:
        return resolve_model(MODEL)
    except ModelNotFoundError as exc:
        pytest.skip(str(exc))


def served(source: Any, precision: str) -> Any:
    """The model as the engine loads it at `precision`."""
    from reference_server.engine.blas import enable_fast_blas
    from reference_server.engine.loading import load_model

    return load_model(source, enable_fast_blas("auto"), 0, None, precision)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def answer(source: Any) -> Iterator[tuple[Any, list[int], int, float]]:
    loaded = served(source, "f32")
    ids, start = tokens(loaded.tokenizer)
    return loaded.tokenizer, ids, start, prefilled_log_likelihood(loaded.model, ids, start)


def test_the_k_quant_file_as_served_is_within_tolerance_of_float32(source: Any, answer: Any) -> None:
    _, ids, start, reference = answer
    loaded = served(source, "auto")
    assert loaded.precision == "gguf"  # the file's own blocks (blocks.py)
    value = decoded_log_likelihood(loaded.model, ids, start)
    print(f"float32 {reference:.4f}, as served {value:.4f} nats/token")
    assert abs(value - reference) <= TOLERANCE, (value, reference)


def test_four_bits_throughout_fails_the_check(source: Any, answer: Any) -> None:
    _, ids, start, reference = answer
    value = decoded_log_likelihood(served(source, "q4").model, ids, start)
    assert abs(value - reference) > TOLERANCE, (value, reference)


def test_the_served_model_ends_its_turns_where_float32_does(source: Any) -> None:
    from reference_server.engine import load_engine

    async def finishes(precision: Any) -> list[str | None]:
        engine = await asyncio.to_thread(load_engine, MODEL, precision=precision)
        try:
            out = []
            for prompt in END_TURN_PROMPTS:
                request = EngineRequest(
                    engine.models()[0].id, (Turn("user", prompt),), 64, Sampling(temperature=0)
                )
                out.append([delta async for delta in engine.generate(request)][-1].finish)
            return out
        finally:
            await engine.aclose()

    default, float32 = asyncio.run(finishes("auto")), asyncio.run(finishes("f32"))
    assert default == ["stop"] * len(END_TURN_PROMPTS)
    assert default == float32
