"""The Anthropic Messages event-stream grammar, checked over a parsed SSE transcript.

    stream   := message_start block* message_delta+ message_stop  |  ... error
    block(i) := content_block_start(i) content_block_delta(i)* content_block_stop(i)

`ping` may come anywhere before the end; indices run 0, 1, 2... in start order; one block is open
at a time; deltas match the open block's type; nothing (not even a ping) follows `message_stop`
or `error` (messages-api.md §4.3, §9.3; peers.md §4.3, §5.2). Unknown event names are recorded,
not judged (the API may add event types); a missing `event:` line is judged, because the SDK
dispatches on the name and drops unnamed events. Each event yields at most one violation of its
own, and the checker carries on as if the event were what it evidently meant, so one mistake is
reported once; codes are stable, so properties cite them and fault-injection tests expect them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from conformance.judging.schemas import validate_event
from conformance.wire.sse import SSEEvent, SSETranscript

__all__ = [
    "BLOCK_DELTAS",
    "KNOWN_EVENTS",
    "VIOLATION_CODES",
    "GrammarReport",
    "Violation",
    "check_stream",
]

KNOWN_EVENTS = frozenset({
    "message_start", "content_block_start", "content_block_delta", "content_block_stop",
    "message_delta", "message_stop", "ping", "error",
})  # fmt: skip
# Which delta types each GA block type accepts. Blocks that arrive complete accept none.
# Block and delta types not listed here (beta ones, future ones) are not judged.
_COMPLETE_BLOCKS = (
    "redacted_thinking", "web_search_tool_result", "web_fetch_tool_result",
    "code_execution_tool_result", "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result", "tool_search_tool_result", "container_upload",
)  # fmt: skip
BLOCK_DELTAS: dict[str, frozenset[str]] = {
    "text": frozenset({"text_delta", "citations_delta"}),
    "tool_use": frozenset({"input_json_delta"}),
    "server_tool_use": frozenset({"input_json_delta"}),
    "thinking": frozenset({"thinking_delta", "signature_delta"}),
    **{kind: frozenset() for kind in _COMPLETE_BLOCKS},
}
# What a block must look like in its content_block_start: empty, filled only by deltas.
_EMPTY_START: dict[str, dict[str, object]] = {
    "text": {"text": ""},
    "tool_use": {"input": {}},
    "server_tool_use": {"input": {}},
    "thinking": {"thinking": "", "signature": ""},
}

VIOLATION_CODES: dict[str, str] = {
    "leading-bom": "the stream starts with a UTF-8 BOM (the SDK then misreads the first field)",
    "invalid-utf8": "bytes that are not UTF-8",
    "unterminated-event": "fields after the last blank line (an event never dispatched)",
    "missing-event-name": "an event without an `event:` line (the SDK drops it)",
    "event-name-mismatch": "the `event:` name differs from the data's `type`",
    "done-sentinel": "a `data: [DONE]` event (removed from the API in 2023)",
    "invalid-json": "event data that is not JSON",
    "data-not-object": "event data that is JSON but not an object",
    "malformed-event": "an event lacking a field the grammar needs (index, delta, message...)",
    "first-not-message-start": "the first event (pings aside) is not message_start",
    "duplicate-message-start": "a second message_start",
    "start-not-empty": "message_start's message has content, stop_reason or stop_sequence",
    "index-gap": "content_block_start indices are not 0, 1, 2... in order",
    "interleaved-blocks": "a block starts while another is still open",
    "block-start-not-empty": "content_block_start carries text, input or thinking already",
    "delta-unknown-block": "a delta for a block that is not open",
    "delta-type-mismatch": "a delta type the open block's type does not take",
    "signature-not-last": "a thinking block has a delta after its signature_delta",
    "signature-missing": "a thinking block stopped without a signature_delta",
    "partial-json-invalid": "a tool block's partial_json does not join into one JSON object",
    "stop-unknown-block": "content_block_stop for a block never started",
    "double-stop": "a second content_block_stop for the same block",
    "block-not-stopped": "a block still open at message_delta or at the end",
    "block-after-message-delta": "content_block_start after message_delta",
    "missing-output-tokens": "message_delta without an integer usage.output_tokens",
    "stop-reason-null": "the last message_delta leaves stop_reason null",
    "no-message-delta": "message_stop (or the end) with no message_delta before it",
    "no-message-stop": "the stream ends without message_stop (and without error)",
    "event-after-stop": "an event after message_stop",
    "event-after-error": "an event after an error event",
    "schema-invalid": "the event's data breaks its JSON Schema (only with validate_schemas)",
}


@dataclass(frozen=True)
class Violation:
    """One break of the stream grammar."""

    code: str
    """A stable code from VIOLATION_CODES."""
    message: str
    """What happened, with the values involved."""
    event_index: int | None
    """The offending event's index in the transcript, or None for the stream as a whole."""


