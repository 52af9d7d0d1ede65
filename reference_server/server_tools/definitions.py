"""Server tools in a request's `tools`: the ones this server runs itself (tool search, web
fetch, web search when a provider is configured, code execution when the server runs it in a
sandbox) checked field by field, and the ones it does not run refused with a 400 naming them.

The advisor needs another model and the first computer use version is not served: each is
refused (computer use's 20250124 and 20251124 versions are client tools: tools/builtin.py). A
code execution tool is several tools to the model (bash and the text editor from 20250825,
Python from 20250522 and again from 20260120).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from reference_server.engine.base import ToolSpec
from reference_server.errors import InvalidRequestError
from reference_server.protocol import CacheControlEphemeralParam

__all__ = [
    "CODE_EXECUTION_TYPES",
    "NO_SEARCH_PROVIDER",
    "REFUSED_TOOL_TYPES",
    "SERVED_TOOL_TYPES",
    "STATEFUL_CODE_TYPES",
    "CodeExecutionConfig",
    "McpToolConfig",
    "ServedTool",
    "ServerToolConfig",
    "SourceRule",
    "ToolConfigParam",
    "ToolSearchConfig",
    "ToolsetParam",
    "WebFetchConfig",
    "WebSearchConfig",
    "check_toolset",
    "checked_param",
    "server_tool",
    "server_tools",
]

SearchKind = Literal["regex", "bm25"]
_T = TypeVar("_T", bound=BaseModel)

# type → the fixed name (messages-api.md §2.6)
_SEARCH_TYPES: dict[str, SearchKind] = {
    "tool_search_tool_regex": "regex",
    "tool_search_tool_regex_20251119": "regex",
    "tool_search_tool_bm25": "bm25",
    "tool_search_tool_bm25_20251119": "bm25",
}
_FETCH_TYPES = frozenset(
    {"web_fetch_20250910", "web_fetch_20260209", "web_fetch_20260309", "web_fetch_20260318"}
)

_SEARCH_WEB_TYPES = frozenset({"web_search_20250305", "web_search_20260209", "web_search_20260318"})
# type -> the sub-tools the model calls (what each version offers: messages-api.md §2.6)
CODE_EXECUTION_TYPES: dict[str, tuple[str, ...]] = {
    "code_execution_20250522": ("code_execution",),
    "code_execution_20250825": ("bash_code_execution", "text_editor_code_execution"),
    "code_execution_20260120": ("bash_code_execution", "text_editor_code_execution", "code_execution"),
    "code_execution_20260521": ("bash_code_execution", "text_editor_code_execution", "code_execution"),
}
# The versions whose Python keeps its names from one call to the next in a container.
STATEFUL_CODE_TYPES = frozenset({"code_execution_20260120", "code_execution_20260521"})
SERVED_TOOL_TYPES = (
    frozenset(_SEARCH_TYPES) | _FETCH_TYPES | _SEARCH_WEB_TYPES | frozenset(CODE_EXECUTION_TYPES)
)
# Web search runs only with a provider (--web-search-index); serving refuses it otherwise.
NO_SEARCH_PROVIDER = (
    "no web search provider is configured (start the server with --web-search-index DIR;"
    " capabilities.server_tools.web_search is false)"
)

# Server tools this server does not run, and why (the 400 says it).
REFUSED_TOOL_TYPES: dict[str, str] = {
    "computer_20241022": "computer use is served in its 20250124 and 20251124 versions",
    "advisor_20260301": "the advisor tool needs a second model this server does not serve",
}

Caller = Literal["direct", "code_execution_20250825", "code_execution_20260120", "code_execution_20260521"]


class _ServerToolParam(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: StrictStr
    name: StrictStr
    cache_control: CacheControlEphemeralParam | None = None
    allowed_callers: list[Caller] | None = None
    defer_loading: StrictBool | None = None
    strict: StrictBool | None = None


class _Citations(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: StrictBool | None = None


class _SourceToolParam(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["tool_reference"]
    name: StrictStr


class _SourceParam(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["all", "none", "only", "except"]
    tools: list[_SourceToolParam] | None = None


class _UserSourceParam(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["all", "none"]


class _URLSourcesParam(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    user_input: _UserSourceParam | None = None
    client_tool_results: _SourceParam | None = None
    server_tool_results: _SourceParam | None = None


class _WebFetchParam(_ServerToolParam):
    allowed_domains: list[StrictStr] | None = None
    blocked_domains: list[StrictStr] | None = None
    citations: _Citations | None = None
    max_content_tokens: Annotated[int, Field(gt=0)] | None = None
    max_uses: Annotated[int, Field(gt=0)] | None = None
    use_cache: StrictBool | None = None  # web_fetch_20260309 and later
    response_inclusion: Literal["full", "excluded"] | None = None  # web_fetch_20260318
    url_sources: _URLSourcesParam | None = None  # where a fetched URL may come from (SDK 2.14)


class _UserLocation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["approximate"]
    city: Annotated[StrictStr, Field(min_length=1, max_length=255)] | None = None
    region: Annotated[StrictStr, Field(min_length=1, max_length=255)] | None = None
    country: Annotated[StrictStr, Field(min_length=2, max_length=2)] | None = None
    timezone: Annotated[StrictStr, Field(min_length=1, max_length=255)] | None = None


class _WebSearchParam(_ServerToolParam):
    allowed_domains: list[StrictStr] | None = None
    blocked_domains: list[StrictStr] | None = None
    max_uses: Annotated[int, Field(gt=0)] | None = None
    user_location: _UserLocation | None = None
    response_inclusion: Literal["full", "excluded"] | None = None  # web_search_20260318


@dataclass(frozen=True, slots=True)
class WebSearchConfig:
    allowed_domains: tuple[str, ...] | None
    blocked_domains: tuple[str, ...]
    max_uses: int | None
    near: tuple[str, ...]  # the user_location's city and region: matches naming them come first


@dataclass(frozen=True, slots=True)
class ToolSearchConfig:
    kind: SearchKind


@dataclass(frozen=True, slots=True)
class SourceRule:
    """Which tools' results may supply a URL: all, none, only `tools`, or all but `tools`."""

    mode: Literal["all", "none", "only", "except"] = "all"
    tools: frozenset[str] = frozenset()

    def allows(self, tool: str | None) -> bool:
        if self.mode in ("all", "none"):
            return self.mode == "all"
        return (tool in self.tools) == (self.mode == "only")


