"""Stream events (`text/event-stream` data objects), as the SDK names them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from .responses import ContentBlock, Message, OutputTokensDetails, StopReason, _Out, _WithContextManagement


class TextDelta(_Out):
    type: Literal["text_delta"] = "text_delta"
    text: str


class InputJSONDelta(_Out):
    type: Literal["input_json_delta"] = "input_json_delta"
    partial_json: str


class ThinkingDelta(_Out):
    type: Literal["thinking_delta"] = "thinking_delta"
    thinking: str


class CitationsDelta(_Out):
    type: Literal["citations_delta"] = "citations_delta"
    citation: dict[str, Any]


class SignatureDelta(_Out):
    type: Literal["signature_delta"] = "signature_delta"
    signature: str


_Delta = TextDelta | InputJSONDelta | ThinkingDelta | SignatureDelta | CitationsDelta


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
    output_tokens_details: OutputTokensDetails | None = None


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
    delta: Annotated[
        TextDelta | InputJSONDelta | ThinkingDelta | SignatureDelta | CitationsDelta,
        Field(discriminator="type"),
    ]


class RawContentBlockStopEvent(_Out):
    type: Literal["content_block_stop"] = "content_block_stop"
    index: int


class RawMessageDeltaEvent(_WithContextManagement):
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
