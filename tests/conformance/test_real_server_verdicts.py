"""Issue 33: what real servers showed the harness. Each deviation a peer made (a stream cut
short, a tool type accepted and ignored, a 500 on a probe, ids of another API, a prefill echoed,
a cause that several properties restated) is injected by the fault proxy in front of the
reference server (tiny-random), and the run must give one honest verdict for it."""

from __future__ import annotations

import asyncio
import collections
import json

import pytest

from conformance.wire.target import PROPERTY_HEADER

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
    # Code execution and web search answered, web fetch crashed, computer use refused (a 400 on
    # the text-only tiny-random: not served, no failure).
    assert sorted(e["response"]["status"] for e in evidence["exchanges"]) == [200, 200, 400, 500]
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


class SlowWhenShared:
    """ASGI: the target in front of it answers a request late (`delay` s) while a request of
    another property is in flight, as a busy two-core machine does under four workers. A
    request whose client hangs up while it waits is dropped (no longer in flight)."""

    def __init__(self, app, delay: float) -> None:
        self.app = app
        self.delay = delay
        self.in_flight: collections.Counter[str] = collections.Counter()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)

        async def replay():
            return {"type": "http.request", "body": body, "more_body": False}

        tag = dict(scope["headers"]).get(PROPERTY_HEADER.encode(), b"").decode()
        self.in_flight[tag] += 1
        try:
            if any(count for other, count in self.in_flight.items() if other != tag):
                hung_up = asyncio.ensure_future(receive())  # http.disconnect, when it comes
                done, _ = await asyncio.wait({hung_up}, timeout=self.delay)
                if done:
                    return
                hung_up.cancel()
            await self.app(scope, replay, send)
        finally:
            self.in_flight[tag] -= 1


def test_a_property_that_times_out_beside_others_is_judged_again_alone(
    tiny_random_url, proof_profile, tmp_path
):
    """Our own server, on a busy machine, failed properties on timeouts with four workers: a
    timeout met while other properties ran is not a verdict until the property, judged again
    with the target to itself, times out too."""
    slow = SlowWhenShared(FaultProxy(tiny_random_url), delay=6)
    with running_proxy(slow) as url:
        code, index, output = run_suite(
            url, tmp_path, profile=proof_profile, extra=["--jobs", "2", "--timeout", "3", "-k", "msg_00"]
        )
    got = verdicts(index)
    assert "FAIL" not in got.values(), output[-4000:]
    again = [p["id"] for p in index["properties"] if any("judged again alone" in n for n in p["notes"])]
    assert again, output[-4000:]  # the concurrent phase did time out
    assert all(got[pid] == "PASS" for pid in again)
    assert code == 0


# ---- one cause, one failure: llama-server's and LiteLLM's deviations, each judged where its rule is


def _like_a_peer(request: Request) -> Request | Response:
    """What the peers did: no key is a 500 in another shape (LiteLLM), models cannot be
    retrieved by id (llama-server), a missing max_tokens gets a default, tool_choice any is
    ignored."""
    body = request.json
    if request.path.startswith("/v1/") and not request.headers.get("x-api-key"):
        return Response(
            500, {"content-type": "application/json"}, b'{"error": {"message": "no key", "code": 500}}'
        )
    if request.method == "GET" and request.path.startswith("/v1/models/"):
        return error(404, "not_found_error", "File Not Found")
    if isinstance(body, dict) and request.path.startswith("/v1/messages"):
        if (
            "max_tokens" not in body
            and "messages" in body
            and not request.path.startswith("/v1/messages/count")
        ):
            body["max_tokens"] = 16
        if isinstance(body.get("tool_choice"), dict) and body["tool_choice"].get("type") == "any":
            body["tool_choice"] = {"type": "none"}
        return request.with_json(body)
    return request


def _peer_answers(request: Request, response: Response) -> Response:
    """OpenAI's list and ids; the prefill repeated at the start of the answer (llama-server)."""
    data = response.json
    if request.path.split("?")[0] == "/v1/models" and isinstance(data, dict) and "data" in data:
        return response.with_json(
            {"object": "list", "data": [{"id": m["id"], "type": "model"} for m in data["data"]]}
        )
    if not isinstance(data, dict) or data.get("type") != "message":
        return response
    for block in data["content"]:
        if block.get("type") == "tool_use":
            block["id"] = "call__0_" + block["id"].removeprefix("toolu_")
    body = request.json
    last = body["messages"][-1] if isinstance(body, dict) and body.get("messages") else {}
    if last.get("role") == "assistant" and isinstance(last.get("content"), str):
        texts = [b for b in data["content"] if b.get("type") == "text"]
        if texts:
            texts[0]["text"] = last["content"] + texts[0]["text"]
    return response.with_json(data)


RESTATED = (
    "models_ or fuzz_004 or hdr_002 or err_001 or stream_018 or sdk_002 or auth_001 or err_031 "
    "or tool_001 or tool_017 or msg_005 or msg_008"
)


