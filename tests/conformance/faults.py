"""One fault per property: the way a real server gets it wrong (many are the bugs of
peers.md §4), injected by fault_proxy.FaultProxy for requests tagged with that property.

test_fault_proofs.py runs the whole suite once against the clean reference server (every
property must PASS) and once through this proxy (every property must FAIL or WARN).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

from .fault_proxy import Fault, Frame, Request, Response

JSONDict = dict[str, Any]


# ------------------------------------------------------------------ building blocks


def error(status: int, kind: str, message: str = "injected") -> Response:
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fault"}
    return Response(
        status, {"content-type": "application/json", "request-id": "req_fault"}, json.dumps(body).encode()
    )


def openai_error(status: int) -> Response:
    body = {"error": {"message": "injected", "type": "invalid_request_error", "code": str(status)}}
    return Response(
        status, {"content-type": "application/json", "request-id": "req_fault"}, json.dumps(body).encode()
    )


def fastapi_422(_: Request) -> Response:
    body = {"detail": [{"loc": ["body"], "msg": "field required", "type": "value_error.missing"}]}
    return Response(
        422, {"content-type": "application/json", "request-id": "req_fault"}, json.dumps(body).encode()
    )


def fake_message(request: Request) -> Response:
    """What a server that accepts anything answers."""
    body = request.json if isinstance(request.json, dict) else {}
    message = {
        "id": "msg_fault",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "ok", "citations": None}],
        "model": str(body.get("model", "m")),
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    return Response(
        200, {"content-type": "application/json", "request-id": "req_fault"}, json.dumps(message).encode()
    )


def when_error(answer: Callable[[Request], Response]) -> Callable[[Request, Response], Response]:
    """Replace every 4xx/5xx the server gave with `answer` (the server "accepts" bad input)."""

    def apply(request: Request, response: Response) -> Response:
        return answer(request) if response.status >= 400 else response

    return apply


def status_instead(status: int, kind: str) -> Callable[[Request, Response], Response]:
    def apply(request: Request, response: Response) -> Response:
        return error(status, kind) if response.status >= 400 else response

    return apply


def message_json(change: Callable[[Request, JSONDict], None]) -> Callable[[Request, Response], Response]:
    """Edit 200 JSON Message bodies in place."""

    def apply(request: Request, response: Response) -> Response:
        data = response.json
        if response.status != 200 or not isinstance(data, dict) or data.get("type") != "message":
            return response
        change(request, data)
        return response.with_json(data)

    return apply


def edit_payloads(
    kind: str, change: Callable[[JSONDict], None]
) -> Callable[[Request, list[Frame]], list[Frame]]:
    """Edit the JSON of every event of type `kind`."""

    def apply(_: Request, frames: list[Frame]) -> list[Frame]:
        out = []
        for frame in frames:
            payload = frame.payload
            if isinstance(payload, dict) and payload.get("type") == kind:
                change(payload)
                frame = Frame(frame.name, json.dumps(payload))
            out.append(frame)
        return out

    return apply


def drop(kind: str) -> Callable[[Request, list[Frame]], list[Frame]]:
    def apply(_: Request, frames: list[Frame]) -> list[Frame]:
        return [f for f in frames if not (isinstance(f.payload, dict) and f.payload.get("type") == kind)]

    return apply


def text(data: JSONDict) -> str:
    return "".join(b.get("text", "") for b in data.get("content", []) if b.get("type") == "text")


def set_text(data: JSONDict, value: str) -> None:
    blocks = [b for b in data["content"] if b.get("type") == "text"]
    if blocks:
        blocks[0]["text"] = value
    else:
        data["content"].append({"type": "text", "text": value, "citations": None})


def replace_stop(old: str, new: str) -> Callable[[Request, JSONDict], None]:
    def change(_: Request, data: JSONDict) -> None:
        if data.get("stop_reason") == old:
            data["stop_reason"], data["stop_sequence"] = new, None

    return change


def _stop_in_stream(old: str, new: str) -> Callable[[JSONDict], None]:
    def change(payload: JSONDict) -> None:
        if payload["delta"].get("stop_reason") == old:
            payload["delta"]["stop_reason"], payload["delta"]["stop_sequence"] = new, None

    return change


def _prefill(request: Request) -> str:
    messages = (request.json or {}).get("messages") or []
    if messages and messages[-1].get("role") == "assistant" and isinstance(messages[-1].get("content"), str):
        return str(messages[-1]["content"])
    return ""


def _count_body(value: Callable[[Request, int], int]) -> Callable[[Request, Response], Response]:
    def apply(request: Request, response: Response) -> Response:
        data = response.json
        if (
            response.status == 200
            and isinstance(data, dict)
            and "input_tokens" in data
            and "type" not in data
        ):
            return response.with_json({"input_tokens": value(request, data["input_tokens"])})
        return response

    return apply


def _tools_of(body: JSONDict) -> list[JSONDict]:
    tools = body.get("tools")
    return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []


def _counting(refuses: Callable[[JSONDict], bool]) -> Callable[[Request], Request | Response]:
    """A count_tokens endpoint whose narrow schema refuses what `refuses` picks: a 400."""

    def apply(request: Request) -> Request | Response:
        body = request.json
        if request.path.startswith("/v1/messages/count_tokens") and isinstance(body, dict) and refuses(body):
            return error(400, "invalid_request_error", "Extra inputs are not permitted")
        return request

    return apply


def _if_json(
    predicate: Callable[[Any], bool], answer: Callable[[Request], Response]
) -> Callable[[Request], Request | Response]:
    def apply(request: Request) -> Request | Response:
        body = request.json  # only JSON objects are judged: generated list or scalar bodies pass
        return answer(request) if isinstance(body, dict) and predicate(body) else request

    return apply


# The prompt of the harness's plain create (drivers.message_body): FUZZ-001/003 send it first, to
# know the create works at all; a generated body never holds it.
PLAIN_PROMPT = "Say hello in one short sentence."


def _crash_unless_plain(request: Request, response: Response) -> Response:
    """Every create but the plain one answered 500: a server that crashes on what generated
    bodies hold, while the plain request works (else there would be nothing to judge)."""
    body = request.json
    messages = body.get("messages") if isinstance(body, dict) else None
    plain = isinstance(messages, list) and messages == [{"role": "user", "content": PLAIN_PROMPT}]
    return response if plain else error(500, "api_error")


def _crash_on_queries(request: Request, response: Response) -> Response:
    """The model list answered, and every list query with parameters (limit, after_id,
    before_id) answered 500."""
    return error(500, "api_error") if request.path.startswith("/v1/models?") else response


def drop_blocks(dropped: Callable[[Any], bool]) -> Callable[[Request], Request]:
    """Messages requests forwarded without the content blocks `dropped` picks (a gateway that
    does not know a block type and leaves it out)."""

    def apply(request: Request) -> Request:
        body = request.json
        if not request.path.startswith("/v1/messages") or not isinstance(body, dict):
            return request
        messages = []
        for message in body.get("messages", []):
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list):
                message = {**message, "content": [b for b in content if not dropped(b)]}
            messages.append(message)
        return request.with_json({**body, "messages": messages})

    return apply


def strip(field: str, path: str = "") -> Callable[[Request], Request]:
    """Requests whose path starts with `path` forwarded without `field` (a gateway that drops
    what it cannot translate)."""

    def apply(request: Request) -> Request:
        data = request.json
        if request.path.startswith(path) and isinstance(data, dict) and field in data:
            return request.with_json({k: v for k, v in data.items() if k != field})
        return request

    return apply


def _with_header(name: str, value: Callable[[Request], str | None]) -> Callable[[Request], Request]:
    def apply(request: Request) -> Request:
        headers = dict(request.headers)
        new = value(request)
        if new is None:
            headers.pop(name, None)
        else:
            headers[name] = new
        return Request(request.method, request.path, headers, request.body)

    return apply


def _has_consecutive_roles(body: Any) -> bool:
    messages = body.get("messages")
    roles = [m.get("role") for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
    return any(a == b for a, b in itertools.pairwise(roles))


def _interleave(_: Request, frames: list[Frame]) -> list[Frame]:
    out: list[Frame] = []
    for frame in frames:
        out.append(frame)
        payload = frame.payload
        if (
            isinstance(payload, dict)
            and payload.get("type") == "content_block_start"
            and payload["index"] == 0
        ):
            out.append(
                Frame.of(
                    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}
                )
            )
            out.append(Frame.of({"type": "content_block_stop", "index": 1}))
    return out


def _error_then_stop(_: Request, frames: list[Frame]) -> list[Frame]:
    error_event = {"type": "error", "error": {"type": "api_error", "message": "injected"}}
    return [*frames[:-1], Frame.of(error_event), frames[-1]]


def _bare_error_event(_: Request, frames: list[Frame]) -> list[Frame]:
    """The stream ended by an error event in OpenAI's shape (no `error.type`)."""
    return [*frames[:-2], Frame.of({"type": "error", "error": {"message": "upstream failed"}})]


