"""The faults of the SRVTOOL-* properties (part of faults.fault_catalogue): how servers and
translators get Anthropic's own tools wrong: client-tool ids on server calls, searches that
return every tool, deferred tools counted, undocumented error codes, usage left at 0, server
call input sent whole, private pages fetched, a tool's type used as its name, the redaction test
string ignored, paused turns refused when sent back, a fetched page's citations counted
from 1, and a server tool taken as a schemaless client tool."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .fault_proxy import Fault, Frame, Request, Response
from .faults import JSONDict, edit_payloads, error, message_json

__all__ = ["as_client_tool", "server_tool_fault_catalogue"]


def _blocks(data: JSONDict, *kinds: str) -> list[JSONDict]:
    return [b for b in data.get("content", []) if isinstance(b, dict) and b.get("type") in kinds]


def _client_ids(_: Request, data: JSONDict) -> None:
    """Server calls under toolu_ ids, their results paired to them (a translator's ids)."""
    for block in data.get("content", []):
        if not isinstance(block, dict):
            continue
        for key in ("id", "tool_use_id"):
            if str(block.get(key, "")).startswith("srvtoolu_"):
                block[key] = "toolu_" + block[key].removeprefix("srvtoolu_")


def _every_tool_found(request: Request, data: JSONDict) -> None:
    body = request.json if isinstance(request.json, dict) else {}
    names = [
        t["name"] for t in body.get("tools", []) if isinstance(t, dict) and isinstance(t.get("name"), str)
    ]
    for result in _blocks(data, "tool_search_tool_result"):
        content = result.get("content")
        if isinstance(content, dict) and isinstance(content.get("tool_references"), list):
            content["tool_references"] = [{"type": "tool_reference", "tool_name": name} for name in names]


def _count_deferred(request: Request) -> Request:
    """count_tokens forwarded without defer_loading: every tool is counted."""
    body = request.json
    if request.path.startswith("/v1/messages/count_tokens") and isinstance(body, dict):
        tools = [{k: v for k, v in t.items() if k != "defer_loading"} for t in body.get("tools", [])]
        return request.with_json({**body, "tools": tools})
    return request


def _fetch_error_code(_: Request, data: JSONDict) -> None:
    for result in _blocks(data, "web_fetch_tool_result"):
        content = result.get("content")
        if isinstance(content, dict) and content.get("type") == "web_fetch_tool_result_error":
            content["error_code"] = "fetch_failed"


def _no_fetch_count(usage: Any, key: str = "web_fetch_requests") -> None:
    if isinstance(usage, dict) and isinstance(usage.get("server_tool_use"), dict):
        usage["server_tool_use"][key] = 0


def _server_input_whole(_: Request, frames: list[Frame]) -> list[Frame]:
    """server_tool_use input whole in content_block_start, and no input_json_delta for it."""
    calls: set[int] = set()
    out = []
    for frame in frames:
        payload = frame.payload
        if isinstance(payload, dict) and payload.get("type") == "content_block_start":
            block = payload.get("content_block")
            if isinstance(block, dict) and block.get("type") == "server_tool_use":
                calls.add(payload.get("index", -1))
                block["input"] = {"query": "tide"}
                frame = Frame.of(payload)
        elif (
            isinstance(payload, dict)
            and payload.get("type") == "content_block_delta"
            and payload.get("index") in calls
        ):
            continue
        out.append(frame)
    return out


def _private_page_fetched(_: Request, data: JSONDict) -> None:
    """A fetch with no address check: the loopback page's text comes back."""
    for result in _blocks(data, "web_fetch_tool_result"):
        result["content"] = {
            "type": "web_fetch_result",
            "url": "http://127.0.0.1/internal/secret",
            "retrieved_at": "2026-01-01T00:00:00Z",
            "content": {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "internal"},
                "title": None,
            },
        }


def _type_as_name(request: Request, data: JSONDict) -> None:
    body = request.json if isinstance(request.json, dict) else {}
    by_name = {t.get("name"): t.get("type") for t in body.get("tools", []) if isinstance(t, dict)}
    for call in _blocks(data, "tool_use"):
        if isinstance(by_name.get(call.get("name")), str):
            call["name"] = by_name[call["name"]]


def _plain_thinking(_: Request, data: JSONDict) -> None:
    for block in _blocks(data, "redacted_thinking"):
        signature = block.pop("data", "")
        block.update(type="thinking", thinking="", signature=signature)


def _refuse_resumed(request: Request) -> Request | Response:
    body = request.json
    messages = body.get("messages") if isinstance(body, dict) else None
    last = messages[-1] if isinstance(messages, list) and messages else None
    content = last.get("content") if isinstance(last, dict) and last.get("role") == "assistant" else None
    if isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "server_tool_use" for b in content
    ):
        return error(400, "invalid_request_error", "messages: server_tool_use blocks are not supported")
    return request


