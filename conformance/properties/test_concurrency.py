"""Requests served side by side: a stream is not cut because another request arrives.

A user with two clients (an agent and its sub-agent, two editors on one local server) meets a
server that ends a running stream when the next request comes (llama-cpp-python's server with
`interrupt_requests`: the stream stops with `data: [DONE]` and no `message_stop`). This is that
finding's one property: the run's own workers never meet it elsewhere, since a run that finds
it judges one request at a time (conformance/concurrency.py).
"""

from __future__ import annotations

from conformance.catalogue import Level, prop
from conformance.concurrency import overlap
from conformance.judging.checks import expect, not_judged
from conformance.wire.target import Target

STREAMING = "build-with-claude/streaming"


@prop(
    "STREAM-024",
    Level.MUST,
    "Two overlapping streams are each answered whole",
    url=f"{STREAMING}#event-types",
    requirement="A stream is not cut because another request arrives: two streams of the same "
    "request, the second sent once the first has begun, each end with message_stop.",
    source='docs: build-with-claude/streaming#event-types — "Each stream uses the following event '
    'flow: ... A final `message_stop` event."',
    alone=True,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:message_start",
        "event:message_stop",
    ),
)
def test_stream_024_overlapping_streams(target: Target) -> None:
    """Sends one greedy streamed request, and the same again once the first's first event came;
    reads both to their end. A stream refused, or one over before the second began (too short
    to overlap), judges nothing."""
    found = overlap(target)
    if found.mode == "unknown":
        not_judged(found.detail, judged_by="STREAM-001" if "HTTP" in found.detail else None)
    expect(
        found.mode != "cut",
        "both streams end with message_stop",
        found.detail,
        reason="stream-cut",
        subject="a running stream cut when another request arrives",
    )
