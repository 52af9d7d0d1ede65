"""The request body of `POST /v1/chat/completions`, as OpenAI's API takes it (the official
SDK's `CompletionCreateParams`), limited to what a text model can serve.

Nested models forbid unknown fields; unknown top-level fields are reported before validation
in OpenAI's words (`mapping.parse_request`). Parameters OpenAI has and this server cannot honour
are accepted here so that `mapping.py` can refuse them by name, never silently.
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

__all__ = [
    "AssistantMessage",
    "ChatCompletionParams",
    "ChatMessage",
    "DeveloperMessage",
    "FunctionTool",
    "JSONObjectFormat",
    "JSONSchemaFormat",
    "NamedToolChoice",
    "SystemMessage",
    "TextFormat",
    "TextPart",
    "ToolMessage",
    "UserMessage",
]


class _Param(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextPart(_Param):
    type: Literal["text"]
    text: StrictStr


class RefusalPart(_Param):
    type: Literal["refusal"]
    refusal: StrictStr


class MediaPart(BaseModel):
    """Image, audio and file parts: recognised so that they are refused by name."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: Literal["image_url", "input_audio", "file"]


def _text_or_parts(value: Any) -> str:
    return "as-string" if isinstance(value, str) else "as-parts"


def _name_or_object(value: Any) -> str:
    return "as-string" if isinstance(value, str) else "as-object"


# Union tags named so that mapping's error paths can drop them.
UNION_TAGS = frozenset({"as-string", "as-parts", "as-object"})


UserPart = Annotated[TextPart | MediaPart, Field(discriminator="type")]
AssistantPart = Annotated[TextPart | RefusalPart, Field(discriminator="type")]

TextContent = Annotated[
    Annotated[StrictStr, Tag("as-string")] | Annotated[list[TextPart], Tag("as-parts")],
    Discriminator(_text_or_parts),
]
UserContent = Annotated[
    Annotated[StrictStr, Tag("as-string")] | Annotated[list[UserPart], Tag("as-parts")],
    Discriminator(_text_or_parts),
]
AssistantContent = Annotated[
    Annotated[StrictStr, Tag("as-string")] | Annotated[list[AssistantPart], Tag("as-parts")],
    Discriminator(_text_or_parts),
]


class SystemMessage(_Param):
    role: Literal["system"]
    content: TextContent
    name: StrictStr | None = None


class DeveloperMessage(_Param):
    role: Literal["developer"]
    content: TextContent
    name: StrictStr | None = None


class UserMessage(_Param):
    role: Literal["user"]
    content: UserContent
    name: StrictStr | None = None


class FunctionCallParam(_Param):
    name: StrictStr
    arguments: StrictStr  # JSON text, as the model wrote it


class ToolCallParam(_Param):
    id: StrictStr
    type: Literal["function"]
    function: FunctionCallParam


class AssistantMessage(_Param):
    role: Literal["assistant"]
    content: AssistantContent | None = None
    name: StrictStr | None = None
    refusal: StrictStr | None = None
    tool_calls: list[ToolCallParam] | None = None
    audio: dict[str, Any] | None = None
    function_call: dict[str, Any] | None = None  # deprecated: refused by mapping


class ToolMessage(_Param):
    role: Literal["tool"]
    content: TextContent
    tool_call_id: StrictStr


ChatMessage = Annotated[
    SystemMessage | DeveloperMessage | UserMessage | AssistantMessage | ToolMessage,
    Field(discriminator="role"),
]


class FunctionDefinition(_Param):
    name: Annotated[StrictStr, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
    description: StrictStr | None = None
    parameters: dict[str, Any] | None = None
    strict: StrictBool | None = None


class FunctionTool(_Param):
    type: Literal["function"]
    function: FunctionDefinition


class FunctionName(_Param):
    name: StrictStr


class NamedToolChoice(_Param):
    type: Literal["function"]
    function: FunctionName


class TextFormat(_Param):
    type: Literal["text"]


class JSONObjectFormat(_Param):
    type: Literal["json_object"]


class JSONSchemaSpec(_Param):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    name: Annotated[StrictStr, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
    description: StrictStr | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: StrictBool | None = None


class JSONSchemaFormat(_Param):
    type: Literal["json_schema"]
    json_schema: JSONSchemaSpec


ResponseFormat = Annotated[TextFormat | JSONObjectFormat | JSONSchemaFormat, Field(discriminator="type")]


class StreamOptions(_Param):
    include_usage: StrictBool | None = None
    include_obfuscation: StrictBool | None = None  # no obfuscation field is ever sent


class ChatCompletionParams(_Param):
    model: StrictStr
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    max_tokens: StrictInt | None = None
    max_completion_tokens: StrictInt | None = None
    temperature: Annotated[StrictFloat, Field(ge=0, le=2)] | None = None
    top_p: Annotated[StrictFloat, Field(ge=0, le=1)] | None = None
    # Not OpenAI's, but the sampling extension vLLM, llama.cpp and Ollama take, and what
    # Anthropic-to-OpenAI gateways (LiteLLM) forward: honoured; -1 or 0 means no limit.
    top_k: Annotated[StrictInt, Field(ge=-1)] | None = None
    stop: (
        Annotated[
            Annotated[StrictStr, Tag("as-string")]
            # OpenAI takes up to 4; vLLM and llama.cpp any number, and gateways translating
            # Anthropic's stop_sequences (no such limit) send them all.
            | Annotated[list[StrictStr], Tag("as-parts")],
            Discriminator(_text_or_parts),
        ]
        | None
    ) = None
    n: StrictInt | None = None
    seed: StrictInt | None = None  # mixed into the request's sampling key (engine/seeds.py)
    stream: StrictBool | None = None
    stream_options: StreamOptions | None = None
    tools: list[FunctionTool] | None = None
    tool_choice: (
        Annotated[
            Annotated[Literal["none", "auto", "required"], Tag("as-string")]
            | Annotated[NamedToolChoice, Tag("as-object")],
            Discriminator(_name_or_object),
        ]
        | None
    ) = None
    parallel_tool_calls: StrictBool | None = None
    response_format: ResponseFormat | None = None
    user: StrictStr | None = None
    # Bookkeeping with no effect on the answer: accepted and ignored.
    metadata: dict[str, StrictStr] | None = None
    store: StrictBool | None = None
    service_tier: StrictStr | None = None
    prompt_cache_key: StrictStr | None = None
    safety_identifier: StrictStr | None = None
    # Known to OpenAI, not served here unless at their neutral value (mapping refuses the rest).
    logprobs: StrictBool | None = None
    top_logprobs: StrictInt | None = None
    frequency_penalty: StrictFloat | None = None
    presence_penalty: StrictFloat | None = None
    logit_bias: dict[str, StrictFloat] | None = None
    modalities: list[StrictStr] | None = None
    audio: dict[str, Any] | None = None
    prediction: dict[str, Any] | None = None
    reasoning_effort: StrictStr | None = None
    verbosity: StrictStr | None = None
    web_search_options: dict[str, Any] | None = None
    functions: list[dict[str, Any]] | None = None
    function_call: StrictStr | dict[str, Any] | None = None
