"""Message Batches: the requests the BATCH-* properties send, polling bounded by the profile's
`batch_wait_seconds`, and strict readers of what comes back (the batch twin of thinking.py).

Each batch request is a real generation on the target, and a CPU server runs them slowly, so
batches are small (one to four requests, max_tokens 8, temperature 0), and a batch a property
does not need to see finish is canceled as soon as it has been judged. One finished batch of two
valid requests is shared by the properties that only read a finished batch (`shared_batch`): it
is created and waited for once per run apart from any property (like the feature probes, its
requests carry no property id, so no property's fault touches it, and they are no property's
evidence unless making it failed); each property then retrieves it and reads its results itself,
under its own id. Properties whose rule is creation, polling, cancel or delete make their own.

Bounded time: a wait polls (0.2 s apart, growing to 2 s) until `processing_status` is `ended`,
for at most `batch_wait_seconds`; a batch still processing then FAILs the property that waits
(the API ends every batch within 24 hours, so one that never ends is the target's failure; a
slow target needs a larger wait, and the message says so). Once a wait of the run has run out
while no batch of the run had ended, a later wait first asks for that batch again: still not
ended, the later wait fails at once with that cause (a target that never ends a batch costs one
wait, not one per property); ended by now, the run waits as usual again.
"""

from __future__ import annotations

import contextlib
import json
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import quote

import anthropic
import httpx

from conformance.judging.checks import ConformanceFailure, expect_status, json_object, read
from conformance.wire.drivers import message_body
from conformance.wire.target import Exchange, Target

__all__ = [
    "BATCH",
    "BATCHES",
    "BATCH_MAX_TOKENS",
    "COUNT_KEYS",
    "RESULT_TYPES",
    "SHARED_PROMPTS",
    "TERMINAL",
    "Results",
    "SharedBatch",
    "apart",
    "batch_path",
    "batch_request",
    "cancel_quietly",
    "counts_of",
    "create",
    "id_of",
    "invalid_request",
    "parse_jsonl",
    "parse_time",
    "result_of",
    "results",
    "retrieve",
    "sdk_batch_call",
    "shared_batch",
    "status_of",
    "wait_ended",
]

BATCHES = "/v1/messages/batches"
BATCH = "the MessageBatch"
BATCH_MAX_TOKENS = 8
TERMINAL = ("succeeded", "errored", "canceled", "expired")
COUNT_KEYS = ("processing", *TERMINAL)
RESULT_TYPES = frozenset(TERMINAL)
# The shared batch: custom_id -> prompt.
SHARED_PROMPTS = {
    "plumbline-ok-1": "Say hello in one short sentence.",
    "plumbline-ok-2": "Name one colour.",
}
_FIRST_PAUSE, _LONGEST_PAUSE = 0.2, 2.0

T = TypeVar("T")


def batch_request(
    target: Target,
    custom_id: str,
    prompt: str = "Say hello in one short sentence.",
    *,
    max_tokens: int = BATCH_MAX_TOKENS,
) -> dict[str, Any]:
    """One cheap, greedy request of a batch."""
    params = message_body(target, max_tokens=max_tokens, messages=[{"role": "user", "content": prompt}])
    return {"custom_id": custom_id, "params": params}


def invalid_request(target: Target, custom_id: str) -> dict[str, Any]:
    """A request the Messages API refuses by its schema (`max_tokens` below its minimum 0), so
    its error is documented; batches validate params when they run, so it comes back errored
    while the batch goes on. It costs nothing to run on a target that accepts it anyway."""
    return {"custom_id": custom_id, "params": message_body(target, max_tokens=-1)}


def batch_path(batch_id: str, suffix: str = "") -> str:
    """The path of a batch (ids come from the target: quoted, so any id makes a valid URL)."""
    return f"{BATCHES}/{quote(batch_id, safe='')}{suffix}"


def create(target: Target, requests: list[dict[str, Any]]) -> dict[str, Any]:
    """POST /v1/messages/batches (raw): 200 and a JSON object."""
    response = target.request("POST", BATCHES, json_body={"requests": requests})
    expect_status(response, 200)
    return json_object(response, BATCH)


def retrieve(target: Target, batch_id: str) -> dict[str, Any]:
    """GET /v1/messages/batches/{id} (raw): 200 and a JSON object."""
    response = target.request("GET", batch_path(batch_id))
    expect_status(response, 200)
    return json_object(response, BATCH)


def id_of(batch: Any) -> str:
    value: str = read(batch, "id", str, where=BATCH)
    return value


