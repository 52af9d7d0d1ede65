"""Response bodies: `Message`, its content blocks and usage, the token count, errors."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class TextBlock(_Out):
    type: Literal["text"] = "text"
    text: str
    citations: list[dict[str, Any]] | None = None


class DirectCaller(_Out):
    type: Literal["direct"] = "direct"


class CodeCaller(_Out):
    """A tool_use the code of a code execution call made (programmatic tool calling)."""

    type: Literal["code_execution_20250825", "code_execution_20260120"]
    tool_id: str  # the code execution call's server_tool_use id


class ToolUseBlock(_Out):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]
    caller: DirectCaller | CodeCaller = Field(default_factory=DirectCaller)


class ThinkingBlock(_Out):
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str


class RedactedThinkingBlock(_Out):
    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


class ServerToolUseBlock(_Out):
    type: Literal["server_tool_use"] = "server_tool_use"
    id: str
    name: str
    input: dict[str, Any]
    caller: DirectCaller = Field(default_factory=DirectCaller)


class WebFetchToolResultBlock(_Out):
    type: Literal["web_fetch_tool_result"] = "web_fetch_tool_result"
    tool_use_id: str
    content: dict[str, Any]  # web_fetch_result or web_fetch_tool_result_error
    caller: DirectCaller = Field(default_factory=DirectCaller)


class ToolSearchToolResultBlock(_Out):
    type: Literal["tool_search_tool_result"] = "tool_search_tool_result"
    tool_use_id: str
    content: dict[str, Any]  # tool_search_tool_search_result or tool_search_tool_result_error


class WebSearchToolResultBlock(_Out):
    type: Literal["web_search_tool_result"] = "web_search_tool_result"
    tool_use_id: str
    content: list[dict[str, Any]] | dict[str, Any]  # web_search_result blocks, or an error
    caller: DirectCaller = Field(default_factory=DirectCaller)


class McpToolUseBlock(_Out):
    type: Literal["mcp_tool_use"] = "mcp_tool_use"
    id: str
    name: str
    server_name: str
    input: dict[str, Any]


class McpToolResultBlock(_Out):
    type: Literal["mcp_tool_result"] = "mcp_tool_result"
    tool_use_id: str
    is_error: bool
    content: list[dict[str, Any]]  # text blocks


class CodeExecutionToolResultBlock(_Out):
    type: Literal["code_execution_tool_result"] = "code_execution_tool_result"
    tool_use_id: str
    content: dict[str, Any]  # code_execution_result or code_execution_tool_result_error


class BashCodeExecutionToolResultBlock(_Out):
    type: Literal["bash_code_execution_tool_result"] = "bash_code_execution_tool_result"
    tool_use_id: str
    content: dict[str, Any]  # bash_code_execution_result or bash_code_execution_tool_result_error


class TextEditorCodeExecutionToolResultBlock(_Out):
    type: Literal["text_editor_code_execution_tool_result"] = "text_editor_code_execution_tool_result"
    tool_use_id: str
    content: dict[str, Any]  # text_editor_code_execution_{view,create,str_replace}_result or an error


ServerToolResultBlock = (
    WebFetchToolResultBlock
    | ToolSearchToolResultBlock
    | WebSearchToolResultBlock
    | McpToolResultBlock
    | CodeExecutionToolResultBlock
    | BashCodeExecutionToolResultBlock
    | TextEditorCodeExecutionToolResultBlock
)

ContentBlock = Annotated[
    TextBlock
    | ToolUseBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ServerToolUseBlock
    | WebFetchToolResultBlock
    | ToolSearchToolResultBlock
    | WebSearchToolResultBlock
    | McpToolUseBlock
    | McpToolResultBlock
    | CodeExecutionToolResultBlock
    | BashCodeExecutionToolResultBlock
    | TextEditorCodeExecutionToolResultBlock,
    Field(discriminator="type"),
]


class CacheCreation(_Out):
    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0


class OutputTokensDetails(_Out):
    thinking_tokens: int


class Usage(_Out):
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation: CacheCreation = Field(default_factory=CacheCreation)
    server_tool_use: dict[str, int] | None = None
    service_tier: Literal["standard", "priority", "batch"] | None = "standard"
    inference_geo: str | None = None
    output_tokens_details: OutputTokensDetails | None = None


StopReason = Literal[
    "end_turn",
    "max_tokens",
    "stop_sequence",
    "tool_use",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
]


class ClearThinkingEdit(_Out):
    type: Literal["clear_thinking_20251015"] = "clear_thinking_20251015"
    cleared_input_tokens: int
    cleared_thinking_turns: int


class ClearToolUsesEdit(_Out):
    type: Literal["clear_tool_uses_20250919"] = "clear_tool_uses_20250919"
    cleared_input_tokens: int
    cleared_tool_uses: int


class ContextManagementResponse(_Out):
    applied_edits: list[ClearThinkingEdit | ClearToolUsesEdit]


class CountContextManagement(_Out):
    """count_tokens' `context_management`: the count before the edits took anything out."""

    original_input_tokens: int


class _DropsAbsentContextManagement(_Out):
    """`context_management` appears only on answers to requests that asked for edits (a beta)."""

    @model_serializer(mode="wrap")
    def _drop_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("context_management") is None:
            data.pop("context_management", None)
        return data


class _WithContextManagement(_DropsAbsentContextManagement):
    context_management: ContextManagementResponse | None = None


class Message(_WithContextManagement):
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


class MessageTokensCount(_DropsAbsentContextManagement):
    input_tokens: int
    context_management: CountContextManagement | None = None  # only when edits were asked for


class ErrorObject(_Out):
    type: str
    message: str


class ErrorResponse(_Out):
    type: Literal["error"] = "error"
    error: ErrorObject
    request_id: str | None
