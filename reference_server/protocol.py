"""Wire models of the Messages API (pydantic v2). Data only: no I/O, no rules.

Names follow the official SDK's types (`anthropic.types`); field names and `type` literals
are the wire strings. Request models forbid unknown fields, as the real API does
(`<field>: Extra inputs are not permitted`). Rules beyond the schema live in
`validation.py` and `serving.py`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    Tag,
)

# ---------------------------------------------------------------- requests


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


class ImageBlockParam(_Param):
    type: Literal["image"]
    source: dict[str, Any]
    cache_control: CacheControlEphemeralParam | None = None


class DocumentBlockParam(_Param):
    type: Literal["document"]
    source: dict[str, Any]
    cache_control: CacheControlEphemeralParam | None = None
    citations: dict[str, Any] | None = None
    context: StrictStr | None = None
    title: StrictStr | None = None


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


class ToolResultBlockParam(_Param):
    type: Literal["tool_result"]
    tool_use_id: StrictStr
    content: StrictStr | list[dict[str, Any]] | None = None
    is_error: StrictBool | None = None
    cache_control: CacheControlEphemeralParam | None = None


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


class DiagnosticsParam(_Param):
    previous_message_id: StrictStr | None = None


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
    container: StrictStr | None = None
    inference_geo: StrictStr | None = None
    speed: Literal["standard", "fast"] | None = None
    diagnostics: DiagnosticsParam | None = None


class MessageCountTokensParams(PromptParams):
    pass


# ---------------------------------------------------------------- responses


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class TextBlock(_Out):
    type: Literal["text"] = "text"
    text: str
    citations: list[dict[str, Any]] | None = None


ContentBlock = TextBlock  # tools and thinking add ToolUseBlock / ThinkingBlock here


class CacheCreation(_Out):
    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0


class Usage(_Out):
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation: CacheCreation = Field(default_factory=CacheCreation)
    server_tool_use: dict[str, int] | None = None
    service_tier: Literal["standard", "priority", "batch"] | None = "standard"
    inference_geo: str | None = None


StopReason = Literal[
    "end_turn",
    "max_tokens",
    "stop_sequence",
    "tool_use",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
]


class Message(_Out):
    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    content: list[ContentBlock]
    model: str
    stop_reason: StopReason | None
    stop_sequence: str | None
    stop_details: dict[str, Any] | None = None
    usage: Usage
    container: dict[str, Any] | None = None


class MessageTokensCount(_Out):
    input_tokens: int


# ---------------------------------------------------------------- stream events


class TextDelta(_Out):
    type: Literal["text_delta"] = "text_delta"
    text: str


class MessageDelta(_Out):
    stop_reason: StopReason | None
    stop_sequence: str | None
    stop_details: dict[str, Any] | None = None
    container: dict[str, Any] | None = None


class MessageDeltaUsage(_Out):
    output_tokens: int
    input_tokens: int | None
    cache_creation_input_tokens: int | None = 0
    cache_read_input_tokens: int | None = 0
    server_tool_use: dict[str, int] | None = None


class RawMessageStartEvent(_Out):
    type: Literal["message_start"] = "message_start"
    message: Message


class RawContentBlockStartEvent(_Out):
    type: Literal["content_block_start"] = "content_block_start"
    index: int
    content_block: ContentBlock


class RawContentBlockDeltaEvent(_Out):
    type: Literal["content_block_delta"] = "content_block_delta"
    index: int
    delta: TextDelta


class RawContentBlockStopEvent(_Out):
    type: Literal["content_block_stop"] = "content_block_stop"
    index: int


class RawMessageDeltaEvent(_Out):
    type: Literal["message_delta"] = "message_delta"
    delta: MessageDelta
    usage: MessageDeltaUsage


class RawMessageStopEvent(_Out):
    type: Literal["message_stop"] = "message_stop"


class PingEvent(_Out):
    type: Literal["ping"] = "ping"


RawMessageStreamEvent = (
    RawMessageStartEvent
    | RawContentBlockStartEvent
    | RawContentBlockDeltaEvent
    | RawContentBlockStopEvent
    | RawMessageDeltaEvent
    | RawMessageStopEvent
)

# ---------------------------------------------------------------- errors


class ErrorObject(_Out):
    type: str
    message: str


class ErrorResponse(_Out):
    type: Literal["error"] = "error"
    error: ErrorObject
    request_id: str | None


# ---------------------------------------------------------------- models


class CapabilitySupport(_Out):
    supported: bool


class ThinkingTypes(_Out):
    adaptive: CapabilitySupport
    between_tools: CapabilitySupport
    disabled: CapabilitySupport
    enabled: CapabilitySupport


class ThinkingCapability(_Out):
    supported: bool
    types: ThinkingTypes


class EffortCapability(_Out):
    supported: bool
    low: CapabilitySupport
    medium: CapabilitySupport
    high: CapabilitySupport
    max: CapabilitySupport
    xhigh: CapabilitySupport | None = None


class ContextManagementCapability(_Out):
    supported: bool
    clear_thinking_20251015: CapabilitySupport | None = None
    clear_tool_uses_20250919: CapabilitySupport | None = None
    compact_20260112: CapabilitySupport | None = None


class ServerToolsCapability(_Out):
    supported: bool
    code_execution: CapabilitySupport
    web_search: CapabilitySupport


class ModelCapabilities(_Out):
    batch: CapabilitySupport
    citations: CapabilitySupport
    code_execution: CapabilitySupport
    context_management: ContextManagementCapability
    effort: EffortCapability
    image_input: CapabilitySupport
    pdf_input: CapabilitySupport
    server_tools: ServerToolsCapability
    structured_outputs: CapabilitySupport
    thinking: ThinkingCapability


class ModelInfo(_Out):
    type: Literal["model"] = "model"
    id: str
    display_name: str
    created_at: str  # RFC 3339
    max_input_tokens: int | None
    max_tokens: int | None
    capabilities: ModelCapabilities | None
    lifecycle: Literal["active", "deprecated", "retired"] = "active"
    deprecated_at: str | None = None
    retires_at: str | None = None
    line: str | None = None


class ModelListResponse(_Out):
    data: list[ModelInfo]
    has_more: bool
    first_id: str | None
    last_id: str | None
