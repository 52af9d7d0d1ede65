"""Issue 18's checks: verdicts a maintainer can trust at a glance, each shown on the reference
server (tiny-random) behind the fault proxy.

- an id without its documented prefix is a WARN, and the gate passes (the prefix is a SHOULD);
- a property with several broken sub-cases shows each of them on the console;
- a target that ignores max_tokens and is too slow to finish within --timeout FAILs for
  max_tokens, with how much text came, not for being slow;
- a SHOULD sub-case of a MUST property WARNs, and only --strict fails the gate for it;
- a property whose precondition fails is SKIP, naming the property that judges it;
- one bug that breaks several properties is one cause, named by what the target did.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx
import pytest

from .fault_proxy import UPSTREAM_TLS, Fault, FaultProxy, Frame, Request, Response, running_proxy
from .faults import edit_payloads, fake_message, fault_catalogue, message_json, when_error
from .scripted_target import read_body
from .suite import API_KEY, run_suite, selecting, verdicts

pytestmark = [pytest.mark.mlx, pytest.mark.slow]

JSONDict = dict[str, Any]


def test_an_id_without_its_prefix_is_a_warning_and_the_gate_passes(tiny_random_url, proof_profile, tmp_path):
    ids = fault_catalogue(API_KEY)["MSG-022"]  # chatcmpl-… ids, plain and streamed
    with running_proxy(FaultProxy(tiny_random_url, everywhere=ids)) as url:
        code, index, output = run_suite(
            url, tmp_path, profile=proof_profile, extra=["-k", "msg_001 or msg_022"]
        )
    assert verdicts(index) == {"MSG-001": "PASS", "MSG-022": "WARN"}, output[-3000:]
    assert code == 0


def test_every_broken_sub_case_is_on_the_console(tiny_random_url, proof_profile, tmp_path):
    """ERR-007's three invalid max_tokens values all accepted: three sub-case lines."""
    accept = Fault("invalid requests answered", response=when_error(fake_message))
    with running_proxy(FaultProxy(tiny_random_url, everywhere=accept)) as url:
        code, index, output = run_suite(url, tmp_path, profile=proof_profile, extra=["-k", "err_007"])
    result = index["properties"][0]
    assert (result["verdict"], len(result["subcases"])) == ("FAIL", 3), output[-3000:]
    for case in ("[max_tokens -1] Expected", "[max_tokens 2.5] Expected", "[max_tokens '16'] Expected"):
        assert case in output, output[-3000:]
    assert code == 1


