"""The API's own behaviour is never blamed: the whole catalogue, run through a proxy that
answers as the newest models do (default sampling values only, no prefill: a 400 naming each)
with answers the suite may not assume reproducible, finds no FAIL. And the run speaks one
version: every raw request, and every SDK call, carries the `--api-version` judged.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.versions import API_VERSIONS

from .fault_proxy import FaultProxy, running_proxy
from .suite import run_suite, verdicts
from .version_faults import NEWEST_API

pytestmark = [pytest.mark.mlx, pytest.mark.slow]

# Answers the suite may not assume reproducible: the comparisons SKIP, never FAIL.
UNREPRODUCIBLE = """
name = "newest"
deterministic = false
max_silence_seconds = 2

[features]
mcp = true
"""
# What a target that refuses prefills does not judge, and what depends on a prefill or on
# comparing two answers.
PREFILL = {"MSG-008": "UNSUPPORTED"}


# The properties that send what the newest models refuse most: the message rules (prefills,
# stop sequences, the generated bodies of MSG-020), the errors (sampling values, ERR-028's
# generated requests), STREAM-022 (its stream compared at the probed sampling) and the versions.
# The whole catalogue (about 135 s on CI's two cores) is a `deep` test.
SENSITIVE = "msg_ or err_ or ver_ or stream_022"


@pytest.mark.parametrize(
    ("version", "selection"),
    [
        pytest.param(API_VERSIONS[0], SENSITIVE, id="sensitive"),
        pytest.param(API_VERSIONS[0], None, marks=pytest.mark.deep, id="whole-catalogue"),
    ],
)
def test_the_newest_models_rules_are_never_a_failure(
    tiny_random_url: str, tmp_path: Path, version: str, selection: str | None
) -> None:
    profile = tmp_path / "newest.toml"
    profile.write_text(UNREPRODUCIBLE)
    proxy = FaultProxy(tiny_random_url, everywhere=NEWEST_API)
    chosen = ["-k", selection] if selection else []
    with running_proxy(proxy) as url:
        code, index, output = run_suite(
            url, tmp_path / "r", profile=profile, extra=["--api-version", version, *chosen]
        )
    found = verdicts(index)
    blamed = {pid: verdict for pid, verdict in found.items() if verdict in ("FAIL", "WARN", "ERROR")}
    assert blamed == {}, output[-6000:]
    assert code == 0
    assert index["target"]["api_version"] == version
    support = index["feature_support"]
    assert support["sampling_parameters"]["supported"] is False
    assert support["prefill"]["supported"] is False
    assert "temperature" in support["sampling_parameters"]["detail"]
    for pid, verdict in PREFILL.items():
        assert found[pid] == verdict
