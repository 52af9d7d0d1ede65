"""`tiny-random-vlm`: a seeded random tiny SmolVLM written as an mlx-vlm model directory.

mlx-vlm loads models from directories only, so unlike `tiny-random` (built in memory) this model
is written once per seed into Plumbline's cache and loaded from there like any mlx-vlm model.
Its text stack is a 2-layer llama, its vision tower a 2-layer SigLIP-style encoder; the tokenizer
is SmolLM2's (from the GGUF already used) plus the image tokens real SmolVLM checkpoints add.
The image processor is transformers' SmolVLM one with tiny tiles (32 px, 4 tokens per tile), so
tests pay almost nothing for images.

Imports MLX and mlx-vlm inside `write_tiny_vlm`: call it on the engine's worker thread only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenizers import AddedToken

from .blas import cache_dir

__all__ = ["CHAT_TEMPLATE", "image_tokens", "tiny_vlm_directory", "write_tiny_vlm"]

# Bump when the files below change, so a stale cached directory is never reused.
_FORMAT = 2
# SmolVLM's chat template shape ("User:<image>Describe it.<end_of_utterance>\nAssistant:").
# Content is a list of parts, as every mlx-vlm template expects.
CHAT_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}"
    "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
_MAX_GRID = 4  # <row_i_col_j> tokens for i, j in 1.._MAX_GRID
_PATCH, _TILE, _SCALE, _LONGEST = 8, 32, 2, 128  # up to 4x4 tiles of 4 tokens


def image_tokens() -> list[str]:
    """The special tokens SmolVLM adds to SmolLM2's vocabulary, in id order."""
    grid = [f"<row_{r}_col_{c}>" for r in range(1, _MAX_GRID + 1) for c in range(1, _MAX_GRID + 1)]
    return ["<global-img>", *grid, "<fake_token_around_image>", "<image>", "<end_of_utterance>"]


def tiny_vlm_directory(seed: int) -> Path:
    """Where the model for `seed` is (or will be) written."""
    return cache_dir() / "models" / f"tiny-random-vlm-v{_FORMAT}-seed{seed}"


def write_tiny_vlm(gguf: Path, seed: int) -> Path:
    """The directory of the tiny model for `seed`, written first if missing (about 4 s)."""
    out = tiny_vlm_directory(seed)
    if (out / "model.safetensors").is_file():
        return out
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_vlm.utils import get_model_and_args, update_module_configs

    from .gguf import read_gguf
    from .tokenizer import ChatTokenizer

    _, meta = read_gguf(gguf)
    base = ChatTokenizer.from_gguf(meta)
    backend = base.backend
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in image_tokens()])
    tokens: list[str] = meta["tokenizer.ggml.tokens"]
    bos = tokens[int(meta["tokenizer.ggml.bos_token_id"])]
    eos = tokens[int(meta["tokenizer.ggml.eos_token_id"])]
    end_of_utterance = backend.token_to_id("<end_of_utterance>")
    # Exactly the tokenizer's size: a padded embedding table would let a random model sample
    # ids the tokenizer cannot decode.
    vocab_size = int(backend.get_vocab_size(with_added_tokens=True))
    config: dict[str, Any] = {
        "architectures": ["SmolVLMForConditionalGeneration"],
        "model_type": "smolvlm",
        "text_config": {
            "model_type": "llama",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "num_hidden_layers": 2,
            "rms_norm_eps": 1e-5,
            "vocab_size": vocab_size,
            "rope_theta": 100000.0,
            "max_position_embeddings": 2048,
            "tie_word_embeddings": True,
        },
        "vision_config": {
            "model_type": "smolvlm_vision",
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_attention_heads": 2,
            "num_hidden_layers": 2,
            "patch_size": _PATCH,
            "image_size": _TILE,
            "num_channels": 3,
            "layer_norm_eps": 1e-6,
        },
        "scale_factor": _SCALE,
        "image_token_id": backend.token_to_id("<image>"),
        "vocab_size": vocab_size,
        "eos_token_id": [end_of_utterance, backend.token_to_id(eos)],
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
    }
    # Written to a temporary directory and renamed, so a concurrent reader never sees half.
    partial = out.with_name(f"{out.name}.partial-{id(config)}")
    partial.mkdir(parents=True, exist_ok=True)
    backend.save(str(partial / "tokenizer.json"))
    model_class, _ = get_model_and_args(config)
    model_config = model_class.ModelConfig.from_dict(config)
    model_config = update_module_configs(  # type: ignore[no-untyped-call]
        model_config, model_class, config, ["text", "vision"]
    )
    mx.random.seed(seed)
    params = dict(tree_flatten(model_class.Model(model_config).parameters()))
    # Unit-scale random linears make activations blow up over layers; halve them.
    params = {k: (v * 0.5 if v.ndim >= 2 else v) for k, v in params.items()}
    mx.save_safetensors(str(partial / "model.safetensors"), params, metadata={"format": "mlx"})
    preprocessor = {
        "image_processor_type": "SmolVLMImageProcessor",
        "processor_class": "SmolVLMProcessor",
        "do_convert_rgb": True,
        "do_resize": True,
        "size": {"longest_edge": _LONGEST},
        "resample": 1,
        "do_image_splitting": True,
        "max_image_size": {"longest_edge": _TILE},
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "do_pad": True,
    }
    image_seq_len = (_TILE // _PATCH) ** 2 // _SCALE**2
    files = {
        "config.json": config,
        "preprocessor_config.json": preprocessor,
        "processor_config.json": {"processor_class": "SmolVLMProcessor", "image_seq_len": image_seq_len},
        "tokenizer_config.json": {
            "tokenizer_class": "GPT2Tokenizer",
            "bos_token": bos,
            "eos_token": "<end_of_utterance>",
            "pad_token": eos,
            "unk_token": eos,
            "add_prefix_space": False,
            "model_max_length": 2048,
            "processor_class": "SmolVLMProcessor",
            "chat_template": CHAT_TEMPLATE,
        },
        "special_tokens_map.json": {
            "bos_token": bos,
            "eos_token": "<end_of_utterance>",
            "pad_token": eos,
            "unk_token": eos,
            "additional_special_tokens": ["<fake_token_around_image>", "<image>", "<end_of_utterance>"],
        },
        "generation_config.json": {"eos_token_id": config["eos_token_id"]},
    }
    for name, data in files.items():
        (partial / name).write_text(json.dumps(data, indent=2), encoding="utf-8")
    (partial / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    try:
        partial.replace(out)
    except OSError:  # another process wrote it first: theirs is as good
        import shutil

        shutil.rmtree(partial, ignore_errors=True)
    return out
