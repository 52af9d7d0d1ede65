"""The RATE-* properties on the reference server with a limit low enough to meet
(`--rate-limit-rpm 12`, tiny-random: the most requests the suite spends to meet a limit, and a
request back every 5 s): each PASSes, and FAILs on its own fault (rate_faults.py);
on a target that reports a limit too high to meet within the suite's burst, RATE-002 and
RATE-003 are SKIP with the reason, not a verdict either way.

test_fault_proofs.py runs the judged server without limits, where they are UNSUPPORTED.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.catalogue import REGISTRY
from conformance.properties import load_all
from conformance.wire.launcher import reference_server

from . import scripted_target
from .fault_proxy import Fault, FaultProxy, running_proxy
from .proofs import assert_each_fails_on_its_fault
from .suite import API_KEY, PROOF_PROFILE, SCRIPTED_PROFILE, run_suite, verdicts

pytestmark = [pytest.mark.mlx, pytest.mark.slow]

SELECTION = ["-k", "rate_0"]


def judged() -> set[str]:
    load_all()
    return {pid for pid, prop in REGISTRY.items() if "rate_limits" in prop.requires}


@pytest.fixture(scope="module")
def limited_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("rate-limited") / "server.log"
    with reference_server("tiny-random", log=log, api_key=API_KEY, args=["--rate-limit-rpm", "12"]) as url:
        yield url


@pytest.fixture(scope="module")
def proof_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("profile") / "proof.toml"
    path.write_text(PROOF_PROFILE)  # rate limits undeclared: the probe finds them
    return path


def test_each_rate_property_passes_then_fails_on_its_fault(
    limited_url: str, proof_profile: Path, tmp_path: Path
):
    assert judged() == {"RATE-001", "RATE-002", "RATE-003"}
    # ERR-031 too: it judges every 429 the run meets (conformance/judging/passive.py).
    with_met = ["-k", "rate_0 or err_031"]
    code, index, output = run_suite(limited_url, tmp_path / "clean", profile=proof_profile, extra=with_met)
    got = verdicts(index)
    assert {pid: got.get(pid) for pid in {*judged(), "ERR-031"}} == dict.fromkeys(
        {*judged(), "ERR-031"}, "PASS"
    ), json.dumps(index["properties"], indent=1)[:4000] + output[-2000:]
    passive = next(p for p in index["properties"] if p["id"] == "ERR-031")
    assert passive["message"].startswith("met in the run: HTTP 429 "), passive
    assert code == 0
    assert index["feature_support"]["rate_limits"]["source"] == "probe"
    assert_each_fails_on_its_fault(
        limited_url,
        judged(),
        lambda url: run_suite(url, tmp_path / "faulted", profile=proof_profile, extra=SELECTION),
    )


def _generous(headers: dict[str, str]) -> dict[str, str]:
    """A limit of 5000 requests a minute, reported as the API does."""
    limits = {"limit": "5000", "remaining": "4999", "reset": "2026-12-04T00:00:00Z"}
    return {**headers, **{f"anthropic-ratelimit-requests-{part}": value for part, value in limits.items()}}


def test_a_limit_too_high_to_meet_is_not_pushed(tmp_path: Path):
    profile = tmp_path / "scripted.toml"
    profile.write_text(SCRIPTED_PROFILE)
    with running_proxy(scripted_target.app) as upstream:
        reporting = FaultProxy(upstream, everywhere=Fault("reports a generous limit", headers=_generous))
        with running_proxy(reporting) as url:
            code, index, _ = run_suite(
                url, tmp_path / "run", profile=profile, model=scripted_target.MODEL, extra=SELECTION
            )
    by_id = {p["id"]: p for p in index["properties"]}
    assert by_id["RATE-001"]["verdict"] == "PASS"
    for pid in ("RATE-002", "RATE-003"):
        assert by_id[pid]["verdict"] == "SKIP", by_id[pid]
        assert "4999 requests left" in by_id[pid]["message"]
    assert code == 0
