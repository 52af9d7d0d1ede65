"""Requests that any model answers the way a property needs, and the calls that send them
through the SDK or the raw wire.

Model output is not deterministic on every target, so properties never check wording;
they build requests that force the behaviour: `max_tokens: 1` for a max_tokens stop, a
prefill (where the target takes one) plus very common stop sequences for a stop-sequence hit,
temperature 0 where the target takes it (`Target.greedy_fields`; under 2026-10-21 no request
may carry it, and the newest models refuse prefills).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anthropic
import httpx

from conformance.judging.answers import answer_key, answer_subject
from conformance.judging.checks import (
    ConformanceFailure,
    expect,
    expect_no_schema_errors,
    expect_status,
    json_object,
    not_judged,
    read,
    read_optional,
)
from conformance.judging.grammar import GrammarReport, check_stream
from conformance.judging.schemas import validate_response
from conformance.wire.sse import SSEParser, SSETranscript
from conformance.wire.target import Target

T = TypeVar("T")

__all__ = [
    "COMMON_STOPS",
    "END_TURN_MAX_TOKENS",
    "END_TURN_PROMPTS",
    "LONG_ANSWER_PROMPT",
    "STOP_PREFILL",
    "STRUCTURED_IGNORED",
    "TOOLS_NOT_COUNTED",
    "ZERO_STREAM_USAGE",
    "StreamRun",
    "count_text_tokens",
    "create_json",
    "create_within_max_tokens",
    "end_turn_bodies",
    "expect_message",
    "expect_no_violations",
    "expect_stream",
    "expect_valid_message",
    "expect_within_max_tokens",
    "max_text_bytes",
    "message_body",
    "natural_end",
    "sdk_call",
    "stop_sequence_body",
    "stream_raw",
    "stream_usage_subject",
    "text_of",
    "total_input_tokens",
]

LONG_ANSWER_PROMPT = "Write a long story about a lighthouse keeper and the sea. Use many words."

# Some of these appear in almost any English continuation within a few tokens. (The API
# rejects whitespace-only stop sequences, so spaces and newlines cannot be used.)
COMMON_STOPS = ["e", "a", "o", "t", "."]


def message_body(target: Target, **changes: Any) -> dict[str, Any]:
    """A small valid create request for the target's model, short, greedy where it may be."""
    body: dict[str, Any] = {
        "model": target.model,
        "max_tokens": 16,
        **target.greedy_fields(),
        "messages": [{"role": "user", "content": "Say hello in one short sentence."}],
    }
    body.update(changes)
    return body


# Requests after which any instruct model is most likely done: the answer is in the prefill.
END_TURN_PROMPTS = (
    ("Reply with one word: yes or no. Is water wet?", "Yes."),
    ("What is 2 + 2? Reply with the number only.", "4"),
    ('Say "OK" and nothing else.', "OK"),
    ("Reply with exactly: Done.", "Done."),
)
END_TURN_MAX_TOKENS = 64


def end_turn_bodies(target: Target) -> list[dict[str, Any]]:
    """Requests (END_TURN_PROMPTS, prefilled with their whole answer where the target takes a
    prefill, else the bare questions) that a model ends by itself, well before max_tokens: try
    them in turn until one ends with end_turn."""
    return [
        message_body(
            target,
            max_tokens=END_TURN_MAX_TOKENS,
            messages=[
                {"role": "user", "content": question},
                *([{"role": "assistant", "content": answer}] if target.prefill else []),
            ],
        )
        for question, answer in END_TURN_PROMPTS
    ]


# Questions most instruct models answer in a few words and then end their turn: a natural end
# that carries text (the prefilled END_TURN_PROMPTS often end with no text at all).
SHORT_ANSWER_PROMPTS = (
    "Reply with one word: yes or no. Is water wet?",
    "What is the capital of France? Answer in one word.",
    "What is 2 + 2? Reply with the number only.",
)
SHORT_ANSWER_MAX_TOKENS = 32


