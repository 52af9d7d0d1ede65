"""A feature is served when a request that uses it is answered as if it were used
(conformance/evidence.py): each probe on a scripted answer, and the detection around it
(conformance/features.py): capabilities a hint, never the only evidence, read from either model
route; the way a set-up was found served is the way the properties use."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from conformance import evidence
from conformance.evidence import Answer
from conformance.features import Features
from conformance.profile import Profile
from conformance.wire.target import Target, TargetConfig

from .fault_proxy import read_body, running_proxy
from .scripted_target import respond

JSONDict = dict[str, Any]
Reply = tuple[int, Any]  # status, body (a dict, or bytes)


def message(*blocks: JSONDict, input_tokens: int = 10, **fields: Any) -> JSONDict:
    usage = {"input_tokens": input_tokens, "output_tokens": 1}
    return {"type": "message", "content": list(blocks), "usage": usage, "stop_reason": "end_turn", **fields}


def refusal(words: str = "not supported") -> JSONDict:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": words}}


TEXT = {"type": "text", "text": "Hello."}
THINKING = {"type": "thinking", "thinking": "Hm.", "signature": "c2ln"}
CALL = {"type": "tool_use", "id": "toolu_1", "name": "record_colour", "input": {}}


class Scripted:
    """Answers each probe request with `reply(body)`; keeps what it was sent."""

    def __init__(self, reply: Callable[[JSONDict], Reply]) -> None:
        self.reply = reply
        self.sent: list[JSONDict] = []

    def __call__(self, body: JSONDict, headers: Mapping[str, str] | None = None) -> Answer:
        self.sent.append(body)
        status, data = self.reply(body)
        raw = data if isinstance(data, bytes) else json.dumps(data).encode()
        return Answer(status, raw, None, {"response": {"status": status}})


@pytest.fixture
def target() -> Target:
    return Target(TargetConfig(url="http://127.0.0.1:9", model="m", profile=Profile()))


def has(body: JSONDict, kind: str) -> bool:
    content = body["messages"][0]["content"]
    return isinstance(content, list) and any(block.get("type") == kind for block in content)


# --------------------------------------------------------------------------- thinking


@pytest.mark.parametrize(
    ("adaptive", "enabled", "supported", "failed", "way"),
    [
        ((200, message(THINKING, TEXT)), None, True, False, "adaptive"),
        ((200, message(TEXT)), (200, message(THINKING, TEXT)), True, False, "enabled"),
        ((200, message(TEXT)), (200, message(TEXT)), False, True, None),  # accepted, not used
        ((200, message(TEXT)), (400, refusal()), True, False, "adaptive"),  # may skip: unproven
        ((400, refusal()), (200, message(THINKING)), True, False, "enabled"),
        ((400, refusal("unknown field thinking")), (400, refusal()), False, False, None),
        ((500, {"error": {"message": "boom"}}), None, False, True, None),
    ],
)
def test_thinking_is_shown_by_a_thinking_block(target, adaptive, enabled, supported, failed, way):
    send = Scripted(lambda body: adaptive if body["thinking"]["type"] == "adaptive" else enabled)
    support = evidence.thinking(send, target, None)
    assert (support.supported, support.failed, support.way) == (supported, failed, way)
    if failed and adaptive[0] == 200:
        assert "accepted, not used" in support.detail
    if not supported and not failed:
        assert "unknown field thinking" in support.detail  # the target's own words


def test_enabled_thinking_is_tried_first_where_the_model_lacks_adaptive(target):
    info = {"capabilities": {"thinking": {"types": {"adaptive": {"supported": False}}}}}
    send = Scripted(lambda body: (200, message(THINKING)))
    assert evidence.thinking(send, target, info).way == "enabled"
    assert [body["thinking"]["type"] for body in send.sent] == ["enabled"]


# --------------------------------------------------------------------------- documents, images


def counting(kind: str, extra: int) -> Callable[[JSONDict], Reply]:
    """Usage grows by `extra` tokens where the request holds a block of `kind`."""
    return lambda body: (200, message(TEXT, input_tokens=20 + (extra if has(body, kind) else 0)))


@pytest.mark.parametrize(
    ("extra", "supported", "failed"), [(70, True, False), (0, False, True), (3, False, True)]
)
def test_a_document_is_served_when_usage_counts_it(target, extra, supported, failed):
    support = evidence.documents(Scripted(counting("document", extra)), target, None)
    assert (support.supported, support.failed) == (supported, failed)
    assert f"usage.input_tokens {20 + extra} with it, 20 without" in support.detail
    if failed:
        assert support.detail.endswith("accepted, not read")


def test_an_image_is_served_when_usage_counts_it(target):
    assert evidence.images(Scripted(counting("image", 53)), target, None).supported
    dropped = evidence.images(Scripted(counting("image", 0)), target, None)
    assert (dropped.supported, dropped.failed) == (False, True)


def test_a_refused_document_is_absent_in_the_targets_words(target):
    openai_shaped = {"error": {"message": "document blocks are not supported", "type": "invalid_request"}}
    send = Scripted(lambda body: (400, openai_shaped) if has(body, "document") else (200, message(TEXT)))
    support = evidence.documents(send, target, None)
    assert (support.supported, support.failed) == (False, False)
    assert "document blocks are not supported" in support.detail


def test_usage_that_cannot_be_read_is_no_evidence_against(target):
    send = Scripted(lambda body: (200, {"type": "message", "content": [TEXT]}))
    support = evidence.documents(send, target, None)
    assert (support.supported, support.failed) == (True, False)
    assert "could not be compared" in support.detail


# --------------------------------------------------------------------------- citations, edits


def test_citations_are_shown_by_a_citation(target):
    cited = {**TEXT, "citations": [{"type": "char_location", "cited_text": "x"}]}
    assert evidence.citations(Scripted(lambda body: (200, message(cited))), target, None).supported
    ignored = evidence.citations(Scripted(lambda body: (200, message(TEXT))), target, None)
    assert (ignored.supported, ignored.failed) == (False, True)


@pytest.mark.parametrize("feature", sorted(evidence.EDITS))
def test_an_edit_is_shown_by_its_context_management_report(target, feature):
    reported = message(TEXT, context_management={"applied_edits": []})
    probe = evidence.edit(feature)
    assert probe(Scripted(lambda body: (200, reported)), target, None).supported
    ignored = probe(Scripted(lambda body: (200, message(TEXT))), target, None)
    assert (ignored.supported, ignored.failed) == (False, True)
    refused = probe(Scripted(lambda body: (400, refusal())), target, None)
    assert (refused.supported, refused.failed) == (False, False)
    sent = Scripted(lambda body: (200, reported))
    probe(sent, target, None)
    assert sent.sent[0]["context_management"] == {"edits": [evidence.EDITS[feature]]}
    assert ("thinking" in sent.sent[0]) is (feature == "clear_thinking")  # the API wants it on


# --------------------------------------------------------------------------- structured, tools


@pytest.mark.parametrize(
    ("text", "stop", "supported", "failed"),
    [
        ('{"ok": true}', "end_turn", True, False),
        ("Yes, the sea is wet.", "end_turn", False, True),
        ('{"ok": "yes"}', "end_turn", False, True),
        ('{"ok": tr', "max_tokens", True, False),  # cut: no evidence either way
        ('```json\n{"ok": tr', "max_tokens", False, True),  # a fence: not the format, cut or not
        ('{\n  "wet": true, "because', "max_tokens", False, True),  # a key the schema does not have
    ],
)
def test_structured_output_is_shown_by_json_of_the_schema(target, text, stop, supported, failed):
    answer = message({"type": "text", "text": text}, stop_reason=stop)
    support = evidence.structured_outputs(Scripted(lambda body: (200, answer)), target, None)
    assert (support.supported, support.failed) == (supported, failed)


def by_choice(**replies: Reply) -> Callable[[JSONDict], Reply]:
    return lambda body: replies[body["tool_choice"]["type"]]


@pytest.mark.parametrize(
    ("replies", "supported", "failed", "way"),
    [
        ({"any": (200, message(CALL))}, True, False, "any"),
        (
            {"any": (400, refusal("any is not a valid tool_choice")), "tool": (200, message(CALL))},
            True,
            False,
            "tool",
        ),
        (
            {"any": (400, refusal()), "tool": (400, refusal()), "auto": (200, message(TEXT))},
            True,
            False,
            "auto",
        ),
        ({"any": (200, message(TEXT)), "tool": (200, message(CALL))}, True, False, "tool"),
        ({"any": (200, message(TEXT)), "tool": (200, message(TEXT))}, False, True, "any"),  # taken, ignored
        ({"any": (400, refusal()), "tool": (400, refusal()), "auto": (400, refusal())}, False, False, None),
    ],
)
def test_tools_are_set_up_the_first_way_the_target_takes(target, replies, supported, failed, way):
    send = Scripted(by_choice(**replies))
    support = evidence.tool_calls(send, target, None)
    assert (support.supported, support.failed, support.way) == (supported, failed, way)
    if way == "tool":
        assert send.sent[1]["tool_choice"] == {
            "type": "tool",
            "name": "record_colour",
            "disable_parallel_tool_use": True,
        }
    if "any is not a valid" in json.dumps(replies):
        assert "any is not a valid tool_choice" in support.detail  # why it is not the way


# --------------------------------------------------------------------------- detection


class Server:
    """An ASGI target: the model routes (by id and listed), and `reply` for every POST."""

    def __init__(
        self, reply: Callable[[JSONDict], Reply], info: JSONDict | None = None, *, listed_only: bool = False
    ) -> None:
        self.reply, self.info, self.listed_only = reply, info, listed_only
        self.posts: list[JSONDict] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = await read_body(receive)
        path = scope["path"]
        model = {"type": "model", "id": "m", "capabilities": (self.info or {}).get("capabilities")}
        if scope["method"] == "POST":
            self.posts.append(json.loads(raw))
            status, body = self.reply(self.posts[-1])
        elif path == "/v1/models/m":
            status, body = (404, {"detail": "Not Found"}) if self.listed_only else (200, model)
        elif path == "/v1/models":
            status, body = 200, {"data": [model], "has_more": False}
        else:
            status, body = 404, {"detail": "Not Found"}
        await respond(send, status, "application/json", json.dumps(body).encode())


def detect(server: Server, feature: str) -> tuple[Any, Target]:
    with running_proxy(server) as url:
        target = Target(TargetConfig(url=url, model="m", profile=Profile()))
        try:
            return Features(target).support(feature), target
        finally:
            target.close()


def test_capabilities_are_a_hint_never_the_only_evidence():
    declared = {"capabilities": {"pdf_input": {"supported": True}}}
    server = Server(counting("document", 0), declared)  # says it reads documents, drops them
    support, _ = detect(server, "documents")
    assert (support.supported, support.failed, support.declared) == (False, True, True)
    assert "(declared: pdf_input.supported true)" in support.detail
    lacking = {"capabilities": {"pdf_input": {"supported": False}}}
    support, _ = detect(Server(counting("document", 70), lacking), "documents")  # says not, reads them
    assert (support.supported, support.declared) == (True, False)


def test_nothing_declared_is_probed_like_anything_else():
    support, _ = detect(Server(counting("document", 70), {"capabilities": None}), "documents")
    assert (support.supported, support.source) == (True, "probe")


def test_the_model_list_speaks_where_the_model_route_is_missing():
    info = {"capabilities": {"thinking": {"types": {"adaptive": {"supported": False}}}}}
    server = Server(lambda body: (200, message(THINKING)), info, listed_only=True)
    support, target = detect(server, "thinking")
    assert support.way == "enabled"  # the listed entry's hint ordered the ways
    assert target.ways == {"thinking": "enabled"}


def test_tools_ignored_by_forced_calls_are_still_tools():
    """tool_choice taken but no call made: forced calls fail (TOOL-001's finding), while the
    tools themselves are served, asked for the way that was taken (count_tokens with tools,
    tool_choice none and tool results are still judged)."""
    support, target = detect(Server(lambda body: (200, message(TEXT))), "tools")
    assert (support.supported, support.way) == (True, "any")
    assert target.ways == {"tools": "any"}
    calls, _ = detect(Server(lambda body: (200, message(TEXT))), "tool_calls")
    assert (calls.supported, calls.failed) == (False, True)


def test_context_management_is_served_where_one_edit_is():
    def reply(body: JSONDict) -> Reply:
        kind = body["context_management"]["edits"][0]["type"]
        if kind == "clear_tool_uses_20250919":
            return 200, message(TEXT, context_management={"applied_edits": []})
        return 400, refusal(f"{kind} is not supported")

    support, _ = detect(Server(reply), "context_management")
    assert (support.supported, support.failed) == (True, False)
    ignored, _ = detect(Server(lambda body: (200, message(TEXT))), "context_management")
    assert (ignored.supported, ignored.failed) == (False, True)


@pytest.mark.parametrize(
    ("status", "supported", "failed"), [(200, True, False), (404, False, False), (502, False, True)]
)
def test_batches_are_probed_by_their_list(status, supported, failed):
    class Batches(Server):
        async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["path"] == "/v1/messages/batches":
                body = json.dumps({"data": [], "has_more": False}).encode()
                await send({"type": "http.response.start", "status": status, "headers": []})
                await send({"type": "http.response.body", "body": body})
                return
            await super().__call__(scope, receive, send)

    support, _ = detect(Batches(lambda body: (200, message(TEXT))), "batches")
    assert (support.supported, support.failed) == (supported, failed)
