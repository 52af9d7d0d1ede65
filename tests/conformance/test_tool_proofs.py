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
        "detail": "a request with tool_choice any got HTTP 200 with a tool_use block",
        "way": "any",
    }
    structured = index["feature_support"]["structured_outputs"]
    assert (structured["source"], structured["declared"]) == ("probe", True)  # shown, and declared
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
    Structured outputs refused although the model's capabilities declare them: one FAIL, by
    STRUCT-001 (their judge), the other STRUCT properties SKIP naming it."""
    fault = Fault("tools and structured outputs refused", request=_refuse_features)
    with running_proxy(FaultProxy(scripted_url, everywhere=fault)) as url:
        selection = ["-k", "test_tool_001 or struct_001 or struct_002 or err_011"]
        code, index, output = run(url, tmp_path, profile, selection)
    got = verdicts(index)
    wanted = {"ERR-011": "PASS", "TOOL-001": "UNSUPPORTED", "STRUCT-001": "FAIL", "STRUCT-002": "SKIP"}
    assert got == wanted, output[-3000:]
    tool = next(p for p in index["properties"] if p["id"] == "TOOL-001")
    refused = "got HTTP 400: invalid_request_error: tools and output_config: not supported"
    ways = "; ".join(f"a request with tool_choice {way} {refused}" for way in ("any", "tool", "auto"))
    assert tool["message"] == f"tools not served (probe: {ways})"
    assert "feature tools not served (probe: " in output
    structured = index["feature_support"]["structured_outputs"]
    assert (structured["supported"], structured["failed"], structured["declared"]) == (False, True, True)
    assert code == 1


def _refuse_any(request: Request) -> Request | Response:
    body = request.json if isinstance(request.json, dict) else {}
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "any":
        # As a gateway passes Anthropic's `any` on to an OpenAI backend, which wants "required".
        return error(400, "invalid_request_error", "'any' is not one of ['none', 'auto', 'required']")
    return request


def test_a_refused_tool_choice_any_is_one_failure(scripted_url, profile, tmp_path):
    """tool_choice any refused with a 400: TOOL-001 FAILs for it, once; every other tool property
    asks for its call with the named tool instead and is judged as on a correct target (PASS),
    the sub-cases that need `any` itself left out, saying why."""
    fault = Fault("tool_choice any refused", request=_refuse_any)
    with running_proxy(FaultProxy(scripted_url, everywhere=fault)) as url:
        code, index, output = run(url, tmp_path, profile)
    got = verdicts(index)
    assert got.pop("TOOL-001") == "FAIL", output[-3000:]
    assert set(got.values()) == {"PASS"}, {pid: v for pid, v in got.items() if v != "PASS"}
    assert index["feature_support"]["tools"]["way"] == "tool"
    assert len(index["causes"]) == 1, index["causes"]
    notes = {p["id"]: " ".join(p.get("notes") or []) for p in index["properties"]}
    assert "tool_choice any left out" in notes["TOOL-010"]
    assert code == 1
