"""A strict, incremental Server-Sent Events parser that records what is on the wire.

The SDK's SSE decoder is lenient on purpose (it must work against whatever a server sends); a
conformance suite needs the opposite: parse exactly as the WHATWG HTML standard says
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation) and
keep every observation a check may want to judge - which line endings were used, comments, events
without an `event:` line, `[DONE]` sentinels, data that is not JSON, bytes left after the last
blank line - together with each event's raw bytes and offset as evidence.

Feed it bytes in chunks of any size (a chunk may split a line, a CRLF pair or a multi-byte UTF-8
character anywhere); the events are the same for every way of cutting the stream.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "LineEnding",
    "SSEComment",
    "SSEEvent",
    "SSEParser",
    "SSETranscript",
    "parse_sse",
]

LineEnding = Literal["LF", "CRLF", "CR"]
_BOM = b"\xef\xbb\xbf"
_LINE_BREAK = re.compile(rb"[\r\n]")
_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class SSEComment:
    """A comment line (`:` first), which the standard says to ignore."""

    text: str
    """The line after the colon, one leading space removed."""
    offset: int
    """Byte offset of the line in the stream."""


@dataclass(frozen=True)
class SSEEvent:
    """One block of lines ended by a blank line, holding at least one `event:` or `data:` line."""

    index: int
    """Position among the stream's events (0-based)."""
    event: str | None
    """The `event:` value, None when the block has no `event:` line."""
    data: str
    """The `data:` values joined with LF."""
    data_lines: int
    """How many `data:` lines the block has; 0 means the standard would not dispatch it."""
    raw: bytes
    """The block's bytes exactly as received, its terminating blank line included."""
    offset: int
    """Byte offset of the block's first line in the stream (a BOM counts): raw is
    stream[offset:offset + len(raw)]."""
    id: str | None = None
    """The block's own `id:` value, if any."""
    retry: int | None = None
    """The block's valid `retry:` value, if any."""
    comments: tuple[str, ...] = ()
    """Comments between the block's field lines."""
    unknown_fields: tuple[tuple[str, str], ...] = ()
    """(name, value) of every field the standard ignores, in order."""
    json: object = None
    """The parsed data, when `json_error` is None."""
    json_error: str | None = field(default=None)
    """Why the data is not JSON (strict: NaN and Infinity are refused), or None."""

    @property
    def name(self) -> str:
        """The event type a browser would dispatch: `message` when no name was given."""
        return self.event or "message"

    @property
    def is_json(self) -> bool:
        """True when the data parsed as JSON."""
        return self.json_error is None

    @property
    def is_done_sentinel(self) -> bool:
        """True for OpenAI's end marker `data: [DONE]`."""
        return self.data.strip() == "[DONE]"


@dataclass(frozen=True)
class SSETranscript:
    """Everything a parse saw: the events and the observations around them."""

    events: tuple[SSEEvent, ...]
    comments: tuple[SSEComment, ...]
    line_endings: frozenset[LineEnding]
    """Every line-ending style that occurred."""
    trailing: bytes
    """Bytes after the last blank line: an unterminated event the standard discards."""
    total_bytes: int
    bom: bool
    """The stream began with a UTF-8 byte order mark (stripped before parsing)."""
    invalid_utf8: bool
    """Some line was not valid UTF-8 (decoded with U+FFFD replacements)."""
    last_event_id: str | None
    retry: int | None
    """The last valid `retry:` value seen."""
    ignored_blocks: tuple[int, ...] = ()
    """Offsets of blocks with fields but neither `event:` nor `data:` (only id/retry/unknown)."""

    @property
    def unnamed_events(self) -> tuple[int, ...]:
        """Indexes of events without an `event:` line (or with an empty one)."""
        return tuple(e.index for e in self.events if not e.event)

    @property
    def done_sentinels(self) -> tuple[int, ...]:
        """Indexes of `data: [DONE]` events."""
        return tuple(e.index for e in self.events if e.is_done_sentinel)

    @property
    def non_json_events(self) -> tuple[int, ...]:
        """Indexes of events whose data is not JSON."""
        return tuple(e.index for e in self.events if not e.is_json)


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _parse_json(data: str) -> tuple[object, str | None]:
    try:
        return json.loads(data, parse_constant=_refuse_constant), None
    except ValueError as error:
        return None, str(error)


class _Block:
    """The fields of the block being read."""

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.raw = bytearray()
        self.event: str | None = None
        self.data: list[str] = []
        self.id: str | None = None
        self.retry: int | None = None
        self.comments: list[str] = []
        self.unknown: list[tuple[str, str]] = []
        self.has_fields = False


