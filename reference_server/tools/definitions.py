"""The `tools` and `tool_choice` of a request, checked the way the real API reports them.

Custom tools are validated field by field with the API's path-style messages
(`tools.3.custom.input_examples: Extra inputs are not permitted`); Anthropic-defined client
tools (bash, text editor, memory) get their fixed names and documented input schemas
(tools/builtin.py); server tools are those this server runs (tool search, web fetch) or a 400
naming the type (server_tools/definitions.py). Tools with `defer_loading` stay out of the
prompt and out of reach until a tool search finds them. `tool_choice` must fit the tools, and
may not force tool use while thinking is on.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from reference_server.engine.base import ToolSpec
from reference_server.errors import InvalidRequestError
from reference_server.protocol import CacheControlEphemeralParam, PromptParams
from reference_server.server_tools.definitions import (
    REFUSED_TOOL_TYPES,
    SERVED_TOOL_TYPES,
    CodeExecutionConfig,
    ServerToolConfig,
    check_toolset,
    checked_param,
    server_tools,
)
from reference_server.tools.builtin import CLIENT_TOOL_TYPES, COMPUTER_TYPES, builtin_client_tool
from reference_server.tools.programmatic import DIRECT, allowed_callers, code_description, code_versions

__all__ = ["ToolDefinition", "ToolPolicy", "check_unique", "parse_tools", "prompt_tools", "tool_policy"]

Caller = Literal["direct", "code_execution_20250825", "code_execution_20260120", "code_execution_20260521"]


class CustomToolParam(BaseModel):
    """A custom (client) tool, as SDK 2.14's `ToolParam`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["custom"] | None = None
    name: Annotated[StrictStr, Field(pattern=r"^[a-zA-Z0-9_-]{1,128}$")]
    description: StrictStr | None = None
    input_schema: dict[str, Any]
    cache_control: CacheControlEphemeralParam | None = None
    strict: StrictBool | None = None
    input_examples: list[dict[str, Any]] | None = None
    eager_input_streaming: StrictBool | None = None
    defer_loading: StrictBool | None = None
    allowed_callers: list[Caller] | None = None


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A validated tool: custom, Anthropic-defined for the client to run, or run by this server
    (`server` holds its settings)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    strict: bool
    deferred: bool = False  # defer_loading: not in the prompt until a tool search finds it
    server: ServerToolConfig | None = None
    images: bool = False  # its results are screenshots: computer use needs a vision model

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema)


def parse_tools(tools: Sequence[dict[str, Any]] | None) -> tuple[ToolDefinition, ...]:
    """The request's tools, or the first problem as a 400 with the API's path."""
    parsed: list[ToolDefinition] = []
    callers: dict[str, tuple[frozenset[str], str]] = {}  # custom tools code may call: name -> (callers, path)
    for index, raw in enumerate(tools or ()):
        kind = raw.get("type")
        path = f"tools.{index}"
        custom = kind in (None, "custom")
        allowed = allowed_callers(raw, f"{path}.custom" if custom else path, custom=custom)
        if kind in CLIENT_TOOL_TYPES:
            name, description, schema, deferred = builtin_client_tool(raw, path)
            parsed.append(
                ToolDefinition(name, description, schema, True, deferred, images=kind in COMPUTER_TYPES)
            )
        elif kind == "mcp_toolset":
            check_toolset(raw, path)  # offers an MCP server's tools (server_tools/mcp.py): no tool
        elif kind in SERVED_TOOL_TYPES or kind in REFUSED_TOOL_TYPES:
            parsed += [
                ToolDefinition(
                    served.name, served.description, served.input_schema, True, served.deferred, served.config
                )
                for served in server_tools(raw, path)
            ]
        elif kind not in (None, "custom"):
            raise InvalidRequestError(f"{path}.type: unknown tool type {kind!r}")
        else:
            parsed.append(_custom_tool(raw, f"{path}.custom"))
            if allowed != {DIRECT}:
                callers[parsed[-1].name] = (allowed, f"{path}.custom.allowed_callers")
    check_unique(parsed, tools or ())
    parsed = _programmatic(parsed, callers)
    _check_deferral(parsed)
    return tuple(parsed)


