"""A scripted target that serves tools, structured outputs and thinking correctly, with no model.

It answers just enough of the API for the TOOL-*, STRUCT-* and THINK-* properties (and the run's
own probes): a forced call gets one tool_use whose input is `example_of(input_schema)`, a
structured answer is `example_of(schema)` as JSON, other requests a short text; with thinking on,
a signed thinking block comes first (`display: omitted` empties its text). Signatures are a
nonce and an HMAC over the nonce and the text under a fixed key, verified when a block comes
back in the history (a changed text or signature is a 400 naming the block). Streams follow the
grammar with the text, the input and the thinking split into fragments, the signature last. It
proves those properties PASS on a correct target and FAIL on their faults (test_tool_proofs.py,
test_thinking_proofs.py) whatever the reference server's model does; the reference server
itself is judged by test_fault_proofs.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from typing import Any

from conformance.generating.strategies import example_of

from .fault_proxy import read_body

MODEL = "scripted"
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
JSONDict = dict[str, Any]

_NO = {"supported": False}
_YES = {"supported": True}
_SIGNING_KEY = b"plumbline-scripted-thinking-key"
THINKING_TEXT = "The user asks for a short answer. I will answer briefly."
MODEL_INFO: JSONDict = {
    "type": "model",
    "id": MODEL,
    "display_name": "Scripted tools target",
    "created_at": "2025-01-01T00:00:00Z",
    "max_input_tokens": 8192,
    "max_tokens": 4096,
    "capabilities": {
        "batch": _NO,
        "citations": _NO,
        "code_execution": _NO,
        "context_management": {
            "supported": False,
            "clear_thinking_20251015": _NO,
            "clear_tool_uses_20250919": _NO,
            "compact_20260112": _NO,
        },
        "effort": {"supported": True, "low": _YES, "medium": _YES, "high": _YES, "max": _YES, "xhigh": None},
        "image_input": _NO,
        "pdf_input": _NO,
        "server_tools": {"supported": False, "code_execution": _NO, "web_search": _NO},
        "structured_outputs": {"supported": True},
        "thinking": {
            "supported": True,
            "types": {"adaptive": _YES, "between_tools": _NO, "disabled": _YES, "enabled": _YES},
        },
    },
}


class Refused(Exception):
    pass


def _tokens(value: Any) -> int:
    return len(json.dumps(value, sort_keys=True)) // 4 + 1


def _prompt_tokens(body: JSONDict) -> int:
    return _tokens([body.get("system"), body.get("messages"), body.get("tools"), body.get("tool_choice")])


def _usage(body: JSONDict, output: int) -> JSONDict:
    return {
        "input_tokens": _prompt_tokens(body),
        "output_tokens": output,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
        "server_tool_use": None,
        "service_tier": "standard",
        "inference_geo": None,
    }


def _validate(body: JSONDict) -> None:
    tools = body.get("tools") or []
    names = []
    for tool in tools:
        if not TOOL_NAME.match(str(tool.get("name", ""))):
            raise Refused("tools.name: bad tool name")
        if (tool.get("input_schema") or {}).get("type") != "object":
            raise Refused("tools.input_schema: type must be object")
        names.append(tool["name"])
    choice = body.get("tool_choice") or {}
    if choice.get("type") == "tool" and choice.get("name") not in names:
        raise Refused("tool_choice.name: no such tool")
    if choice.get("type") in ("any", "tool") and not tools:
        raise Refused("tool_choice: requires tools")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
        raise Refused("max_tokens: an integer >= 0")
    messages = body.get("messages") or []
    if not messages:
        raise Refused("messages: at least one message is required")
    seen: set[str] = set()
    for n, message in enumerate(messages):
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        uses = [b["id"] for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        if seen & set(uses) or len(set(uses)) != len(uses):
            raise Refused("tool_use ids must be unique")
        seen.update(uses)
        results = [
            b.get("tool_use_id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        previous = messages[n - 1].get("content") if n else None
        asked = [
            b["id"] for b in (previous if isinstance(previous, list) else []) if b.get("type") == "tool_use"
        ]
        if results and (message.get("role") != "user" or set(results) - set(asked)):
            raise Refused("unexpected tool_use_id found in tool_result blocks")
        if uses:
            following = messages[n + 1].get("content") if n + 1 < len(messages) else None
            answered = {
                b.get("tool_use_id")
                for b in (following if isinstance(following, list) else [])
                if isinstance(b, dict) and b.get("type") == "tool_result"
            }
            if set(uses) - answered:
                raise Refused("tool_use ids were found without tool_result blocks immediately after")


def _mac(nonce: bytes, text: str) -> bytes:
    return hmac.new(_SIGNING_KEY, nonce + text.encode(), hashlib.sha256).digest()


def sign(text: str, seed: str) -> str:
    """The signature of a thinking block showing `text` (a nonce from `seed`, then the HMAC)."""
    nonce = hashlib.sha256(seed.encode()).digest()[:16]
    return base64.b64encode(nonce + _mac(nonce, text)).decode()


def verifies(text: Any, signature: Any) -> bool:
    if not isinstance(text, str) or not isinstance(signature, str):
        return False
    try:
        raw = base64.b64decode(signature, validate=True)
    except ValueError:
        return False
    return len(raw) == 48 and hmac.compare_digest(raw[16:], _mac(raw[:16], text))


def _thinking(body: JSONDict) -> str | None:
    """The display of the request's thinking (None: thinking off); a broken rule is Refused."""
    config = body.get("thinking") or {}
    kind = config.get("type")
    if kind in (None, "disabled"):
        return None
    if kind not in ("enabled", "adaptive"):
        raise Refused("thinking.type: unknown")
    if kind == "enabled":
        budget = config.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            raise Refused("thinking.budget_tokens: must be at least 1024")
        if budget >= int(body.get("max_tokens", 0)):
            raise Refused("max_tokens: must be greater than thinking.budget_tokens")
    if (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
        raise Refused("Thinking may not be enabled when tool_choice forces tool use.")
    if body.get("temperature") not in (None, 1):
        raise Refused("temperature: may only be set to 1 when thinking is enabled")
    if body.get("top_k") is not None:
        raise Refused("top_k: may not be set when thinking is enabled")
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else []):
            if not (isinstance(block, dict) and block.get("type") == "thinking"):
                continue
            if message.get("role") != "assistant" or not verifies(
                block.get("thinking"), block.get("signature")
            ):
                raise Refused(f"messages.{i}.content.{j}.signature: Invalid `signature` in `thinking` block")
    display = config.get("display") or "summarized"
    return str(display)