class SSEParser:
    """Incremental parser: `feed` chunks, then `close` for the transcript.

    Works on bytes until a line is complete, so chunk boundaries never matter: CR, LF and the
    bytes of a UTF-8 character cannot be confused, because no multi-byte sequence contains
    0x0A or 0x0D.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._offset = 0  # stream offset of _buffer[0]
        self._started = False
        self._bom = False
        self._block: _Block | None = None
        self._events: list[SSEEvent] = []
        self._comments: list[SSEComment] = []
        self._endings: set[LineEnding] = set()
        self._invalid_utf8 = False
        self._last_event_id: str | None = None
        self._retry: int | None = None
        self._ignored: list[int] = []
        self._total = 0
        self._closed = False

    @property
    def events(self) -> tuple[SSEEvent, ...]:
        """The events completed so far."""
        return tuple(self._events)

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume a chunk; return the events it completed."""
        if self._closed:
            raise RuntimeError("feed() after close()")
        before = len(self._events)
        self._total += len(chunk)
        self._buffer += chunk
        if not self._started:
            if len(self._buffer) < len(_BOM) and _BOM.startswith(bytes(self._buffer)):
                return []  # could still be a BOM: wait for more
            self._strip_bom()
        self._drain(final=False)
        return self._events[before:]

    def close(self) -> SSETranscript:
        """End of stream: finish pending lines and return the transcript."""
        if not self._closed:
            if not self._started:
                self._strip_bom()
            self._drain(final=True)
            self._closed = True
        trailing = bytes(self._block.raw if self._block else b"") + bytes(self._buffer)
        return SSETranscript(
            events=tuple(self._events),
            comments=tuple(self._comments),
            line_endings=frozenset(self._endings),
            trailing=trailing,
            total_bytes=self._total,
            bom=self._bom,
            invalid_utf8=self._invalid_utf8,
            last_event_id=self._last_event_id,
            retry=self._retry,
            ignored_blocks=tuple(self._ignored),
        )

    # --- internals ------------------------------------------------------------------------------

    def _strip_bom(self) -> None:
        self._started = True
        if self._buffer.startswith(_BOM):
            self._bom = True
            del self._buffer[: len(_BOM)]
            self._offset += len(_BOM)

    def _drain(self, *, final: bool) -> None:
        while True:
            match = _LINE_BREAK.search(self._buffer)
            if match is None:
                # At the end, an unterminated last line is discarded as the standard says; it
                # stays in the buffer and so in `trailing`.
                return
            at = match.start()
            ending: LineEnding = "LF"
            size = 1
            if self._buffer[at] == 0x0D:
                if at + 1 == len(self._buffer) and not final:
                    return  # a CR at the end of a chunk may be the first half of CRLF
                if at + 1 < len(self._buffer) and self._buffer[at + 1] == 0x0A:
                    ending, size = "CRLF", 2
                else:
                    ending = "CR"
            line = bytes(self._buffer[:at])
            raw = bytes(self._buffer[: at + size])
            offset = self._offset
            del self._buffer[: at + size]
            self._offset += at + size
            self._endings.add(ending)
            self._line(line, raw, offset)

    def _decode(self, line: bytes) -> str:
        try:
            return line.decode("utf-8")
        except UnicodeDecodeError:
            self._invalid_utf8 = True
            return line.decode("utf-8", errors="replace")

    def _line(self, line: bytes, raw: bytes, offset: int) -> None:
        if not line:
            if self._block is not None:
                self._block.raw += raw
                self._finish(self._block)
                self._block = None
            return
        if self._block is None:
            self._block = _Block(offset)
        block = self._block
        block.raw += raw
        text = self._decode(line)
        if text.startswith(":"):
            comment = text[1:].removeprefix(" ")
            self._comments.append(SSEComment(comment, offset))
            block.comments.append(comment)
            return
        name, colon, value = text.partition(":")
        if colon:
            value = value.removeprefix(" ")
        block.has_fields = True
        if name == "event":
            block.event = value
        elif name == "data":
            block.data.append(value)
        elif name == "id":
            if "\x00" not in value:  # the standard ignores ids containing NULL
                block.id = value
                self._last_event_id = value
        elif name == "retry" and _DIGITS.fullmatch(value):
            block.retry = int(value)
            self._retry = block.retry
        else:
            block.unknown.append((name, value))

    def _finish(self, block: _Block) -> None:
        if block.event is None and not block.data:
            if block.has_fields:
                self._ignored.append(block.offset)
            return  # comments only, or nothing a client would dispatch
        data = "\n".join(block.data)
        parsed, error = _parse_json(data)
        self._events.append(
            SSEEvent(
                index=len(self._events),
                event=block.event,
                data=data,
                data_lines=len(block.data),
                raw=bytes(block.raw),
                offset=block.offset,
                id=block.id,
                retry=block.retry,
                comments=tuple(block.comments),
                unknown_fields=tuple(block.unknown),
                json=parsed,
                json_error=error,
            )
        )


def parse_sse(stream: bytes | Iterable[bytes]) -> SSETranscript:
    """Parse a whole stream, given as bytes or as an iterable of chunks."""
    parser = SSEParser()
    for chunk in [stream] if isinstance(stream, bytes | bytearray) else stream:
        parser.feed(bytes(chunk))
    return parser.close()