@dataclass(frozen=True, slots=True)
class WebFetchConfig:
    allowed_domains: tuple[str, ...] | None
    blocked_domains: tuple[str, ...]
    max_uses: int | None
    max_content_tokens: int | None
    citations: bool = False  # the fetched document is citable (server_tools/citing.py)
    use_cache: bool = True  # a page the server holds offline may answer the fetch (fetch.py)
    # url_sources: where a URL must already appear to be fetched (default: anywhere it may).
    user_input: bool = True
    client_results: SourceRule = SourceRule()
    server_results: SourceRule = SourceRule()


@dataclass(frozen=True, slots=True)
class McpToolConfig:
    """A tool of a remote MCP server, as the request offers it."""

    server_name: str
    url: str
    token: str | None
    deferred: bool = False


class ToolConfigParam(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: StrictBool | None = None
    defer_loading: StrictBool | None = None


class ToolsetParam(BaseModel):
    """A `mcp_toolset` tool (mcp-client-2025-11-20)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["mcp_toolset"]
    mcp_server_name: Annotated[StrictStr, Field(min_length=1)]
    default_config: ToolConfigParam | None = None
    configs: dict[str, ToolConfigParam] | None = None
    cache_control: dict[str, Any] | None = None


def check_toolset(raw: dict[str, Any], path: str) -> ToolsetParam:
    """A `mcp_toolset` entry of `tools`, checked (it offers a server's tools: it is no tool)."""
    return checked_param(ToolsetParam, raw, path)


@dataclass(frozen=True, slots=True)
class CodeExecutionConfig:
    """One sub-tool of a code execution tool: the tool's type and where the request has it, and
    the client tools its Python may call (programmatic tool calling: tools/programmatic.py)."""

    version: str
    path: str
    callable: tuple[ToolSpec, ...] = ()

    @property
    def caller(self) -> str:
        """The `caller.type` of the tool_use blocks its code's calls become (the 2026 versions
        share one, as SDK 2.17 types them)."""
        return "code_execution_20260120" if self.version in STATEFUL_CODE_TYPES else self.version


ServerToolConfig = ToolSearchConfig | WebFetchConfig | WebSearchConfig | McpToolConfig | CodeExecutionConfig

# Bounded, so that a weak model's forced call ends (the API documents no bound for either).
_QUERY = {
    "type": "object",
    "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 100}},
    "required": ["query"],
}
_URL = {
    "type": "object",
    "properties": {"url": {"type": "string", "minLength": 1, "maxLength": 250}},
    "required": ["url"],
}

_DESCRIPTIONS = {
    "regex": "Search the other available tools by a Python regular expression over their names and"
    " descriptions; the tools found become callable.",
    "bm25": "Search the other available tools by keywords; the tools found become callable.",
    "web_fetch": "Fetch the text of a web page or PDF, given its URL (one already in the conversation).",
    "web_search": "Search the web; results give page titles, URLs and their text.",
    "code_execution": "Run Python code in a sandboxed container (no network; files persist in the"
    " container for later calls). Print what you want to see.",
    "bash_code_execution": "Run a bash command in a sandboxed Linux container (no network; files"
    " persist in the container for later calls).",
    "text_editor_code_execution": "View, create or edit a file in the container: command `view`"
    " (path), `create` (path, file_text) or `str_replace` (path, old_str, new_str).",
}
# Bounded, so that a weak model's forced call ends.
_CODE_INPUTS: dict[str, dict[str, Any]] = {
    "code_execution": {
        "type": "object",
        "properties": {"code": {"type": "string", "minLength": 1, "maxLength": 4000}},
        "required": ["code"],
    },
    "bash_code_execution": {
        "type": "object",
        "properties": {"command": {"type": "string", "minLength": 1, "maxLength": 2000}},
        "required": ["command"],
    },
    "text_editor_code_execution": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "enum": ["view", "create", "str_replace"]},
            "path": {"type": "string", "minLength": 1, "maxLength": 255},
            "file_text": {"type": "string", "maxLength": 8000},
            "old_str": {"type": "string", "maxLength": 2000},
            "new_str": {"type": "string", "maxLength": 2000},
        },
        "required": ["command", "path"],
    },
}


