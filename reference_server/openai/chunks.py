"""Streamed completions: `chat.completion.chunk` models and their SSE framing (pure).

OpenAI's stream is unnamed `data:` lines, each one chunk, ended by `data: [DONE]`. A failure
after the first byte is sent as one `data: {"error": {...}}` line, which the SDK raises, and
the stream ends there without `[DONE]`. No pings: OpenAI sends none.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Literal

from .errors import to_openai_error
from .responses import CompletionUsage, ErrorBody, FinishReason, Wire

__all__ = [
    "ChatCompletionChunk",
    "ChoiceDelta",
    "ChunkChoice",
    "FunctionDelta",
    "ToolCallDelta",
    "sse_chunks",
]

log = logging.getLogger(__name__)

DONE = b"data: [DONE]\n\n"


class FunctionDelta(Wire):
    omit_none = frozenset({"name", "arguments"})
    name: str | None = None
    arguments: str | None = None


class ToolCallDelta(Wire):
    omit_none = frozenset({"id", "type", "function"})
    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: FunctionDelta | None = None


class ChoiceDelta(Wire):
    omit_none = frozenset({"role", "content", "tool_calls"})
    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class ChunkChoice(Wire):
    index: int = 0
    delta: ChoiceDelta
    logprobs: None = None
    finish_reason: FinishReason | None = None


class ChatCompletionChunk(Wire):
    # `usage` only on the final chunk of a stream with `stream_options.include_usage`.
    omit_none = frozenset({"usage"})
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: CompletionUsage | None = None


def encode_chunk(chunk: Wire) -> bytes:
    return b"data: " + chunk.model_dump_json().encode() + b"\n\n"


async def sse_chunks(chunks: AsyncGenerator[ChatCompletionChunk, None]) -> AsyncGenerator[bytes, None]:
    """Encode `chunks`, then `[DONE]`; an exception becomes a final error line instead."""
    try:
        async with aclosing(chunks):  # a client that leaves stops the generation at once
            async for chunk in chunks:
                yield encode_chunk(chunk)
    except Exception as exc:
        error = to_openai_error(exc)
        if error.status_code >= 500:
            log.error("stream failed after its first byte", exc_info=exc)
        yield encode_chunk(ErrorBody(error=error.detail()))
        return
    yield DONE
