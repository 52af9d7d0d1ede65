"""Rebuild the final Message from stream events, the way the official SDK does.

Properties compare a streamed answer with the non-streamed one for the same request; this gives
the streamed side as a plain dict, with the SDK's merge rules (SDK 2.14
`lib/streaming/_messages.py`, `accumulate_event`):

- `content_block_start` appends the block; deltas and stops address `content[index]`;
- text and thinking deltas concatenate, `citations_delta` appends, `signature_delta` replaces;
- `input_json_delta` fragments concatenate and the joined text, parsed, becomes `input` (the `{}`
  from the start stays when no fragment arrives);
- `message_delta` sets `stop_reason`, `stop_sequence` and `stop_details`, replaces
  `usage.output_tokens`, and replaces `input_tokens`, the cache counts, `server_tool_use` and
  `output_tokens_details` (and `container`) only when they are not null;
- `ping`, `error`, `message_stop` and unknown events change nothing.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from conformance.judging.grammar import KNOWN_EVENTS
from conformance.wire.sse import SSETranscript

__all__ = ["AccumulationError", "accumulate", "accumulate_transcript"]

_REPLACED_WHEN_SET = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "server_tool_use",
    "output_tokens_details",
)


class AccumulationError(ValueError):
    """The events cannot be folded into a message (the SDK would raise too)."""


def accumulate(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Fold parsed event payloads (each with a `type`) into the final Message dict."""
    message: dict[str, Any] | None = None
    tool_json: dict[int, str] = {}
    for event in events:
        kind = event.get("type")
        if kind in ("ping", "error", "message_stop") or kind not in KNOWN_EVENTS:
            continue
        if message is None:
            if kind != "message_start":
                raise AccumulationError(f'unexpected event order: {kind} before "message_start"')
            message = copy.deepcopy(dict(event["message"]))
            continue
        if kind == "content_block_start":
            message["content"].append(copy.deepcopy(event["content_block"]))
        elif kind == "content_block_delta":
            _apply_delta(_block(message, event), event["delta"], event["index"], tool_json)
        elif kind == "content_block_stop":
            _block(message, event)
        elif kind == "message_delta":
            _apply_message_delta(message, event)
    if message is None:
        raise AccumulationError("no message_start")
    return message


def accumulate_transcript(transcript: SSETranscript) -> dict[str, Any]:
    """Fold a parsed SSE stream, dispatching by event name as the SDK does.

    Events without a name or with data that is not a JSON object are skipped, as the SDK skips
    (or fails on) them; the payload's `type` is filled from the name when missing.
    """
    payloads = []
    for event in transcript.events:
        if event.event in KNOWN_EVENTS and isinstance(event.json, dict):
            payloads.append({"type": event.event, **event.json})
    return accumulate(payloads)


def _block(message: dict[str, Any], event: Mapping[str, Any]) -> dict[str, Any]:
    index = event.get("index")
    content = message["content"]
    if not isinstance(index, int) or not 0 <= index < len(content):
        raise AccumulationError(f"{event.get('type')} for block {index!r}, never started")
    block: dict[str, Any] = content[index]
    return block


def _apply_delta(
    block: dict[str, Any], delta: Mapping[str, Any], index: int, tool_json: dict[int, str]
) -> None:
    kind, block_kind = delta.get("type"), block.get("type")
    # Mismatched delta/block pairs are ignored, as the SDK ignores them.
    if kind == "text_delta" and block_kind == "text":
        block["text"] += delta["text"]
    elif kind == "citations_delta" and block_kind == "text":
        block["citations"] = [*(block.get("citations") or []), delta["citation"]]
    elif kind == "thinking_delta" and block_kind == "thinking":
        block["thinking"] += delta["thinking"]
    elif kind == "signature_delta" and block_kind == "thinking":
        block["signature"] = delta["signature"]
    elif kind == "input_json_delta" and block_kind in ("tool_use", "server_tool_use"):
        tool_json[index] = tool_json.get(index, "") + delta["partial_json"]
        # Incomplete JSON so far is left alone: the SDK parses partial JSON, we wait for the rest.
        with contextlib.suppress(ValueError):
            if tool_json[index]:
                block["input"] = json.loads(tool_json[index])


def _apply_message_delta(message: dict[str, Any], event: Mapping[str, Any]) -> None:
    delta = event.get("delta") or {}
    message["stop_reason"] = delta.get("stop_reason")
    message["stop_sequence"] = delta.get("stop_sequence")
    message["stop_details"] = delta.get("stop_details")
    if delta.get("container") is not None:
        message["container"] = delta["container"]
    usage = event.get("usage") or {}
    target = message.setdefault("usage", {})
    target["output_tokens"] = usage.get("output_tokens")
    for key in _REPLACED_WHEN_SET:
        if usage.get(key) is not None:
            target[key] = usage[key]