def _empty_delta(_: Request, frames: list[Frame]) -> list[Frame]:
    out: list[Frame] = []
    for frame in frames:
        out.append(frame)
        payload = frame.payload
        if isinstance(payload, dict) and payload.get("type") == "content_block_start":
            out.append(
                Frame.of(
                    {
                        "type": "content_block_delta",
                        "index": payload["index"],
                        "delta": {"type": "text_delta", "text": ""},
                    }
                )
            )
    return out


def _finish_before(picks: Callable[[Any], bool]) -> Callable[[Request, list[Frame]], list[Frame]]:
    """message_delta and message_stop sent before the first frame that `picks` chooses, the content
    after them: a translator that emits the finish chunk before the content that came with it
    (LiteLLM PR #14477, "don't send content block after message w/ finish reason"). The
    TypeScript SDK's finalMessage() is its snapshot at message_stop, so it loses what follows;
    the Python SDK and the wire oracle fold every event until the stream ends."""
    finish = ("message_delta", "message_stop")

    def apply(_: Request, frames: list[Frame]) -> list[Frame]:
        kinds = [f.payload.get("type") if isinstance(f.payload, dict) else None for f in frames]
        ends = [f for f, kind in zip(frames, kinds, strict=True) if kind in finish]
        rest = [f for f, kind in zip(frames, kinds, strict=True) if kind not in finish]
        at = next((i for i, f in enumerate(rest) if picks(f.payload)), None)
        return frames if at is None else [*rest[:at], *ends, *rest[at:]]

    return apply


