"""The suite's own concurrency is not the target's fault (issue 42, point 6).

Judged by several workers (`--jobs`), a target that cuts a running stream when the next request
arrives (as llama-cpp-python's server does) would fail most stream properties for how the suite
called, not for what one request got; one whose answers differ beside other requests (a server
that batches them) would fail every comparison of two answers. The run probes two overlapping
streams first (conformance/concurrency.py): STREAM-024 gives the cut its one FAIL and the run
judges one request at a time; where answers differ beside others, the comparisons run with the
target to themselves. Each in front of the reference server (concurrency_faults.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from .concurrency_faults import Batching, InterruptedBehindAGateway, Interrupting, Serialising
from .fault_proxy import running_proxy
from .suite import run_suite, selecting, verdicts

pytestmark = [pytest.mark.mlx, pytest.mark.slow]

# Stream properties whose verdicts rested on streams the workers cut (the list), and the
# comparisons of two answers.
STREAMED = ["STREAM-012", "STREAM-020", "STREAM-021", "TOOL-011", "TOOL-013", "SDK-003"]
COMPARING = ["STREAM-012", "TOOL-012"]


def run(
    proxy: Callable[[str], Any], url: str, tmp_path: Any, profile: Any, pids: list[str], jobs: str
) -> tuple[int, dict[str, Any], str]:
    with running_proxy(proxy(url)) as proxied:
        return run_suite(proxied, tmp_path, profile=profile, extra=["--jobs", jobs, *selecting(pids)])


# CI keeps one of each kind (the cut with [DONE], the differing answers); the rest run in
# `nox -s deep` (each a whole run by several workers: 15-40 s on two cores).
@pytest.mark.parametrize(
    "fault", [Interrupting, pytest.param(InterruptedBehindAGateway, marks=pytest.mark.deep)]
)
def test_a_target_that_cuts_streams_is_blamed_once_and_judged_one_request_at_a_time(
    fault, tiny_random_url, proof_profile, tmp_path
):
    """Cut with [DONE] (llama-cpp-python), or cut and then closed as if whole by a gateway in
    front (LiteLLM before llama-cpp-python: `end_turn` after a few words)."""
    # Two workers: the probe of two overlapping streams finds the cut whatever their number, and
    # from then on the run judges one request at a time (each further worker, a few seconds to
    # start, would wait).
    code, index, output = run(fault, tiny_random_url, tmp_path, proof_profile, [*STREAMED, "STREAM-024"], "2")
    assert index["concurrency"]["mode"] == "cut", index["concurrency"]
    assert "the run judges one request at a time" in output
    got = verdicts(index)
    assert got.pop("STREAM-024") == "FAIL", output[-3000:]
    assert set(got.values()) == {"PASS"}, output[-4000:]  # nothing else meets a cut stream
    assert [c["cause"] for c in index["causes"]] == ["a running stream cut when another request arrives"]
    assert code == 1


@pytest.mark.deep
def test_a_target_that_serialises_is_judged_one_request_at_a_time(tiny_random_url, proof_profile, tmp_path):
    code, index, output = run(
        Serialising, tiny_random_url, tmp_path, proof_profile, ["STREAM-012", "STREAM-024"], "2"
    )
    assert index["concurrency"]["mode"] == "serialised", index["concurrency"]
    assert "the run judges one request at a time" in output
    assert set(verdicts(index).values()) == {"PASS"}, output[-3000:]  # one at a time is no fault
    assert code == 0


def test_answers_that_differ_beside_others_are_compared_alone(tiny_random_url, proof_profile, tmp_path):
    """Every property but the comparisons runs beside the others; a comparison's own requests,
    sent with the target to itself, agree: PASS, saying how it was judged."""
    pids = [*COMPARING, "STREAM-001", "STREAM-002", "MSG-001", "MSG-002", "MSG-003"]
    code, index, output = run(Batching, tiny_random_url, tmp_path, proof_profile, pids, "2")
    assert (index["concurrency"]["mode"], index["concurrency"]["alike"]) == ("concurrent", False)
    assert set(verdicts(index).values()) == {"PASS"}, output[-4000:]
    notes = {p["id"]: " ".join(p.get("notes") or []) for p in index["properties"]}
    assert all("with the target to itself" in notes[pid] for pid in COMPARING), notes
    assert code == 0


@pytest.mark.parametrize("fault", [Interrupting, pytest.param(Serialising, marks=pytest.mark.deep)])
def test_one_worker_needs_no_probe(fault, tiny_random_url, proof_profile, tmp_path):
    """One process sends one request at a time already: no start-up probe; STREAM-024 still
    judges the cut itself (its own two streams)."""
    _, index, _ = run(fault, tiny_random_url, tmp_path, proof_profile, ["STREAM-024"], "1")
    assert index["concurrency"] is None
    assert verdicts(index) == {"STREAM-024": "FAIL" if fault is Interrupting else "PASS"}