def status_of(batch: Any) -> str:
    value: str = read(batch, "processing_status", str, where=BATCH)
    return value


def counts_of(batch: Any) -> dict[str, int]:
    """The five request_counts, each an integer."""
    return {key: read(batch, f"request_counts.{key}", int, where=BATCH) for key in COUNT_KEYS}


def parse_time(value: str, what: str) -> datetime:
    """An RFC 3339 timestamp with its offset (what the API writes), as an aware datetime."""
    try:
        moment = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None or "T" not in value.upper():
        raise ConformanceFailure(f"{what}: an RFC 3339 date-time", repr(value), reason="timestamp")
    return moment


# ------------------------------------------------------------------ waiting, run-scoped state


@dataclass
class SharedBatch:
    """The run's finished batch of two valid requests (see the module docstring)."""

    requests: list[dict[str, Any]]
    batch_id: str = ""
    failure: BaseException | None = None
    exchanges: list[Exchange] = field(default_factory=list)

    @property
    def custom_ids(self) -> list[str]:
        return [str(request["custom_id"]) for request in self.requests]

    def params(self, custom_id: str) -> dict[str, Any]:
        return next(dict(r["params"]) for r in self.requests if r["custom_id"] == custom_id)


@dataclass
class _Run:
    ended_one: bool = False  # some batch of this run has ended
    stalled: str = ""  # the batch whose wait ran out while no batch had ended
    stalled_since: float = 0.0  # when its wait began (time.monotonic)
    shared: SharedBatch | None = None

    def still_stalled(self, target: Target) -> str | None:
        """Why not to wait again: the stalled batch, asked again (apart), has still not ended
        and no batch of the run has. None when there is no such batch (any more)."""
        if not self.stalled or self.ended_one:
            return None
        with apart(target):
            try:
                status = status_of(retrieve(target, self.stalled))
            except (ConformanceFailure, httpx.TransportError):
                status = "unknown"
        if status == "ended":
            self.stalled, self.ended_one = "", True
            return None
        since = time.monotonic() - self.stalled_since
        return (
            f"not waited for: batch {self.stalled} of this run is still {status!r} {since:.0f} s after the "
            "run began to wait for it, and no batch of this run has ended"
        )


_RUNS: weakref.WeakKeyDictionary[Target, _Run] = weakref.WeakKeyDictionary()


def _run(target: Target) -> _Run:
    if target not in _RUNS:
        _RUNS[target] = _Run()
    return _RUNS[target]


def wait_ended(
    target: Target,
    batch_id: str,
    *,
    observe: Callable[[dict[str, Any]], None] | None = None,
    what: str = "the batch",
) -> dict[str, Any]:
    """Poll the batch until it has ended, at most the profile's `batch_wait_seconds`; each
    polled MessageBatch goes to `observe` first. The ended MessageBatch, or a FAIL."""
    run = _run(target)
    wait = target.config.profile.batch_wait_seconds
    expected = (
        f"{what} ends (processing_status 'ended') within the profile's batch_wait_seconds "
        f"({wait:g} s); the API ends every batch within 24 hours, so a slow target needs a larger "
        "batch_wait_seconds"
    )
    stalled = run.still_stalled(target)
    if stalled is not None:
        raise ConformanceFailure(expected, stalled, reason="batch-never-ended")
    started = time.monotonic()
    pause, polls = _FIRST_PAUSE, 0
    while True:
        batch = retrieve(target, batch_id)
        polls += 1
        if observe is not None:
            observe(batch)
        status = status_of(batch)
        if status == "ended":
            run.ended_one = True
            return batch
        elapsed = time.monotonic() - started
        if elapsed >= wait:
            break
        time.sleep(min(pause, wait - elapsed))
        pause = min(pause * 1.5, _LONGEST_PAUSE)
    counts = json.dumps(batch.get("request_counts"), default=str)
    actual = (
        f"processing_status still {status!r} after {elapsed:.0f} s ({polls} polls); request_counts {counts}"
    )
    if not run.ended_one:
        run.stalled, run.stalled_since = batch_id, started
    raise ConformanceFailure(expected, actual, reason="batch-never-ended")


@contextlib.contextmanager
def apart(target: Target) -> Iterator[list[Exchange]]:
    """Requests neither tagged with the running property's id nor kept as its evidence; yields
    the list they are recorded in."""
    recorder = target.recorder
    property_id, exchanges = recorder.property_id, recorder.exchanges
    recorder.reset(None)
    try:
        yield recorder.exchanges
    finally:
        recorder.property_id, recorder.exchanges = property_id, exchanges