def _finish_before_last_text(_: Request, frames: list[Frame]) -> list[Frame]:
    """At a natural end, the last text delta sent after message_stop (a proxy that flushes its
    buffer late): the Python SDK still folds it, the TypeScript SDK's finalMessage() loses it."""
    if not _ends_by_itself(frames):
        return frames
    texts = [i for i, f in enumerate(frames) if _delta_of("text_delta")(f.payload)]
    if not texts:
        return frames
    last = texts[-1]
    rest = [f for i, f in enumerate(frames) if i != last]
    stop = next(
        i
        for i, f in enumerate(rest)
        if isinstance(f.payload, dict) and f.payload.get("type") == "message_stop"
    )
    return [*rest[: stop + 1], frames[last], *rest[stop + 1 :]]


def _last_text_lost(_: Request, frames: list[Frame]) -> list[Frame]:
    """At a natural end, the last text delta lost (a translator that drops the chunk that
    carries the finish reason)."""
    if not _ends_by_itself(frames):
        return frames
    texts = [i for i, f in enumerate(frames) if _delta_of("text_delta")(f.payload)]
    return [f for i, f in enumerate(frames) if not texts or i != texts[-1]]


def _ends_by_itself(frames: list[Frame]) -> bool:
    return any(
        isinstance(f.payload, dict)
        and f.payload.get("type") == "message_delta"
        and isinstance(f.payload.get("delta"), dict)
        and f.payload["delta"].get("stop_reason") == "end_turn"
        for f in frames
    )


def _delta_of(kind: str) -> Callable[[Any], bool]:
    def picks(payload: Any) -> bool:
        return (
            isinstance(payload, dict)
            and payload.get("type") == "content_block_delta"
            and isinstance(payload.get("delta"), dict)
            and payload["delta"].get("type") == kind
        )

    return picks


def _no_event_lines(_: Request, frames: list[Frame]) -> list[Frame]:
    return [Frame(None, f.data) for f in frames]


def _to_json_delta(payload: JSONDict) -> None:
    if payload["delta"].get("type") == "text_delta":
        payload["delta"] = {"type": "input_json_delta", "partial_json": payload["delta"]["text"]}


