"""The faults of the CODE-* properties (part of faults.fault_catalogue): how servers and
gateways get code execution wrong: every sub-tool's result under the Python tool's block, a
`container` the gateway does not pass on (each request a new container), runs not counted in
usage, the 2026 versions' Python run without its state, uploads dropped on the way, and
`allowed_callers` dropped (the tool offered to the model, the code unable to call it)."""

from __future__ import annotations

from typing import Any

from .fault_proxy import Fault, Request
from .faults import JSONDict, drop_blocks, message_json, strip

__all__ = ["code_execution_fault_catalogue"]


def _python_blocks(_: Request, data: JSONDict) -> None:
    """bash and text editor results as code_execution_tool_result (the 20250522 tool's block)."""
    for block in data.get("content", []):
        if isinstance(block, dict) and block.get("type") in (
            "bash_code_execution_tool_result",
            "text_editor_code_execution_tool_result",
        ):
            block["type"] = "code_execution_tool_result"


def _runs_not_counted(_: Request, data: JSONDict) -> None:
    usage = data.get("usage")
    tools = usage.get("server_tool_use") if isinstance(usage, dict) else None
    if isinstance(tools, dict):
        tools.pop("code_execution_requests", None)


def _stateless_python(request: Request) -> Request:
    """The 2026 versions served as the 20250522 tool: each Python call a fresh interpreter."""
    body = request.json
    if not request.path.startswith("/v1/messages") or not isinstance(body, dict):
        return request
    tools = [
        {**tool, "type": "code_execution_20250522"}
        if isinstance(tool, dict)
        and tool.get("type") in ("code_execution_20260120", "code_execution_20260521")
        else tool
        for tool in body.get("tools") or []
    ]
    return request.with_json({**body, "tools": tools}) if tools else request


def _callers_dropped(request: Request) -> Request:
    """A gateway that knows no `allowed_callers`: every tool goes on as the model's alone."""
    body = request.json
    if not request.path.startswith("/v1/messages") or not isinstance(body, dict):
        return request
    tools = [
        {k: v for k, v in tool.items() if k != "allowed_callers"} if isinstance(tool, dict) else tool
        for tool in body.get("tools") or []
    ]
    return request.with_json({**body, "tools": tools}) if tools else request


def _is_upload(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "container_upload"


def code_execution_fault_catalogue() -> dict[str, Fault]:
    return {
        "CODE-001": Fault(
            "bash and editor results under the Python tool's block", response=message_json(_python_blocks)
        ),
        "CODE-002": Fault(
            "`container` not passed on (a new container each request)",
            request=strip("container", "/v1/messages"),
        ),
        "CODE-003": Fault("code runs not counted in usage", response=message_json(_runs_not_counted)),
        "CODE-004": Fault(
            "each Python call of a 2026 version in a fresh interpreter", request=_stateless_python
        ),
        "CODE-005": Fault("container_upload blocks dropped by the gateway", request=drop_blocks(_is_upload)),
        "CODE-006": Fault(
            "allowed_callers dropped by the gateway (code cannot call tools)", request=_callers_dropped
        ),
    }
