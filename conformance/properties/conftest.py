"""Fixtures shared by the property modules: here, not in the plugin, so that a project whose
pytest loads the plugin (the `pytest11` entry point) gets no fixture of ours in its own tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from conformance.features import Features
from conformance.plugin import enter_property, property_turn, session_features, session_target
from conformance.wire.target import Target


@pytest.fixture(scope="session")
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    session = session_target(request.config)
    yield session
    session.close()


@pytest.fixture(autouse=True)
def _property_context(request: pytest.FixtureRequest, target: Target) -> Iterator[None]:
    with property_turn(request.config, request.function):
        enter_property(request.config, request.function, target)
        yield


@pytest.fixture(scope="session")
def model_info(request: pytest.FixtureRequest, target: Target) -> dict[str, Any] | None:
    """The target's ModelInfo for the model under test (`GET /v1/models/{model}`, else its entry
    in `GET /v1/models`), or None when neither gives one: a hint, never a verdict's evidence."""
    return session_features(request.config).model_info()


@pytest.fixture(scope="session")
def features(request: pytest.FixtureRequest, target: Target) -> Features:
    """What the run found out about the target's optional features (asked once, before any
    property ran; a worker reads its controller's)."""
    return session_features(request.config)