def cancel_quietly(target: Target, batch_id: str) -> None:
    """Cancel a batch no property needs any more (apart; whatever the answer), so a slow target
    does not spend its time on it."""
    with apart(target), contextlib.suppress(httpx.TransportError):
        target.request("POST", batch_path(batch_id, "/cancel"))


def shared_batch(target: Target) -> SharedBatch:
    """The run's shared finished batch, made (apart) on first use. If making it failed, that
    failure again, with the exchanges that show it as this property's evidence."""
    run = _run(target)
    if run.shared is None:
        requests = [batch_request(target, cid, prompt) for cid, prompt in SHARED_PROMPTS.items()]
        shared = SharedBatch(requests)
        with apart(target) as exchanges:
            try:
                shared.batch_id = id_of(create(target, requests))
                wait_ended(target, shared.batch_id, what="the run's shared batch")
            except (ConformanceFailure, httpx.TransportError) as exc:
                shared.failure = exc
        shared.exchanges = exchanges
        run.shared = shared
    shared = run.shared
    if shared.failure is not None:
        target.recorder.exchanges.extend(shared.exchanges[-4:])
        failure = shared.failure
        if isinstance(failure, ConformanceFailure):
            raise ConformanceFailure(
                f"the run's shared batch of {len(shared.requests)} requests (made once, apart): "
                f"{failure.expected}",
                failure.actual,
                reason=failure.reason,
            )
        raise failure
    return shared


# ------------------------------------------------------------------ results


@dataclass(frozen=True)
class Results:
    """A results file as sent, and its lines."""

    response: httpx.Response
    lines: list[dict[str, Any]]

    @property
    def custom_ids(self) -> list[Any]:
        return [line.get("custom_id") for line in self.lines]


def results(target: Target, batch_id: str) -> Results:
    """GET /v1/messages/batches/{id}/results (raw), read strictly as JSON Lines."""
    response = target.request("GET", batch_path(batch_id, "/results"))
    expect_status(response, 200)
    return Results(response, parse_jsonl(response.content, "the results file"))


def parse_jsonl(data: bytes, where: str) -> list[dict[str, Any]]:
    """JSON Lines as the SDK reads them: one JSON object per line, a last newline optional,
    and no blank line (the SDK's decoder raises on one)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConformanceFailure(
            f"{where}: UTF-8 JSON Lines", f"{len(data)} bytes that are not UTF-8", reason="not-jsonl"
        ) from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    out: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        line = line.removesuffix("\r")
        if not line.strip():
            raise ConformanceFailure(
                f"{where}: one JSON object per line and no blank line (the SDK's decoder fails on one)",
                f"line {number} of {len(lines)} is blank",
                reason="not-jsonl",
            )
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConformanceFailure(
                f"{where}: each line one JSON object (JSON Lines)",
                f"line {number} is not JSON ({exc.msg}): {line[:200]!r}",
                reason="not-jsonl",
            ) from None
        if not isinstance(value, dict):
            kind = "an array" if isinstance(value, list) else type(value).__name__
            raise ConformanceFailure(
                f"{where}: each line one JSON object (JSON Lines, not a JSON array)",
                f"line {number} is {kind}: {line[:200]}",
                reason="not-jsonl",
            )
        out.append(value)
    return out


def result_of(
    lines: list[dict[str, Any]], custom_id: str, *, where: str = "the results file"
) -> dict[str, Any]:
    """The `result` object of the (first) line for `custom_id`."""
    for line in lines:
        if line.get("custom_id") == custom_id:
            found: dict[str, Any] = read(line, "result", dict, where=f"{where}, line of {custom_id}")
            return found
    raise ConformanceFailure(
        f"{where}: a line for custom_id {custom_id!r}",
        f"custom_ids: {[line.get('custom_id') for line in lines]}",
        reason="missing-result",
    )


def sdk_batch_call(what: str, call: Callable[[], T]) -> T:
    """Run an SDK call; what the SDK raises about the response (an unparseable line, no
    results_url, a shape it cannot read) is the target's failure, not the suite's. Error
    statuses and transport trouble go to the plugin, which judges them."""
    try:
        return call()
    except (anthropic.APIStatusError, anthropic.APIConnectionError):
        raise
    except (anthropic.AnthropicError, ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
        raise ConformanceFailure(
            f"the official SDK handles {what}",
            f"{type(exc).__name__}: {exc}"[:500],
            reason="sdk-rejected-response",
        ) from exc
