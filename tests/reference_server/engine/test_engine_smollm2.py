"""The embedded SmolLM2-135M-Instruct, end to end on MLX (a few seconds)."""

from __future__ import annotations

from typing import Any

import pytest

from reference_server.engine import EngineRequest, Sampling, Turn

pytestmark = [pytest.mark.mlx, pytest.mark.smollm2]


def ask(*turns: Turn, max_tokens: int = 24) -> EngineRequest:
    return EngineRequest(
        model="smollm2-135m-instruct",
        turns=turns,
        max_tokens=max_tokens,
        sampling=Sampling(temperature=0),
    )


def test_model_card(smollm2_engine: Any) -> None:
    (card,) = smollm2_engine.models()
    assert (card.id, card.display_name) == ("smollm2-135m-instruct", "SmolLM2 135M Instruct")
    assert card.context_window == card.max_output_tokens == 8192


def test_capital_of_france(smollm2_engine: Any, collect: Any) -> None:
    deltas = collect(smollm2_engine, ask(Turn("user", "What is the capital of France?")))
    text = "".join(d.text for d in deltas)
    assert "Paris" in text
    assert deltas[-1].finish == "stop"
    assert "<|im_end|>" not in text


def test_prefill_is_continued(smollm2_engine: Any, collect: Any) -> None:
    deltas = collect(
        smollm2_engine,
        ask(
            Turn("user", "What is the capital of France?"),
            Turn("assistant", "The capital of France is"),
            max_tokens=3,
        ),
    )
    assert "".join(d.text for d in deltas).startswith(" Paris")