def _break_json(_: Request, frames: list[Frame]) -> list[Frame]:
    return [Frame(f.name, f.data[:-1]) if f.name == "content_block_stop" else f for f in frames]


def _upper_stream_text(payload: JSONDict) -> None:
    if payload["delta"].get("type") == "text_delta":
        payload["delta"]["text"] = payload["delta"]["text"].upper() + "~"


def _openai_models(_: Request, response: Response) -> Response:
    data = response.json
    if response.status != 200 or not isinstance(data, dict) or "data" not in data:
        return response
    return response.with_json(
        {
            "object": "list",
            "data": [{"id": m["id"], "object": "model", "owned_by": "me"} for m in data["data"]],
        }
    )


def _always_more(_: Request, response: Response) -> Response:
    data = response.json
    if response.status == 200 and isinstance(data, dict) and "has_more" in data:
        data["has_more"] = True
        return response.with_json(data)
    return response


def _first_model_for_unknown(request: Request, response: Response) -> Response:
    if response.status == 404 and request.path.startswith("/v1/models/"):
        name = request.path.split("/")[3].split("?")[0]
        model = {
            "type": "model",
            "id": name,
            "display_name": name,
            "created_at": "2025-01-01T00:00:00Z",
            "max_input_tokens": 8192,
            "max_tokens": 8192,
            "capabilities": None,
        }
        return Response(
            200, {"content-type": "application/json", "request-id": "req_fault"}, json.dumps(model).encode()
        )
    return response


def _zero_max_tokens(request: Request, response: Response) -> Response:
    if request.path.startswith("/v1/models/") and isinstance(response.json, dict):
        return response.with_json({**response.json, "max_tokens": 0})
    return response


def _only_bearer(request: Request) -> Request | Response:
    if "x-api-key" in request.headers:
        return error(401, "authentication_error")
    return request


def _only_x_api_key(request: Request) -> Request | Response:
    if request.headers.get("authorization", "").lower().startswith("bearer "):
        return error(401, "authentication_error")
    return request


def _accept_any_key(key: str) -> Callable[[Request], Request]:
    def apply(request: Request) -> Request:
        headers = {k: v for k, v in request.headers.items() if k != "authorization"}
        headers["x-api-key"] = key
        return Request(request.method, request.path, headers, request.body)

    return apply


def _bump_output_tokens(request: Request, data: JSONDict) -> None:
    data["usage"]["output_tokens"] = int((request.json or {}).get("max_tokens", 0)) + 1


def _stop_sequence_in_text(_: Request, data: JSONDict) -> None:
    if data.get("stop_sequence"):
        set_text(data, text(data) + data["stop_sequence"])


def _repeat_prefill(request: Request, data: JSONDict) -> None:
    set_text(data, _prefill(request) + " " + text(data))


def _generate_for_zero(request: Request, data: JSONDict) -> None:
    if (request.json or {}).get("max_tokens") == 0:
        set_text(data, "x")
        data["usage"]["output_tokens"] = 1


def _cache_mismatch(_: Request, data: JSONDict) -> None:
    data["usage"]["cache_creation"] = {"ephemeral_5m_input_tokens": 3, "ephemeral_1h_input_tokens": 0}
    data["usage"]["cache_creation_input_tokens"] = 0


def _empty_block_first(_: Request, data: JSONDict) -> None:
    data["content"].insert(0, {"type": "text", "text": "", "citations": None})


def _openai_finish(_: Request, data: JSONDict) -> None:
    words = {"end_turn": "stop", "max_tokens": "length"}
    data["stop_reason"] = words.get(data.get("stop_reason"), data.get("stop_reason"))


def _empty_stop_sequence(_: Request, data: JSONDict) -> None:
    if data.get("stop_reason") != "stop_sequence":
        data["stop_sequence"] = ""


def _has_system_turn(body: Any) -> bool:
    messages = body.get("messages") if isinstance(body, dict) else None
    return isinstance(messages, list) and any(
        isinstance(m, dict) and m.get("role") == "system" for m in messages
    )


