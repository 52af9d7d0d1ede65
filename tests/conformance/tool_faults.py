"""The faults of the TOOL-* and STRUCT-* properties (part of faults.fault_catalogue): how real
servers and translators get tool use and structured outputs wrong (peers.md §4.3 #14-#26,
§4.10 #62, and the OpenAI-shaped habits of translators)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

from .fault_proxy import Fault, Frame, Request
from .faults import JSONDict, edit_payloads, error, message_json, replace_stop

__all__ = ["tool_fault_catalogue"]


def _calls(data: JSONDict) -> list[JSONDict]:
    return [b for b in data.get("content", []) if isinstance(b, dict) and b.get("type") == "tool_use"]


def _request_tools(request: Request) -> list[JSONDict]:
    body = request.json if isinstance(request.json, dict) else {}
    tools = body.get("tools")
    return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []


def _choice(request: Request) -> JSONDict:
    body = request.json if isinstance(request.json, dict) else {}
    choice = body.get("tool_choice")
    return choice if isinstance(choice, dict) else {}


def _each_call(change: Callable[[Request, JSONDict], None]) -> Callable[[Request, JSONDict], None]:
    def apply(request: Request, data: JSONDict) -> None:
        for call in _calls(data):
            change(request, call)

    return apply


def _openai_call_id(event: JSONDict) -> None:
    block = event.get("content_block")
    if isinstance(block, dict) and block.get("type") == "tool_use":
        block["id"] = "call_" + str(block.get("id", ""))[-8:]


def _drop_calls(_: Request, data: JSONDict) -> None:
    """A translator that loses the tool calls: text only, end_turn."""
    if not _calls(data):
        return
    data["content"] = [b for b in data["content"] if b not in _calls(data)] or [
        {"type": "text", "text": "I will record it.", "citations": None}
    ]
    data["stop_reason"] = "end_turn"


def _first_tool(request: Request, call: JSONDict) -> None:
    tools = _request_tools(request)
    if tools:
        call["name"] = tools[0].get("name")


def _counter_ids(_: Request, data: JSONDict) -> None:
    for n, call in enumerate(_calls(data)):
        call["id"] = f"toolu_{n}"


def _call_despite_none(request: Request, data: JSONDict) -> None:
    tools = _request_tools(request)
    if _choice(request).get("type") == "none" and tools:
        call = {"type": "tool_use", "id": "toolu_fault1", "name": tools[0].get("name"), "input": {}}
        data["content"] = [{**call, "caller": {"type": "direct"}}]
        data["stop_reason"] = "tool_use"


def _repeat_call(request: Request, data: JSONDict) -> None:
    calls = _calls(data)
    if calls and _choice(request).get("disable_parallel_tool_use"):
        data["content"].append({**calls[0], "id": f"{calls[0].get('id')}x"})


def _wrap_text(before: str, after: str) -> Callable[[Request, JSONDict], None]:
    def change(_: Request, data: JSONDict) -> None:
        for block in data.get("content", []):
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                block["text"] = before + block["text"] + after

    return change


def _tool_indices(frames: list[Frame]) -> set[int]:
    found = set()
    for frame in frames:
        payload = frame.payload
        if isinstance(payload, dict) and payload.get("type") == "content_block_start":
            block = payload.get("content_block")
            if isinstance(block, dict) and block.get("type") == "tool_use":
                found.add(payload.get("index"))
    return found


def _is_json_delta(payload: Any) -> bool:
    return (
        isinstance(payload, dict)
        and payload.get("type") == "content_block_delta"
        and isinstance(payload.get("delta"), dict)
        and payload["delta"].get("type") == "input_json_delta"
    )


def _fragments_twice(_: Request, frames: list[Frame]) -> list[Frame]:
    """Each input_json_delta sent twice: the fragments join into two JSON values."""
    out: list[Frame] = []
    for frame in frames:
        out.append(frame)
        if _is_json_delta(frame.payload):
            out.append(frame)
    return out


def _no_json_deltas(_: Request, frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if not _is_json_delta(f.payload)]


def _input_in_start(_: Request, frames: list[Frame]) -> list[Frame]:
    """The whole input put in content_block_start, and no input_json_delta."""
    joined: dict[int, str] = {}
    for frame in frames:
        if _is_json_delta(frame.payload):
            index = frame.payload["index"]
            joined[index] = joined.get(index, "") + frame.payload["delta"].get("partial_json", "")
    out: list[Frame] = []
    for frame in frames:
        payload = frame.payload
        if _is_json_delta(payload):
            continue
        if isinstance(payload, dict) and payload.get("index") in _tool_indices([frame]):
            with contextlib.suppress(ValueError):
                payload["content_block"]["input"] = json.loads(joined.get(payload["index"]) or "{}")
            frame = Frame(frame.name, json.dumps(payload))
        out.append(frame)
    return out


def _tool_stops_at_end(_: Request, frames: list[Frame]) -> list[Frame]:
    """Tool blocks left open and all stopped after message_delta (OGX)."""
    tools = _tool_indices(frames)

    def is_tool_stop(frame: Frame) -> bool:
        payload = frame.payload
        return (
            isinstance(payload, dict)
            and payload.get("type") == "content_block_stop"
            and payload.get("index") in tools
        )

    stops = [f for f in frames if is_tool_stop(f)]
    rest = [f for f in frames if not is_tool_stop(f)]
    end = next((i for i, f in enumerate(rest) if f.name == "message_stop"), len(rest))
    return [*rest[:end], *stops, *rest[end:]]


def _stop_in_stream(old: str, new: str) -> Callable[[JSONDict], None]:
    def change(payload: JSONDict) -> None:
        if payload["delta"].get("stop_reason") == old:
            payload["delta"]["stop_reason"] = new

    return change


def _strip_count_tools(request: Request) -> Request:
    data = request.json
    if request.path.startswith("/v1/messages/count_tokens") and isinstance(data, dict) and "tools" in data:
        return request.with_json({k: v for k, v in data.items() if k != "tools"})
    return request


def _has_tool_result(body: Any) -> bool:
    return '"tool_result"' in json.dumps(body)


def tool_fault_catalogue() -> dict[str, Fault]:
    extra_key = _each_call(lambda r, call: call["input"].update(plumbline_extra=True))
    return {
        "TOOL-001": Fault(
            "tool calls dropped, text returned (translator)", response=message_json(_drop_calls)
        ),
        "TOOL-002": Fault(
            "tool_choice name ignored: the first tool called", response=message_json(_each_call(_first_tool))
        ),
        "TOOL-003": Fault(
            "tool calls end with end_turn (LiteLLM #34692, pgEdge #217)",
            response=message_json(replace_stop("tool_use", "end_turn")),
            frames=edit_payloads("message_delta", _stop_in_stream("tool_use", "end_turn")),
        ),
        "TOOL-004": Fault(
            "input as a JSON string (OpenAI arguments)",
            response=message_json(_each_call(lambda r, call: call.update(input=json.dumps(call["input"])))),
        ),
        "TOOL-005": Fault(
            "strict tool input without its properties",
            response=message_json(_each_call(lambda r, call: call.update(input={}))),
        ),
        "TOOL-006": Fault("an undeclared key in the tool input", response=message_json(extra_key)),
        "TOOL-007": Fault(
            "ids from a per-message counter (toolu_0 every turn)", response=message_json(_counter_ids)
        ),
        "TOOL-008": Fault(
            "tool_result blocks crash the server (llama.cpp early build)",
            request=lambda r: (
                error(500, "api_error", "unsupported content[].type") if _has_tool_result(r.json) else r
            ),
        ),
        "TOOL-009": Fault("tool_choice none ignored (llama.cpp)", response=message_json(_call_despite_none)),
        "TOOL-010": Fault("disable_parallel_tool_use ignored", response=message_json(_repeat_call)),
        "TOOL-011": Fault("input fragments sent twice ({…}{…}, archestra #5409)", frames=_fragments_twice),
        "TOOL-012": Fault("streamed tool input lost: {} (LiteLLM #25561)", frames=_no_json_deltas),
        "TOOL-013": Fault("whole input in content_block_start (AntSeed PR #15)", frames=_input_in_start),
        "TOOL-014": Fault("count_tokens ignores tools (CLIProxyAPI #679)", request=_strip_count_tools),
        "TOOL-015": Fault("an undeclared key in the tool input", response=message_json(extra_key)),
        "TOOL-016": Fault("tool blocks stopped after message_delta (OGX)", frames=_tool_stops_at_end),
        "TOOL-017": Fault(
            "OpenAI call ids (call_…) kept in translation",
            response=message_json(_each_call(lambda r, call: call.update(id="call_" + call["id"][-8:]))),
            frames=edit_payloads("content_block_start", _openai_call_id),
        ),
        "TOOL-018": Fault(
            "tools with eager_input_streaming refused (a proxy's narrow schema)",
            request=lambda r: (
                error(
                    400,
                    "invalid_request_error",
                    "tools.0.custom.eager_input_streaming: Extra inputs are not permitted",
                )
                if r.path.startswith("/v1/messages")
                and any("eager_input_streaming" in t for t in _request_tools(r))
                else r
            ),
        ),
        "STRUCT-001": Fault(
            "JSON in a markdown fence", response=message_json(_wrap_text("```json\n", "\n```"))
        ),
        "STRUCT-002": Fault(
            "prose before the JSON (prompted JSON)", response=message_json(_wrap_text("Here it is: ", ""))
        ),
        "STRUCT-003": Fault(
            "text after the JSON", response=message_json(_wrap_text("", "\nHope this helps!"))
        ),
    }
