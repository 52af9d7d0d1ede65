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