def fault_catalogue(api_key: str) -> dict[str, Fault]:
    """Property id → the fault that must make it fail."""
    from .batch_faults import batch_fault_catalogue
    from .code_execution_faults import code_execution_fault_catalogue
    from .concurrency_faults import concurrency_fault_catalogue
    from .content_faults import content_fault_catalogue
    from .files_faults import files_fault_catalogue
    from .rate_faults import rate_fault_catalogue
    from .server_tool_faults import server_tool_fault_catalogue
    from .skills_faults import skills_fault_catalogue
    from .thinking_faults import thinking_fault_catalogue  # they build on this module's helpers
    from .tool_faults import tool_fault_catalogue
    from .version_faults import version_fault_catalogue
    from .workspace_faults import workspace_fault_catalogue

    accept = when_error(fake_message)
    return {
        # ---- messages
        "MSG-001": Fault(
            "an OpenAI object (type chat.completion)",
            response=message_json(lambda r, d: d.update(type="chat.completion")),
        ),
        "MSG-024": Fault(
            "every answer names the gateway's default model",
            response=message_json(lambda r, d: d.update(model="gpt-4o-mini")),
            frames=edit_payloads("message_start", lambda p: p["message"].update(model="gpt-4o-mini")),
        ),
        "MSG-022": Fault(
            "OpenAI-style ids (LiteLLM's translation)",
            response=message_json(lambda r, d: d.update(id="chatcmpl-9eNaN8f3")),
            frames=edit_payloads("message_start", lambda p: p["message"].update(id="chatcmpl-9eNaN8f3")),
        ),
        "MSG-002": Fault(
            "OpenAI finish reasons", response=message_json(lambda r, d: d.update(stop_reason="stop"))
        ),
        "MSG-003": Fault(
            "stop_sequence '' instead of null (Bifrost)", response=message_json(_empty_stop_sequence)
        ),
        "MSG-004": Fault(
            "stop hit reported as end_turn (vLLM #45807)",
            response=message_json(replace_stop("stop_sequence", "end_turn")),
        ),
        "MSG-005": Fault("stop sequence left in the text", response=message_json(_stop_sequence_in_text)),
        "MSG-006": Fault(
            "length reported as end_turn", response=message_json(replace_stop("max_tokens", "end_turn"))
        ),
        "MSG-007": Fault("output_tokens over max_tokens", response=message_json(_bump_output_tokens)),
        "MSG-008": Fault("prefill repeated in the answer", response=message_json(_repeat_prefill)),
        "MSG-009": Fault(
            "input_tokens always 0", response=message_json(lambda r, d: d["usage"].update(input_tokens=0))
        ),
        "MSG-010": Fault("cache breakdown that does not add up", response=message_json(_cache_mismatch)),
        "MSG-011": Fault("max_tokens 0 still generates", response=message_json(_generate_for_zero)),
        "MSG-012": Fault(
            "same-role runs rejected",
            request=_if_json(_has_consecutive_roles, lambda r: error(400, "invalid_request_error")),
        ),
        "MSG-013": Fault(
            "echoed citations: null rejected",
            request=_if_json(
                lambda b: "citations" in json.dumps(b), lambda r: error(400, "invalid_request_error")
            ),
        ),
        "MSG-015": Fault(
            "system blocks rejected",
            request=_if_json(
                lambda b: isinstance(b.get("system"), list),
                lambda r: error(400, "invalid_request_error"),
            ),
        ),
        "MSG-016": Fault("empty text block emitted", response=message_json(_empty_block_first)),
        "MSG-017": Fault(
            "cache_control refused with 422 (oMLX)",
            request=_if_json(lambda b: "cache_control" in json.dumps(b), fastapi_422),
        ),
        "MSG-018": Fault(
            "top_k refused",
            request=_if_json(lambda b: "top_k" in b, lambda r: error(400, "invalid_request_error")),
        ),
        "MSG-019": Fault(
            "?beta=true not routed (Ollama #13949)",
            request=lambda r: error(404, "not_found_error") if "beta=true" in r.path else r,
        ),
        "MSG-020": Fault("output_tokens over max_tokens", response=message_json(_bump_output_tokens)),
        "MSG-021": Fault("OpenAI finish reasons (stop, length)", response=message_json(_openai_finish)),
        "MSG-023": Fault(
            "a cut by the context window reported as max_tokens",
            response=message_json(replace_stop("model_context_window_exceeded", "max_tokens")),
        ),
        # ---- streaming
        "STREAM-001": Fault(
            "stream sent as text/plain",
            frames=lambda r, f: f,
            headers=lambda h: {**h, "content-type": "text/plain"},
        ),
        "STREAM-002": Fault("data-only events (pi #1983)", frames=_no_event_lines),
        "STREAM-003": Fault("OpenAI [DONE] terminator", frames=lambda r, f: [*f, Frame(None, "[DONE]")]),
        "STREAM-004": Fault(
            "message_start already stopped",
            frames=edit_payloads("message_start", lambda p: p["message"].update(stop_reason="end_turn")),
        ),
        "STREAM-005": Fault(
            "block indices start at 1",
            frames=edit_payloads("content_block_start", lambda p: p.update(index=p["index"] + 1)),
        ),
        "STREAM-006": Fault("a second block opened inside the first (OGX)", frames=_interleave),
        "STREAM-007": Fault("blocks never stopped", frames=drop("content_block_stop")),
        "STREAM-008": Fault(
            "text streamed as input_json_delta (LiteLLM #29286)",
            frames=edit_payloads("content_block_delta", _to_json_delta),
        ),
        "STREAM-009": Fault("no message_stop", frames=drop("message_stop")),
        "STREAM-010": Fault("truncated JSON data", frames=_break_json),
        "STREAM-011": Fault(
            "message_start role 'bot'",
            frames=edit_payloads("message_start", lambda p: p["message"].update(role="bot")),
        ),
        "STREAM-012": Fault(
            "streamed text differs from create",
            frames=edit_payloads("content_block_delta", _upper_stream_text),
        ),
        "STREAM-013": Fault(
            "usage not cumulative",
            frames=edit_payloads(
                "message_start", lambda p: p["message"]["usage"].update(output_tokens=10_000)
            ),
        ),
        "STREAM-014": Fault(
            "message_start input_tokens 0 (SGLang #20678)",
            frames=edit_payloads("message_start", lambda p: p["message"]["usage"].update(input_tokens=0)),
        ),
        "STREAM-015": Fault(
            "stop hit streamed as end_turn (SGLang #33153)",
            frames=edit_payloads("message_delta", _stop_in_stream("stop_sequence", "end_turn")),
        ),
        "STREAM-016": Fault(
            "length streamed as end_turn",
            frames=edit_payloads("message_delta", _stop_in_stream("max_tokens", "end_turn")),
        ),
        "STREAM-017": Fault(  # the proof profile's limit is 2 s, 3 s with its slack
            "long silence with comments only (Router-Maestro #61)", frames=lambda r, f: f, silence=4.0
        ),
        "STREAM-018": Fault(
            "early errors sent as a 200 stream",
            response=lambda r, resp: _error_as_stream(resp) if r.streaming and resp.status >= 400 else resp,
        ),
        "STREAM-019": Fault("an error event without error.type (OpenAI's shape)", frames=_bare_error_event),
        "STREAM-020": Fault("empty text deltas", frames=_empty_delta),
        "STREAM-021": Fault("message_start missing: the SDK gives up", frames=drop("message_start")),
        "STREAM-022": Fault("blocks never stopped", frames=drop("content_block_stop")),
        "STREAM-023": Fault("the last text delta of a natural end lost", frames=_last_text_lost),
        # ---- errors
        "ERR-001": Fault("max_tokens defaulted (llama.cpp)", response=accept),
        "ERR-002": Fault("unknown fields ignored", response=accept),
        "ERR-003": Fault("validation as 422 (oMLX)", response=when_error(fastapi_422)),
        "ERR-004": Fault("out-of-range sampling accepted", response=accept),
        "ERR-005": Fault("thinking budget not checked", response=accept),
        "ERR-006": Fault("max_tokens not bounded", response=accept),
        "ERR-007": Fault("bad max_tokens crashes the server", response=status_instead(500, "api_error")),
        "ERR-008": Fault("empty messages accepted (llama.cpp)", response=accept),
        "ERR-009": Fault("empty text crashes the server", response=status_instead(500, "api_error")),
        "ERR-010": Fault("unknown model as 400", response=status_instead(400, "invalid_request_error")),
        "ERR-011": Fault("bad tools accepted", response=accept),
        "ERR-012": Fault("tool pairing crashes the server", response=status_instead(500, "api_error")),
        "ERR-013": Fault("tool_choice not checked", response=accept),
        "ERR-014": Fault(
            "media type crashes the server (llama.cpp)", response=status_instead(500, "api_error")
        ),
        "ERR-015": Fault("cache_control as 422", response=when_error(fastapi_422)),
        "ERR-016": Fault("breakpoints not capped", response=accept),
        "ERR-017": Fault("user_id length not checked", response=accept),
        "ERR-018": Fault("service_tier not checked", response=accept),
        "ERR-019": Fault("oversized body as 400", response=status_instead(400, "invalid_request_error")),
        "ERR-020": Fault("anthropic-version never read (imp #1562)", response=accept),
        "ERR-021": Fault(
            "malformed JSON crashes the server",
            response=lambda r, resp: (
                Response(500, {"content-type": "text/plain"}, b"Internal Server Error")
                if resp.status >= 400
                else resp
            ),
        ),
        "ERR-022": Fault(
            "error types are class names (vLLM)",
            response=lambda r, resp: error(resp.status, "NotFoundError") if resp.status == 404 else resp,
        ),
        "ERR-023": Fault(
            "framework default bodies",
            response=lambda r, resp: (
                Response(
                    resp.status,
                    {"content-type": "application/json", "request-id": "req_fault"},
                    b'{"detail":"Not Found"}',
                )
                if resp.status >= 400
                else resp
            ),
        ),
        "ERR-024": Fault(
            "body request_id differs from the header",
            response=lambda r, resp: (
                resp.with_json({**resp.json, "request_id": "req_other"})
                if resp.status >= 400 and isinstance(resp.json, dict)
                else resp
            ),
        ),
        "ERR-025": Fault("content type not checked", response=accept),
        "ERR-026": Fault(
            "OpenAI envelope on 404 (LiteLLM #39037)",
            response=lambda r, resp: openai_error(404) if resp.status == 404 else resp,
        ),
        "ERR-027": Fault("images silently ignored (mlx-vlm #1060)", response=accept),
        "ERR-028": Fault("validation as 422", response=when_error(fastapi_422)),
        "ERR-029": Fault("unknown roles accepted (tldw)", response=accept),
        "ERR-030": Fault(
            "a system turn crashes the server (vLLM #44000 before its fix)",
            request=lambda r: error(500, "api_error", "messages.1.role") if _has_system_turn(r.json) else r,
        ),
        "ERR-031": Fault(
            "an overloaded server answers in OpenAI's shape (a 529 without the envelope)",
            request=lambda r: openai_error(529),
        ),
        # ---- headers and auth
        "HDR-001": Fault(
            "no request-id header",
            headers=lambda h: {k: v for k, v in h.items() if k != "request-id"},
            response=lambda r, resp: resp,
        ),
        "HDR-005": Fault(
            "request ids that are bare UUIDs",
            headers=lambda h: {**h, "request-id": "3f2c9a7e-5b1d-4c8e-9f60-2a7d1e4b8c03"},
            response=lambda r, resp: resp,
        ),
        "HDR-002": Fault(
            "?beta=true not routed (LiteLLM #13252)",
            request=lambda r: error(404, "not_found_error") if "beta=true" in r.path else r,
        ),
        "HDR-003": Fault(
            "telemetry headers refused",
            request=lambda r: error(400, "invalid_request_error") if "x-stainless-lang" in r.headers else r,
        ),
        "HDR-004": Fault(
            "Accept: application/json gets JSON",
            request=lambda r: (
                fake_message(r) if r.streaming and r.headers.get("accept") == "application/json" else r
            ),
        ),
        "AUTH-001": Fault("missing key accepted", request=_accept_any_key(api_key)),
        "AUTH-002": Fault("wrong key accepted", request=_accept_any_key(api_key)),
        "AUTH-003": Fault("x-api-key refused (vLLM #51572)", request=_only_bearer),
        "AUTH-004": Fault("Bearer refused", request=_only_x_api_key),
        # ---- tokens and models
        "TOKENS-001": Fault(
            "counts scaled (oMLX context scaling)", response=_count_body(lambda r, n: n * 4 // 3 + 1)
        ),
        "TOKENS-002": Fault("constant count (codebuddy2api #12)", response=_count_body(lambda r, n: 10)),
        "TOKENS-007": Fault("count one token off (BOS counted)", response=_count_body(lambda r, n: n + 1)),
        "TOKENS-008": Fault(
            "count_tokens takes system as a string only",
            request=_counting(lambda b: isinstance(b.get("system"), list)),
        ),
        "TOKENS-009": Fault(
            "count_tokens with a narrow tool schema (no eager_input_streaming)",
            request=_counting(lambda b: any("eager_input_streaming" in t for t in _tools_of(b))),
        ),
        "TOKENS-010": Fault(
            "count_tokens refuses thinking as create-only", request=_counting(lambda b: "thinking" in b)
        ),
        "TOKENS-011": Fault(
            "count_tokens knows no server tool types",
            request=_counting(
                lambda b: any(str(t.get("type", "")).startswith("web_fetch") for t in _tools_of(b))
            ),
        ),
        "TOKENS-003": Fault("system ignored (CLIProxyAPI #679)", request=strip("system")),
        "TOKENS-004": Fault(
            "count_tokens missing (LiteLLM #13252)",
            request=lambda r: (
                error(404, "not_found_error") if r.path.startswith("/v1/messages/count_tokens") else r
            ),
        ),
        "TOKENS-005": Fault("create-only fields accepted", request=strip("max_tokens")),
        "TOKENS-006": Fault(
            "count_tokens never fails",
            response=lambda r, resp: (
                resp.with_json({"input_tokens": 0}, status=200) if resp.status >= 400 else resp
            ),
        ),
        "MODELS-001": Fault("OpenAI model list (Ollama #15992)", response=_openai_models),
        "MODELS-002": Fault("has_more always true", response=_always_more),
        "MODELS-003": Fault("any id is a model", response=_first_model_for_unknown),
        "MODELS-004": Fault(
            "a ModelInfo that states max_tokens 0 (an unknown limit filled with 0)", response=_zero_max_tokens
        ),
        # ---- fuzz
        "FUZZ-001": Fault("schema-invalid bodies accepted", response=accept),
        "FUZZ-002": Fault("count_tokens crashes on bad input", response=status_instead(500, "api_error")),
        "FUZZ-003": Fault("unexpected input crashes the server", response=_crash_unless_plain),
        "FUZZ-004": Fault("model list queries crash the server", response=_crash_on_queries),
        # ---- tools and structured outputs
        **tool_fault_catalogue(),
        **version_fault_catalogue(),
        **server_tool_fault_catalogue(),
        **code_execution_fault_catalogue(),
        **files_fault_catalogue(),
        **skills_fault_catalogue(),
        **workspace_fault_catalogue(api_key),
        **rate_fault_catalogue(),
        # ---- extended thinking
        **thinking_fault_catalogue(),
        # ---- message batches
        **batch_fault_catalogue(),
        # ---- documents, images, citations and context management
        **content_fault_catalogue(),
        # ---- requests served side by side
        **concurrency_fault_catalogue(),
        # ---- the TypeScript SDK
        "SDK-001": Fault(
            "finish sent before the text (LiteLLM PR #14477): TS finalMessage text empty",
            frames=_finish_before(_delta_of("text_delta")),
        ),
        "SDK-002": Fault(
            "error bodies in UTF-16 (a charset the wire's readers honour): TS reads no error.type",
            response=lambda r, resp: _utf16_error(resp) if resp.status >= 400 else resp,
        ),
        "SDK-003": Fault(
            "finish sent before the tool input fragments (LiteLLM PR #14477): TS finalMessage input {}",
            frames=_finish_before(_delta_of("input_json_delta")),
        ),
        "SDK-004": Fault(
            "the last text of a natural end flushed after message_stop: TS finalMessage loses it",
            frames=_finish_before_last_text,
        ),
    }


def _utf16_error(response: Response) -> Response:
    """The same error, its JSON encoded in UTF-16 (with its BOM and charset): Python's JSON
    readers decode it, the TypeScript SDK's reads the bytes as UTF-8 and finds no JSON."""
    headers = {**response.headers, "content-type": "application/json; charset=utf-16"}
    return Response(response.status, headers, response.body.decode("utf-8").encode("utf-16"))


def _error_as_stream(response: Response) -> Response:
    payload = (
        response.json
        if isinstance(response.json, dict)
        else {"type": "error", "error": {"type": "api_error", "message": "x"}}
    )
    body = Frame.of(payload).encode()
    return Response(200, {"content-type": "text/event-stream", "request-id": "req_fault"}, body)
