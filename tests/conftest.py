"""What both packages' tests share: one server on the embedded SmolLM2 per session (loading it
takes seconds on a CPU, so the end-to-end tests of the server and the harness's proofs on a
model that ends its turns use the same one)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from conformance.wire.launcher import reference_server


@pytest.fixture(scope="session", autouse=True)
def _private_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test reads or writes the user's data directory (signing key, message batches): apps
    built in process and servers started without `--data-dir` use this session's own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLUMBLINE_DATA_DIR", str(tmp_path_factory.mktemp("plumbline-data")))
        yield


@pytest.fixture(scope="session", autouse=True)
def _one_blas_thread() -> Iterator[None]:
    """The models the tests load, in process and in the servers they start, multiply on one
    thread (reference_server/engine/blas.py's setting for a shared machine): two pytest workers,
    each beside a server and a harness run, keep both cores busy, and a second OpenBLAS thread
    then mostly spins waiting for the first (measured: the suite took 9% less CPU and 11% less
    wall time on one). Where a test judges the threads themselves it sets them (test_kernels.py,
    test_engine_sources.py)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLUMBLINE_BLAS_THREADS", os.environ.get("PLUMBLINE_BLAS_THREADS") or "1")
        yield


@pytest.fixture(scope="session")
def smollm2_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Our server on the embedded SmolLM2, a model that ends its turns by itself: no key (any
    key is accepted), pings every 0.5 s, code execution on (test_code_execution_e2e.py)."""
    log = tmp_path_factory.mktemp("smollm2") / "server.log"
    args = ["--ping-interval", "0.5", "--code-execution"]
    with reference_server("smollm2-135m-instruct", log=log, args=args) as url:
        yield url
