"""The `tools` and `tool_choice` of a request, checked the way the real API reports them.

Custom tools are validated field by field with the API's path-style messages
(`tools.3.custom.input_examples: Extra inputs are not permitted`); server and built-in tools
(web search, code execution, bash, text editor, memory, tool search, computer) run on
Anthropic's side and are refused with a 400 that names the type; `tool_choice` must fit the
tools, and may not force tool use while thinking is on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from reference_server.engine.base import ToolSpec
from reference_server.errors import InvalidRequestError
from reference_server.protocol import CacheControlEphemeralParam, PromptParams

__all__ = ["SERVER_TOOL_TYPES", "ToolDefinition", "ToolPolicy", "parse_tools", "tool_policy"]

# Tool types that run on Anthropic's infrastructure (messages-api.md §2.6), GA and beta.
SERVER_TOOL_TYPES = frozenset(
    {
        "bash_20241022",
        "bash_20250124",
        "code_execution_20250522",
        "code_execution_20250825",
        "code_execution_20260120",
        "code_execution_20260521",
        "computer_20241022",
        "computer_20250124",
        "computer_20251124",
        "memory_20250818",
        "text_editor_20241022",
        "text_editor_20250124",
        "text_editor_20250429",
        "text_editor_20250728",
        "web_search_20250305",
        "web_search_20260209",
        "web_search_20260318",
        "web_fetch_20250910",
        "web_fetch_20260209",
        "web_fetch_20260309",
        "web_fetch_20260318",
        "tool_search_tool_bm25",
        "tool_search_tool_bm25_20251119",
        "tool_search_tool_regex",
        "tool_search_tool_regex_20251119",
        "advisor_20260301",
        "mcp_toolset",
    }
)

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
    """A validated custom tool."""

    name: str
    description: str
    input_schema: dict[str, Any]
    strict: bool

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema)


def parse_tools(tools: Sequence[dict[str, Any]] | None) -> tuple[ToolDefinition, ...]:
    """The request's tools, or the first problem as a 400 with the API's path."""
    parsed: list[ToolDefinition] = []
    for index, raw in enumerate(tools or ()):
        kind = raw.get("type")
        if kind in SERVER_TOOL_TYPES:
            raise InvalidRequestError(
                f"tools.{index}: tool type {kind!r} is a server tool that runs on Anthropic's side; this "
                "server runs custom tools only (no `type`, or type 'custom')"
            )
        if kind not in (None, "custom"):
            raise InvalidRequestError(f"tools.{index}.type: unknown tool type {kind!r}")
        parsed.append(_custom_tool(raw, f"tools.{index}.custom"))
    seen: set[str] = set()
    for index, tool in enumerate(parsed):
        if tool.name in seen:
            raise InvalidRequestError(f"tools.{index}.custom.name: tool names must be unique ({tool.name!r})")
        seen.add(tool.name)
    return tuple(parsed)


def _custom_tool(raw: dict[str, Any], path: str) -> ToolDefinition:
    try:
        tool = CustomToolParam.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidRequestError(f"{path}.{where}: {first['msg']}") from None
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
    return ToolDefinition(tool.name, tool.description or "", schema, bool(tool.strict))


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """How the model may use the tools in this turn (from `tool_choice`, default auto)."""

    mode: Literal["auto", "any", "tool", "none"]
    tools: tuple[ToolDefinition, ...]  # the tools it may call (one for mode "tool")
    parallel: bool  # more than one call allowed

    @property
    def may_call(self) -> bool:
        return self.mode != "none" and bool(self.tools)


def tool_policy(params: PromptParams, tools: tuple[ToolDefinition, ...]) -> ToolPolicy:
    """Check `tool_choice` against the tools and thinking; the policy it sets."""
    choice = params.tool_choice
    mode = choice.type if choice is not None else "auto"
    thinking = params.thinking is not None and params.thinking.type != "disabled"
    if mode in ("any", "tool") and thinking:
        raise InvalidRequestError("Thinking may not be enabled when tool_choice forces tool use.")
    if mode in ("any", "tool") and not tools:
        raise InvalidRequestError(f"tool_choice: tool_choice type {mode!r} requires tools to be provided")
    parallel = not bool(getattr(choice, "disable_parallel_tool_use", None))
    allowed = tools
    if choice is not None and choice.type == "tool":
        allowed = tuple(tool for tool in tools if tool.name == choice.name)
        if not allowed:
            raise InvalidRequestError(
                f"tool_choice.name: tool {choice.name!r} is not one of the provided tools"
            )
    return ToolPolicy(mode, allowed, parallel)
