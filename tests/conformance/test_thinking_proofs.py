"""The THINK-* properties on a scripted target that serves extended thinking correctly
(scripted_target.py: HMAC signatures verified in the history): each PASSes there and FAILs
(MUST) or WARNs (SHOULD) on its own fault, and on the extra faults of thinking_faults.py,
whatever any model does; a target whose model says it lacks thinking is UNSUPPORTED for them,
with the reason, while one that says it serves thinking and refuses it FAILs.

test_fault_proofs.py proves the same on the reference server, which serves thinking.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.catalogue import REGISTRY
from conformance.properties import load_all

from . import scripted_target
from .fault_proxy import Fault, FaultProxy, Request, Response, running_proxy
from .faults import error, strip
from .proofs import assert_each_fails_on_its_fault
from .suite import run_suite, verdicts
from .thinking_faults import EXTRA_THINKING_FAULTS

pytestmark = [pytest.mark.slow]

SELECTION = ["-k", "think"]


def judged() -> set[str]:
    """The properties of the selection: every one that needs thinking and `-k think` selects, and
    ERR-005 (budgets). (SRVTOOL-009 and TOKENS-010 need thinking too; test_fault_proofs.py proves
    them on the reference server.)"""
    load_all()
    return {
        pid for pid, prop in REGISTRY.items() if "thinking" in prop.requires and "think" in prop.test_name
    } | {"ERR-005"}


def run(url: str, tmp_path: Path, profile: Path, selection: list[str] = SELECTION) -> tuple[int, dict, str]:
    return run_suite(url, tmp_path, profile=profile, model=scripted_target.MODEL, extra=selection)


def test_a_correct_target_passes(scripted_url, profile, tmp_path):
    code, index, output = run(scripted_url, tmp_path, profile)
    got = verdicts(index)
    assert set(got) == judged(), output[-3000:]
    assert set(got.values()) == {"PASS"}, output[-6000:]
    assert index["feature_support"]["thinking"] == {
        "supported": True,
        "source": "probe",
        "detail": "a request with adaptive thinking got HTTP 200 with a thinking block "
        "(declared: thinking.supported true)",
        "way": "adaptive",
        "declared": True,
    }
    assert code == 0


def test_each_property_fails_on_its_fault(scripted_url, profile, tmp_path):
    assert_each_fails_on_its_fault(scripted_url, judged(), lambda url: run(url, tmp_path, profile))


@pytest.mark.parametrize("name", sorted(EXTRA_THINKING_FAULTS))
def test_extra_faults_fail_their_property(scripted_url, profile, tmp_path, name):
    load_all()  # REGISTRY[pid] below, whatever ran before on this worker
    pid, fault = EXTRA_THINKING_FAULTS[name]
    with running_proxy(FaultProxy(scripted_url, {pid: fault})) as url:
        code, index, output = run(url, tmp_path, profile, ["-k", REGISTRY[pid].selector])
    assert verdicts(index) == {pid: "FAIL"}, output[-3000:]
    assert code == 1


def _without_thinking(request: Request, response: Response) -> Response:
    """The model's capabilities say thinking is not supported."""
    data = response.json
    if response.status == 200 and isinstance(data, dict) and data.get("type") == "model":
        data["capabilities"]["thinking"]["supported"] = False
        return response.with_json(data)
    return response


def _refuse_thinking(request: Request) -> Request | Response:
    body = request.json if isinstance(request.json, dict) else {}
    if request.path.startswith("/v1/messages") and "thinking" in body:
        return error(400, "invalid_request_error", "thinking: not supported")
    return request


def _without_adaptive(request: Request, response: Response) -> Response:
    data = response.json
    if response.status == 200 and isinstance(data, dict) and data.get("type") == "model":
        data["capabilities"]["thinking"]["types"]["adaptive"]["supported"] = False
        return response.with_json(data)
    return response


