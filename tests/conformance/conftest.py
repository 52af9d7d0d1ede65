"""Reference servers shared by the end-to-end tests of the harness (one per session)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.cli import JUDGED_SERVER_ARGS
from conformance.plugin import KEEP_EXCHANGES_ENV
from conformance.wire.launcher import reference_server

from . import scripted_target
from .fault_proxy import running_proxy
from .suite import API_KEY, PROOF_PROFILE, SCRIPTED_PROFILE, SECOND_API_KEY, run_suite


@pytest.fixture(scope="session")
def tiny_random_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Our server on the seeded tiny random model, with a key, pinging every 0.5 s."""
    log = tmp_path_factory.mktemp("tiny-random") / "server.log"
    args = ["--ping-interval", "0.5", *JUDGED_SERVER_ARGS]
    with reference_server(
        "tiny-random", log=log, api_key=API_KEY, second_api_key=SECOND_API_KEY, args=args
    ) as url:
        yield url


@pytest.fixture(scope="session")
def proof_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A profile that declares the reference server deterministic (no probe needed)."""
    path = tmp_path_factory.mktemp("profile") / "proof.toml"
    path.write_text(PROOF_PROFILE)
    return path


@pytest.fixture(scope="session")
def reference_run(
    tiny_random_url: str, proof_profile: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[int, dict[str, Any], Path]:
    """The whole catalogue against tiny-random, once per session: (exit code, index.json, the
    run's report directory). Every exchange of every property is kept (exchanges/<ID>.json):
    the fault proofs judge the verdicts, the coverage test the exchanges."""
    report_dir = tmp_path_factory.mktemp("reference-run")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEEP_EXCHANGES_ENV, "1")
        code, index, _ = run_suite(tiny_random_url, report_dir, profile=proof_profile)
    return code, index, report_dir / "proof" / index["run_id"]


@pytest.fixture(scope="session")
def faulted_run(
    tiny_random_url: str, proof_profile: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[int, dict[str, Any], Path, dict[str, int]]:
    """The whole catalogue against tiny-random through the fault proxy, each property meeting
    its own fault (faults.py), once per session: (exit code, index.json, report directory, how
    often each fault was applied). The fault proofs judge it; test_jobs.py compares it with the
    same run by several workers."""
    from .fault_proxy import FaultProxy
    from .faults import fault_catalogue

    report_dir = tmp_path_factory.mktemp("faulted-run")
    proxy = FaultProxy(tiny_random_url, fault_catalogue(API_KEY))
    with running_proxy(proxy) as url:
        code, index, _ = run_suite(url, report_dir, profile=proof_profile)
    return code, index, report_dir / "proof" / index["run_id"], dict(proxy.applied)


@pytest.fixture(scope="module")
def scripted_url() -> Iterator[str]:
    """The scripted target (scripted_target.py), which serves tools, structured outputs and
    thinking correctly whatever any model does, on a real socket."""
    with running_proxy(scripted_target.app) as url:
        yield url


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scripted target's profile (deterministic: no probe needed)."""
    path = tmp_path_factory.mktemp("scripted") / "scripted.toml"
    path.write_text(SCRIPTED_PROFILE)
    return path
