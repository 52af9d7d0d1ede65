"""Generated text → text and tool calls, incrementally, for streaming.

The model writes calls in the engine's built-in format (engine/toolformat.py), held to it by
the grammar: `<tool_call>\\n{"name": "N", "arguments": {...}}\\n</tool_call>`, calls joined by
a newline. `CallParser.feed` takes text as it is generated and returns pieces: free text (with
any partial call tag held back), a call's start once its name is known, fragments of its
arguments' JSON as they arrive (their concatenation is exactly the arguments' JSON text), and
its end. Nothing is buffered longer than needed to tell text from a tag.

Under `auto` an answer may also open with the JSON of a call of one of its tools (`bare`),
bare or in a ```json fence (tools/grammar.py says why): at the start of the text, what may
still become that opening is held back, then parsed as the answer's last call.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import regex

from reference_server.engine.toolformat import CALL_OPEN, CALL_SEPARATOR, CALL_SUFFIX

__all__ = ["ArgsPiece", "CallEnd", "CallParser", "CallStart", "Piece", "TextPiece"]


@dataclass(frozen=True, slots=True)
class TextPiece:
    text: str


@dataclass(frozen=True, slots=True)
class CallStart:
    name: str


@dataclass(frozen=True, slots=True)
class ArgsPiece:
    json: str


@dataclass(frozen=True, slots=True)
class CallEnd:
    complete: bool  # False: generation stopped inside the arguments


Piece = TextPiece | CallStart | ArgsPiece | CallEnd

_HEAD = re.compile(r'\{"name": "([^"\\]+)", "arguments": ')
_HEAD_MAX = 200  # a name is at most 128 characters
# A bare call's text before its arguments (the grammar's bare_open and BARE_NAME_i), whitespace
# included: complete once the arguments' first character is in.
_BARE_HEAD = regex.compile(
    r'\s*(?:```(?:json)?\s*)?\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)+)"\s*,\s*"arguments"\s*:\s*(?=\S)'
)


class CallParser:
    """Splits one generation's text into pieces (see the module docstring)."""

    def __init__(self, bare: frozenset[str] = frozenset()) -> None:
        """`bare`: the names of the tools whose calls may come bare."""
        self._names = bare
        self._state = "start" if bare else "text"  # start | text | head | args | tail | between | done
        self._bare = False  # the call is a bare one (no tags)
        self._buffer = ""
        self._depth = 0
        self._in_string = False
        self._escaped = False
        self.calls = 0  # calls started

    def feed(self, text: str) -> list[Piece]:
        self._buffer += text
        pieces: list[Piece] = []
        while True:
            step = getattr(self, f"_{self._state}")(pieces)
            if not step:
                return pieces

    def flush(self) -> list[Piece]:
        """Generation ended: what is left, and the end of an unfinished call."""
        pieces: list[Piece] = []
        if self._state in ("start", "text", "between") and self._buffer:
            pieces.append(TextPiece(self._buffer))
        elif self._state == "args":
            pieces.append(CallEnd(complete=False))
        elif self._state == "tail":
            pieces.append(CallEnd(complete=True))  # the arguments were whole
        self._buffer = ""
        self._state = "text"
        return pieces

    # Each state consumes what it can; True when it changed state and should run again.

    def _start(self, pieces: list[Piece]) -> bool:
        match = _BARE_HEAD.match(self._buffer, partial=True)
        if match is None:
            self._state = "text"
            return True
        if match.partial:
            return False  # may still open a bare call
        if (name := json.loads(f'"{match.group(1)}"')) not in self._names:
            self._state = "text"  # JSON naming no tool: text
            return True
        pieces.append(CallStart(name))
        self.calls += 1
        self._buffer = self._buffer[match.end() :]
        self._depth, self._in_string, self._escaped = 0, False, False
        self._bare, self._state = True, "args"
        return True

    def _done(self, pieces: list[Piece]) -> bool:
        self._buffer = ""  # after a bare call: its closing brace's whitespace and fence
        return False

    def _text(self, pieces: list[Piece]) -> bool:
        found = self._buffer.find(CALL_OPEN)
        if found >= 0:
            if found:
                pieces.append(TextPiece(self._buffer[:found]))
            self._buffer = self._buffer[found + len(CALL_OPEN) :]
            self._state = "head"
            return True
        keep = _partial_suffix(self._buffer, CALL_OPEN)
        emit = self._buffer[: len(self._buffer) - keep]
        if emit:
            pieces.append(TextPiece(emit))
        self._buffer = self._buffer[len(emit) :]
        return False

    def _head(self, pieces: list[Piece]) -> bool:
        match = _HEAD.match(self._buffer)
        if match is None:
            if len(self._buffer) > _HEAD_MAX:  # not our format after all: it was text
                pieces.append(TextPiece(CALL_OPEN + self._buffer))
                self._buffer, self._state = "", "text"
            return False
        pieces.append(CallStart(match.group(1)))
        self.calls += 1
        self._buffer = self._buffer[match.end() :]
        self._depth, self._in_string, self._escaped = 0, False, False
        self._state = "args"
        return True

    def _args(self, pieces: list[Piece]) -> bool:
        for index, char in enumerate(self._buffer):
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif char == "\\":
                    self._escaped = True
                elif char == '"':
                    self._in_string = False
                continue
            if char == '"':
                self._in_string = True
            elif char in "{[":
                self._depth += 1
            elif char in "}]":
                self._depth -= 1
                if self._depth == 0:
                    pieces.append(ArgsPiece(self._buffer[: index + 1]))
                    self._buffer = self._buffer[index + 1 :]
                    self._state = "tail"
                    return True
        if self._buffer:
            pieces.append(ArgsPiece(self._buffer))
        self._buffer = ""
        return False

    def _tail(self, pieces: list[Piece]) -> bool:
        if self._bare:
            if not self._buffer.lstrip():
                return False
            pieces.append(CallEnd(complete=True))  # the grammar allows only the brace here
            self._state = "done"
            return True
        if self._buffer.startswith(CALL_SUFFIX):
            self._buffer = self._buffer[len(CALL_SUFFIX) :]
            pieces.append(CallEnd(complete=True))
            self._state = "between"
            return True
        return False

    def _between(self, pieces: list[Piece]) -> bool:
        joint = CALL_SEPARATOR + CALL_OPEN
        if self._buffer.startswith(joint):
            self._buffer = self._buffer[len(joint) :]
            self._state = "head"
            return True
        if joint.startswith(self._buffer):
            return False  # maybe the next call
        self._state = "text"  # unconstrained text after a call: keep it as text
        return True


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of `text` that is a proper beginning of `tag`."""
    for size in range(min(len(text), len(tag) - 1), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0
