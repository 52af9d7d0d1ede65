"""Issue 42: one cause per root, one root per cause. A cause is keyed by the rule broken and the
target's own message (normalised), the same whichever transport met the answer (raw, streamed,
the Python SDK, the TypeScript SDK) and whichever check failed on it; the text shown stays the
first occurrence's, in the target's words."""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace
from typing import Any

import anthropic
import httpx
import httpx2
import pytest
from pydantic import BaseModel

from conformance.catalogue import REGISTRY, Citation, Level, Property
from conformance.judging.checks import (
    Cases,
    ConformanceFailure,
    expect_envelope,
    expect_error,
    expect_status,
    json_body,
)
from conformance.judging.outcome import judge
from conformance.judging.verdicts import Result, Verdict, causes, message_key
from conformance.properties.test_errors import without_max_tokens
from conformance.properties.test_sdk import wire_stream
from conformance.properties.test_structured import COLOUR_SCHEMA, expect_json_texts, format_kept
from conformance.properties.test_tokens import accepted
from conformance.wire.drivers import STRUCTURED_IGNORED, StreamRun, expect_stream, message_body, sdk_call
from conformance.wire.target import Exchange
from conformance.wire.tsdriver import TSResult

from .fault_proxy import Fault, FaultProxy, running_proxy
from .fault_proxy import Request as FaultRequest
from .fault_proxy import Response as FaultResponse
from .suite import run_suite, selecting, verdicts

CITE = Citation("https://example.invalid/docs#x", "a requirement")
HEADERS = {"content-type": "application/json", "anthropic-version": "2023-06-01", "x-api-key": "k"}


def request(body: Any, *, path: str = "/v1/messages", pid: str = "MSG-001") -> httpx.Request:
    """A request as Target.request sends it (tagged with its property, as the transport does)."""
    headers = {**HEADERS, "x-plumbline-property": pid}
    return httpx.Request("POST", f"http://t{path}", content=json.dumps(body).encode(), headers=headers)


def answer(
    status: int, body: Any, sent: httpx.Request | None = None, *, raw: bytes | None = None
) -> httpx.Response:
    content = raw if raw is not None else json.dumps(body).encode()
    return httpx.Response(status, content=content, request=sent or request({"model": "m"}))


def caught(call: Any, *args: Any, **kwargs: Any) -> ConformanceFailure:
    with pytest.raises(ConformanceFailure) as failure:
        call(*args, **kwargs)
    return failure.value


def broken(pid: str, failure: ConformanceFailure, title: str | None = None) -> Result:
    """The Result outcome.judge makes of a ConformanceFailure."""
    prop = REGISTRY.get(pid) or Property(pid, Level.MUST, title or pid.lower(), CITE)
    return Result(
        prop,
        Verdict.FAIL,
        0.1,
        reason=failure.reason,
        expected=failure.expected,
        actual=failure.actual,
        subject=failure.subject,
        key=failure.key,
        subcases=[b.as_dict() for b in failure.subcases],
    )


def openai_error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": "400"}}


def test_three_different_400s_with_bodies_of_the_same_keys_are_three_causes():
    """One gateway's 13-property group merged three roots: each keeps its own message now."""
    roots = [
        "cache_control: Extra inputs are not permitted",
        "max_tokens: Input should be greater than or equal to 1",
        "tool_choice: 'any' is not supported by this backend",
    ]
    results = [
        broken(f"MSG-0{10 + n}", caught(expect_status, answer(400, openai_error(message)), 200))
        for n, message in enumerate(roots)
    ]
    found = causes(results)
    assert len(found) == 3, found
    assert [text for text, _ in found] == [
        f"POST /v1/messages answered HTTP 400 (a body with keys error: {message})" for message in roots
    ]


def test_the_same_message_is_one_cause_whatever_its_ids_numbers_and_quoted_values():
    first = "messages.0: tool_choice 'any' needs tools (req_011CSHo 12 given, `claude-x`)"
    second = 'messages.3: tool_choice "any" needs tools (req_9ZZ 7 given, `other`)'
    results = [
        broken("TOOL-001", caught(expect_status, answer(400, {"detail": first}), 200)),
        broken("TOOL-002", caught(expect_status, answer(400, {"detail": second}), 200)),
    ]
    assert causes(results) == [
        (f"POST /v1/messages answered HTTP 400 (a body with keys detail: {first})", ["TOOL-001", "TOOL-002"])
    ]
    assert (
        message_key(first)
        == message_key(second)
        == "messages.<n>: tool_choice <v> needs tools (<id> <n> given, <v>)"
    )
    assert message_key("It doesn't  take\nTHIS") == "it doesn't take this"


