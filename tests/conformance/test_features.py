"""Feature detection: the profile's word, else what a request that uses the feature shows
(test_evidence.py judges each feature's evidence); Anthropic's own tools, the Files API and the
request-shaping probes here."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conformance.features import Features, judge_probe
from conformance.profile import Profile
from conformance.wire.target import PROPERTY_HEADER, Target, TargetConfig

from .fault_proxy import read_body, running_proxy
from .scripted_target import respond


class Fake:
    """An ASGI target: a ModelInfo with `capabilities`, and `status`/`body` for every POST."""

    def __init__(
        self, capabilities: Any = None, status: int = 200, body: Any = None, files_status: int = 200
    ) -> None:
        self.capabilities = capabilities
        self.files_status = files_status
        self.status = status
        self.body = body if body is not None else {"type": "message", "content": []}
        self.seen: list[tuple[str, str, dict[str, str], Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = await read_body(receive)
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.seen.append((scope["method"], scope["path"], headers, json.loads(raw) if raw else None))
        if scope["method"] == "GET" and scope["path"] == "/v1/files":
            status, body = self.files_status, {"data": [], "has_more": False}
        elif scope["method"] == "GET":
            status, body = 200, {"type": "model", "id": "m", "capabilities": self.capabilities}
        else:
            status, body = self.status, self.body
        await respond(send, status, "application/json", json.dumps(body).encode())

    @property
    def posts(self) -> list[Any]:
        return [body for method, _, _, body in self.seen if method == "POST"]


def features(url: str, profile: Profile | None = None) -> tuple[Target, Features]:
    target = Target(TargetConfig(url=url, model="m", profile=profile or Profile()))
    return target, Features(target)


REFUSAL = {"type": "error", "error": {"type": "invalid_request_error", "message": "tools: not supported"}}


def test_the_profile_decides_without_a_request():
    target, found = features(
        "http://127.0.0.1:9", Profile(features=frozenset({"tools"}), absent=frozenset({"batches"}))
    )
    try:
        tools, batches = found.support("tools"), found.support("batches")
    finally:
        target.close()
    assert (tools.supported, tools.source) == (True, "profile")
    assert (batches.supported, batches.source) == (False, "profile")
    assert "batches = false" in batches.detail


def test_a_400_to_the_tools_probe_means_absent_with_the_reason():
    fake = Fake(status=400, body=REFUSAL)
    with running_proxy(fake) as url:
        target, found = features(url)
        support = found.support("tools")
        again = found.support("tools")
        target.close()
    assert (support.supported, support.source, support.failed) == (False, "probe", False)
    said = "got HTTP 400: invalid_request_error: tools: not supported"
    assert support.detail == "; ".join(
        f"a request with tool_choice {way} {said}" for way in ("any", "tool", "auto")
    )
    assert support.reason.startswith("tools not served (probe: ")
    assert again is support
    assert [post["tool_choice"]["type"] for post in fake.posts] == ["any", "tool", "auto"]


@pytest.mark.parametrize(("status", "failed"), [(500, True), (404, False), (422, False), (429, False)])
def test_a_tools_probe_that_is_neither_taken_nor_refused_fails(status, failed):
    fake = Fake(status=status, body={"error": {"message": "boom"}})
    with running_proxy(fake) as url:
        target, found = features(url)
        support = found.support("tools")
        target.close()
    assert support.failed is failed
    if failed:
        assert not support.supported
        assert support.evidence is not None  # TOOL-001 judges it on this exchange


def test_a_failed_probe_is_not_served_and_keeps_its_exchange():
    target, found = features("http://127.0.0.1:9")
    try:
        support = found.support("tools")
    finally:
        target.close()
    assert (support.supported, support.failed) == (False, True)
    assert "ConnectError" in support.detail
    assert support.evidence is not None


def test_the_mcp_connector_is_absent_unless_a_profile_declares_it():
    fake = Fake(capabilities=None)
    with running_proxy(fake) as url:
        target, found = features(url)
        support = found.support("mcp")
        target.close()
    assert (support.supported, support.source) == (False, "undeclared")
    assert fake.posts == []


@pytest.mark.parametrize(
    ("status", "served"),
    [(200, True), (401, True), (500, False), (400, False), (404, False), (405, False), (422, False)],
)
def test_the_files_api_is_probed_by_its_list(status, served):
    fake = Fake(files_status=status)
    with running_proxy(fake) as url:
        target, found = features(url)
        support = found.support("files")
        target.close()
    assert (support.supported, support.source) == (served, "probe")
    assert support.failed is (status == 500)  # neither served nor refused: FILES-001 judges it
    assert f"HTTP {status}" in support.detail
    [listed] = [headers for method, path, headers, _ in fake.seen if path == "/v1/files"]
    assert listed["anthropic-beta"] == "files-api-2025-04-14"
    assert fake.posts == []


def test_probes_are_neither_tagged_nor_kept_as_the_propertys_evidence():
    fake = Fake(status=400, body=REFUSAL)
    with running_proxy(fake) as url:
        target, found = features(url)
        target.recorder.reset("TOOL-001")
        target.request("GET", "/v1/models")  # the property's own request
        found.support("tools")
        exchanges, tag = list(target.recorder.exchanges), target.recorder.property_id
        target.close()
    assert tag == "TOOL-001"
    assert [e.method for e in exchanges] == ["GET"]
    tags = [headers.get(PROPERTY_HEADER) for method, _, headers, _ in fake.seen]
    assert tags[0] == "TOOL-001"
    assert len(tags) > 1  # the model routes, then each way to force a call
    assert set(tags[1:]) == {None}


def _message(*blocks: dict[str, Any]) -> bytes:
    return json.dumps({"type": "message", "content": list(blocks)}).encode()


SERVED = _message(
    {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_fetch",
        "input": {"url": "https://a.example"},
    },
    {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_1", "content": {}},
)


@pytest.mark.parametrize(
    ("status", "body", "supported", "failed"),
    [
        (200, SERVED, True, False),  # run: its result block
        (400, json.dumps(REFUSAL).encode(), False, False),  # refused: absent
        (200, _message({"type": "text", "text": "I fetched it."}), False, True),  # accepted, ignored
        (200, _message({"type": "tool_use", "id": "toolu_1", "name": "web_fetch", "input": {}}), False, True),
        (500, b'{"error": {"message": "boom"}}', False, True),  # the probe's own failure
        (404, b"", False, True),
    ],
)
def test_anthropic_tools_are_served_only_when_the_answer_shows_them_run(status, body, supported, failed):
    support = judge_probe("web_fetch", status, body, evidence={"response": {"status": status}})
    assert (support.supported, support.failed) == (supported, failed)
    assert support.evidence == {"response": {"status": status}}  # SRVTOOL-015 judges it
    if failed:
        assert support.reason.startswith("web_fetch not judged (probe: ")


def test_a_server_tool_call_cut_by_max_tokens_is_served_not_ignored():
    """A model that samples a long input runs out of max_tokens inside the call: the server took
    the tool for its own (server_tool_use) but could not run it yet."""
    call = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_fetch", "input": {}}
    cut = json.dumps({"type": "message", "content": [call], "stop_reason": "max_tokens"}).encode()
    support = judge_probe("web_fetch", 200, cut)
    assert (support.supported, support.failed) == (True, False)
    assert "cut by max_tokens" in support.detail
    ended = json.dumps({"type": "message", "content": [call], "stop_reason": "end_turn"}).encode()
    assert judge_probe("web_fetch", 200, ended).failed  # it ended without running it


def test_bash_is_shown_by_its_tool_use():
    call = _message({"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}})
    assert judge_probe("builtin_tools", 200, call).supported
    other = _message({"type": "tool_use", "id": "toolu_1", "name": "other", "input": {}})
    assert judge_probe("builtin_tools", 200, other).failed


def test_a_failed_server_tool_probe_is_not_served_and_keeps_its_exchange():
    target, found = features("http://127.0.0.1:9")
    try:
        support = found.support("web_search")
    finally:
        target.close()
    assert (support.supported, support.failed) == (False, True)
    assert "ConnectError" in support.detail
    assert support.evidence is not None
    assert support.evidence["transport_error"].startswith("ConnectError")
    assert target.recorder.exchanges == []  # apart: not the running property's


def test_what_workers_read_is_what_the_controller_found():
    fake = Fake(status=500, body={"error": "boom"})
    with running_proxy(fake) as url:
        target, found = features(url)
        found.detect(["web_fetch", "tools"])
        context = json.loads(json.dumps(found.as_context()))
        _, worker = features(url)
        worker.preset(context)
        target.close()
    assert worker.detected == found.detected
    assert "evidence" not in found.detected["web_fetch"].as_dict()  # index.json: the words only
