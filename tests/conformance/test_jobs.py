"""`plumbline --jobs`: the verdicts do not depend on how many workers judge (issue 19).

The catalogue runs once more with `--jobs 4` against the clean reference server (in CI a
selection spanning every phase of the scheduler, in `nox -s deep` the whole catalogue, and
through the fault proxy), compared with the session's runs of it by one worker (`--jobs 1`).
Verdicts, reasons, exit codes and the reports' shape must be the same.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from conformance.catalogue import REGISTRY
from conformance.features import REQUEST_SHAPING
from conformance.properties import load_all
from conformance.scheduling import PhasedScheduling, property_of_nodeid

from .fault_proxy import Fault, FaultProxy, running_proxy
from .faults import error, fault_catalogue
from .suite import API_KEY, run_suite, verdicts

VERDICTS = {"PASS", "FAIL", "WARN", "SKIP", "UNSUPPORTED", "ERROR"}


def _judged(index: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {p["id"]: (p["verdict"], p["reason"]) for p in index["properties"]}


# CI's selection: every phase of the scheduler (the properties judged alone, ERR-019 and
# STREAM-017; the batches that share state; the passive ERR-031 given last) in about half the
# catalogue; `nox -s deep` compares the whole catalogue.
PHASES = "msg_ or stream_ or err_ or batch_"


@pytest.mark.mlx
@pytest.mark.slow
@pytest.mark.xdist_group("catalogue")  # with the session's runs it compares (tests/conformance/conftest.py)
@pytest.mark.parametrize("selection", [PHASES, pytest.param(None, marks=pytest.mark.deep, id="all")])
def test_one_worker_and_the_default_give_the_same_verdicts(
    selection, reference_run, tiny_random_url, proof_profile, tmp_path
):
    load_all()
    serial_code, serial, _ = reference_run  # --jobs 1 (tests/conformance/suite.py)
    extra = ["--jobs", "4", *(["-k", selection] if selection else [])]
    code, index, output = run_suite(tiny_random_url, tmp_path, profile=proof_profile, extra=extra)
    ids = [p["id"] for p in index["properties"]]
    assert _judged(index) == {pid: verdict for pid, verdict in _judged(serial).items() if pid in ids}
    assert code == serial_code == 0
    assert ids == sorted(ids)  # catalogue order, once each
    assert set(ids) <= {p["id"] for p in serial["properties"]}
    if selection is None:
        assert len(ids) == len(REGISTRY)
    else:
        assert {"ERR-019", "STREAM-017", "ERR-031", "BATCH-001"} <= set(ids)  # every phase
    features = index["feature_support"]  # a selection asks only what its properties require
    assert features == {name: serial["feature_support"][name] for name in features}
    assert index["determinism"] == serial["determinism"]
    verdict_lines = [line.split() for line in output.splitlines()]
    ids_printed = [w[1] for w in verdict_lines if len(w) > 1 and w[0] in VERDICTS and "-" in w[1]]
    # The console's verdict lines in catalogue order too, each once; the passive ones last.
    passive = [pid for pid in ids if REGISTRY[pid].passive]
    assert ids_printed == [pid for pid in ids if pid not in passive] + passive
    run_dir = tmp_path / "proof" / index["run_id"]
    assert (run_dir / "junit.xml").read_text().count("<testcase ") == len(ids)


@pytest.mark.mlx
@pytest.mark.slow
@pytest.mark.deep  # 65 s in CI; the clean comparison above stays in CI as its representative
@pytest.mark.xdist_group("catalogue")
def test_one_worker_and_the_default_give_the_same_failures(
    faulted_run, tiny_random_url, proof_profile, tmp_path
):
    load_all()
    serial_code, serial, _, _ = faulted_run  # --jobs 1
    with running_proxy(FaultProxy(tiny_random_url, fault_catalogue(API_KEY))) as url:
        code, index, _ = run_suite(url, tmp_path, profile=proof_profile, extra=["--jobs", "4"])
    parallel, one = _judged(index), _judged(serial)
    different = {pid: (one[pid], parallel.get(pid)) for pid in one if one[pid] != parallel.get(pid)}
    assert not different, json.dumps(different, indent=1)
    assert code == serial_code == 1


@pytest.mark.mlx
@pytest.mark.slow
@pytest.mark.deep  # 31 s in CI; the clean comparison above runs four workers in CI
def test_a_failing_target_under_load_is_a_fail_not_an_error(tiny_random_url, proof_profile, tmp_path):
    """Four workers at once against a target that answers every request with a 500."""
    crash = Fault("a 500 for everything", request=lambda request: error(500, "api_error", "boom"))
    with running_proxy(FaultProxy(tiny_random_url, everywhere=crash)) as url:
        code, index, output = run_suite(
            url, tmp_path, profile=proof_profile, extra=["--jobs", "4", "-k", "msg or stream or err"]
        )
    got = verdicts(index)
    assert "ERROR" not in got.values(), output[-3000:]
    assert "FAIL" in got.values()
    assert code == 1


# ---- the scheduler, on its own (no worker processes)


class Node:
    """What PhasedScheduling needs of an xdist WorkerController."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def _nodeid(test_name: str) -> str:
    return f"properties/test_x.py::{test_name}"