@pytest.mark.parametrize(
    "shape",
    [
        lambda said: {"detail": [{"loc": ["body", "max_tokens"], "msg": said}]},  # FastAPI's list
        lambda said: {"detail": {"error": said}},  # LiteLLM's count_tokens
        lambda said: {"detail": said},
        lambda said: {"message": said},
        lambda said: {"error": said},
        lambda said: {"error": {"message": said, "type": None, "code": 400}},  # OpenAI's
        lambda said: {"type": "error", "error": {"type": "invalid_request_error", "message": said}},
    ],
)
def test_the_message_of_every_error_shape_is_read_and_keys_the_cause(shape):
    def failed(said: str) -> ConformanceFailure:
        return caught(expect_status, answer(400, shape(said)), 200)

    refused = failed("Input should be greater than or equal to 1")
    assert str(refused.subject).endswith("Input should be greater than or equal to 1)")
    assert failed("Input should be greater than or equal to 7").key == refused.key  # its numbers out
    assert failed("Field required").key != refused.key  # another message, another cause


def test_a_quoted_backend_error_is_keyed_by_its_own_message():
    """A gateway passing its backend's JSON on (every value in it quoted) or a Python repr of a
    validation list: keyed by the inner message, not by a key with every value taken out."""

    def litellm(message: str) -> dict[str, Any]:
        inner = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        return openai_error(f"litellm.BadRequestError: AnthropicException - b'{json.dumps(inner)}'. Group=m")

    def ogx(field: str) -> dict[str, Any]:
        return openai_error(f"[{{'type': 'missing', 'loc': ('body', '{field}'), 'msg': 'Field required'}}]")

    keys = [
        caught(expect_status, answer(400, body), 200).key
        for body in (
            litellm("max_tokens: Field required"),
            litellm("model: Field required"),
            ogx("model"),
            ogx("messages"),
        )
    ]
    assert len(set(keys)) == 4, keys


def test_one_answer_is_one_cause_raw_streamed_through_either_sdk():
    """The tool_choice root under three keys (raw, streamed, through the SDK): one now, with
    the TypeScript SDK's too; the first wording (the raw one) names it."""
    content = json.dumps(openai_error("tool_choice: 'any' is not supported (id chatcmpl-42)")).encode()
    again = json.dumps(openai_error("tool_choice: 'any' is not supported (id chatcmpl-77)")).encode()
    raw = caught(expect_status, answer(400, None, raw=content), 200)
    streamed_request = request({"model": "m", "stream": True})
    raw_streamed = caught(expect_status, answer(400, None, streamed_request, raw=again), 200)
    stream_run = caught(expect_stream, StreamRun(400, httpx.Headers(), again))
    exchange = Exchange("POST", "http://127.0.0.1:9/v1/messages", {}, b'{"stream": true}', status=400)
    exchange.response_body.extend(again)
    typescript = caught(wire_stream, TSResult({}, {"ok": False}, exchange))
    results = [
        broken("TOOL-001", raw),
        broken("TOOL-002", raw_streamed),
        broken("TOOL-003", stream_run),
        sdk_result("TOOL-004", again),
        broken("TOOL-005", typescript),
    ]
    assert causes(results) == [
        (
            "POST /v1/messages answered HTTP 400 (a body with keys error: tool_choice: 'any' is not "
            "supported (id chatcmpl-42))",
            ["TOOL-001", "TOOL-002", "TOOL-003", "TOOL-004", "TOOL-005"],
        )
    ]
    # Each transport still says which it was, in the text each result keeps.
    assert str(raw_streamed.subject).startswith("POST /v1/messages (stream) answered")
    assert stream_run.subject == raw_streamed.subject
    assert str(typescript.subject).endswith(", through the TypeScript SDK")
    assert str(results[3].subject).endswith(", through the SDK")


def sdk_result(pid: str, content: bytes, *, path: str = "/v1/messages", status: int = 400) -> Result:
    """What outcome.judge makes of the APIStatusError the Python SDK raises for this answer."""
    sent = httpx2.Request("POST", f"http://t{path}", content=b'{"model": "m"}')
    response = httpx2.Response(status, content=content, request=sent)
    try:
        body: Any = json.loads(content)
    except ValueError:
        body = content.decode()
    error = anthropic.APIStatusError(f"Error code: {status}", response=response, body=body)

    def raise_it() -> None:
        raise error

    call = pytest.CallInfo.from_call(raise_it, "call")
    report = SimpleNamespace(passed=False, skipped=False, longrepr=None)
    prop = Property(pid, Level.MUST, pid.lower(), CITE)
    return judge(prop, call, report, None)  # type: ignore[arg-type]


