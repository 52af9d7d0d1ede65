"""An mlx-lm model directory (config.json + safetensors + tokenizer.json), built here at random."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from reference_server.engine import EngineRequest, Sampling, Turn

pytestmark = pytest.mark.mlx

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def write_model_dir(path: Path, tokenizer: Any, *, quantize: bool) -> Path:
    import mlx.core as mx
    import mlx.nn as nn
    from mlx.utils import tree_flatten
    from mlx_lm.models import llama

    config: dict[str, Any] = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5,
        "vocab_size": tokenizer.vocab_size,
        "max_position_embeddings": 512,
        "tie_word_embeddings": True,
        "eos_token_id": 2,
    }
    mx.random.seed(3)
    model = llama.Model(llama.ModelArgs.from_dict(config))
    if quantize:
        nn.quantize(model, group_size=64, bits=4)
        config["quantization"] = {"group_size": 64, "bits": 4}
    path.mkdir()
    mx.save_safetensors(str(path / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (path / "config.json").write_text(json.dumps(config))
    tokenizer._tokenizer.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(
        json.dumps({"chat_template": CHATML, "eos_token": "<|im_end|>", "bos_token": None})
    )
    return path


@pytest.mark.parametrize("quantize", [False, True], ids=["float", "4bit"])
def test_mlx_lm_directory_generates(
    tmp_path: Path, smollm2_tokenizer: Any, collect: Any, quantize: bool
) -> None:
    from reference_server.engine import load_engine

    model_dir = write_model_dir(tmp_path / "Tiny-Dir", smollm2_tokenizer, quantize=quantize)
    engine = load_engine(str(model_dir))
    try:
        (card,) = engine.models()
        assert (card.id, card.context_window) == ("tiny-dir", 512)
        req = EngineRequest(
            model="tiny-dir", turns=(Turn("user", "Hi"),), max_tokens=6, sampling=Sampling(temperature=0)
        )
        # No default system prompt in this template: exactly the user turn and the generation prompt.
        prompt = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        assert asyncio.run(engine.count_tokens(req)) == len(smollm2_tokenizer.encode(prompt))
        deltas = collect(engine, req)
        assert deltas == collect(engine, req)
        assert deltas[-1].finish in ("length", "stop")
        assert deltas[-1].output_tokens <= 6
    finally:
        asyncio.run(engine.aclose())


def test_context_window_option_caps_the_models_own(tmp_path: Path, smollm2_tokenizer: Any) -> None:
    from reference_server.engine import load_engine

    model_dir = write_model_dir(tmp_path / "Tiny-Dir", smollm2_tokenizer, quantize=False)
    for asked, served in [(100, 100), (100_000, 512)]:  # never beyond the model's own 512
        engine = load_engine(str(model_dir), context_window=asked)
        try:
            assert engine.models()[0].context_window == served
        finally:
            asyncio.run(engine.aclose())