def test_the_properties_that_run_alone_go_first_on_one_worker_and_batches_stay_together(monkeypatch):
    load_all()
    alone = sorted(p.test_name for p in REGISTRY.values() if p.alone)
    batches = sorted(p.test_name for p in REGISTRY.values() if p.area == "BATCH")
    others = sorted(p.test_name for p in REGISTRY.values() if not p.alone and p.area != "BATCH")[:10]
    collection = [_nodeid(name) for name in sorted([*alone, *batches, *others])]
    prepared: list[list[str]] = []

    class Config:
        def getvalue(self, name: str) -> Any:
            return None

    monkeypatch.setattr("xdist.workermanage.parse_tx_spec_config", lambda config: ["popen"] * 2)
    scheduler = PhasedScheduling(Config(), print, lambda props: prepared.append([p.id for p in props]))
    first, second = Node("gw0"), Node("gw1")
    for node in (first, second):
        scheduler.add_node(node)
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    assert len(prepared) == 1  # asked once, before anything is sent
    assert len(prepared[0]) == len(collection)
    names = [collection[i].rsplit("::", 1)[1] for i in first.sent]
    assert names[: len(alone)] == alone  # the ones that run alone, first, on one worker
    assert second.sent == []  # ... while the other waits
    for index in list(first.sent[: len(alone)]):
        scheduler.mark_test_complete(first, index)
    assert second.sent  # then everyone works
    while not scheduler.tests_finished:
        node = min((n for n in (first, second) if scheduler.node2pending[n]), key=lambda n: n.name)
        scheduler.mark_test_complete(node, scheduler.node2pending[node][0])
    sent = first.sent + second.sent
    assert sorted(sent) == list(range(len(collection)))  # every property once
    holders = {
        ("gw0" if i in first.sent else "gw1") for i, nodeid in enumerate(collection) if "batch" in nodeid
    }
    assert len(holders) == 1  # the batch properties, on one worker
    assert first.shutting_down
    assert second.shutting_down


def test_node_ids_name_their_properties():
    load_all()
    prop = REGISTRY["MSG-001"]
    assert property_of_nodeid(f"properties/test_messages.py::{prop.test_name}") == prop
    assert property_of_nodeid("properties/test_messages.py::test_nothing") is None


@pytest.mark.mlx
# One worker in CI (the representative); two in `nox -s deep`.
@pytest.mark.parametrize("jobs", ["1", pytest.param("2", marks=pytest.mark.deep)])
def test_a_selection_prepares_only_what_it_runs(tiny_random_url, proof_profile, tmp_path, jobs):
    """`-k` deselects before the run is planned: the features asked for and the run's size are
    those of the selected properties (they were the whole catalogue's with --jobs 1)."""
    load_all()
    selected = ["TOOL-001", "TOOL-009"]
    selection = " or ".join(REGISTRY[pid].selector for pid in selected)
    code, index, output = run_suite(
        tiny_random_url, tmp_path, profile=proof_profile, extra=["-k", selection, "--jobs", jobs]
    )
    assert code == 0, output[-3000:]
    assert [p["id"] for p in index["properties"]] == selected
    # The request-shaping features are probed before every run (every property's requests depend
    # on them); tools are found by the forced call TOOL-001 needs (tool_calls).
    assert set(index["feature_support"]) == {"tools", "tool_calls", *REQUEST_SHAPING}


# ---- what crosses from a worker to the controller, and a run cut short


def _huge_ints(request, response):
    """Every JSON answer carries ints far outside 32 bits, as a target's echo of a generated
    request may: usage that no 32-bit encoder can carry, and a key of its own."""
    data = response.json
    if not isinstance(data, dict):
        return response
    data["x_counter"] = -(2**40)
    if isinstance(data.get("usage"), dict):
        data["usage"]["output_tokens"] = -(2**63)
    return response.with_json(data)


# Enough properties that each of two workers judges several, among them those that read usage.
SEVERAL = "msg_00 or tokens_00"