def natural_end(
    target: Target, answer: Callable[[dict[str, Any]], T], ended: Callable[[T], bool]
) -> tuple[dict[str, Any], T]:
    """The first of the requests a model answers in a few words and then ends by itself (tried
    in turn) whose `answer` is `ended` (with end_turn and some text), and that answer; not
    judged (MSG-021 judges end_turn) when the model ends none."""
    for question in SHORT_ANSWER_PROMPTS:
        messages = [{"role": "user", "content": question}]
        body = message_body(target, max_tokens=SHORT_ANSWER_MAX_TOKENS, messages=messages)
        answered = answer(body)
        if ended(answered):
            return body, answered
    not_judged("the model ended none of the short-answer prompts by itself with text", judged_by="MSG-021")


STOP_PREFILL = "Once upon a time, in a small village by the sea,"


def stop_sequence_body(target: Target, **changes: Any) -> dict[str, Any]:
    """A request whose answer hits a stop sequence on any model that writes English: a long
    answer is asked for, begun by a prefill where the target takes one, and the stops are very
    common letters."""
    prefill = [{"role": "assistant", "content": STOP_PREFILL}] if target.prefill else []
    return message_body(
        target,
        max_tokens=16,  # the first word of any English answer nearly always holds one of the stops
        stop_sequences=COMMON_STOPS,
        messages=[{"role": "user", "content": LONG_ANSWER_PROMPT}, *prefill],
        **changes,
    )