def _programmatic(
    parsed: list[ToolDefinition], callers: Mapping[str, tuple[frozenset[str], str]]
) -> list[ToolDefinition]:
    """The tools with programmatic tool calling applied (tools/programmatic.py): each code
    execution version's sub-tools know the tools its code may call (its Python's description
    lists them), and a tool only code may call is not offered to the model."""
    if not callers:
        return parsed
    versions = {tool.server.version for tool in parsed if isinstance(tool.server, CodeExecutionConfig)}
    callable_by: dict[str, list[ToolSpec]] = {}
    for tool in parsed:
        if tool.name in callers:
            allowed, path = callers[tool.name]
            for version in code_versions(allowed, versions, path):
                callable_by.setdefault(version, []).append(tool.spec())
    kept: list[ToolDefinition] = []
    for tool in parsed:
        if tool.name in callers and DIRECT not in callers[tool.name][0]:
            continue
        config = tool.server
        if isinstance(config, CodeExecutionConfig) and config.version in callable_by:
            specs = tuple(callable_by[config.version])
            described = code_description(tool.description, specs) if tool.name == "code_execution" else None
            tool = replace(
                tool, description=described or tool.description, server=replace(config, callable=specs)
            )
        kept.append(tool)
    return kept


def check_unique(parsed: Sequence[ToolDefinition], raw: Sequence[dict[str, Any]] = ()) -> None:
    """Tool names are unique (an MCP server's tools included)."""
    seen: set[str] = set()
    kinds = [tool.get("type") for tool in raw if tool.get("type") != "mcp_toolset"]
    for index, tool in enumerate(parsed):
        if tool.name in seen:
            where = "custom.name" if index < len(kinds) and kinds[index] in (None, "custom") else "name"
            raise InvalidRequestError(f"tools.{index}.{where}: tool names must be unique ({tool.name!r})")
        seen.add(tool.name)


def prompt_tools(tools: Sequence[ToolDefinition]) -> tuple[ToolSpec, ...]:
    """The tools the prompt lists: all but deferred ones (a tool search's result shows those)."""
    return tuple(tool.spec() for tool in tools if not tool.deferred)


def _check_deferral(tools: Sequence[ToolDefinition]) -> None:
    """Something must stay loaded. (A deferred tool needs no server tool search: a client may
    search itself and answer with `tool_reference` blocks in a tool_result, as Claude Code does.)"""
    if tools and all(tool.deferred for tool in tools):
        raise InvalidRequestError("tools: all tools have defer_loading set; at least one tool must be loaded")


def _custom_tool(raw: dict[str, Any], path: str) -> ToolDefinition:
    tool = checked_param(CustomToolParam, raw, path)
    schema = tool.input_schema
    if schema.get("type") != "object":
        raise InvalidRequestError(f"{path}.input_schema.type: Input should be 'object'")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = ".".join(str(part) for part in exc.absolute_path)
        raise InvalidRequestError(
            f"{path}.input_schema{'.' + where if where else ''}: not a valid JSON Schema: {exc.message}"
        ) from None
    return ToolDefinition(
        tool.name, tool.description or "", schema, bool(tool.strict), bool(tool.defer_loading)
    )


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """How the model may use the tools in this turn (from `tool_choice`, default auto)."""

    mode: Literal["auto", "any", "tool", "none"]
    tools: tuple[ToolDefinition, ...]  # the tools it may call (one for mode "tool")
    parallel: bool  # more than one call allowed

    @property
    def may_call(self) -> bool:
        return self.mode != "none" and bool(self.tools)


def tool_policy(
    params: PromptParams, tools: tuple[ToolDefinition, ...], loaded: Collection[str] = ()
) -> ToolPolicy:
    """Check `tool_choice` against the tools and thinking; the policy it sets. Deferred tools
    are callable only once `loaded` (found by a tool search earlier in the conversation)."""
    choice = params.tool_choice
    mode = choice.type if choice is not None else "auto"
    thinking = params.thinking is not None and params.thinking.type != "disabled"
    if mode in ("any", "tool") and thinking:
        raise InvalidRequestError("Thinking may not be enabled when tool_choice forces tool use.")
    if mode in ("any", "tool") and not tools:
        raise InvalidRequestError(f"tool_choice: tool_choice type {mode!r} requires tools to be provided")
    parallel = not bool(getattr(choice, "disable_parallel_tool_use", None))
    allowed = tuple(tool for tool in tools if not tool.deferred or tool.name in loaded)
    if choice is not None and choice.type == "tool":
        allowed = tuple(tool for tool in allowed if tool.name == choice.name)
        if not allowed and any(tool.name == choice.name for tool in tools):
            raise InvalidRequestError(
                f"tool_choice.name: tool {choice.name!r} has defer_loading set and no tool search has"
                " found it"
            )
        if not allowed:
            raise InvalidRequestError(
                f"tool_choice.name: tool {choice.name!r} is not one of the provided tools"
            )
    return ToolPolicy(mode, allowed, parallel)