class IgnoresMaxTokens:
    """A server that generates as much as it likes (2000 tokens, whatever was asked), and streams
    as it goes: an ASGI proxy that rewrites max_tokens and relays every chunk as it comes (the
    fault proxy holds a whole answer before sending it). When the suite hangs up (its --timeout,
    or enough text read), the proxy hangs up on the server too, which then stops generating, as
    the server it stands for would: the rest of the 2000 tokens is not computed for nobody."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        relay = asyncio.ensure_future(self.relay(scope, body, send))
        hung_up = asyncio.ensure_future(receive())  # http.disconnect, once the client goes
        await asyncio.wait({relay, hung_up}, return_when=asyncio.FIRST_COMPLETED)
        for task in (relay, hung_up):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def relay(self, scope: dict[str, Any], body: bytes, send: Any) -> None:
        data = json.loads(body) if body else None
        if isinstance(data, dict) and "max_tokens" in data:
            body = json.dumps({**data, "max_tokens": 2000}).encode()
        skip = {"host", "content-length", "connection"}
        headers = {k.decode(): v.decode() for k, v in scope["headers"] if k.decode().lower() not in skip}
        query = f"?{scope['query_string'].decode()}" if scope["query_string"] else ""
        async with httpx.AsyncClient(timeout=300, verify=UPSTREAM_TLS) as client:
            url = self.upstream + scope["path"] + query
            async with client.stream(scope["method"], url, headers=headers, content=body) as answer:
                relayed = [
                    (k.encode(), v.encode()) for k, v in answer.headers.items() if k.lower() not in skip
                ]
                await send({"type": "http.response.start", "status": answer.status_code, "headers": relayed})
                async for chunk in answer.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


# CI judges one non-streamed property (read again streamed) and one streamed; MSG-007 takes
# MSG-006's path at the cost of another 2000-token answer, so `nox -s deep` adds it.
@pytest.mark.parametrize(
    "judged",
    [
        pytest.param(("MSG-006", "STREAM-016"), id="one-of-each"),
        pytest.param(("MSG-006", "MSG-007", "STREAM-016"), marks=pytest.mark.deep, id="all-three"),
    ],
)
def test_an_ignored_max_tokens_fails_for_max_tokens_even_when_the_target_is_too_slow(
    tiny_random_url, proof_profile, tmp_path, judged
):
    """A 2000-token answer takes tiny-random far longer than the 3 s --timeout: the non-streamed
    properties then read the same request streamed, and every one names max_tokens."""
    with running_proxy(IgnoresMaxTokens(tiny_random_url)) as url:  # type: ignore[arg-type]
        code, index, output = run_suite(
            url, tmp_path, profile=proof_profile, extra=[*selecting(judged), "--timeout", "3"]
        )
    results = {p["id"]: p for p in index["properties"]}
    assert {pid: p["verdict"] for pid, p in results.items()} == dict.fromkeys(judged, "FAIL"), output[-3000:]
    for result in results.values():
        broken = result["subcases"] or [result]
        assert all(case["reason"] == "max-tokens-ignored" for case in broken), json.dumps(result)[:2000]
        assert all("for max_tokens" in case["actual"] for case in broken), json.dumps(result)[:2000]
    assert [c["cause"] for c in index["causes"]] == [
        "max_tokens ignored: more text came than max_tokens allows"
    ]
    assert code == 1


def _after_error(_: Request, frames: list[Frame]) -> list[Frame]:
    """oMLX: a well-formed error event, then a message_stop after it."""
    error = {"type": "error", "error": {"type": "api_error", "message": "injected"}}
    return [*frames[:-1], Frame.of(error), frames[-1]]


def _bom(data: bytes) -> bytes:
    return b"\xef\xbb\xbf" + data


def test_a_should_sub_case_of_a_must_is_a_warning(tiny_random_url, proof_profile, tmp_path):
    """STREAM-019's 'nothing after an error event' and STREAM-010's 'no leading BOM' are SHOULD
    sub-cases: broken, their MUST properties WARN; the gate passes, and fails under --strict."""
    faults = {
        "STREAM-019": Fault("message_stop after an error event (oMLX)", frames=_after_error),
        "STREAM-010": Fault("a leading byte order mark", frames=lambda r, f: f, stream_bytes=_bom),
    }
    selection = ["-k", "stream_010 or stream_019"]
    with running_proxy(FaultProxy(tiny_random_url, faults)) as url:
        code, index, output = run_suite(url, tmp_path / "plain", profile=proof_profile, extra=selection)
        assert verdicts(index) == {"STREAM-010": "WARN", "STREAM-019": "WARN"}, output[-3000:]
        assert all(p["subcases"] == [] or p["subcases"][0]["level"] == "SHOULD" for p in index["properties"])
        assert "(SHOULD) Expected" in output
        assert code == 0
        strict, _, _ = run_suite(
            url, tmp_path / "strict", profile=proof_profile, extra=[*selection, "--strict"]
        )
    assert strict == 1


def _refuse_max_tokens_zero(request: Request) -> Request | Response:
    body = request.json
    if isinstance(body, dict) and body.get("max_tokens") == 0:
        error = {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: >= 1"}}
        return Response(400, {"content-type": "application/json"}, json.dumps(error).encode())
    return request


def test_a_failed_precondition_is_a_skip_naming_the_property_that_judges_it(
    tiny_random_url, proof_profile, tmp_path
):
    """max_tokens 0 refused: MSG-011 FAILs for it; MSG-016 judges its other answers, says which
    it could not, and does not WARN a second time for the same refusal."""
    fault = Fault("max_tokens 0 refused", request=_refuse_max_tokens_zero)
    with running_proxy(FaultProxy(tiny_random_url, everywhere=fault)) as url:
        code, index, output = run_suite(
            url, tmp_path, profile=proof_profile, extra=["-k", "msg_011 or msg_016"]
        )
    results = {p["id"]: p for p in index["properties"]}
    assert results["MSG-011"]["verdict"] == "FAIL", output[-3000:]
    assert results["MSG-016"]["verdict"] == "PASS", output[-3000:]
    assert any("MSG-011 judges that" in note for note in results["MSG-016"]["notes"]), results["MSG-016"]
    assert "(MSG-011 judges them)" in output
    assert code == 1  # MSG-011's failure, once


def _zero_usage(payload: JSONDict) -> None:
    usage = payload.get("usage") or payload.get("message", {}).get("usage")
    if isinstance(usage, dict):
        usage.update(input_tokens=0, output_tokens=0)


def test_one_bug_is_one_cause_named_by_what_the_target_did(tiny_random_url, proof_profile, tmp_path):
    """Streamed usage always 0 (message_start and message_delta): every property it breaks is
    listed under one cause, in the target's words, digits intact."""
    zero = Fault(
        "streamed usage always 0",
        frames=lambda r, f: edit_payloads("message_delta", _zero_usage)(
            r, edit_payloads("message_start", _zero_usage)(r, f)
        ),
    )
    with running_proxy(FaultProxy(tiny_random_url, everywhere=zero)) as url:
        code, index, output = run_suite(
            url, tmp_path, profile=proof_profile, extra=["-k", "stream_012 or stream_013 or stream_014"]
        )
    broken = {pid for pid, verdict in verdicts(index).items() if verdict in ("FAIL", "WARN")}
    assert broken == {"STREAM-012", "STREAM-013", "STREAM-014"}, output[-3000:]
    groups = {c["cause"]: c["properties"] for c in index["causes"]}
    assert groups["streamed usage reports 0 tokens"] == ["STREAM-012", "STREAM-013", "STREAM-014"], groups
    assert (
        "one cause, 3 properties (STREAM-012, STREAM-013, STREAM-014): streamed usage reports 0 tokens"
        in output
    )
    assert code == 1


