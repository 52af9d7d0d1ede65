"""ERR-031, judged from what the whole run meets (conformance/judging/passive.py): an error status the
suite cannot provoke is judged wherever a property meets one. On tiny-random through a fault
that answers another property's request with a 529: FAIL when the 529 is not the documented
error, naming the property that met it, PASS when it is; with several workers too, where the
property that met it ran in another process. The rate-limited server's 429s: test_rate_limit_proofs.py."""

from __future__ import annotations

import json

import pytest

from conformance.catalogue import REGISTRY, Level
from conformance.judging.passive import MetError, judge_met, problem_of
from conformance.judging.verdicts import Result, Verdict
from conformance.properties import load_all

from .fault_proxy import Fault, FaultProxy, Response, running_proxy
from .faults import error, openai_error
from .suite import run_suite, verdicts


def test_a_status_is_judged_against_its_documented_type():
    documented = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    assert problem_of(529, documented.encode()) is None
    assert "not the error envelope" in str(
        problem_of(529, b'{"error": {"message": "x", "type": "server_error"}}')
    )
    assert "where HTTP 500 is 'api_error'" in str(problem_of(500, documented.encode()))
    assert "not JSON" in str(problem_of(504, b"<html>Gateway Timeout</html>"))
    wordless = {"type": "error", "error": {"type": "rate_limit_error"}}
    assert "message is not a string" in str(problem_of(429, json.dumps(wordless).encode()))


def test_the_verdict_is_what_the_run_met():
    load_all()
    own = Result(REGISTRY["ERR-031"], Verdict.SKIP, 0.1, message="none met")
    assert judge_met(own, []) == own
    good = MetError("MSG-001", 529, None)
    assert judge_met(own, [good, good]).verdict is Verdict.PASS
    bad = MetError("STREAM-002", 500, "the body is not JSON", {"curl": "curl x"})
    failed = judge_met(own, [good, bad])
    assert failed.verdict is Verdict.FAIL
    assert failed.actual == "STREAM-002 met HTTP 500: the body is not JSON"
    assert failed.evidence == [{"curl": "curl x"}]
    assert REGISTRY["ERR-031"].level is Level.MUST
    assert REGISTRY["ERR-031"].passive


def _retry_after_1(response: Response) -> Response:
    """The 529 asks to be left one second: the property that met it is judged again a second
    later, not after the 5 s a 529 without retry-after costs (ERR-031's own fault, in the faulted
    catalogue run of test_fault_proofs.py, meets that one)."""
    return Response(response.status, {**response.headers, "retry-after": "1"}, response.body)


@pytest.mark.mlx
@pytest.mark.slow
# Two workers in CI (the harder path: the 529 met in another process); one in `nox -s deep`.
@pytest.mark.parametrize("jobs", [pytest.param("1", marks=pytest.mark.deep), "2"])
def test_a_529_another_property_met_is_judged(tiny_random_url, proof_profile, tmp_path, jobs):
    selection = ["-k", "msg_001 or err_031", "--jobs", jobs]
    openai_shaped = {
        "MSG-001": Fault("overloaded, in OpenAI's shape", request=lambda r: _retry_after_1(openai_error(529)))
    }
    with running_proxy(FaultProxy(tiny_random_url, openai_shaped)) as url:
        code, index, output = run_suite(url, tmp_path / "bad", profile=proof_profile, extra=selection)
    # Overloaded both times it was asked: MSG-001 is not judged (a 529 says nothing of its rule),
    # ERR-031 judges the answer.
    assert verdicts(index) == {"MSG-001": "SKIP", "ERR-031": "FAIL"}, output[-3000:]
    judged = next(p for p in index["properties"] if p["id"] == "ERR-031")
    assert judged["actual"].startswith("MSG-001 met HTTP 529: the body is not the error envelope"), judged
    assert code == 1
    assert output.index("ERR-031") > output.index("MSG-001")  # given last

    documented = {
        "MSG-001": Fault(
            "overloaded", request=lambda r: _retry_after_1(error(529, "overloaded_error", "Overloaded"))
        )
    }
    with running_proxy(FaultProxy(tiny_random_url, documented)) as url:
        code, index, output = run_suite(url, tmp_path / "good", profile=proof_profile, extra=selection)
    assert verdicts(index) == {"MSG-001": "SKIP", "ERR-031": "PASS"}, output[-3000:]
    judged = next(p for p in index["properties"] if p["id"] == "ERR-031")
    assert judged["message"].startswith("met in the run: HTTP 529 "), judged


def test_an_error_a_property_wanted_refused_is_its_own_finding():
    """A 500 for a request AUTH-001 wanted refused with a 401 is AUTH-001's finding (fixing the
    401 removes the 500): ERR-031 does not repeat it, and is SKIP naming AUTH-001 when that was
    all it met. A 529 met by a property that wanted a success stays ERR-031's to judge."""
    from conformance.judging.passive import owned

    load_all()
    own = Result(REGISTRY["ERR-031"], Verdict.SKIP, 0.1, message="none met")
    auth = Result(
        REGISTRY["AUTH-001"],
        Verdict.FAIL,
        0.1,
        reason="wrong-status",
        expected="HTTP status 401",
        actual='HTTP 500: {"error": "no key"}',
    )
    crash = MetError("AUTH-001", 500, "the body is not the error envelope", {"curl": "curl a"})
    theirs = owned([crash], auth)
    assert theirs[0].owned
    skipped = judge_met(own, theirs)
    assert (skipped.verdict, skipped.judged_by) == (Verdict.SKIP, "AUTH-001")
    assert "AUTH-001 (HTTP 500)" in str(skipped.message)
    busy = Result(
        REGISTRY["MSG-001"],
        Verdict.FAIL,
        0.1,
        reason="unexpected-error-status",
        expected="a Message",
        actual="HTTP 529",
    )
    overloaded = owned([MetError("MSG-001", 529, "the body is not the error envelope")], busy)
    assert not overloaded[0].owned
    assert judge_met(own, [*theirs, *overloaded]).verdict is Verdict.FAIL  # the 529's shape is ERR-031's


def test_an_error_a_feature_probe_met_is_its_judges_finding():
    """A 500 for the Skills API's probe (LiteLLM forwards /v1/skills to Anthropic and fails) is
    SKILL-001's finding, the probe's judge: ERR-031 does not repeat it (one cause, one failure)."""
    from conformance.judging.passive import owned

    load_all()
    own = Result(REGISTRY["ERR-031"], Verdict.SKIP, 0.1, message="none met")
    probe = Result(
        REGISTRY["SKILL-001"],
        Verdict.FAIL,
        0.1,
        reason="feature-probe",
        expected="skills: a request that uses it answered as if it were used, or refused with a 4xx",
        actual="GET /v1/skills got HTTP 500: internal_server_error: litellm.APIConnectionError",
    )
    crash = MetError("SKILL-001", 500, "the body is not the error envelope", {"curl": "curl a"})
    theirs = owned([crash], probe)
    assert theirs[0].owned
    skipped = judge_met(own, theirs)
    assert (skipped.verdict, skipped.judged_by) == (Verdict.SKIP, "SKILL-001")
