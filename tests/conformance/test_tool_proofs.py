"""The TOOL-* and STRUCT-* properties on a scripted target that serves tools and structured
outputs correctly (scripted_target.py): each PASSes there and FAILs (MUST) or WARNs (SHOULD) on
its own fault, whatever any model does; and a target that refuses tools is UNSUPPORTED for
them, with the reason, while one that declares structured outputs and refuses them FAILs.

test_fault_proofs.py proves the same on the reference server, once it serves these features.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.catalogue import REGISTRY
from conformance.properties import load_all

from . import scripted_target
from .fault_proxy import Fault, FaultProxy, Request, Response, running_proxy
from .faults import error
from .proofs import assert_each_fails_on_its_fault
from .suite import run_suite, verdicts

pytestmark = [pytest.mark.slow]

SELECTION = ["-k", "(tool or struct) and not srvtool"]


def judged() -> set[str]:
    """The properties of the selection: every one that needs tools or structured outputs (but
    thinking), and the tool request errors ERR-011..013."""
    load_all()
    wanted = {
        pid
        for pid, prop in REGISTRY.items()
        if {"tools", "structured_outputs"} & set(prop.requires)
        and prop.area != "THINK"
        and ("tool" in prop.test_name or "struct" in prop.test_name)
        and prop.area != "SRVTOOL"
    }  # THINK-010 needs tools too: test_thinking_proofs.py proves it; SRVTOOL-* and TOKENS-009/010
    # are proven on the reference server (test_fault_proofs.py)
    return wanted | {"ERR-011", "ERR-012", "ERR-013"}


def run(url: str, tmp_path: Path, profile: Path, selection: list[str] = SELECTION) -> tuple[int, dict, str]:
    return run_suite(url, tmp_path, profile=profile, model=scripted_target.MODEL, extra=selection)


def test_a_correct_target_passes(scripted_url, profile, tmp_path):
    code, index, output = run(scripted_url, tmp_path, profile)
    got = verdicts(index)
    assert set(got) == judged(), output[-3000:]
    assert set(got.values()) == {"PASS"}, output[-6000:]
    assert index["feature_support"]["tools"] == {
        "supported": True,
        "source": "probe",
        "detail": "a forced tool call got HTTP 200",
    }
    assert index["feature_support"]["structured_outputs"]["source"] == "capabilities"
    assert code == 0


def test_each_property_fails_on_its_fault(scripted_url, profile, tmp_path):
    assert_each_fails_on_its_fault(scripted_url, judged(), lambda url: run(url, tmp_path, profile))


def _refuse_features(request: Request) -> Request | Response:
    body = request.json if isinstance(request.json, dict) else {}
    if request.path.startswith("/v1/messages") and ("tools" in body or "output_config" in body):
        return error(400, "invalid_request_error", "tools and output_config: not supported")
    return request


def test_refused_features_are_unsupported_unless_declared(scripted_url, profile, tmp_path):
    """Tools refused with a 400 and declared nowhere: UNSUPPORTED with the probe's reason.
    Structured outputs refused although the model's capabilities declare them: FAIL."""
    fault = Fault("tools and structured outputs refused", request=_refuse_features)
    with running_proxy(FaultProxy(scripted_url, everywhere=fault)) as url:
        code, index, output = run(url, tmp_path, profile, ["-k", "test_tool_001 or struct_001 or err_011"])
    got = verdicts(index)
    assert got == {"ERR-011": "PASS", "TOOL-001": "UNSUPPORTED", "STRUCT-001": "FAIL"}, output[-3000:]
    tool = next(p for p in index["properties"] if p["id"] == "TOOL-001")
    assert tool["message"] == (
        "tools not served (probe: a forced tool call got HTTP 400: invalid_request_error: "
        "tools and output_config: not supported)"
    )
    assert "feature tools not served (probe: " in output
    assert index["feature_support"]["structured_outputs"]["supported"] is True
    assert code == 1
