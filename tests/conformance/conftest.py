"""Reference servers shared by the end-to-end tests of the harness (one per session)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.launcher import reference_server

from .suite import API_KEY, PROOF_PROFILE


@pytest.fixture(scope="session")
def tiny_random_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Our server on the seeded tiny random model, with a key, pinging every 0.5 s."""
    log = tmp_path_factory.mktemp("tiny-random") / "server.log"
    with reference_server("tiny-random", log=log, api_key=API_KEY, args=["--ping-interval", "0.5"]) as url:
        yield url


@pytest.fixture(scope="session")
def smollm2_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Our server on the embedded SmolLM2, a model that ends its turns by itself."""
    log = tmp_path_factory.mktemp("smollm2") / "server.log"
    with reference_server("smollm2-135m-instruct", log=log, api_key=API_KEY) as url:
        yield url


@pytest.fixture(scope="session")
def proof_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A profile that declares the reference server deterministic (no probe needed)."""
    path = tmp_path_factory.mktemp("profile") / "proof.toml"
    path.write_text(PROOF_PROFILE)
    return path