def create_json(target: Target, body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """POST /v1/messages (raw); expects 200 and a JSON object. The Message's schema is judged
    by the schema properties (MSG-001, FUZZ-003); the others read the fields they need."""
    response = target.request("POST", "/v1/messages", json_body=body, **kwargs)
    return expect_message(response)


def expect_message(response: httpx.Response) -> dict[str, Any]:
    expect_status(response, 200)
    return json_object(response, "the Message")


def expect_valid_message(message: Any) -> None:
    """The Message is valid against the schema (the rule of the schema properties only)."""
    expect_no_schema_errors(validate_response("POST /v1/messages", 200, message), "the Message")


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


ZERO_STREAM_USAGE = "streamed usage reports 0 tokens"
TOOLS_NOT_COUNTED = "count_tokens does not count the tools"  # TOOL-014 and TOKENS-009
# STRUCT-001/002/003, raw, streamed and through the SDK's messages.parse: one bug, whichever
# way the answer shows it (prose, a fence, JSON that breaks the schema, a parse that fails).
STRUCTURED_IGNORED = "structured output ignored: the answer is not JSON valid against output_config.format"


def stream_usage_subject(streamed: Any, expected: Any = 1) -> str | None:
    """The cause of a streamed token count of 0 where tokens were used (one bug that breaks
    several properties: the counts of message_start and message_delta left at 0)."""
    zero = streamed == 0 and not isinstance(streamed, bool)
    return ZERO_STREAM_USAGE if zero and isinstance(expected, int) and expected > 0 else None


def total_input_tokens(usage: Any, *, where: str) -> int:
    """All input tokens of a usage object: uncached + written to cache + read from cache (the
    cache counters may be absent or null; input_tokens may not)."""
    total: int = read(usage, "input_tokens", int, where=where)
    for key in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        total += read_optional(usage, key, int, where=where, default=0)
    return total


def text_of(message: Any) -> str:
    """The text of a Message's text blocks, joined (blocks of another shape are not text)."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return ""
    return "".join(
        block["text"]
        for block in content
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
    )


def count_text_tokens(target: Target, text: str) -> int | None:
    """How many tokens `text` is for the target's own tokenizer, by its count_tokens: a user
    turn holding the text less a one-character turn, plus one (the template cancels out). None
    when count_tokens does not answer with counts."""
    counts = []
    for content in (text, "x"):
        body = {"model": target.model, "messages": [{"role": "user", "content": content}]}
        response = target.request("POST", "/v1/messages/count_tokens", json_body=body)
        try:
            value = response.json().get("input_tokens") if response.status_code == 200 else None
        except (ValueError, AttributeError):
            value = None
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        counts.append(value)
    return counts[0] - counts[1] + 1


# Mean characters per token of English prose stay far below this for any tokenizer in use, so
# text longer than this many bytes per allowed token is over max_tokens whatever the tokenizer.
_MAX_BYTES_PER_TOKEN = 32


def max_text_bytes(max_tokens: int) -> int:
    """Text longer than this many bytes proves max_tokens ignored, whatever the tokenizer: a
    stream judged on max_tokens stops being read there (the target need not be waited for)."""
    return _MAX_BYTES_PER_TOKEN * max_tokens + 64


def create_within_max_tokens(target: Target, body: dict[str, Any], *, where: str) -> dict[str, Any]:
    """POST a request whose max_tokens is judged and return the Message. A target too slow to
    answer within --timeout is asked the same request streamed, read for at most as long and as
    much text as proves max_tokens ignored: a target that ignores max_tokens fails for that,
    with how much text arrived, not for being slow."""
    try:
        return create_json(target, body)
    except (httpx.ReadTimeout, httpx.WriteTimeout) as slow:
        limit = int(body["max_tokens"])
        run = stream_raw(target, body, max_text=max_text_bytes(limit))
        if run.status != 200 or len(run.text.encode()) <= limit:
            raise slow from None
        waited = f"no answer within {target.config.timeout:g} s"
        expect_within_max_tokens(target, run.text, None, limit, where=f"{where} ({waited}; streamed instead)")
        raise slow from None


def expect_within_max_tokens(
    target: Target, text: str, output_tokens: int | None, max_tokens: int, *, where: str, count: bool = True
) -> None:
    """Judge max_tokens by what was sent, not only by what the target says: the reported
    output_tokens, and the generated text itself (its size, and its tokens by the target's own
    count_tokens when `count` and that works; a few tokens of slack for word boundaries)."""
    if output_tokens is not None:
        expect(
            output_tokens <= max_tokens,
            f"{where}: usage.output_tokens <= max_tokens ({max_tokens})",
            output_tokens,
            reason="usage",
            subject=f"usage.output_tokens over max_tokens {max_tokens}",
        )
    size = len(text.encode())
    if size <= max_tokens:
        return  # every token is at least one byte
    ignored = "max_tokens ignored: more text came than max_tokens allows"
    measured = count_text_tokens(target, text) if count else None
    expect(
        size <= max_text_bytes(max_tokens),
        f"{where}: at most {max_tokens} tokens of text (about {_MAX_BYTES_PER_TOKEN * max_tokens} bytes)",
        f"{size} bytes of text{'' if measured is None else f' ({measured} tokens by count_tokens)'} for "
        f"max_tokens {max_tokens}: {text[:200]!r}",
        reason="max-tokens-ignored",
        subject=ignored,
    )
    if measured is not None:
        expect(
            measured <= max_tokens + 2,
            f"{where}: at most {max_tokens} generated tokens (by the target's count_tokens, +2 slack)",
            f"{measured} tokens of text for max_tokens {max_tokens}: {text[:200]!r}",
            reason="max-tokens-ignored",
            subject=ignored,
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
    truncated: bool = False  # reading stopped early (stream_raw's max_text)
    ended: float | None = None  # when the stream closed (or reading stopped), as `arrivals`

    @property
    def events(self) -> list[dict[str, Any]]:
        """The JSON payloads of the events that parsed as JSON objects."""
        if self.transcript is None:
            return []
        return [e.json for e in self.transcript.events if isinstance(e.json, dict)]

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]

    def last(self, kind: str) -> dict[str, Any]:
        """The last event of type `kind`; a stream without one fails the property."""
        found = self.of_type(kind)
        if not found:
            seen = [e.get("type") for e in self.events]
            raise ConformanceFailure(
                f"a {kind} event in the stream", f"events: {seen}", reason="missing-event"
            )
        return found[-1]

    def first(self, kind: str) -> dict[str, Any]:
        found = self.of_type(kind)
        if not found:
            self.last(kind)  # raises
        return found[0]

    @property
    def text(self) -> str:
        """The text of every text_delta, joined."""
        deltas = (e.get("delta") for e in self.of_type("content_block_delta"))
        return "".join(
            d["text"]
            for d in deltas
            if isinstance(d, dict) and d.get("type") == "text_delta" and isinstance(d.get("text"), str)
        )

    def longest_silence(self) -> float:
        """The longest wait between events, from the request until the stream closed: a stream
        silent after its last event (or with none) waits as long for the next, or the end."""
        marks = [0.0, *self.arrivals]
        if self.ended is not None:
            marks.append(max(self.ended, marks[-1]))
        return max((b - a for a, b in itertools.pairwise(marks)), default=0.0)


def stream_raw(
    target: Target, body: dict[str, Any], *, max_text: int | None = None, **kwargs: Any
) -> StreamRun:
    """POST a `stream: true` request and read the whole stream from the wire. With `max_text`,
    stop reading once the text deltas exceed that many bytes, or once the stream has run for
    --timeout (`truncated`): a target that ignores max_tokens is judged on what it sent, not
    waited for."""
    body = {**body, "stream": True}
    started = time.monotonic()
    truncated = False
    with target.stream("/v1/messages", body, **kwargs) as response:
        if response.status_code != 200:
            return StreamRun(response.status_code, response.headers, response.read())
        parser = SSEParser()
        arrivals: list[float] = []
        raw = bytearray()
        text_bytes = 0
        for chunk in response.iter_raw():
            raw.extend(chunk)
            for event in parser.feed(chunk):
                arrivals.append(time.monotonic() - started)
                text_bytes += len(_delta_text(event.json).encode())
            if max_text is not None and (
                text_bytes > max_text or time.monotonic() - started > target.config.timeout
            ):
                truncated = True
                break
        transcript = parser.close()
        ended = time.monotonic() - started
    return StreamRun(
        response.status_code,
        response.headers,
        bytes(raw),
        transcript,
        check_stream(transcript, validate_schemas=True),
        arrivals,
        truncated,
        ended,
    )


def _delta_text(payload: Any) -> str:
    delta = payload.get("delta") if isinstance(payload, dict) else None
    text = delta.get("text") if isinstance(delta, dict) else None
    return text if isinstance(text, str) else ""


# What stream_raw sends: the route of every StreamRun expect_stream judges.
_STREAMED = "POST /v1/messages"


def expect_stream(run: StreamRun) -> StreamRun:
    """200 with `text/event-stream`; the parsed stream is attached. A wrong status is named and
    keyed as the same answer to an unstreamed request is (checks.status_subject): one cause."""
    if run.status != 200 or run.transcript is None:
        raise ConformanceFailure(
            "HTTP 200 with an event stream",
            f"HTTP {run.status}: {run.body[:300].decode('utf-8', 'replace')}",
            reason="wrong-status",
            subject=answer_subject(f"{_STREAMED} (stream)", run.status, run.body),
            key=answer_key(_STREAMED, run.status, run.body),
        )
    media = run.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    expect(
        media == "text/event-stream",
        "Content-Type: text/event-stream",
        media,
        reason="content-type",
        subject=f"{_STREAMED} (stream) answered Content-Type {media or 'none'}",
    )
    return run


def expect_no_violations(run: StreamRun, codes: Iterable[str], what: str) -> None:
    """None of the grammar violations `codes` occurred."""
    if run.report is None:
        raise ConformanceFailure(what, f"HTTP {run.status}, no event stream", reason="wrong-status")
    wanted = set(codes)
    found = [v for v in run.report.violations if v.code in wanted]
    if found:
        raise ConformanceFailure(
            what,
            "; ".join(f"[{v.code}] event {v.event_index}: {v.message}" for v in found[:4]),
            reason=found[0].code,
        )
