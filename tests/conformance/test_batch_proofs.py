"""The BATCH-* properties on a scripted target that serves Message Batches correctly, in memory
(scripted_batches.py: requests progress as the batch is polled, so a cancel is observable): each
PASSes there and FAILs (MUST) or WARNs (SHOULD) on its own fault and on the extra faults of
batch_faults.py, and none ERRORs; a target whose model says it lacks batches is UNSUPPORTED for
them, with the reason, while one that says it serves them and has no batch endpoint FAILs; a
batch that never ends FAILs within the profile's `batch_wait_seconds`, and costs one wait.

test_fault_proofs.py proves the same on the reference server once its profile says it serves
batches.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.catalogue import REGISTRY
from conformance.generating.batches import parse_jsonl, parse_time
from conformance.judging.checks import ConformanceFailure
from conformance.plugin import KEEP_EXCHANGES_ENV
from conformance.properties import load_all
from conformance.reporting import coverage

from . import scripted_batches, scripted_target
from .batch_faults import CATALOGUE_REASONS, EXTRA_BATCH_FAULTS, NEVER_ENDS
from .fault_proxy import Fault, FaultProxy, Request, Response, running_proxy
from .faults import error, fault_catalogue
from .proofs import assert_each_fails_on_its_fault, broken
from .suite import API_KEY, SCRIPTED_PROFILE, run_suite, verdicts

SELECTION = ["-k", "batch and not ver_ and not iso_"]
WAIT_S = 3  # batch_wait_seconds of the never-ending runs


def judged() -> set[str]:
    """The properties of the selection: every BATCH one. (VER-004, a batch under each API version,
    needs a target that serves both versions: test_fault_proofs.py proves it on the reference.)"""
    load_all()
    return {pid for pid, prop in REGISTRY.items() if pid.startswith("BATCH-")}


@pytest.fixture
def batches_url() -> Iterator[str]:
    """A fresh scripted batch target for each test (its batches live in memory)."""
    with running_proxy(scripted_batches.make_app()) as url:
        yield url


@pytest.fixture(scope="module")
def short_wait(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("short-wait") / "short.toml"
    path.write_text(f"{SCRIPTED_PROFILE}batch_wait_seconds = {WAIT_S}\n")
    return path


def run(url: str, tmp_path: Path, profile: Path, selection: list[str] = SELECTION) -> tuple[int, dict, str]:
    return run_suite(url, tmp_path, profile=profile, model=scripted_target.MODEL, extra=selection)


def details(index: dict, ids: set[str]) -> str:
    return json.dumps([p for p in index["properties"] if p["id"] in ids], indent=1)[:6000]


def test_jsonl_is_read_as_the_sdk_reads_it():
    assert parse_jsonl(b'{"a": 1}\n{"b": 2}\n', "r") == [{"a": 1}, {"b": 2}]
    assert parse_jsonl(b'{"a": 1}\r\n{"b": 2}', "r") == [{"a": 1}, {"b": 2}]  # last newline optional
    assert parse_jsonl(b"", "r") == []
    for body, actual in (
        (b'{"a": 1}\n\n{"b": 2}\n', "line 2 of 3 is blank"),
        (b'[{"a": 1}, {"b": 2}]\n', "line 1 is an array"),
        (b'[\n{"a": 1}\n]', "line 1 is not JSON"),
        (b'"text"\n', "line 1 is str"),
        (b"\xff\xfe", "bytes that are not UTF-8"),
    ):
        with pytest.raises(ConformanceFailure) as failure:
            parse_jsonl(body, "r")
        assert actual in failure.value.actual, (body, failure.value.actual)


def test_timestamps_must_be_rfc3339_with_an_offset():
    assert parse_time("2024-08-20T18:37:24.100435Z", "t").utcoffset() is not None
    assert parse_time("2024-08-20T20:37:24+02:00", "t") == parse_time("2024-08-20T18:37:24Z", "t")
    for value in ("2024-08-20", "2024-08-20T18:37:24", "1724178644", "yesterday"):
        with pytest.raises(ConformanceFailure):
            parse_time(value, "t")


def test_every_batch_property_has_a_fault():
    assert judged() == {pid for pid in fault_catalogue(API_KEY) if pid.startswith("BATCH-")}
    assert len(judged()) >= 13


@pytest.mark.slow
def test_a_correct_target_passes(batches_url, profile, tmp_path, monkeypatch):
    """Every BATCH property PASSes, and what each declares it covers shows in its own exchanges
    (as test_coverage.py holds on the reference server once it serves batches)."""
    monkeypatch.setenv(KEEP_EXCHANGES_ENV, "1")
    code, index, output = run(batches_url, tmp_path, profile)
    got = verdicts(index)
    unseen = {}
    for pid in judged():
        case = json.loads((tmp_path / "scripted" / index["run_id"] / "exchanges" / f"{pid}.json").read_text())
        seen = set().union(*(coverage.observe(exchange) for exchange in case["exchanges"]))
        unseen[pid] = [key for key in REGISTRY[pid].covers if key not in seen]
    assert not any(unseen.values()), unseen
    assert set(got) == judged(), output[-3000:]
    assert set(got.values()) == {"PASS"}, output[-6000:]
    assert index["feature_support"]["batches"] == {
        "supported": True,
        "source": "probe",
        "detail": "GET /v1/messages/batches got HTTP 200 (declared: batch.supported true)",
        "declared": True,
    }
    assert code == 0


@pytest.mark.slow
def test_each_property_fails_on_its_fault(batches_url, profile, tmp_path):
    index, _ = assert_each_fails_on_its_fault(batches_url, judged(), lambda url: run(url, tmp_path, profile))
    # Each fails for its own rule, not a neighbour's.
    reasons = {p["id"]: p["reason"] for p in index["properties"]}
    assert reasons == CATALOGUE_REASONS, details(
        index, {p for p in reasons if reasons[p] != CATALOGUE_REASONS[p]}
    )


def rounds() -> list[dict[str, tuple[str, str, Fault]]]:
    """The extra faults in as few runs as can hold them: at most one per property a run (each
    fault breaks only its own property's exchanges, so one run judges several)."""
    out: list[dict[str, tuple[str, str, Fault]]] = []
    for name, (pid, reason, fault) in sorted(EXTRA_BATCH_FAULTS.items()):
        free = next((r for r in out if pid not in {p for p, _, _ in r.values()}), None)
        if free is None:
            free = {}
            out.append(free)
        free[name] = (pid, reason, fault)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("number", range(len(rounds())))
def test_extra_faults_fail_their_property(batches_url, short_wait, tmp_path, number):
    """Each extra fault FAILs (WARNs) its property for the reason it breaks; a batch that never
    ends among them, after the profile's short batch_wait_seconds and saying so."""
    load_all()
    faults = rounds()[number]
    with running_proxy(FaultProxy(batches_url, {pid: fault for pid, _, fault in faults.values()})) as url:
        selection = " or ".join(REGISTRY[pid].selector for pid, _, _ in faults.values())
        code, index, output = run(url, tmp_path, short_wait, ["-k", selection])
    got = {p["id"]: (p["verdict"], p["reason"]) for p in index["properties"]}
    wanted = {pid: (broken(pid), reason) for pid, reason, _ in faults.values()}
    assert got == wanted, f"{faults.keys()}\n{details(index, set(got))}\n{output[-3000:]}"
    for result in index["properties"]:
        if result["reason"] == "batch-never-ended":
            assert f"batch_wait_seconds ({WAIT_S} s)" in result["expected"]
            assert "still 'in_progress' after" in result["actual"]
            assert WAIT_S <= result["duration_s"] < WAIT_S + 10
    assert code == 1


@pytest.mark.slow
def test_a_target_that_never_ends_a_batch_costs_one_wait(batches_url, short_wait, tmp_path):
    """No batch ever ends: every property that waits FAILs (WARN for a SHOULD), none ERRORs,
    those that need no finished batch still PASS, and the run waits once, not once each."""
    with running_proxy(FaultProxy(batches_url, everywhere=NEVER_ENDS)) as url:
        code, index, output = run(url, tmp_path, short_wait)
    no_wait = {"BATCH-006", "BATCH-009", "BATCH-012"}
    expected = {pid: "PASS" if pid in no_wait else broken(pid) for pid in judged()}
    got = verdicts(index)
    assert got == expected, (
        f"{details(index, {p for p in got if got[p] != expected.get(p)})}\n{output[-3000:]}"
    )
    waited = [p for p in index["properties"] if p["verdict"] != "PASS"]
    assert all("batch_wait_seconds" in (p.get("expected") or "") for p in waited if p["id"] != "BATCH-007"), (
        waited
    )
    assert sum(p["duration_s"] for p in index["properties"]) < 2 * WAIT_S + 10
    assert code == 1


def _without_batches(request: Request, response: Response) -> Response:
    """The model's capabilities say batches are not supported."""
    data = response.json
    if response.status == 200 and isinstance(data, dict):
        for info in data.get("data", [data]):
            if isinstance(info, dict) and info.get("type") == "model":
                info["capabilities"]["batch"]["supported"] = False
        return response.with_json(data)
    return response


def _no_batch_endpoints(request: Request) -> Request | Response:
    if request.path.startswith("/v1/messages/batches"):
        return error(404, "not_found_error", "Not Found")
    return request


@pytest.mark.slow
def test_batches_unsupported_when_the_model_says_so(batches_url, profile, tmp_path):
    fault = Fault("no batches", request=_no_batch_endpoints, response=_without_batches)
    with running_proxy(FaultProxy(batches_url, everywhere=fault)) as url:
        code, index, output = run(url, tmp_path, profile)
    assert set(verdicts(index).values()) == {"UNSUPPORTED"}, output[-3000:]
    assert set(verdicts(index)) == judged()
    first = next(p for p in index["properties"] if p["id"] == "BATCH-001")
    assert first["message"] == (
        "batches not served (probe: GET /v1/messages/batches got HTTP 404: not_found_error: Not Found "
        "(declared: batch.supported false))"
    )
    assert code == 0


@pytest.mark.slow
def test_batches_claimed_and_missing_fail_once(batches_url, profile, tmp_path):
    """Capabilities saying batches are served, every batch path a 404: BATCH-001 (the judge of
    batches) FAILs on the run's probe, the others SKIP naming it; never ERROR."""
    fault = Fault("no batch endpoints", request=_no_batch_endpoints)
    with running_proxy(FaultProxy(batches_url, everywhere=fault)) as url:
        code, index, output = run(url, tmp_path, profile)
    expected = {pid: "FAIL" if pid == "BATCH-001" else "SKIP" for pid in judged()}
    got = verdicts(index)
    assert got == expected, (
        f"{details(index, {p for p in got if got[p] != expected.get(p)})}\n{output[-3000:]}"
    )
    assert code == 1