def test_each_deviation_is_one_failure_of_the_property_whose_rule_it_breaks(
    tiny_random_url, proof_profile, tmp_path
):
    fault = Fault("a peer's deviations", request=_like_a_peer, response=_peer_answers)
    with running_proxy(FaultProxy(tiny_random_url, everywhere=fault)) as url:
        code, index, output = run_suite(url, tmp_path, profile=proof_profile, extra=["-k", RESTATED])
    by_id = {p["id"]: p for p in index["properties"]}
    got = {pid: p["verdict"] for pid, p in by_id.items()}

    def judged_by(pid: str, owner: str) -> None:
        assert (got[pid], by_id[pid]["judged_by"]) == ("SKIP", owner), (pid, by_id[pid])

    # Each rule broken fails once, where it is stated.
    for pid in ("AUTH-001", "MODELS-001", "MODELS-003", "ERR-001", "TOOL-001"):
        assert got[pid] == "FAIL", (pid, by_id[pid])
    assert got["MSG-008"] == "WARN"  # the prefill repeated
    assert got["TOOL-017"] == "WARN"  # call_ ids, seen with the named tool_choice once any was ignored
    assert "call__0_" in by_id["TOOL-017"]["actual"]
    # ... and is not restated by the properties that build on it.
    judged_by("ERR-031", "AUTH-001")  # the 500 for a request without a key
    judged_by("MODELS-002", "MODELS-001")  # a list without has_more cannot be paginated
    judged_by("MODELS-004", "MODELS-003")  # no model can be retrieved by id
    judged_by("STREAM-018", "ERR-001")  # the request without max_tokens is accepted, streamed or not
    assert got["FUZZ-004"] == "PASS", by_id["FUZZ-004"]  # the list's shape is MODELS-001's
    assert any("MODELS-001 or MODELS-003" in n for n in by_id["FUZZ-004"]["notes"])
    assert got["HDR-002"] == "PASS", by_id["HDR-002"]  # ?beta=true answers as the plain paths do
    assert got["MSG-005"] == "PASS", by_id["MSG-005"]  # the stop sequence is in the repeated prefill only
    assert any("MSG-008's finding" in n for n in by_id["MSG-005"]["notes"])
    if got["SDK-002"] != "SKIP" or "cannot run here" not in str(by_id["SDK-002"]["message"]):
        assert got["SDK-002"] == "PASS", by_id["SDK-002"]  # each wrong answer is its owner's
        assert "ERR-001" in " ".join(by_id["SDK-002"]["notes"]) or "ERR-001" in str(
            by_id["SDK-002"]["message"]
        )
    failing = sorted(pid for pid, verdict in got.items() if verdict in ("FAIL", "WARN"))
    assert failing == [
        "AUTH-001",
        "ERR-001",
        "MODELS-001",
        "MODELS-003",
        "MSG-008",
        "TOOL-001",
        "TOOL-017",
    ], output[-3000:]
    assert code == 1


def _tool_choice_ignored(request: Request) -> Request:
    body = request.json
    if isinstance(body, dict) and "tool_choice" in body:
        return request.with_json({**body, "tool_choice": {"type": "none"}})
    return request


def test_bash_not_called_where_no_forced_call_is_honoured_is_tool_001s_finding(
    tiny_random_url, proof_profile, tmp_path
):
    """llama-server on SmolLM2 answered every forced call, bash's too, with text: bash runs on the
    client, so its missing call is TOOL-001's (tool_choice not honoured), while the server tools
    it accepted and never ran are SRVTOOL-015's."""
    fault = Fault("tool_choice ignored", request=_tool_choice_ignored)
    with running_proxy(FaultProxy(tiny_random_url, everywhere=fault)) as url:
        code, index, output = run_suite(
            url, tmp_path, profile=proof_profile, extra=["-k", "srvtool_015 or tool_001"]
        )
    by_id = {p["id"]: p for p in index["properties"]}
    assert by_id["TOOL-001"]["verdict"] == "FAIL", output[-3000:]
    judge = by_id["SRVTOOL-015"]
    assert judge["verdict"] == "FAIL", judge
    assert {case["case"] for case in judge["subcases"]} == {
        "tool_search_tool_regex (tool_search)",
        "web_fetch (web_fetch)",
        "web_search (web_search)",
    }
    assert (
        "1 not judged: [bash (builtin_tools)] a forced bash call, like a forced custom tool's, got no tool_use"
        in (judge["actual"])
    )
    assert code == 1


def test_a_generated_invalid_body_asks_for_few_tokens_whatever_else_it_breaks():
    """FUZZ-001's negative cases may carry max_tokens 1073741824 beside the constraint they
    break: a target that wrongly accepts one generated until its context was full (50 s on
    llama-server, twice with the replay). Lowered, the body stays invalid and the answer is quick."""
    from conformance.properties.test_fuzz import FUZZ_MAX_TOKENS, _bounded

    body = {"max_tokens": 1073741824, "messages": 487}
    assert _bounded(body) == {"max_tokens": FUZZ_MAX_TOKENS, "messages": 487}
    assert body["max_tokens"] == 1073741824  # the generated case is not changed
    for untouched in ({"max_tokens": -1}, {"max_tokens": "16"}, {"max_tokens": True}, [1], "\x00"):
        assert _bounded(untouched) is None  # the broken constraint itself, or no object