def test_a_message_without_its_stop_sequence_key_is_one_schema_cause(
    tiny_random_url, proof_profile, tmp_path
):
    """OGX's Message without `stop_sequence`: MSG-001 judges the schema, one cause; FUZZ-003's
    generated requests repeat it, and leave it to MSG-001 (issue 33: one cause, one failure)."""

    def drop(_: Request, data: JSONDict) -> None:
        if data.get("stop_sequence") is None:
            data.pop("stop_sequence", None)

    fault = Fault("stop_sequence omitted when null", response=message_json(drop))
    with running_proxy(FaultProxy(tiny_random_url, everywhere=fault)) as url:
        _, index, output = run_suite(
            url, tmp_path, profile=proof_profile, extra=["-k", "msg_001 or fuzz_003"]
        )
    assert [c["cause"] for c in index["causes"]] == [
        "the Message: $: 'stop_sequence' is a required property"
    ], output[-3000:]
    assert verdicts(index) == {"MSG-001": "FAIL", "FUZZ-003": "PASS"}
    fuzz = next(p for p in index["properties"] if p["id"] == "FUZZ-003")
    assert any("are MSG-001's" in note for note in fuzz["notes"]), fuzz


def test_each_thinking_budget_sub_case_is_refused_for_its_budget_alone(
    tiny_random_url, proof_profile, tmp_path
):
    """A target that refuses any temperature with thinking but never checks the budget FAILs
    ERR-005: its requests carry no temperature (they did, and passed on that refusal alone)."""
    from .faults import error

    def temperature_only(request: Request) -> Request | Response:
        body = request.json
        if isinstance(body, dict) and "temperature" in body:
            return error(400, "invalid_request_error", "temperature may only be set to 1 with thinking")
        return fake_message(request)

    faults = {"ERR-005": Fault("budget unchecked, temperature refused", request=temperature_only)}
    with running_proxy(FaultProxy(tiny_random_url, faults)) as url:
        code, index, output = run_suite(url, tmp_path, profile=proof_profile, extra=["-k", "err_005"])
    assert verdicts(index) == {"ERR-005": "FAIL"}, output[-3000:]
    assert "2 of 2 sub-cases broken" in output or "budget_tokens above max_tokens" in output
    assert code == 1