def answer(body: JSONDict) -> JSONDict:
    """The Message for a valid request."""
    _validate(body)
    display = _thinking(body)
    tools = {tool["name"]: tool for tool in body.get("tools") or []}
    choice = body.get("tool_choice") or {}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    content: list[JSONDict]
    if choice.get("type") in ("any", "tool"):
        name = choice.get("name") or next(iter(tools))
        schema = tools[name]["input_schema"]
        call = {"type": "tool_use", "id": f"toolu_{digest[:20]}", "name": name, "input": example_of(schema)}
        content, stop = [{**call, "caller": {"type": "direct"}}], "tool_use"
    elif (body.get("output_config") or {}).get("format"):
        text = json.dumps(example_of(body["output_config"]["format"]["schema"]))
        content, stop = [{"type": "text", "text": text, "citations": None}], "end_turn"
    else:
        words = ["Hello", " there", "."][: max(1, int(body.get("max_tokens", 3)))]
        stop = "end_turn" if len(words) == 3 else "max_tokens"
        content = [{"type": "text", "text": "".join(words), "citations": None}]
    usage = _usage(body, sum(_tokens(block) for block in content))
    if display is not None:
        shown = "" if display == "omitted" else THINKING_TEXT
        thought = {"type": "thinking", "thinking": shown, "signature": sign(shown, digest)}
        content = [thought, *content]
        thinking_tokens = _tokens(THINKING_TEXT)
        usage["output_tokens"] += thinking_tokens
        usage["output_tokens_details"] = {"thinking_tokens": thinking_tokens}
    return {
        "id": f"msg_{digest[:24]}",
        "type": "message",
        "role": "assistant",
        "content": content,
        "model": body.get("model", MODEL),
        "stop_reason": stop,
        "stop_sequence": None,
        "stop_details": None,
        "usage": usage,
        "container": None,
    }


