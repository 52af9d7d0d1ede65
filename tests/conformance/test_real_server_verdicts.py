"""Issue 33: what real servers showed the harness. Each deviation a peer made (a stream cut
short, a tool type accepted and ignored, a 500 on a probe, ids of another API, a prefill echoed,
a cause that several properties restated) is injected by the fault proxy in front of the
reference server (tiny-random), and the run must give one honest verdict for it."""

from __future__ import annotations

import json

import pytest

from .fault_proxy import Fault, FaultProxy, Frame, Request, Response, running_proxy
from .faults import error
from .server_tool_faults import as_client_tool
from .suite import run_suite, verdicts

pytestmark = [pytest.mark.mlx, pytest.mark.slow]


def _cut_after_start(_: Request, frames: list[Frame]) -> list[Frame]:
    """A backend that cut every stream short under load: message_start, then nothing."""
    return frames[:1]


def test_a_stream_with_no_content_block_gives_no_pass_to_the_block_rules(
    tiny_random_url, proof_profile, tmp_path
):
    """STREAM-008 and STREAM-011 passed on such streams: every block rule is SKIP, saying why
    and naming STREAM-009, which FAILs the cut stream."""
    cut = Fault("every stream cut after message_start", frames=_cut_after_start)
    selection = (
        "stream_005 or stream_006 or stream_007 or stream_008 or stream_009 or stream_011 or stream_020"
    )
    with running_proxy(FaultProxy(tiny_random_url, everywhere=cut)) as url:
        code, index, output = run_suite(url, tmp_path, profile=proof_profile, extra=["-k", selection])
    by_id = {p["id"]: p for p in index["properties"]}
    assert by_id["STREAM-009"]["verdict"] == "FAIL", output[-3000:]
    for pid in ("STREAM-005", "STREAM-006", "STREAM-007", "STREAM-008", "STREAM-011", "STREAM-020"):
        assert by_id[pid]["verdict"] == "SKIP", (pid, by_id[pid])
        assert by_id[pid]["judged_by"] == "STREAM-009"
        assert "nothing to judge" in by_id[pid]["message"]
    assert code == 1
    assert verdicts(index).keys() == by_id.keys()


def _web_fetch_crashes(request: Request) -> Request | Response:
    """LiteLLM: a request with web_fetch answered HTTP 500."""
    body = request.json
    tools = body.get("tools") if isinstance(body, dict) else None
    if isinstance(tools, list) and any(str(t.get("type", "")).startswith("web_fetch_") for t in tools):
        return error(500, "api_error", "litellm.APIConnectionError: unsupported tool")
    return request


def _web_fetch_crashes_web_search_ignored(request: Request) -> Request | Response:
    crashed = _web_fetch_crashes(request)
    return crashed if isinstance(crashed, Response) else as_client_tool("web_search_")(request)


def test_a_tool_type_crashed_on_or_ignored_fails_one_property_not_a_cascade(
    tiny_random_url, proof_profile, tmp_path
):
    """Only a 400 meant absent: a 500 on the web fetch probe and a web search run as a client
    tool counted as served, and every SRVTOOL property that needs them failed for that one
    cause. Now SRVTOOL-015 fails once, with the probes as evidence, and the rest SKIP naming it."""
    fault = Fault("web_fetch crashes, web_search ignored", request=_web_fetch_crashes_web_search_ignored)
    with running_proxy(FaultProxy(tiny_random_url, everywhere=fault)) as url:
        code, index, output = run_suite(
            url, tmp_path, profile=proof_profile, extra=["-k", "srvtool or tokens_011"]
        )
    by_id = {p["id"]: p for p in index["properties"]}
    judge = by_id["SRVTOOL-015"]
    assert judge["verdict"] == "FAIL", output[-3000:]
    broken = {case["case"]: case for case in judge["subcases"]}
    assert set(broken) == {"web_fetch (web_fetch)", "web_search (web_search)"}
    assert "HTTP 500" in broken["web_fetch (web_fetch)"]["actual"]
    assert "without a web_search_tool_result block" in broken["web_search (web_search)"]["actual"]
    assert "tool_use web_search" in broken["web_search (web_search)"]["actual"]
    evidence = json.loads((tmp_path / "proof" / index["run_id"] / "cases" / "SRVTOOL-015.json").read_text())
    assert sorted(e["response"]["status"] for e in evidence["exchanges"]) == [200, 200, 200, 500]
    for pid in (
        "SRVTOOL-004",
        "SRVTOOL-005",
        "SRVTOOL-007",
        "SRVTOOL-012",
        "SRVTOOL-013",
        "SRVTOOL-014",
        "TOKENS-011",
    ):
        assert by_id[pid]["verdict"] == "SKIP", (pid, by_id[pid])
        assert by_id[pid]["judged_by"] == "SRVTOOL-015"
    failed = [pid for pid, p in by_id.items() if p["verdict"] in ("FAIL", "WARN")]
    assert failed == ["SRVTOOL-015"], output[-3000:]  # one cause, one failure
    assert index["feature_support"]["web_fetch"]["failed"] is True
    assert code == 1