@dataclass(frozen=True, slots=True)
class ServedTool:
    """A checked server tool: its fixed name, what the model reads of it, and its settings."""

    name: str
    description: str
    input_schema: dict[str, Any]
    deferred: bool
    config: ServerToolConfig


def server_tools(raw: dict[str, Any], path: str) -> tuple[ServedTool, ...]:
    """The tools the model is offered for one server tool entry (code execution's sub-tools;
    one tool for the others), or a 400."""
    kind = raw["type"]
    if kind not in CODE_EXECUTION_TYPES:
        return (server_tool(raw, path),)
    tool = checked_param(_ServerToolParam, raw, path)
    _check_name(tool, "code_execution", path)
    config = CodeExecutionConfig(kind, path)
    return tuple(
        ServedTool(name, _DESCRIPTIONS[name], _CODE_INPUTS[name], bool(tool.defer_loading), config)
        for name in CODE_EXECUTION_TYPES[kind]
    )


def server_tool(raw: dict[str, Any], path: str) -> ServedTool:
    """A server tool this server runs, or a 400 (refused types, bad fields, a wrong name)."""
    kind = raw["type"]
    if kind in REFUSED_TOOL_TYPES:
        raise InvalidRequestError(f"{path}: tool type {kind!r} is not served: {REFUSED_TOOL_TYPES[kind]}")
    if kind in _SEARCH_TYPES:
        search = _SEARCH_TYPES[kind]
        name = f"tool_search_tool_{search}"
        tool: _ServerToolParam = checked_param(_ServerToolParam, raw, path)
        _check_name(tool, name, path)
        if tool.defer_loading:
            raise InvalidRequestError(f"{path}.defer_loading: a tool search tool cannot itself be deferred")
        return ServedTool(name, _DESCRIPTIONS[search], _QUERY, False, ToolSearchConfig(search))
    if kind in _SEARCH_WEB_TYPES:
        return _web_search(kind, raw, path)
    fetch = checked_param(_WebFetchParam, raw, path)
    _check_name(fetch, "web_fetch", path)
    if fetch.allowed_domains is not None and fetch.blocked_domains is not None:
        raise InvalidRequestError(f"{path}: allowed_domains and blocked_domains cannot both be set")
    if kind == "web_fetch_20250910" and fetch.use_cache is not None:
        raise InvalidRequestError(f"{path}.use_cache: Extra inputs are not permitted")
    if kind != "web_fetch_20260318" and fetch.response_inclusion is not None:
        raise InvalidRequestError(f"{path}.response_inclusion: Extra inputs are not permitted")
    if kind == "web_fetch_20260318" and fetch.url_sources is not None:
        raise InvalidRequestError(f"{path}.url_sources: Extra inputs are not permitted")
    sources = fetch.url_sources or _URLSourcesParam()
    allowed = fetch.allowed_domains
    config = WebFetchConfig(
        allowed_domains=tuple(d.lower() for d in allowed) if allowed is not None else None,
        blocked_domains=tuple(d.lower() for d in fetch.blocked_domains or ()),
        max_uses=fetch.max_uses,
        max_content_tokens=fetch.max_content_tokens,
        citations=fetch.citations is not None and fetch.citations.enabled is True,
        use_cache=fetch.use_cache is not False,
        user_input=sources.user_input is None or sources.user_input.type == "all",
        client_results=_rule(sources.client_tool_results, f"{path}.url_sources.client_tool_results"),
        server_results=_rule(sources.server_tool_results, f"{path}.url_sources.server_tool_results"),
    )
    return ServedTool("web_fetch", _DESCRIPTIONS["web_fetch"], _URL, bool(fetch.defer_loading), config)


