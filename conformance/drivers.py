"""Requests that any model answers the way a property needs, and the calls that send them
through the SDK or the raw wire.

Model output is not deterministic on every target, so properties never check wording;
they build requests that force the behaviour: `max_tokens: 1` for a max_tokens stop, a
prefill plus very common stop sequences for a stop-sequence hit, temperature 0 always.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx

from conformance.checks import (
    ConformanceFailure,
    expect,
    expect_json,
    expect_no_schema_errors,
    expect_status,
)
from conformance.grammar import GrammarReport, check_stream
from conformance.schemas import validate_response
from conformance.sse import SSEParser, SSETranscript
from conformance.target import Target

__all__ = [
    "COMMON_STOPS",
    "GA_STOP_REASONS",
    "LONG_ANSWER_PROMPT",
    "StreamRun",
    "create_json",
    "expect_message",
    "expect_no_violations",
    "expect_stream",
    "message_body",
    "sdk_call",
    "stop_sequence_body",
    "stream_raw",
    "text_of",
    "total_input_tokens",
]

LONG_ANSWER_PROMPT = "Write a long story about a lighthouse keeper and the sea. Use many words."

# The GA stop reasons (SDK types/stop_reason.py); model_context_window_exceeded is GA since 0.119.
GA_STOP_REASONS = frozenset(
    {
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
    }
)

# Some of these appear in almost any English continuation within a few tokens. (The API
# rejects whitespace-only stop sequences, so spaces and newlines cannot be used.)
COMMON_STOPS = ["e", "a", "o", "t", "."]


def message_body(target: Target, **changes: Any) -> dict[str, Any]:
    """A small valid create request for the target's model, greedy and short."""
    body: dict[str, Any] = {
        "model": target.model,
        "max_tokens": 16,
        "temperature": 0,
        "messages": [{"role": "user", "content": "Say hello in one short sentence."}],
    }
    body.update(changes)
    return body


def stop_sequence_body(target: Target, **changes: Any) -> dict[str, Any]:
    """A request whose answer hits a stop sequence on any model that writes English: a long
    answer is asked for, begun by a prefill, and the stops are very common letters."""
    return message_body(
        target,
        max_tokens=48,
        stop_sequences=COMMON_STOPS,
        messages=[
            {"role": "user", "content": LONG_ANSWER_PROMPT},
            {"role": "assistant", "content": "Once upon a time, in a small village by the sea,"},
        ],
        **changes,
    )


def create_json(target: Target, body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """POST /v1/messages (raw); expects 200, JSON, and a schema-valid Message."""
    response = target.request("POST", "/v1/messages", json_body=body, **kwargs)
    return expect_message(response)


def expect_message(response: httpx.Response) -> dict[str, Any]:
    expect_status(response, 200)
    message = expect_json(response)
    expect_no_schema_errors(validate_response("POST /v1/messages", 200, message), "the Message body")
    if not isinstance(message, dict):
        raise ConformanceFailure("a JSON object", repr(message), reason="schema")
    return message


def sdk_call(what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
    """Run an SDK call; an SDK-side failure caused by the response (unparseable body, bad
    event order, strict validation) becomes a conformance failure, not a harness error."""
    try:
        return call(*args, **kwargs)
    except (anthropic.APIStatusError, anthropic.APIConnectionError):
        raise  # judged by the plugin: an error status, or transport trouble
    except (
        anthropic.APIResponseValidationError,
        ValueError,
        RuntimeError,
        IndexError,
        KeyError,
    ) as exc:
        raise ConformanceFailure(
            f"the official SDK handles the response to {what}",
            f"{type(exc).__name__}: {exc}",
            reason="sdk-rejected-response",
        ) from exc


def total_input_tokens(usage: dict[str, Any]) -> int:
    """All input tokens of a usage object: uncached + written to cache + read from cache."""
    keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(int(usage.get(key) or 0) for key in keys)


def text_of(message: dict[str, Any]) -> str:
    return "".join(
        block.get("text", "") for block in message.get("content", []) if block.get("type") == "text"
    )


@dataclass(slots=True)
class StreamRun:
    """One raw streaming request: the response head, the parsed transcript, the grammar
    verdict, and when each event arrived (seconds after the request was sent)."""

    status: int
    headers: httpx.Headers
    body: bytes
    transcript: SSETranscript | None = None
    report: GrammarReport | None = None
    arrivals: list[float] = field(default_factory=list)

    @property
    def events(self) -> list[dict[str, Any]]:
        """The JSON payloads of the events that parsed as JSON objects."""
        if self.transcript is None:
            return []
        return [e.json for e in self.transcript.events if isinstance(e.json, dict)]

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]

    @property
    def text(self) -> str:
        """The text of every text_delta, joined."""
        return "".join(e["delta"].get("text", "") for e in self.of_type("content_block_delta"))

    def longest_silence(self) -> float:
        """The longest wait for an event, from the request until the last event."""
        marks = [0.0, *self.arrivals]
        return max((b - a for a, b in itertools.pairwise(marks)), default=0.0)


def stream_raw(target: Target, body: dict[str, Any], **kwargs: Any) -> StreamRun:
    """POST a `stream: true` request and read the whole stream from the wire."""
    body = {**body, "stream": True}
    started = time.monotonic()
    with target.stream("/v1/messages", body, **kwargs) as response:
        if response.status_code != 200:
            return StreamRun(response.status_code, response.headers, response.read())
        parser = SSEParser()
        arrivals: list[float] = []
        raw = bytearray()
        for chunk in response.iter_raw():
            raw.extend(chunk)
            for _ in parser.feed(chunk):
                arrivals.append(time.monotonic() - started)
        transcript = parser.close()
    return StreamRun(
        response.status_code,
        response.headers,
        bytes(raw),
        transcript,
        check_stream(transcript, validate_schemas=True),
        arrivals,
    )


def expect_stream(run: StreamRun) -> StreamRun:
    """200 with `text/event-stream`; the parsed stream is attached."""
    if run.status != 200 or run.transcript is None:
        raise ConformanceFailure(
            "HTTP 200 with an event stream",
            f"HTTP {run.status}: {run.body[:300].decode('utf-8', 'replace')}",
            reason="wrong-status",
        )
    media = run.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    expect(
        media == "text/event-stream",
        "Content-Type: text/event-stream",
        media,
        reason="content-type",
    )
    return run


def expect_no_violations(run: StreamRun, codes: Iterable[str], what: str) -> None:
    """None of the grammar violations `codes` occurred."""
    assert run.report is not None
    wanted = set(codes)
    found = [v for v in run.report.violations if v.code in wanted]
    if found:
        raise ConformanceFailure(
            what,
            "; ".join(f"[{v.code}] event {v.event_index}: {v.message}" for v in found[:4]),
            reason=found[0].code,
        )
