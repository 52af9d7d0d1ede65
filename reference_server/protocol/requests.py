"""Request bodies of the Messages API: create and count_tokens params and their blocks.

Request models forbid unknown fields, as the real API does (`<field>: Extra inputs are not
permitted`). Rules beyond the schema live in `validation.py` and `tools/`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    Tag,
)


class _Param(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CacheControlEphemeralParam(_Param):
    type: Literal["ephemeral"]
    ttl: Literal["5m", "1h"] | None = None


class TextBlockParam(_Param):
    type: Literal["text"]
    text: Annotated[StrictStr, Field(min_length=1)]
    cache_control: CacheControlEphemeralParam | None = None
    citations: list[dict[str, Any]] | None = None


class ImageTransformationsParam(_Param):
    """SDK 2.17: what happens to an image over the model's maximum size (content/images.py)."""

    oversized_image: Literal["downsize", "error"] | None = None


class ImageBlockParam(_Param):
    type: Literal["image"]
    source: dict[str, Any]
    cache_control: CacheControlEphemeralParam | None = None
    transformations: ImageTransformationsParam | None = None


class DocumentBlockParam(_Param):
    type: Literal["document"]
    source: dict[str, Any]
    cache_control: CacheControlEphemeralParam | None = None
    citations: dict[str, Any] | None = None
    context: StrictStr | None = None
    title: StrictStr | None = None
    # Not on the wire: the Files API id a `file` source named, kept when the source is replaced
    # by the file's content (files/sources.py), for the file_id of its citations.
    _file_id: str | None = PrivateAttr(default=None)


class SearchResultBlockParam(_Param):
    type: Literal["search_result"]
    content: list[TextBlockParam]
    source: StrictStr
    title: StrictStr
    cache_control: CacheControlEphemeralParam | None = None
    citations: dict[str, Any] | None = None


class ToolUseBlockParam(_Param):
    type: Literal["tool_use"]
    id: StrictStr
    name: StrictStr
    input: dict[str, Any]
    cache_control: CacheControlEphemeralParam | None = None
    caller: dict[str, Any] | None = None
    toolset_name: StrictStr | None = None  # SDK 2.14: echoed from responses


class ToolResultBlockParam(_Param):
    type: Literal["tool_result"]
    tool_use_id: StrictStr
    content: StrictStr | list[dict[str, Any]] | None = None
    is_error: StrictBool | None = None
    cache_control: CacheControlEphemeralParam | None = None
    toolset_name: StrictStr | None = None
    # Not on the wire: the Files API ids of the documents in `content` whose `file` source was
    # replaced by the file's content (files/sources.py), by position, for their citations.
    _file_ids: dict[int, str] = PrivateAttr(default_factory=dict)


class ThinkingBlockParam(_Param):
    type: Literal["thinking"]
    thinking: StrictStr
    signature: StrictStr


class RedactedThinkingBlockParam(_Param):
    type: Literal["redacted_thinking"]
    data: StrictStr


