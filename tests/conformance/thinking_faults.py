"""The faults of the THINK-* properties (part of faults.fault_catalogue): how servers and
translators get extended thinking wrong (peers.md §4.6 #41-#45: empty or placeholder
signatures, signature_delta dropped or misplaced, duplicated thinking text, history blocks
refused or never checked), plus the extra faults test_thinking_proofs.py proves one by one."""

from __future__ import annotations

from typing import Any

from .fault_proxy import Fault, Frame, Request, Response
from .faults import JSONDict, error, fake_message, message_json, when_error

__all__ = ["EXTRA_THINKING_FAULTS", "thinking_fault_catalogue"]


def _thoughts(data: JSONDict) -> list[JSONDict]:
    return [b for b in data.get("content", []) if isinstance(b, dict) and b.get("type") == "thinking"]


def _thinking_of(request: Request) -> JSONDict:
    body = request.json if isinstance(request.json, dict) else {}
    config = body.get("thinking")
    return config if isinstance(config, dict) else {}


def _empty_signature(_: Request, data: JSONDict) -> None:
    for block in _thoughts(data):
        block["signature"] = ""


def _thinking_last(_: Request, data: JSONDict) -> None:
    """The thinking block moved after the answer (a translator appending reasoning at the end)."""
    thoughts = _thoughts(data)
    data["content"] = [b for b in data["content"] if b not in thoughts] + thoughts


def _too_many_thinking_tokens(_: Request, data: JSONDict) -> None:
    usage = data.get("usage")
    if isinstance(usage, dict):
        usage["output_tokens_details"] = {"thinking_tokens": int(usage.get("output_tokens", 0)) + 1}


def _omitted_shown(request: Request, data: JSONDict) -> None:
    if _thinking_of(request).get("display") == "omitted":
        for block in _thoughts(data):
            block["thinking"] = "The user asks a sum. Two plus two is four."


def _thinking_unasked(request: Request, data: JSONDict) -> None:
    if _thinking_of(request).get("type") in (None, "disabled"):
        thought = {"type": "thinking", "thinking": "Let me think.", "signature": "c2lnbmVk"}
        data["content"].insert(0, thought)


def _has_history_thinking(body: Any) -> bool:
    messages = body.get("messages") if isinstance(body, dict) else None
    return any(
        isinstance(block, dict) and block.get("type") == "thinking"
        for message in (messages if isinstance(messages, list) else [])
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for block in message["content"]
    )


def _refuse_history(request: Request) -> Request | Response:
    if _has_history_thinking(request.json):
        return error(
            400, "invalid_request_error", "messages.1.content.0: Invalid signature in thinking block"
        )
    return request


def _delta_kind(frame: Frame) -> str | None:
    payload = frame.payload
    if isinstance(payload, dict) and payload.get("type") == "content_block_delta":
        delta = payload.get("delta")
        return delta.get("type") if isinstance(delta, dict) else None
    return None


def _signature_early(_: Request, frames: list[Frame]) -> list[Frame]:
    """Each signature_delta sent before its block's last thinking_delta (dropped when the block
    has no thinking_delta): the signature arrives in the stream before all the thinking."""
    out: list[Frame] = []
    for frame in frames:
        if _delta_kind(frame) != "signature_delta":
            out.append(frame)
            continue
        index = frame.payload["index"]
        thinking = [
            n
            for n, f in enumerate(out)
            if _delta_kind(f) == "thinking_delta" and f.payload.get("index") == index
        ]
        if thinking:
            out.insert(thinking[-1], frame)
    return out


def _no_signature_delta(_: Request, frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if _delta_kind(f) != "signature_delta"]


def _thinking_twice(_: Request, frames: list[Frame]) -> list[Frame]:
    """Each thinking_delta sent twice (Open WebUI PR #29860: duplicated thinking text)."""
    out: list[Frame] = []
    for frame in frames:
        out.append(frame)
        if _delta_kind(frame) == "thinking_delta":
            out.append(frame)
    return out


def _accept(what: str) -> Fault:
    return Fault(what, response=when_error(fake_message))


# Faults proved one at a time besides the catalogue's (property id, fault).
EXTRA_THINKING_FAULTS: dict[str, tuple[str, Fault]] = {
    "thinking after the text": (
        "THINK-001",
        Fault("thinking block after the text", response=message_json(_thinking_last)),
    ),
    "no signature_delta": (
        "THINK-002",
        Fault("signature_delta dropped (Open WebUI PR #29860)", frames=_no_signature_delta),
    ),
}


def thinking_fault_catalogue() -> dict[str, Fault]:
    edit = message_json
    return {
        "THINK-001": Fault(
            "thinking blocks with an empty signature (Fireworks, pi #4464; OGX)",
            response=edit(_empty_signature),
        ),
        "THINK-002": Fault("signature_delta before the last thinking_delta", frames=_signature_early),
        "THINK-003": Fault("thinking deltas sent twice (Open WebUI PR #29860)", frames=_thinking_twice),
        "THINK-004": Fault("thinking_tokens over output_tokens", response=edit(_too_many_thinking_tokens)),
        "THINK-005": _accept("any thinking accepted back (history never verified)"),
        "THINK-006": _accept("any signature accepted (Manifest gateway #1658 passes them on)"),
        "THINK-007": Fault("its own thinking refused back (Manifest gateway #1658)", request=_refuse_history),
        "THINK-008": Fault("display omitted ignored: the text is shown", response=edit(_omitted_shown)),
        "THINK-009": Fault("a thinking block although thinking is off", response=edit(_thinking_unasked)),
        "THINK-010": _accept("thinking with a forced tool_choice accepted"),
        "THINK-011": _accept("thinking with temperature 0 or top_k accepted"),
    }
