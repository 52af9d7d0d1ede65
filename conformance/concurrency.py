"""Does the target answer two overlapping requests each whole, and alike? A user with two
clients meets the answer, and so do the suite's own workers (`--jobs`).

Two of the same greedy streamed request, the second sent once the first's first event came:

- `cut`: a stream ended without its `message_stop` (llama-cpp-python's server ends a running
  stream with `[DONE]` when another request waits: `interrupt_requests`), or ended as if whole
  with a strict beginning of the other's text (a gateway in front closed the cut stream
  properly, `end_turn` where the other ran on to max_tokens). That is STREAM-024's
  finding, once; the rest of the run is judged one request at a time, so that no other verdict
  rests on a stream the suite's own concurrency cut;
- `serialised`: the second stream began only after the first ended: the target takes one
  request at a time, so the run does too (workers would only queue, and time out);
- `concurrent`: both ran at once. Where their answers differ though the same request sent
  alone twice agreed (a server that batches concurrent requests computes them differently:
  llama-server's slots), the comparison properties (`compares`) run with the target to
  themselves, under the concurrency the determinism probe ran under;
- `unknown`: the first stream ended before the second was sent (too short to overlap), or a
  stream was refused: nothing changes.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from conformance.wire.drivers import LONG_ANSWER_PROMPT, StreamRun, message_body
from conformance.wire.sse import SSEParser
from conformance.wire.target import Target

__all__ = ["Concurrency", "Overlap", "overlap", "probe_concurrency"]

PROBE_MAX_TOKENS = 64  # long enough that the second request is sent while the first streams


@dataclass(slots=True)
class _Stream:
    """One of the two streams: when it was sent, when each event came (monotonic seconds)."""

    sent: float = 0.0
    arrivals: list[float] = field(default_factory=list)
    run: StreamRun | None = None
    failure: str | None = None
    started: threading.Event = field(default_factory=threading.Event)

    @property
    def complete(self) -> bool:
        return self.run is not None and self.run.status == 200 and bool(self.run.of_type("message_stop"))

    def said(self, name: str) -> str:
        if self.failure is not None:
            return f"{name} failed ({self.failure})"
        assert self.run is not None
        if self.run.status != 200:
            return f"{name} got HTTP {self.run.status}"
        events = [str(e.get("type")) for e in self.run.events]
        done = " then [DONE]" if b"[DONE]" in self.run.body else ""
        ended = (
            "ended with message_stop" if self.complete else f"ended after {events[-3:] or 'no event'}{done}"
        )
        return f"{name}: {len(events)} events, {ended}"


@dataclass(frozen=True, slots=True)
class Overlap:
    """What two overlapping streams of one request showed."""

    mode: str  # "concurrent", "serialised", "cut" or "unknown"
    alike: bool | None  # both complete: the same text and stop reason
    detail: str
    evidence: list[dict[str, Any]]


def overlap(target: Target) -> Overlap:
    """Send the same greedy streamed request twice, the second once the first's first event
    came, and read both to their end. Recorded as the running property's exchanges."""
    body = {
        **message_body(
            target, max_tokens=PROBE_MAX_TOKENS, messages=[{"role": "user", "content": LONG_ANSWER_PROMPT}]
        ),
        "stream": True,
    }
    first, second = _Stream(), _Stream()
    reader = threading.Thread(target=_read, args=(target, body, first), daemon=True)
    reader.start()
    first.started.wait(timeout=target.config.timeout)
    _read(target, body, second)
    reader.join(timeout=target.config.timeout)
    evidence = [e.as_evidence() for e in target.recorder.exchanges[-2:]]
    said = f"{first.said('the first stream')}; {second.said('the second')}"
    if first.run is None or second.run is None or not (first.run.status == second.run.status == 200):
        return Overlap("unknown", None, f"{said}: nothing to compare", evidence)
    if not (first.complete and second.complete):
        return Overlap("cut", None, f"{said}: a stream cut while another request was served", evidence)
    if (cut := _ended_early(first.run, second.run)) is not None:
        return Overlap("cut", None, f"{said}: {cut}", evidence)
    first_end = first.arrivals[-1] if first.arrivals else first.sent
    if second.sent >= first_end:
        return Overlap("unknown", None, f"{said}: the first ended before the second was sent", evidence)
    alike = (first.run.text, _stop(first.run)) == (second.run.text, _stop(second.run))
    answers = "the same answer" if alike else "different answers"
    if second.arrivals and second.arrivals[0] >= first_end:
        return Overlap(
            "serialised", alike, f"the second stream began only after the first ended ({answers})", evidence
        )
    return Overlap("concurrent", alike, f"both streams ran at once, with {answers}", evidence)


def _ended_early(first: StreamRun, second: StreamRun) -> str | None:
    """A stream that ended as if whole, but whose text is a strict beginning of the other's (the
    same request): cut, then closed properly by a gateway in front (LiteLLM turns the backend's
    early `[DONE]` into message_delta and message_stop). Only where the longer ran to max_tokens
    and the shorter says it ended by itself: an answer of its own never stops mid-sentence so."""
    for short, long in ((first, second), (second, first)):
        if (
            long.text.startswith(short.text)
            and len(short.text) < len(long.text)
            and _stop(long) == "max_tokens"
            and _stop(short) != "max_tokens"
        ):
            return (
                f"one stream ended ({_stop(short)}) after {len(short.text)} characters of text that the "
                f"other, the same request, went on from to max_tokens ({len(long.text)} characters)"
            )
    return None


def _stop(run: StreamRun) -> Any:
    deltas = run.of_type("message_delta")
    delta = deltas[-1].get("delta") if deltas else None
    return delta.get("stop_reason") if isinstance(delta, dict) else None


def _read(target: Target, body: dict[str, Any], stream: _Stream) -> None:
    """One stream, read to its end, each event's arrival kept; never raises."""
    stream.sent = time.monotonic()
    try:
        with target.stream("/v1/messages", body) as response:
            if response.status_code != 200:
                stream.run = StreamRun(response.status_code, response.headers, response.read())
                return
            parser, raw = SSEParser(), bytearray()
            for chunk in response.iter_raw():
                raw.extend(chunk)
                for _ in parser.feed(chunk):
                    stream.arrivals.append(time.monotonic())
                    stream.started.set()
            stream.run = StreamRun(200, response.headers, bytes(raw), parser.close())
    except httpx.TransportError as exc:
        stream.failure = f"{type(exc).__name__}: {exc}"
    finally:
        stream.started.set()


@dataclass(frozen=True, slots=True)
class Concurrency:
    """The run's start-up probe of concurrency, and what the run does about it."""

    mode: str
    alike: bool | None
    detail: str

    @property
    def one_at_a_time(self) -> bool:
        """The run judges one request at a time: the target cuts or serialises concurrent work."""
        return self.mode in ("cut", "serialised")

    @property
    def compare_alone(self) -> bool:
        """Comparisons of two answers run with the target to themselves: concurrent answers differ."""
        return self.alike is False

    def as_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "alike": self.alike, "detail": self.detail}


def probe_concurrency(target: Target) -> Concurrency:
    """The start-up probe (before any property, apart from their evidence)."""
    recorder = target.recorder
    property_id, exchanges = recorder.property_id, recorder.exchanges
    recorder.reset(None)
    try:
        found = overlap(target)
    finally:
        recorder.property_id, recorder.exchanges = property_id, exchanges
    return Concurrency(found.mode, found.alike, found.detail)