@pytest.mark.mlx
@pytest.mark.slow
def test_a_target_answering_ints_far_outside_32_bits_is_judged_whole(
    tiny_random_url, proof_profile, tmp_path
):
    """The evidence of a property judged by a worker reaches the controller whatever the target
    sent (execnet could not encode an int below -2**31: the run ended with an INTERNALERROR,
    exit 2, and a summary that read like a complete run)."""
    load_all()
    huge = Fault("ints far outside 32 bits", response=_huge_ints)
    with running_proxy(FaultProxy(tiny_random_url, everywhere=huge)) as url:
        code, index, output = run_suite(
            url, tmp_path, profile=proof_profile, extra=["--jobs", "2", "-k", SEVERAL]
        )
    assert "INTERNALERROR" not in output, output[-3000:]
    got = verdicts(index)
    planned = [p.id for p in REGISTRY.values() if p.id.startswith(("MSG-00", "TOKENS-00"))]
    assert sorted(got) == sorted(planned)  # every selected property has a verdict
    assert "ERROR" not in got.values(), output[-3000:]
    assert got["MSG-009"] == "FAIL"  # usage.output_tokens < 0, with the huge value as evidence
    evidence = json.loads((tmp_path / "proof" / index["run_id"] / "cases" / "MSG-009.json").read_text())
    assert -(2**63) in [e["response"]["body"]["usage"]["output_tokens"] for e in evidence["exchanges"]]
    assert code == 1


CRASH_PLUGIN = """
import pytest

def pytest_runtest_logreport(report):
    # On a worker only: its report of MSG-003 cannot be sent (as the int the transport could
    # not encode did), an internal error that ends the whole run.
    if report.when == "call" and "test_msg_003_" in report.nodeid and CONFIG and hasattr(CONFIG[0], "workerinput"):
        raise RuntimeError("simulated: the report could not be sent")

CONFIG = []

def pytest_configure(config):
    CONFIG.append(config)
"""


@pytest.mark.mlx
@pytest.mark.slow
def test_a_run_cut_short_names_every_property_it_did_not_judge(
    tiny_random_url, proof_profile, tmp_path, monkeypatch
):
    """A worker's internal error ends the run: each property it planned and never judged is an
    ERROR that says why, in index.json, summary.md, junit.xml and on the console; exit 2."""
    load_all()
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "plumbline_crash.py").write_text(CRASH_PLUGIN)
    monkeypatch.setenv(
        "PYTHONPATH", f"{tmp_path / 'plugins'}:{__import__('os').environ.get('PYTHONPATH', '')}"
    )
    monkeypatch.setenv("PYTEST_PLUGINS", "plumbline_crash")
    reports = tmp_path / "reports"
    code, index, output = run_suite(
        tiny_random_url, reports, profile=proof_profile, extra=["--jobs", "2", "-k", "msg_0"]
    )
    planned = sorted(p.id for p in REGISTRY.values() if p.id.startswith("MSG-0"))
    by_id = {p["id"]: p for p in index["properties"]}
    assert sorted(by_id) == planned  # the report holds the whole plan, judged or not
    unjudged = [p for p in index["properties"] if p["reason"] == "not-judged"]
    assert unjudged, output[-3000:]
    for p in unjudged:
        assert p["verdict"] == "ERROR"
        assert p["message"].startswith("not judged: the run stopped on a harness error"), p["message"]
        assert "simulated: the report could not be sent" in p["message"]
    assert index["counts"]["ERROR"] == len(unjudged)
    assert code == 2
    run_dir = reports / "proof" / index["run_id"]
    summary = (run_dir / "summary.md").read_text()
    junit = (run_dir / "junit.xml").read_text()
    for p in unjudged:
        assert f"| ERROR | {p['id']} |" in summary
        assert f"{p['id']} " in junit
    assert junit.count("<error ") == len(unjudged)
    assert any(line.split()[:2] == ["ERROR", unjudged[0]["id"]] for line in output.splitlines())


@pytest.mark.mlx
@pytest.mark.slow
def test_a_workers_feature_probe_is_the_running_propertys_request(tiny_random_url, proof_profile, tmp_path):
    """SRVTOOL-015 sends its own probes through the `features` fixture. A worker once built a
    second Target for that fixture: its probes went out untagged and unrecorded, so a server
    that took web search as a client tool passed under `--jobs 2` and failed under `--jobs 1`
    (found by the deep comparison above)."""
    faults = {"SRVTOOL-015": fault_catalogue(API_KEY)["SRVTOOL-015"]}
    with running_proxy(FaultProxy(tiny_random_url, faults)) as url:
        code, index, output = run_suite(
            url, tmp_path, profile=proof_profile, extra=["--jobs", "2", "-k", "srvtool_015 or msg_001"]
        )
    assert verdicts(index) == {"MSG-001": "PASS", "SRVTOOL-015": "FAIL"}, output[-3000:]
    evidence = json.loads((tmp_path / "proof" / index["run_id"] / "cases" / "SRVTOOL-015.json").read_text())
    assert any(
        "web_search" in json.dumps(e["request"].get("body")) and e["response"]["status"] == 200
        for e in evidence["exchanges"]
    ), evidence
    assert code == 1