def _filters_ignored(_: Request, data: JSONDict) -> None:
    """Domain filters not applied: the fetch is tried, and the reserved domain does not resolve."""
    for result in _blocks(data, "web_fetch_tool_result"):
        content = result.get("content")
        if isinstance(content, dict) and content.get("error_code") == "url_not_allowed":
            content["error_code"] = "url_not_accessible"


def _mcp_as_client_calls(_: Request, data: JSONDict) -> None:
    """A translator that passes MCP calls on as client tool calls, results dropped."""
    data["content"] = [
        b for b in data.get("content", []) if not (isinstance(b, dict) and b.get("type") == "mcp_tool_result")
    ]
    for block in _blocks(data, "mcp_tool_use"):
        block.pop("server_name", None)
        block["type"] = "tool_use"
    data["stop_reason"] = "tool_use"


def _one_based(citation: Any) -> None:
    """Character indexes counted from 1 (a translator's off-by-one)."""
    if isinstance(citation, dict) and citation.get("type") == "char_location":
        for key in ("start_char_index", "end_char_index"):
            if isinstance(citation.get(key), int):
                citation[key] += 1


def _one_based_citations(_: Request, data: JSONDict) -> None:
    for block in _blocks(data, "text"):
        for citation in block.get("citations") or ():
            _one_based(citation)


def _one_based_delta(payload: JSONDict) -> None:
    delta = payload.get("delta")
    if isinstance(delta, dict) and delta.get("type") == "citations_delta":
        _one_based(delta.get("citation"))


def as_client_tool(prefix: str) -> Callable[[Request], Request]:
    """llama-server: a tool whose type starts with `prefix` taken as a schemaless client tool
    under its name, so a forced call of it is a tool_use the client cannot run."""

    def rewrite(request: Request) -> Request:
        body = request.json
        tools = body.get("tools") if isinstance(body, dict) else None
        if not isinstance(tools, list):
            return request
        body["tools"] = [
            {"name": t.get("name"), "input_schema": {"type": "object"}}
            if isinstance(t, dict) and str(t.get("type", "")).startswith(prefix)
            else t
            for t in tools
        ]
        return request.with_json(body)

    return rewrite


def _old_computer_actions(_: Request, data: JSONDict) -> None:
    """Computer calls in another agent's words: `click` at a point past the display's edge."""
    for block in data.get("content", []):
        if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") == "computer":
            block["input"] = {"action": "click", "coordinate": [4096, 4096]}


def server_tool_fault_catalogue() -> dict[str, Fault]:
    return {
        "SRVTOOL-001": Fault(
            "server tool calls under client ids (toolu_…)", response=message_json(_client_ids)
        ),
        "SRVTOOL-002": Fault(
            "a tool search that returns every tool", response=message_json(_every_tool_found)
        ),
        "SRVTOOL-003": Fault("defer_loading ignored by count_tokens", request=_count_deferred),
        "SRVTOOL-004": Fault(
            "an undocumented web fetch error code", response=message_json(_fetch_error_code)
        ),
        "SRVTOOL-005": Fault(
            "usage.server_tool_use left at 0",
            response=message_json(lambda r, d: _no_fetch_count(d.get("usage"))),
            frames=edit_payloads("message_delta", lambda p: _no_fetch_count(p.get("usage"))),
        ),
        "SRVTOOL-006": Fault(
            "server_tool_use input whole at its start, no deltas", frames=_server_input_whole
        ),
        "SRVTOOL-007": Fault("web fetch with no address check", response=message_json(_private_page_fetched)),
        "SRVTOOL-008": Fault(
            "the tool's type as its name (bash_20250124)", response=message_json(_type_as_name)
        ),
        "SRVTOOL-016": Fault(
            "computer calls as `click` off the display", response=message_json(_old_computer_actions)
        ),
        "SRVTOOL-009": Fault("the redaction test string ignored", response=message_json(_plain_thinking)),
        "SRVTOOL-010": Fault("a paused turn sent back is refused", request=_refuse_resumed),
        "SRVTOOL-013": Fault(
            "web searches not counted in usage",
            response=message_json(lambda r, d: _no_fetch_count(d.get("usage"), "web_search_requests")),
        ),
        "SRVTOOL-012": Fault("web fetch domain filters ignored", response=message_json(_filters_ignored)),
        "SRVTOOL-011": Fault(
            "MCP calls passed on as client tool calls", response=message_json(_mcp_as_client_calls)
        ),
        "SRVTOOL-014": Fault(
            "a fetched page's character indexes counted from 1",
            response=message_json(_one_based_citations),
            frames=edit_payloads("content_block_delta", _one_based_delta),
        ),
        "SRVTOOL-015": Fault(
            "web search taken as a schemaless client tool", request=as_client_tool("web_search_")
        ),
    }