def events(message: JSONDict) -> list[JSONDict]:
    """The stream of a Message: each text and each input JSON in two fragments."""
    usage = {**message["usage"], "output_tokens": 0}
    if "output_tokens_details" in usage:
        usage["output_tokens_details"] = {"thinking_tokens": 0}
    start = {**message, "content": [], "stop_reason": None, "usage": usage}
    out: list[JSONDict] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        if block["type"] == "thinking":
            first = {"type": "thinking", "thinking": "", "signature": ""}
            out.append({"type": "content_block_start", "index": index, "content_block": first})
            half = len(block["thinking"]) // 2
            for part in (block["thinking"][:half], block["thinking"][half:]):
                if part:
                    delta = {"type": "thinking_delta", "thinking": part}
                    out.append({"type": "content_block_delta", "index": index, "delta": delta})
            delta = {"type": "signature_delta", "signature": block["signature"]}
            out.append({"type": "content_block_delta", "index": index, "delta": delta})
            out.append({"type": "content_block_stop", "index": index})
            continue
        if block["type"] == "tool_use":
            text, kind, key = json.dumps(block["input"]), "input_json_delta", "partial_json"
            first = {**block, "input": {}}
        else:
            text, kind, key = block["text"], "text_delta", "text"
            first = {**block, "text": ""}
        out.append({"type": "content_block_start", "index": index, "content_block": first})
        half = len(text) // 2
        for part in (text[:half], text[half:]):
            if part:
                out.append(
                    {"type": "content_block_delta", "index": index, "delta": {"type": kind, key: part}}
                )
        out.append({"type": "content_block_stop", "index": index})
    usage = message["usage"]
    out.append(
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": message["stop_reason"],
                "stop_sequence": None,
                "stop_details": None,
                "container": None,
            },
            "usage": {
                k: usage[k]
                for k in (
                    "output_tokens",
                    "input_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                    "server_tool_use",
                    "output_tokens_details",
                )
                if k in usage
            },
        }
    )
    out.append({"type": "message_stop"})
    return out


def _error(status: int, kind: str, message: str) -> tuple[int, str, bytes]:
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_scripted"}
    return status, "application/json", json.dumps(body).encode()


def route(method: str, path: str, raw: bytes) -> tuple[int, str, bytes]:
    """(status, content type, body) for one request."""
    path = path.split("?", 1)[0]
    if method == "GET" and path == "/v1/models":
        listing = {"data": [MODEL_INFO], "has_more": False, "first_id": MODEL, "last_id": MODEL}
        return 200, "application/json", json.dumps(listing).encode()
    if method == "GET" and path.startswith("/v1/models/"):
        if path.rsplit("/", 1)[-1] != MODEL:
            return _error(404, "not_found_error", "model")
        return 200, "application/json", json.dumps(MODEL_INFO).encode()
    try:
        body = json.loads(raw)
    except ValueError:
        return _error(400, "invalid_request_error", "bad JSON")
    if not isinstance(body, dict):
        return _error(400, "invalid_request_error", "not an object")
    if method == "POST" and path == "/v1/messages/count_tokens":
        return 200, "application/json", json.dumps({"input_tokens": _prompt_tokens(body)}).encode()
    if method != "POST" or path != "/v1/messages":
        return _error(404, "not_found_error", "no such route")
    try:
        message = answer(body)
    except Refused as refused:
        return _error(400, "invalid_request_error", str(refused))
    if body.get("stream"):
        frames = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events(message))
        return 200, "text/event-stream", frames.encode()
    return 200, "application/json", json.dumps(message).encode()


async def respond(send: Any, status: int, media: str, data: bytes) -> None:
    """One whole response (ASGI), as every scripted target answers."""
    headers = [
        (b"content-type", media.encode()),
        (b"request-id", b"req_scripted"),
        (b"content-length", str(len(data)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The ASGI app (run with fault_proxy.running_proxy)."""
    if scope["type"] != "http":
        return
    raw = await read_body(receive)
    await respond(send, *route(scope["method"], scope["path"], raw))
