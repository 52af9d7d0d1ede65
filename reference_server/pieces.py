"""What one turn's generation yields, piece by piece, and how it ends (`Outcome`).

MessagesService.run and the server-tool loop (server_tools/loop.py) yield these; assembly.py
turns them into a `Message` or stream events, the OpenAI dialect (openai/serving.py) into
chunks. A leaf: it imports none of those, so they all read top-down.
"""

from __future__ import annotations

from dataclasses import dataclass

from reference_server.citations import QuoteEnd, QuoteStart, QuoteText
from reference_server.protocol import StopReason
from reference_server.server_tools.pieces import ProgrammaticCall, ServerCallStart, ServerResult
from reference_server.thinking import ThinkingEnd, ThinkingText
from reference_server.tools.calls import ArgsPiece, CallEnd, CallStart

__all__ = ["Outcome", "Piece"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """The turn's end: the last piece."""

    stop_reason: StopReason
    stop_sequence: str | None
    output_tokens: int
    server_tool_use: dict[str, int] | None = None  # usage.server_tool_use, with server tools
    container: dict[str, str] | None = None  # the code execution container used: {id, expires_at}


# A text piece (str), a thinking piece, a piece of a client or server tool call, a server
# tool's result, a call code made (programmatic tool calling), a piece of a quote
# (citations), or the Outcome.
Piece = (
    str
    | ThinkingText
    | ThinkingEnd
    | CallStart
    | ArgsPiece
    | CallEnd
    | ServerCallStart
    | ServerResult
    | ProgrammaticCall
    | QuoteStart
    | QuoteText
    | QuoteEnd
    | Outcome
)