def test_a_request_that_should_have_been_refused_is_keyed_by_what_was_sent():
    """ERR-001 and ERR-023 send the same body without max_tokens: a target that fills in a
    default answers both, and that is one missing check, named by the first (ERR-001)."""
    target = SimpleNamespace(model="m", greedy_fields=lambda: {"temperature": 0})
    missing = {k: v for k, v in message_body(target).items() if k != "max_tokens"}  # type: ignore[arg-type]
    message = {"type": "message", "content": []}

    err_001 = Cases()
    for field, body in (("model", {"messages": missing["messages"]}), ("max_tokens", missing)):
        with err_001.case(f"missing {field}"):
            expect_error(answer(200, message, request(body, pid="ERR-001")), 400, "invalid_request_error")
    err_023 = Cases()
    with err_023.case("POST /v1/messages"):
        sent = request(without_max_tokens(target), pid="ERR-023")  # type: ignore[arg-type]
        expect_envelope(answer(200, message, sent), range(400, 600), None)
    # The same body streamed (STREAM-018's) is the same missing check.
    streamed = caught(
        expect_status, answer(200, message, request({**missing, "stream": True}, pid="STREAM-018")), 400
    )

    found = causes(
        [
            broken("ERR-001", caught(err_001.check)),
            broken("ERR-023", caught(err_023.check)),
            broken("STREAM-018", streamed),
        ]
    )
    title = REGISTRY["ERR-001"].title
    assert found == [
        (
            f"answered HTTP 200, not refused: {title} [missing max_tokens]",
            ["ERR-001", "ERR-023", "STREAM-018"],
        ),
        (f"answered HTTP 200, not refused: {title} [missing model]", ["ERR-001"]),
    ]


def test_a_refusal_keyed_by_its_request_needs_the_same_request():
    """Another body (or the same body without a key) is another missing check."""
    body = {"model": "m", "messages": []}
    with_key = caught(expect_status, answer(200, {}, request(body)), 400)
    bare = httpx.Request("POST", "http://t/v1/messages", content=json.dumps(body).encode())
    without_key = caught(expect_status, answer(200, {}, bare), 400)
    other = caught(expect_status, answer(200, {}, request({**body, "system": 1})), 400)
    assert len({with_key.key, without_key.key, other.key}) == 3
    # A credential is fingerprinted as present, never by its value.
    another_key = request(body)
    another_key.headers["x-api-key"] = "another"
    assert caught(expect_status, answer(200, {}, another_key), 400).key == with_key.key


def test_a_refusal_with_another_status_is_keyed_by_that_status_not_by_its_words():
    """A gateway that refuses every invalid request with FastAPI's 422: each refusal's message
    names its own field, but the one root is the 422 where a 400 is documented."""

    def refused(field: str, wanted: int) -> ConformanceFailure:
        detail = {"detail": [{"loc": ["body", field], "msg": "Field required", "type": "missing"}]}
        return caught(expect_status, answer(422, detail), wanted)

    results = [
        broken("ERR-001", refused("model", 400)),
        broken("ERR-029", refused("messages.0.role", 400)),
        broken("AUTH-002", refused("x-api-key", 401)),  # another documented status: another root
    ]
    found = causes(results)
    assert [ids for _, ids in found] == [["ERR-001", "ERR-029"], ["AUTH-002"]], found
    assert (
        found[0][0]
        == "POST /v1/messages answered HTTP 422 (a body with keys detail: body.model: Field required)"
    )


def test_a_missing_count_tokens_route_is_one_cause_whichever_check_met_it():
    """The status check, the JSON check, TOKENS-010's accepted(), an error envelope wanted, the
    SDK: four keys before, one now (a 404 is keyed by its route, whatever its body says)."""
    path = "/v1/messages/count_tokens"
    plain = b"404 page not found"
    detail = json.dumps({"detail": "Not Found"}).encode()
    count = request({"model": "m", "messages": []}, path=path)
    target = SimpleNamespace(model="m", request=lambda *a, **k: answer(404, None, count, raw=detail))
    results = [
        broken("TOKENS-001", caught(expect_status, answer(404, None, count, raw=detail), 200)),
        broken("TOKENS-002", caught(json_body, answer(404, None, count, raw=plain))),
        broken(
            "TOKENS-005",
            caught(expect_error, answer(404, None, count, raw=detail), 400, "invalid_request_error"),
        ),
        broken("TOKENS-010", caught(accepted, target, "output_config")),
        sdk_result("TOKENS-004", detail, path=path, status=404),
    ]
    found = causes(results)
    assert [ids for _, ids in found] == [
        ["TOKENS-001", "TOKENS-002", "TOKENS-004", "TOKENS-005", "TOKENS-010"]
    ], found
    assert (
        found[0][0] == "POST /v1/messages/count_tokens answered HTTP 404 (a body with keys detail: Not Found)"
    )


