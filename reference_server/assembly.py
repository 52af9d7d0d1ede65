"""A generation's pieces (MessagesService.run's) as the API's answer: one `Message`, or the
typed stream events of the same message in the documented order (a thinking block first and
signed last, text opened lazily, tool_use blocks with their JSON as `input_json_delta`s, usage
and `context_management` on `message_delta`). No engine and no HTTP here."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import jiter

from reference_server.engine.base import Generation, PromptUsage
from reference_server.ids import new_message_id, new_tool_use_id
from reference_server.prepared import PreparedMessage
from reference_server.protocol import (
    CacheCreation,
    ContentBlock,
    InputJSONDelta,
    Message,
    MessageDelta,
    MessageDeltaUsage,
    OutputTokensDetails,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RawMessageStreamEvent,
    SignatureDelta,
    StopReason,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
    Usage,
)
from reference_server.thinking import ThinkingEnd, ThinkingText
from reference_server.tools.calls import ArgsPiece, CallEnd, CallStart

__all__ = ["Outcome", "Piece", "Seal", "events_of", "message_of"]


@dataclass(frozen=True, slots=True)
class Outcome:
    stop_reason: StopReason
    stop_sequence: str | None
    output_tokens: int


Piece = str | ThinkingText | ThinkingEnd | CallStart | ArgsPiece | CallEnd | Outcome  # what `run` yields
Seal = Callable[[ThinkingEnd], ThinkingBlock]  # the finished thinking block, signed


async def message_of(
    prepared: PreparedMessage, generation: Generation, pieces: AsyncIterator[Piece], seal: Seal
) -> Message:
    """The whole message, from `pieces` (MessagesService.run's) of `generation`."""
    builder = _ContentBuilder()
    thinking: list[str] = []
    ended: ThinkingEnd | None = None
    outcome: Outcome | None = None
    async for piece in pieces:
        if isinstance(piece, Outcome):
            outcome = piece
        elif isinstance(piece, ThinkingText):
            thinking.append(piece.text)
        elif isinstance(piece, ThinkingEnd):
            ended = piece
        else:
            builder.add(piece)
    assert outcome is not None  # run() always ends with an Outcome or raises
    content = builder.blocks()
    if ended is not None and ended.thinking:
        content.insert(0, seal(ended))
    return Message(
        id=new_message_id(),
        content=content,
        model=prepared.requested_model,
        stop_reason=outcome.stop_reason,
        stop_sequence=outcome.stop_sequence,
        usage=_usage(generation.usage, outcome.output_tokens, _thinking_tokens(prepared, ended)),
        context_management=prepared.context_management,
    )


async def events_of(
    prepared: PreparedMessage, generation: Generation, pieces: AsyncIterator[Piece], seal: Seal
) -> AsyncIterator[RawMessageStreamEvent]:
    """The same message as `message_of`, as typed stream events in the documented order."""
    prompt = generation.usage
    yield RawMessageStartEvent(
        message=Message(
            id=new_message_id(),
            content=[],
            model=prepared.requested_model,
            stop_reason=None,
            stop_sequence=None,
            usage=_usage(prompt, 0),
        )
    )
    index = -1  # of the last block started
    text_open = call_open = thinking_open = False
    shown = prepared.thinking is not None and prepared.thinking.display != "omitted"
    ended: ThinkingEnd | None = None
    outcome: Outcome | None = None
    async for piece in pieces:
        if isinstance(piece, Outcome):
            outcome = piece
        elif isinstance(piece, ThinkingText):
            if not thinking_open:
                index += 1
                thinking_open = True
                yield RawContentBlockStartEvent(
                    index=index, content_block=ThinkingBlock(thinking="", signature="")
                )
            if shown:
                yield RawContentBlockDeltaEvent(index=index, delta=ThinkingDelta(thinking=piece.text))
        elif isinstance(piece, ThinkingEnd):
            ended = piece
            if thinking_open:  # the signature is the block's last delta
                signature = seal(piece).signature
                yield RawContentBlockDeltaEvent(index=index, delta=SignatureDelta(signature=signature))
                yield RawContentBlockStopEvent(index=index)
                thinking_open = False
        elif isinstance(piece, str):
            if not text_open:  # opened lazily: an empty answer has no (empty) text block
                index += 1
                text_open = True
                yield RawContentBlockStartEvent(index=index, content_block=TextBlock(text=""))
            yield RawContentBlockDeltaEvent(index=index, delta=TextDelta(text=piece))
        elif isinstance(piece, CallStart):
            if text_open:
                text_open = False
                yield RawContentBlockStopEvent(index=index)
            index += 1
            call_open = True
            block = ToolUseBlock(id=new_tool_use_id(), name=piece.name, input={})
            yield RawContentBlockStartEvent(index=index, content_block=block)
        elif isinstance(piece, ArgsPiece):
            yield RawContentBlockDeltaEvent(index=index, delta=InputJSONDelta(partial_json=piece.json))
        else:
            call_open = False
            yield RawContentBlockStopEvent(index=index)
    assert outcome is not None
    if text_open or call_open:
        yield RawContentBlockStopEvent(index=index)
    yield RawMessageDeltaEvent(
        delta=MessageDelta(stop_reason=outcome.stop_reason, stop_sequence=outcome.stop_sequence),
        usage=MessageDeltaUsage(
            output_tokens=outcome.output_tokens,
            input_tokens=prompt.uncached,
            cache_creation_input_tokens=prompt.cache_write,
            cache_read_input_tokens=prompt.cache_read,
            output_tokens_details=_thinking_tokens(prepared, ended),
        ),
        context_management=prepared.context_management,
    )
    yield RawMessageStopEvent()


def _thinking_tokens(prepared: PreparedMessage, ended: ThinkingEnd | None) -> OutputTokensDetails | None:
    """`output_tokens_details` of a request with thinking on (None with it off)."""
    if prepared.thinking is None:
        return None
    return OutputTokensDetails(thinking_tokens=ended.tokens if ended is not None else 0)


def _usage(prompt: PromptUsage, output_tokens: int, details: OutputTokensDetails | None = None) -> Usage:
    """The API's usage: `input_tokens` excludes what was read from or written to the cache."""
    return Usage(
        output_tokens_details=details,
        input_tokens=prompt.uncached,
        output_tokens=output_tokens,
        cache_read_input_tokens=prompt.cache_read,
        cache_creation_input_tokens=prompt.cache_write,
        cache_creation=CacheCreation(
            ephemeral_5m_input_tokens=prompt.cache_write_5m,
            ephemeral_1h_input_tokens=prompt.cache_write_1h,
        ),
    )


@dataclass
class _ContentBuilder:
    """The content blocks of a non-streamed answer, from `run`'s pieces."""

    text: list[str] = field(default_factory=list)
    calls: list[tuple[str, list[str]]] = field(default_factory=list)

    def add(self, piece: str | CallStart | ArgsPiece | CallEnd) -> None:
        if isinstance(piece, str):
            self.text.append(piece)
        elif isinstance(piece, CallStart):
            self.calls.append((piece.name, []))
        elif isinstance(piece, ArgsPiece):
            self.calls[-1][1].append(piece.json)

    def blocks(self) -> list[ContentBlock]:
        text = "".join(self.text)
        blocks: list[ContentBlock] = [TextBlock(text=text)] if text else []  # never an empty text block
        for name, parts in self.calls:
            blocks.append(ToolUseBlock(id=new_tool_use_id(), name=name, input=_arguments("".join(parts))))
        return blocks


def _arguments(text: str) -> dict[str, Any]:
    """A call's input: its JSON, or as much of it as was written when max_tokens cut it (read
    the way the SDK reads partial JSON, so streamed and plain answers agree)."""
    try:
        value = json.loads(text)
    except ValueError:
        value = jiter.from_json(text.encode(), partial_mode="trailing-strings") if text else {}
    return value if isinstance(value, dict) else {}
