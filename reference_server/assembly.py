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

from reference_server.citations import QuoteEnd, QuoteStart, QuoteText
from reference_server.engine.base import Generation, PromptUsage
from reference_server.ids import new_message_id, new_tool_use_id
from reference_server.pieces import Outcome, Piece
from reference_server.prepared import PreparedMessage
from reference_server.protocol import (
    CacheCreation,
    CitationsDelta,
    CodeCaller,
    ContentBlock,
    InputJSONDelta,
    McpToolUseBlock,
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
    RedactedThinkingBlock,
    ServerToolUseBlock,
    SignatureDelta,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
    Usage,
)
from reference_server.server_tools.pieces import ProgrammaticCall, ServerCallStart, ServerResult
from reference_server.thinking import ThinkingEnd, ThinkingText
from reference_server.tools.calls import ArgsPiece, CallEnd, CallStart

__all__ = ["Seal", "events_of", "message_of"]


# The finished thinking block, signed (redacted_thinking for the documented test string).
Seal = Callable[[ThinkingEnd], ThinkingBlock | RedactedThinkingBlock]


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
        usage=_usage(
            generation.usage,
            outcome.output_tokens,
            _thinking_tokens(prepared, ended),
            outcome.server_tool_use,
        ),
        context_management=prepared.context_management,
        container=outcome.container,
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
    redacted = prepared.thinking is not None and prepared.thinking.redacted
    ended: ThinkingEnd | None = None
    outcome: Outcome | None = None
    async for piece in pieces:
        if isinstance(piece, Outcome):
            outcome = piece
        elif isinstance(piece, ThinkingText):
            if redacted:  # a redacted_thinking block arrives whole, once the thinking is sealed
                continue
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
            if redacted and piece.thinking:
                index += 1
                yield RawContentBlockStartEvent(index=index, content_block=seal(piece))
                yield RawContentBlockStopEvent(index=index)
            elif thinking_open:  # the signature is the block's last delta
                sealed = seal(piece)
                assert isinstance(sealed, ThinkingBlock)
                signature = sealed.signature
                yield RawContentBlockDeltaEvent(index=index, delta=SignatureDelta(signature=signature))
                yield RawContentBlockStopEvent(index=index)
                thinking_open = False
        elif isinstance(piece, QuoteStart):  # a quote is a text block of its own
            if text_open:
                yield RawContentBlockStopEvent(index=index)
            index += 1
            text_open = True
            yield RawContentBlockStartEvent(index=index, content_block=TextBlock(text=""))
        elif isinstance(piece, QuoteEnd):  # its citation is the block's last delta
            if piece.citation is not None:
                yield RawContentBlockDeltaEvent(index=index, delta=CitationsDelta(citation=piece.citation))
            yield RawContentBlockStopEvent(index=index)
            text_open = False
        elif isinstance(piece, str | QuoteText):
            if not text_open:  # opened lazily: an empty answer has no (empty) text block
                index += 1
                text_open = True
                yield RawContentBlockStartEvent(index=index, content_block=TextBlock(text=""))
            text = piece if isinstance(piece, str) else piece.text
            yield RawContentBlockDeltaEvent(index=index, delta=TextDelta(text=text))
        elif isinstance(piece, CallStart | ServerCallStart | ServerResult | ProgrammaticCall):
            if text_open:
                text_open = False
                yield RawContentBlockStopEvent(index=index)
            index += 1
            if isinstance(piece, ServerResult):  # arrives whole
                yield RawContentBlockStartEvent(index=index, content_block=piece.block)
                yield RawContentBlockStopEvent(index=index)
                continue
            if isinstance(piece, ProgrammaticCall):  # whole too; its input as one delta
                yield RawContentBlockStartEvent(index=index, content_block=_called(piece, {}))
                delta = InputJSONDelta(partial_json=json.dumps(piece.input, ensure_ascii=False))
                yield RawContentBlockDeltaEvent(index=index, delta=delta)
                yield RawContentBlockStopEvent(index=index)
                continue
            call_open = True
            block: ToolUseBlock | ServerToolUseBlock | McpToolUseBlock = (
                ToolUseBlock(id=new_tool_use_id(), name=piece.name, input={})
                if not isinstance(piece, ServerCallStart)
                else ServerToolUseBlock(id=piece.id, name=piece.name, input={})
                if piece.server_name is None
                else McpToolUseBlock(id=piece.id, name=piece.name, server_name=piece.server_name, input={})
            )
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
        delta=MessageDelta(
            stop_reason=outcome.stop_reason, stop_sequence=outcome.stop_sequence, container=outcome.container
        ),
        usage=MessageDeltaUsage(
            output_tokens=outcome.output_tokens,
            input_tokens=prompt.uncached,
            cache_creation_input_tokens=prompt.cache_write,
            cache_read_input_tokens=prompt.cache_read,
            server_tool_use=outcome.server_tool_use,
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


def _usage(
    prompt: PromptUsage,
    output_tokens: int,
    details: OutputTokensDetails | None = None,
    server_tool_use: dict[str, int] | None = None,
) -> Usage:
    """The API's usage: `input_tokens` excludes what was read from or written to the cache."""
    return Usage(
        server_tool_use=server_tool_use,
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
    """The content blocks of a non-streamed answer, from `run`'s pieces, in the order the stream
    would start them: text, then calls (and, with server tools, results and more text)."""

    done: list[ContentBlock] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    call: tuple[str, str, ServerCallStart | None, list[str]] | None = None  # id, name, server call, JSON

    def add(
        self,
        piece: str
        | CallStart
        | ArgsPiece
        | CallEnd
        | ServerCallStart
        | ServerResult
        | ProgrammaticCall
        | QuoteStart
        | QuoteText
        | QuoteEnd,
    ) -> None:
        if isinstance(piece, str | QuoteText):
            self.text.append(piece if isinstance(piece, str) else piece.text)
            return
        if isinstance(piece, QuoteEnd):
            citations = [piece.citation] if piece.citation is not None else None
            self.done.append(TextBlock(text="".join(self.text), citations=citations))
            self.text = []
            return
        self._flush_text()
        if isinstance(piece, QuoteStart):
            return
        if isinstance(piece, CallStart):
            self.call = (new_tool_use_id(), piece.name, None, [])
        elif isinstance(piece, ServerCallStart):
            self.call = (piece.id, piece.name, piece, [])
        elif isinstance(piece, ArgsPiece) and self.call is not None:
            self.call[3].append(piece.json)
        elif isinstance(piece, CallEnd):
            self._flush_call()
        elif isinstance(piece, ServerResult):
            self.done.append(piece.block)
        elif isinstance(piece, ProgrammaticCall):
            self.done.append(_called(piece, piece.input))

    def _flush_text(self) -> None:
        text = "".join(self.text)
        if text:  # never an empty text block
            self.done.append(TextBlock(text=text))
        self.text = []

    def _flush_call(self) -> None:
        if self.call is None:
            return
        tool_id, name, server, parts = self.call
        arguments = _arguments("".join(parts))
        if server is None:
            self.done.append(ToolUseBlock(id=tool_id, name=name, input=arguments))
        elif server.server_name is None:
            self.done.append(ServerToolUseBlock(id=tool_id, name=name, input=arguments))
        else:
            self.done.append(
                McpToolUseBlock(id=tool_id, name=name, server_name=server.server_name, input=arguments)
            )
        self.call = None

    def blocks(self) -> list[ContentBlock]:
        self._flush_text()
        self._flush_call()
        return self.done


def _called(call: ProgrammaticCall, arguments: dict[str, Any]) -> ToolUseBlock:
    """The tool_use block of a call code made: its caller names the code execution call."""
    caller = CodeCaller.model_validate({"type": call.caller_type, "tool_id": call.caller_id})
    return ToolUseBlock(id=call.id, name=call.name, input=arguments, caller=caller)


def _arguments(text: str) -> dict[str, Any]:
    """A call's input: its JSON, or as much of it as was written when max_tokens cut it (read
    the way the SDK reads partial JSON, so streamed and plain answers agree)."""
    try:
        value = json.loads(text)
    except ValueError:
        value = jiter.from_json(text.encode(), partial_mode="trailing-strings") if text else {}
    return value if isinstance(value, dict) else {}
