"""`--context-window`: tiny-random's window (a long Claude Code prompt needs ~30k tokens), a cap
for other models."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from reference_server.__main__ import parse_args
from reference_server.engine import EngineRequest, PromptTooLongError, Sampling, Turn


def test_cli_option_reaches_the_settings() -> None:
    assert parse_args([]).context_window is None
    assert parse_args(["--context-window", "32768"]).context_window == 32768


@pytest.mark.parametrize("value", ["0", "-5", "many"])
def test_cli_rejects_a_non_positive_window(value: str) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--context-window", value])


def long_request(words: int, max_tokens: int = 2) -> EngineRequest:
    return EngineRequest(
        model="tiny-random",
        turns=(Turn("user", " ".join(f"word{i}" for i in range(words))),),
        max_tokens=max_tokens,
        sampling=Sampling(temperature=0),
    )


@pytest.fixture(scope="module")
def wide_tiny_engine(smollm2_gguf: Any) -> Any:
    pytest.importorskip("mlx.core")
    from reference_server.engine import load_engine

    engine = load_engine("tiny-random", seed=0, context_window=32768)
    yield engine
    asyncio.run(engine.aclose())


@pytest.mark.mlx
def test_tiny_random_takes_the_window_it_is_given(wide_tiny_engine: Any, collect: Any) -> None:
    (card,) = wide_tiny_engine.models()
    assert card.context_window == card.max_output_tokens == 32768
    req = long_request(1000)  # ~4.8k tokens: too long for the default 2048
    assert asyncio.run(wide_tiny_engine.count_tokens(req)) > 2048
    assert collect(wide_tiny_engine, req)[-1].output_tokens == 2
    with pytest.raises(PromptTooLongError) as caught:
        asyncio.run(wide_tiny_engine.count_tokens(long_request(7000)))
    assert caught.value.limit == 32768


@pytest.mark.mlx
@pytest.mark.slow
def test_tiny_random_prefills_a_30k_token_prompt(wide_tiny_engine: Any, collect: Any) -> None:
    req = long_request(6000, max_tokens=3)
    prompt_tokens = asyncio.run(wide_tiny_engine.count_tokens(req))
    assert 28000 < prompt_tokens < 32768
    started = time.perf_counter()
    deltas = collect(wide_tiny_engine, req)
    elapsed = time.perf_counter() - started
    assert deltas[-1].output_tokens == 3
    # 15-24 s on two cores shared with other work (46 s before blocked attention); generous for CI.
    assert elapsed < 120, f"{prompt_tokens}-token prefill took {elapsed:.1f} s"