@dataclass(frozen=True)
class GrammarReport:
    """The verdict on one stream."""

    violations: tuple[Violation, ...]
    unknown_events: tuple[int, ...]
    """Indexes of events with a name the grammar does not know (tolerated)."""
    pings: int
    ended_with_error: bool
    completed: bool
    """True when message_stop arrived."""
    started: bool = False
    """True when a message began: message_start, or another message event in its place (not a
    ping, not an error). A stream that never began has nothing for the grammar's stream-wide
    rules to judge."""

    @property
    def ok(self) -> bool:
        """True when nothing was violated."""
        return not self.violations

    @property
    def codes(self) -> frozenset[str]:
        """The distinct violation codes."""
        return frozenset(v.code for v in self.violations)


@dataclass
class _Block:
    index: int
    kind: str
    partial_json: list[str] = field(default_factory=list)
    signed: bool = False


class _Checker:
    def __init__(self, validate_schemas: bool) -> None:
        self.validate_schemas = validate_schemas
        self.violations: list[Violation] = []
        self.unknown: list[int] = []
        self.pings = 0
        self.started = False
        self.first_reported = False
        self.next_index = 0
        self.open: dict[int, _Block] = {}
        self.stopped: set[int] = set()
        self.deltas = 0
        self.stop_reason: object = None
        self.terminal: str | None = None  # "message_stop" or "error"

    def flag(self, code: str, message: str, index: int | None) -> None:
        self.violations.append(Violation(code, message, index))

    def event(self, event: SSEEvent) -> None:
        i = event.index
        if event.is_done_sentinel:
            self.flag("done-sentinel", "data: [DONE] is not an Anthropic event", i)
            return
        if self.terminal is not None:
            code = "event-after-stop" if self.terminal == "message_stop" else "event-after-error"
            self.flag(code, f"{event.name!r} after {self.terminal}", i)
            return
        before = len(self.violations)
        data = event.json if isinstance(event.json, dict) else None
        declared = data.get("type") if data is not None else None
        kind = self._kind(event, declared)
        if kind is None:
            return
        if not event.is_json:
            self.flag("invalid-json", f"{kind} data is not JSON: {event.json_error}", i)
            return
        if data is None:
            self.flag("data-not-object", f"{kind} data is {type(event.json).__name__}", i)
            return
        self._dispatch(kind, data, i)
        if self.validate_schemas and len(self.violations) == before:
            self._schema(data, i)

    def _kind(self, event: SSEEvent, declared: object) -> str | None:
        """The event type to check against, or None when the grammar has nothing to say."""
        i = event.index
        if not event.event:
            if isinstance(declared, str) and declared in KNOWN_EVENTS:
                self.flag("missing-event-name", f"{declared} sent without an event: line", i)
                return declared  # judge the rest as what it evidently is
            self.flag("missing-event-name", "an event without an event: line", i)
            return None
        if event.event not in KNOWN_EVENTS:
            if isinstance(declared, str) and declared in KNOWN_EVENTS:
                self.flag("event-name-mismatch", f"{declared} sent as event {event.event!r}", i)
            else:
                self.unknown.append(i)
            return None  # the SDK drops events it does not know by name
        if event.is_json and isinstance(event.json, dict) and declared != event.event:
            # The SDK dispatches on the name (and fills in a missing `type` from it), so the
            # event is still judged as what its name says.
            self.flag("event-name-mismatch", f"event {event.event!r} has type {declared!r}", i)
        return event.event

    def _dispatch(self, kind: str, data: dict[str, Any], i: int) -> None:
        if kind == "ping":
            self.pings += 1
            return
        if kind == "error":
            self.terminal = "error"
            return
        if not self.started and kind != "message_start":
            if not self.first_reported:
                self.flag("first-not-message-start", f"{kind} before message_start", i)
                self.first_reported = True
            self.started = True
        handler = {
            "message_start": self._message_start,
            "content_block_start": self._block_start,
            "content_block_delta": self._block_delta,
            "content_block_stop": self._block_stop,
            "message_delta": self._message_delta,
            "message_stop": self._message_stop,
        }[kind]
        handler(data, i)

    def _message_start(self, data: dict[str, Any], i: int) -> None:
        if self.started:
            self.flag("duplicate-message-start", "message_start after the stream began", i)
            return
        self.started = True
        message = data.get("message")
        if not isinstance(message, dict):
            self.flag("malformed-event", "message_start without a message object", i)
            return
        filled = [
            f"{key}={message.get(key)!r}"
            for key, empty in (("content", []), ("stop_reason", None), ("stop_sequence", None))
            if message.get(key, empty) != empty
        ]
        if filled:
            self.flag("start-not-empty", "message_start has " + ", ".join(filled), i)

    def _index(self, data: dict[str, Any], i: int, kind: str) -> int | None:
        index = data.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            return index
        self.flag("malformed-event", f"{kind} without an integer index", i)
        return None

    def _block_start(self, data: dict[str, Any], i: int) -> None:
        index = self._index(data, i, "content_block_start")
        block = data.get("content_block")
        if index is None:
            return
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            self.flag("malformed-event", "content_block_start without a typed content_block", i)
            return
        kind = block["type"]
        if self.deltas:
            self.flag("block-after-message-delta", f"block {index} starts after message_delta", i)
        elif self.open:
            self.flag("interleaved-blocks", f"block {index} starts while {sorted(self.open)} open", i)
        elif index != self.next_index:
            self.flag("index-gap", f"block index {index}, expected {self.next_index}", i)
        else:
            filled = [key for key, empty in _EMPTY_START.get(kind, {}).items() if block.get(key) != empty]
            if filled:
                self.flag("block-start-not-empty", f"{kind} block starts with {filled}", i)
        self.open[index] = _Block(index, kind)
        self.next_index = max(self.next_index, index + 1)

    def _block_delta(self, data: dict[str, Any], i: int) -> None:
        index = self._index(data, i, "content_block_delta")
        delta = data.get("delta")
        if index is None:
            return
        if not isinstance(delta, dict) or not isinstance(delta.get("type"), str):
            self.flag("malformed-event", "content_block_delta without a typed delta", i)
            return
        block = self.open.get(index)
        if block is None:
            state = "already stopped" if index in self.stopped else "never started"
            self.flag("delta-unknown-block", f"delta for block {index}, which is {state}", i)
            return
        kind = delta["type"]
        allowed = BLOCK_DELTAS.get(block.kind)
        if allowed is not None and kind not in allowed:
            self.flag("delta-type-mismatch", f"{kind} on a {block.kind} block ({index})", i)
            return
        if block.signed:
            self.flag("signature-not-last", f"{kind} after signature_delta in block {index}", i)
        if kind == "signature_delta":
            block.signed = True
        elif kind == "input_json_delta":
            fragment = delta.get("partial_json")
            if not isinstance(fragment, str):
                self.flag("malformed-event", "input_json_delta without string partial_json", i)
                return
            block.partial_json.append(fragment)

    def _block_stop(self, data: dict[str, Any], i: int) -> None:
        index = self._index(data, i, "content_block_stop")
        if index is None:
            return
        block = self.open.pop(index, None)
        if block is None:
            if index in self.stopped:
                self.flag("double-stop", f"block {index} stopped again", i)
            else:
                self.flag("stop-unknown-block", f"stop for block {index}, never started", i)
            return
        self.stopped.add(index)
        self._close(block, i)

    def _close(self, block: _Block, i: int) -> None:
        if block.kind == "thinking" and not block.signed:
            self.flag("signature-missing", f"thinking block {block.index} has no signature", i)
        if block.kind in ("tool_use", "server_tool_use"):
            text = "".join(block.partial_json)
            try:
                value = json.loads(text) if text else {}
            except ValueError as error:
                self.flag("partial-json-invalid", f"block {block.index}: {error}: {text!r}", i)
                return
            if not isinstance(value, dict):
                self.flag("partial-json-invalid", f"block {block.index} input is not an object", i)

    def _abandon_open(self, i: int | None, when: str) -> None:
        for index in sorted(self.open):
            self.flag("block-not-stopped", f"block {index} still open at {when}", i)
            self.stopped.add(index)
        self.open.clear()

    def _message_delta(self, data: dict[str, Any], i: int) -> None:
        self._abandon_open(i, "message_delta")
        self.deltas += 1
        delta, usage = data.get("delta"), data.get("usage")
        if not isinstance(delta, dict):
            self.flag("malformed-event", "message_delta without a delta object", i)
            return
        self.stop_reason = delta.get("stop_reason")
        tokens = usage.get("output_tokens") if isinstance(usage, dict) else None
        if not isinstance(tokens, int) or isinstance(tokens, bool):
            self.flag("missing-output-tokens", f"usage is {json.dumps(usage)}", i)

    def _message_stop(self, data: dict[str, Any], i: int) -> None:
        self.terminal = "message_stop"
        if not self.deltas:
            self._abandon_open(i, "message_stop")
            self.flag("no-message-delta", "message_stop without a message_delta before it", i)
        elif self.stop_reason is None:
            self.flag("stop-reason-null", "the last message_delta has stop_reason null", i)

    def _schema(self, data: dict[str, Any], i: int) -> None:
        errors = validate_event(data)
        if errors:
            shown = "; ".join(str(e) for e in errors[:3])
            self.flag("schema-invalid", f"{data.get('type')}: {shown}", i)

    def end(self, transcript: SSETranscript) -> None:
        if self.terminal is None:
            if not self.started:
                # No event at all (pings aside): the stream ended before it began. That is its
                # missing end, not a wrong first event: there was none.
                self.flag("no-message-stop", "the stream ends without any event (pings aside)", None)
            else:
                self._abandon_open(None, "the end of the stream")
                if not self.deltas:
                    self.flag("no-message-delta", "the stream ends without message_delta", None)
                self.flag("no-message-stop", "the stream ends without message_stop", None)
        lines = transcript.trailing.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        if any(line and not line.startswith(b":") for line in lines):
            self.flag("unterminated-event", f"undispatched bytes {transcript.trailing!r}", None)
        if transcript.bom:
            self.flag("leading-bom", "the stream starts with EF BB BF", None)
        if transcript.invalid_utf8:
            self.flag("invalid-utf8", "some lines are not valid UTF-8", None)


def check_stream(transcript: SSETranscript, *, validate_schemas: bool = False) -> GrammarReport:
    """Check a parsed stream against the Messages event grammar.

    With `validate_schemas`, each known event whose grammar is fine is also validated against
    its JSON Schema (code `schema-invalid`).
    """
    checker = _Checker(validate_schemas)
    for event in transcript.events:
        checker.event(event)
    checker.end(transcript)
    return GrammarReport(
        violations=tuple(checker.violations),
        unknown_events=tuple(checker.unknown),
        pings=checker.pings,
        ended_with_error=checker.terminal == "error",
        completed=checker.terminal == "message_stop",
        started=checker.started,
    )