class ServerContentBlockParam(BaseModel):
    """GA block types that belong to server tools and containers. Accepted by the schema so
    that serving can answer "not supported by this server" instead of a shape error."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: Literal[
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "container_upload",
        "mid_conv_system",
        "mcp_tool_use",  # beta: the MCP connector
        "mcp_tool_result",
    ]


ContentBlockParam = Annotated[
    TextBlockParam
    | ImageBlockParam
    | DocumentBlockParam
    | SearchResultBlockParam
    | ToolUseBlockParam
    | ToolResultBlockParam
    | ThinkingBlockParam
    | RedactedThinkingBlockParam
    | ServerContentBlockParam,
    Field(discriminator="type"),
]


def _str_or_blocks(value: Any) -> str:
    return "as-string" if isinstance(value, str) else "as-blocks"


# Tags named so that `validation.error_path` can drop them from error locations.
UNION_TAGS = frozenset({"as-string", "as-blocks"})

MessageContent = Annotated[
    Annotated[StrictStr, Tag("as-string")] | Annotated[list[ContentBlockParam], Tag("as-blocks")],
    Discriminator(_str_or_blocks),
]

SystemPrompt = Annotated[
    Annotated[StrictStr, Tag("as-string")] | Annotated[list[TextBlockParam], Tag("as-blocks")],
    Discriminator(_str_or_blocks),
]


class MessageParam(_Param):
    # `system` is the SDK 2.14 SystemMessageParam (mid-conversation system instructions).
    role: Literal["user", "assistant", "system"]
    content: MessageContent


class MetadataParam(_Param):
    user_id: Annotated[StrictStr, Field(max_length=512)] | None = None


class ThinkingConfigEnabledParam(_Param):
    type: Literal["enabled"]
    budget_tokens: Annotated[StrictInt, Field(ge=1024)]
    display: Literal["summarized", "omitted"] | None = None


class ThinkingConfigDisabledParam(_Param):
    type: Literal["disabled"]


class ThinkingConfigAdaptiveParam(_Param):
    type: Literal["adaptive"]
    display: Literal["summarized", "omitted"] | None = None


ThinkingConfigParam = Annotated[
    ThinkingConfigEnabledParam | ThinkingConfigDisabledParam | ThinkingConfigAdaptiveParam,
    Field(discriminator="type"),
]


class JSONOutputFormatParam(_Param):
    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class OutputConfigParam(_Param):
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    format: JSONOutputFormatParam | None = None


class ToolChoiceAutoParam(_Param):
    type: Literal["auto"]
    disable_parallel_tool_use: StrictBool | None = None


class ToolChoiceAnyParam(_Param):
    type: Literal["any"]
    disable_parallel_tool_use: StrictBool | None = None


class ToolChoiceToolParam(_Param):
    type: Literal["tool"]
    name: StrictStr
    disable_parallel_tool_use: StrictBool | None = None


class ToolChoiceNoneParam(_Param):
    type: Literal["none"]


ToolChoiceParam = Annotated[
    ToolChoiceAutoParam | ToolChoiceAnyParam | ToolChoiceToolParam | ToolChoiceNoneParam,
    Field(discriminator="type"),
]


class ContextManagementEditParam(BaseModel):
    """One edit of the `context-management-2025-06-27` beta; its own fields are the beta's."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: Literal["clear_tool_uses_20250919", "clear_thinking_20251015", "compact_20260112"]


class ContextManagementParam(_Param):
    edits: list[ContextManagementEditParam] | None = None


class DiagnosticsParam(_Param):
    previous_message_id: StrictStr | None = None


class McpToolConfigurationParam(_Param):
    enabled: StrictBool | None = None
    allowed_tools: list[StrictStr] | None = None


class McpServerParam(_Param):
    """One entry of `mcp_servers` (beta MCP connector)."""

    type: Literal["url"]
    url: Annotated[StrictStr, Field(min_length=1)]
    name: Annotated[StrictStr, Field(min_length=1)]
    authorization_token: StrictStr | None = None
    tool_configuration: McpToolConfigurationParam | None = None


class ContainerParam(_Param):
    """SDK 2.17's object form of `container`: its id, and the skills to load into it."""

    id: StrictStr | None = None
    skills: list[dict[str, Any]] | None = None


class PromptParams(_Param):
    """Fields shared by create and count_tokens."""

    model: Annotated[StrictStr, Field(min_length=1)]
    messages: list[MessageParam]
    system: SystemPrompt | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: ToolChoiceParam | None = None
    thinking: ThinkingConfigParam | None = None
    output_config: OutputConfigParam | None = None
    cache_control: CacheControlEphemeralParam | None = None
    # Declared so that serving can refuse it in words (Claude Code sends it with thinking on).
    context_management: ContextManagementParam | None = None
    mcp_servers: list[McpServerParam] | None = None  # beta (server_tools/mcp.py)


class MessageCreateParams(PromptParams):
    max_tokens: Annotated[StrictInt, Field(ge=0)]
    stream: StrictBool | None = None
    stop_sequences: list[StrictStr] | None = None
    # Sampling: absent from SDK 2.14's typed arguments but sent by older clients and via
    # extra_body; the OpenAPI spec still lists them.
    temperature: Annotated[StrictFloat, Field(ge=0.0, le=1.0)] | None = None
    top_p: Annotated[StrictFloat, Field(ge=0.0, le=1.0)] | None = None
    top_k: Annotated[StrictInt, Field(ge=0)] | None = None
    metadata: MetadataParam | None = None
    service_tier: Literal["auto", "standard_only"] | None = None
    # A code execution container's id, or the object with the skills to load into it
    # (server_tools/prepare.py, skills/loading.py).
    container: StrictStr | ContainerParam | None = None
    inference_geo: StrictStr | None = None
    speed: Literal["standard", "fast"] | None = None
    diagnostics: DiagnosticsParam | None = None


class MessageCountTokensParams(PromptParams):
    # SDK 2.17 sends it to count_tokens too; counting does not depend on it.
    speed: Literal["standard", "fast"] | None = None