def _rule(source: _SourceParam | None, path: str) -> SourceRule:
    if source is None:
        return SourceRule()
    if source.type in ("only", "except") and source.tools is None:
        raise InvalidRequestError(f"{path}.tools: Field required")
    if source.type in ("all", "none") and source.tools is not None:
        raise InvalidRequestError(f"{path}.tools: Extra inputs are not permitted")
    return SourceRule(source.type, frozenset(tool.name for tool in source.tools or ()))


def _web_search(kind: str, raw: dict[str, Any], path: str) -> ServedTool:
    search = checked_param(_WebSearchParam, raw, path)
    _check_name(search, "web_search", path)
    if search.allowed_domains is not None and search.blocked_domains is not None:
        raise InvalidRequestError(f"{path}: allowed_domains and blocked_domains cannot both be set")
    if kind != "web_search_20260318" and search.response_inclusion is not None:
        raise InvalidRequestError(f"{path}.response_inclusion: Extra inputs are not permitted")
    where = search.user_location
    config = WebSearchConfig(
        allowed_domains=tuple(search.allowed_domains) if search.allowed_domains is not None else None,
        blocked_domains=tuple(search.blocked_domains or ()),
        max_uses=search.max_uses,
        near=tuple(place for place in (where.city, where.region) if place) if where is not None else (),
    )
    return ServedTool("web_search", _DESCRIPTIONS["web_search"], _QUERY, bool(search.defer_loading), config)


def checked_param(model: type[_T], raw: dict[str, Any], path: str) -> _T:
    """`raw` as a `model` tool entry; its first problem as a 400 with the API's path."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidRequestError(f"{path}.{where}: {first['msg']}") from None


def _check_name(tool: _ServerToolParam, name: str, path: str) -> None:
    if tool.name != name:
        raise InvalidRequestError(f"{path}.name: Input should be {name!r}")