class Sky(BaseModel):
    colour: str


def test_structured_output_ignored_is_one_named_cause():
    """STRUCT-001 (plain and streamed), STRUCT-002 (the SDK's parse), STRUCT-003: prose, a
    fence, JSON against the schema: one bug."""
    prose = caught(expect_json_texts, ["The sky is blue."], COLOUR_SCHEMA, "the answer", stop=None)
    fence = caught(
        expect_json_texts,
        ['```json\n{"colour": "red"}\n```'],
        COLOUR_SCHEMA,
        "the streamed answer",
        stop=None,
    )
    invalid = caught(expect_json_texts, ['{"colour": 3}'], COLOUR_SCHEMA, "the answer", stop="end_turn")

    def parse() -> None:
        with format_kept():
            sdk_call("messages.parse", Sky.model_validate_json, "The sky is blue.")

    struct_001 = Cases()
    for name, failure in (("plain", prose), ("streamed", fence)):
        with struct_001.case(name):
            raise failure
    results = [
        broken("STRUCT-001", caught(struct_001.check)),
        broken("STRUCT-002", caught(parse)),
        broken("STRUCT-003", invalid),
    ]
    assert causes(results) == [(STRUCTURED_IGNORED, ["STRUCT-001", "STRUCT-002", "STRUCT-003"])]

    # An SDK failure that is not the format's (a Message the SDK refuses) keeps its own cause.
    def refused() -> None:
        with format_kept():
            sdk_call("messages.parse", lambda: (_ for _ in ()).throw(KeyError("content")))

    assert caught(refused).subject is None


def _one_gateway(request: FaultRequest) -> FaultRequest | FaultResponse:
    """A gateway with four roots: no count_tokens route, stop_sequences refused by its backend
    (an OpenAI-shaped 400 with a request id of its own), system prompts refused (the same
    shape, another message), and a default max_tokens filled in."""
    path, body = request.path.split("?", 1)[0], request.json
    if path == "/v1/messages/count_tokens":
        return FaultResponse(404, {"content-type": "application/json"}, b'{"detail": "Not Found"}')
    if path != "/v1/messages" or not isinstance(body, dict):
        return request
    if "stop_sequences" in body:
        said = f"stop_sequences is not supported (request req_{uuid.uuid4().hex[:12]})"
        return FaultResponse(
            400, {"content-type": "application/json"}, json.dumps(openai_error(said)).encode()
        )
    if "system" in body:
        return FaultResponse(
            400,
            {"content-type": "application/json"},
            json.dumps(openai_error("system is not supported")).encode(),
        )
    if "max_tokens" not in body and "model" in body and "messages" in body:
        return request.with_json({**body, "max_tokens": 16})
    return request


@pytest.mark.mlx
@pytest.mark.slow
def test_one_gateway_run_lists_one_cause_per_root(tiny_random_url, proof_profile, tmp_path):
    """End to end, through the fault proxy: the stop_sequences refusal met raw (MSG-004),
    streamed (STREAM-015) and through the SDK (STREAM-012) is one cause; the missing max_tokens
    check ERR-001 and ERR-023 meet is one; the missing count_tokens route met by a status check
    and an error check (TOKENS-004, TOKENS-005) is one; the other 400 (system) is its own."""
    judged = [
        "MSG-004",
        "MSG-015",
        "STREAM-012",
        "STREAM-015",
        "ERR-001",
        "ERR-023",
        "TOKENS-004",
        "TOKENS-005",
    ]
    with running_proxy(
        FaultProxy(tiny_random_url, everywhere=Fault("one gateway", request=_one_gateway))
    ) as url:
        code, index, output = run_suite(url, tmp_path, profile=proof_profile, extra=selecting(judged))
    broken = {"FAIL", "WARN"}
    assert {pid for pid, verdict in verdicts(index).items() if verdict in broken} == set(judged), output[
        -3000:
    ]
    found = [(c["cause"], c["properties"]) for c in index["causes"]]
    assert [ids for _, ids in found] == [
        ["MSG-004", "STREAM-012", "STREAM-015"],
        ["ERR-001", "ERR-023"],
        ["TOKENS-004", "TOKENS-005"],
        ["MSG-015"],
    ], found
    texts = [text for text, _ in found]
    assert texts[0].startswith(
        "POST /v1/messages answered HTTP 400 (a body with keys error: stop_sequences is not"
    )
    assert texts[1] == f"answered HTTP 200, not refused: {REGISTRY['ERR-001'].title} [missing max_tokens]"
    assert texts[2] == "POST /v1/messages/count_tokens answered HTTP 404 (a body with keys detail: Not Found)"
    assert texts[3] == "POST /v1/messages answered HTTP 400 (a body with keys error: system is not supported)"
    assert code == 1