def _refuse_adaptive(request: Request) -> Request | Response:
    body = request.json if isinstance(request.json, dict) else {}
    if (body.get("thinking") or {}).get("type") == "adaptive":
        return error(400, "invalid_request_error", "thinking.type: adaptive is not supported by this model")
    return request


def test_enabled_thinking_where_adaptive_is_absent(scripted_url, profile, tmp_path):
    """A model whose capabilities lack adaptive thinking gets `enabled` with the smallest budget."""
    fault = Fault("no adaptive thinking", request=_refuse_adaptive, response=_without_adaptive)
    with running_proxy(FaultProxy(scripted_url, everywhere=fault)) as url:
        code, index, output = run(url, tmp_path, profile)
    assert set(verdicts(index).values()) == {"PASS"}, output[-3000:]
    assert code == 0


def test_thinking_unsupported_when_refused(scripted_url, profile, tmp_path):
    """Every thinking request refused with a 400, as the capabilities say: UNSUPPORTED, with the
    refusal in the target's words."""
    fault = Fault("no thinking", request=_refuse_thinking, response=_without_thinking)
    with running_proxy(FaultProxy(scripted_url, everywhere=fault)) as url:
        code, index, output = run(url, tmp_path, profile, ["-k", "think_001 or think_010"])
    assert verdicts(index) == {"THINK-001": "UNSUPPORTED", "THINK-010": "UNSUPPORTED"}, output[-3000:]
    first = next(p for p in index["properties"] if p["id"] == "THINK-001")
    refused = "got HTTP 400: invalid_request_error: thinking: not supported"
    assert first["message"] == (
        f"thinking not served (probe: a request with adaptive thinking {refused}; a request with enabled "
        f"thinking {refused} (declared: thinking.supported false))"
    )
    assert code == 0


def test_thinking_claimed_and_refused_fails_once(scripted_url, profile, tmp_path):
    """Capabilities saying thinking is served, every thinking request refused: THINK-001 (the
    judge of thinking) FAILs, the others SKIP naming it."""
    fault = Fault("thinking refused", request=_refuse_thinking)
    with running_proxy(FaultProxy(scripted_url, everywhere=fault)) as url:
        code, index, output = run(url, tmp_path, profile, ["-k", "think_001 or think_007"])
    assert verdicts(index) == {"THINK-001": "FAIL", "THINK-007": "SKIP"}, output[-3000:]
    assert code == 1


def test_thinking_accepted_and_ignored_is_one_failure(scripted_url, profile, tmp_path):
    """A gateway that drops `thinking` and declares nothing: THINK-001 FAILs on the run's probe
    (enabled thinking answered without a thinking block); the other thinking properties SKIP
    naming it, instead of each failing or passing on what they do not see."""
    load_all()  # REGISTRY below, whatever ran before on this worker
    nothing = Fault(
        "thinking dropped", request=strip("thinking", "/v1/messages"), response=_without_capabilities
    )
    with running_proxy(FaultProxy(scripted_url, everywhere=nothing)) as url:
        code, index, output = run(url, tmp_path, profile)
    got = verdicts(index)
    assert got.pop("THINK-001") == "FAIL", output[-3000:]
    assert got.pop("ERR-005") == "FAIL"  # its own rule: budgets a gateway never reads are not refused
    skipped = {pid for pid, verdict in got.items() if verdict == "SKIP"}
    assert skipped == {pid for pid in got if "thinking" in REGISTRY[pid].requires}, got
    assert {p["judged_by"] for p in index["properties"] if p["id"] in skipped} == {"THINK-001"}
    causes = {cause["cause"]: cause["properties"] for cause in index["causes"]}
    assert causes["thinking accepted, not used"] == ["THINK-001"]
    assert code == 1


def _without_capabilities(request: Request, response: Response) -> Response:
    data = response.json
    if response.status == 200 and isinstance(data, dict) and data.get("type") == "model":
        return response.with_json({**data, "capabilities": None})
    return response
