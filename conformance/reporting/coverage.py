"""Spec coverage: which parts of the Messages surface the properties exercise.

The universe of coverage keys is read from the vendored extract of the official OpenAPI copy
(`spec/anthropic-openapi-2026-05.messages.json`, written by `scripts/extract_spec.py`), plus
the keys our overlays add (`schemas/openapi.json`: what SDK 2.14 has that the copy lacks),
marked as such. Each property declares the keys it exercises (`prop(..., covers=...)`); a test
holds every key to this universe and to what the property really sent and saw.

Keys are `<kind>:<name>`:

| kind | name | example |
|---|---|---|
| `endpoint` | `METHOD path` of an operation | `endpoint:POST /v1/messages` |
| `param` | a query, path or header parameter, by name | `param:anthropic-version` |
| `request` | a field of the create body (CreateMessageParams) | `request:tools[].input_schema` |
| `response` | a field of the Message | `response:usage.input_tokens` |
| `count_request` | a field of the count_tokens body | `count_request:system` |
| `count_response` | a field of the count_tokens answer | `count_response:input_tokens` |
| `models` | a field of the model list | `models:has_more` |
| `model` | a field of a ModelInfo | `model:display_name` |
| `error_body` | a field of the error envelope | `error_body:error.message` |
| `block` | a content block type (request or response) | `block:tool_use` |
| `delta` | a content_block_delta type | `delta:input_json_delta` |
| `event` | a stream event type | `event:message_delta` |
| `stop_reason` | a StopReason value | `stop_reason:stop_sequence` |
| `error` | an error type | `error:invalid_request_error` |

Field paths: property names joined by `.` from the body's root; `[]` after a name steps into
the items of an array (`messages[].role`); the members of a union (`anyOf`, `oneOf`, `allOf`)
are merged, so `tools[].input_schema` names the custom tool's field and `tools[].max_uses` a
server tool's. Paths stop after three names, and at content block lists (`messages[].content`,
the Message's `content`: the blocks themselves are `block:` keys), at the model list's `data`
(its items are `model:` keys) and at a few deep option maps (`STOPS`). Fields inside content
blocks (a text block's `cache_control`, an image's `source`) are not keys: the block type is.

The spec extract lives in a checkout (`spec/`), not in the wheel: coverage is a repository tool.
The page itself is written by conformance/reporting/coverage_report.py (`nox -s coverage`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from conformance.judging.schemas import openapi_path
from conformance.wire.sse import parse_sse

__all__ = [
    "KINDS",
    "SPEC_PATH",
    "CoverageKey",
    "covered_by",
    "field_paths",
    "observe",
    "universe",
]

SPEC_PATH = Path(__file__).resolve().parents[2] / "spec" / "anthropic-openapi-2026-05.messages.json"

# Kind → what the report calls it, in report order.
KINDS = {
    "endpoint": "endpoints",
    "param": "parameters (query, path, header)",
    "request": "create request fields",
    "response": "Message fields",
    "count_request": "count_tokens request fields",
    "count_response": "count_tokens response fields",
    "models": "model list fields",
    "model": "ModelInfo fields",
    "error_body": "error envelope fields",
    "block": "content block types",
    "delta": "delta types",
    "event": "stream event types",
    "stop_reason": "stop reasons",
    "error": "error types",
}
MAX_DEPTH = 3  # names in a field path
# Where a field path stops: content block lists (their blocks are `block:` keys), the model
# list's items (`model:` keys), citations on system blocks and the browser toolset's per-action
# configs (one key each is enough to say whether they are exercised).
STOPS = frozenset({"messages[].content", "content", "data", "system[].citations", "tools[].configs"})

Schema = dict[str, Any]


@dataclass(frozen=True, slots=True)
class CoverageKey:
    key: str
    official: bool  # in the official copy; False: added by an overlay (SDK 2.14)
    note: str = ""  # e.g. "request" / "response" for block types

    @property
    def kind(self) -> str:
        return self.key.split(":", 1)[0]


class _Walker:
    """Reads one OpenAPI document (the extract, or the derived one)."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.schemas: dict[str, Schema] = document["components"]["schemas"]

    def resolve(self, node: Any) -> Schema:
        while isinstance(node, dict) and "$ref" in node:
            node = self.schemas[node["$ref"].rsplit("/", 1)[1]]
        return node if isinstance(node, dict) else {}

    def members(self, node: Any) -> Iterator[Schema]:
        """`node` and, recursively, every member of its unions (null branches dropped)."""
        node = self.resolve(node)
        yield node
        for keyword in ("anyOf", "oneOf", "allOf"):
            for member in node.get(keyword, []):
                yield from self.members(member)

    def fields(self, node: Any, prefix: str = "", depth: int = 0) -> Iterator[str]:
        """Field paths under `node` (see the module docstring)."""
        if depth >= MAX_DEPTH:
            return
        seen: set[str] = set()
        for member in self.members(node):
            for name, child in member.get("properties", {}).items():
                path = f"{prefix}{name}"
                if path in seen:
                    continue
                seen.add(path)
                yield path
                if path in STOPS:
                    continue
                yield from self.fields(child, f"{path}.", depth + 1)
                for item in self.items(child):
                    yield from self.fields(item, f"{path}[].", depth + 1)

    def items(self, node: Any) -> Iterator[Any]:
        for member in self.members(node):
            if member.get("type") == "array" and "items" in member:
                yield member["items"]

    def consts(self, node: Any, field: str = "type") -> list[str]:
        """The `field` constants of a union's members (`type` of blocks, deltas, errors)."""
        found: list[str] = []
        for member in self.members(node):
            prop = self.resolve(member.get("properties", {}).get(field, {}))
            values = [prop["const"]] if "const" in prop else prop.get("enum", [])
            if len(values) == 1 and values[0] not in found:
                found.append(values[0])
        return found

    def body(self, path: str, method: str = "post") -> Schema:
        operation = self.document["paths"][path][method]
        return operation["requestBody"]["content"]["application/json"]["schema"]  # type: ignore[no-any-return]

    def answer(self, path: str, method: str) -> Schema:
        content = self.document["paths"][path][method]["responses"]["200"]["content"]
        return content["application/json"]["schema"]  # type: ignore[no-any-return]

    def keys(self) -> dict[str, str]:
        """Every coverage key this document defines → note."""
        out: dict[str, str] = {}
        paths = self.document["paths"]
        for path, item in paths.items():
            for method, operation in item.items():
                out[f"endpoint:{method.upper()} {path}"] = ""
                for parameter in operation.get("parameters", []):
                    out[f"param:{parameter['name']}"] = ""
        sections = (
            ("request", self.body("/v1/messages")),
            ("response", self.answer("/v1/messages", "post")),
            ("count_request", self.body("/v1/messages/count_tokens")),
            ("count_response", self.answer("/v1/messages/count_tokens", "post")),
            ("models", self.answer("/v1/models", "get")),
            ("model", self.answer("/v1/models/{model_id}", "get")),
            ("error_body", self.schemas["ErrorResponse"]),
        )
        for kind, schema in sections:
            out.update((f"{kind}:{name}", "") for name in self.fields(schema))
        out.update(self._blocks())
        start = self.schemas["ContentBlockDeltaEvent"]["properties"]["delta"]
        out.update((f"delta:{name}", "") for name in self.consts(start))
        events = self.consts(self.schemas["MessageStreamEvent"])
        if "ErrorEvent" in self.schemas:  # the error event: schemas/ defines it (an overlay)
            events.append("error")
        out.update((f"event:{name}", "") for name in events)
        stops = self.resolve(self.schemas["StopReason"]).get("enum", [])
        out.update((f"stop_reason:{name}", "") for name in stops)
        errors = self.schemas["ErrorResponse"]["properties"]["error"]
        out.update((f"error:{name}", "") for name in self.consts(errors))
        return out

    def _blocks(self) -> dict[str, str]:
        """Content block types, each noted as sent in requests, returned, or both."""
        request = self.resolve(self.schemas["InputMessage"]["properties"]["content"])
        sent = [t for item in self.items(request) for t in self.consts(item)]
        returned = self.consts(self.schemas["ContentBlock"])
        returned += self.consts(self.schemas["ContentBlockStartEvent"]["properties"]["content_block"])
        notes: dict[str, str] = {}
        for name in [*returned, *sent]:
            where = ("request" if name in sent else "") + (" response" if name in returned else "")
            notes[f"block:{name}"] = where.strip().replace(" ", ", ")
        return notes


def walker(document: dict[str, Any]) -> _Walker:
    """A reader of one OpenAPI document (the extract, or the derived one)."""
    return _Walker(document)


@cache
def universe() -> dict[str, CoverageKey]:
    """Every coverage key: the official copy's, then what the overlays add."""
    official = _Walker(json.loads(SPEC_PATH.read_text(encoding="utf-8"))).keys()
    derived = _Walker(json.loads(openapi_path().read_text(encoding="utf-8"))).keys()
    keys = {key: CoverageKey(key, True, note) for key, note in official.items()}
    for key, note in derived.items():
        keys.setdefault(key, CoverageKey(key, False, note))
    return keys


def field_paths(value: Any, prefix: str = "", depth: int = 0) -> Iterator[str]:
    """The field paths (same notation as the universe) present in a JSON value."""
    if depth >= MAX_DEPTH or not isinstance(value, dict):
        return
    for name, child in value.items():
        path = f"{prefix}{name}"
        yield path
        if path in STOPS:
            continue
        yield from field_paths(child, f"{path}.", depth + 1)
        if isinstance(child, list):
            for item in child:
                yield from field_paths(item, f"{path}[].", depth + 1)


def covered_by(declarations: Iterable[tuple[str, Iterable[str]]]) -> dict[str, list[str]]:
    """Key → ids of the properties that declare it, from (id, covers) pairs."""
    out: dict[str, list[str]] = {}
    for pid, covers in declarations:
        for key in covers:
            out.setdefault(key, []).append(pid)
    return out


@cache
def _templates() -> list[tuple[re.Pattern[str], str, list[str]]]:
    """The spec's paths as patterns (literal ones first), with the parameters each fills."""
    paths = {k.key.split(" ", 1)[1] for k in universe().values() if k.kind == "endpoint"}
    out = []
    for path in sorted(paths, key=lambda p: ("{" in p, p)):
        names = re.findall(r"\{(\w+)\}", path)
        pattern = re.escape(path)
        for name in names:
            pattern = pattern.replace(re.escape(f"{{{name}}}"), "[^/]+")
        out.append((re.compile(f"^{pattern}$"), path, names))
    return out


def _template(path: str) -> tuple[str, list[str]]:
    """The spec's path for a concrete one, and the path parameters it fills."""
    for pattern, template, names in _templates():
        if pattern.match(path):
            return template, names
    return path, []


def observe(exchange: Mapping[str, Any]) -> set[str]:
    """The coverage keys one recorded exchange (the evidence format of conformance/wire/target.py)
    shows: what was sent (endpoint, parameters, request fields, request blocks) and what came
    back (fields, blocks, deltas, events, stop reasons, error types). A streamed Message counts
    as the Message: message_start's `message`, message_delta's `delta` and `usage`."""
    request, response = exchange.get("request") or {}, exchange.get("response") or {}
    url = urlsplit(str(request.get("url", "")))
    path, filled = _template(url.path)
    method = str(request.get("method", "")).upper()
    keys = {f"endpoint:{method} {path}", *(f"param:{name}" for name in filled)}
    keys |= {f"param:{name}" for name, _ in parse_qsl(url.query) if name != "beta"}
    keys |= {f"param:{name.lower()}" for name in request.get("headers") or {}}
    body = request.get("body")
    if path == "/v1/messages" and method == "POST":
        keys |= _prefixed("request", body) | _sent_blocks(body)
    elif path == "/v1/messages/count_tokens":
        keys |= _prefixed("count_request", body) | _sent_blocks(body)
    answer = response.get("body")
    status = response.get("status")
    if isinstance(status, int) and status >= 400:
        keys |= _error(answer)
    elif isinstance(answer, str) and path == "/v1/messages":
        keys |= _streamed(answer)
    elif path == "/v1/messages":
        keys |= _message(answer)
    elif path == "/v1/messages/count_tokens":
        keys |= _prefixed("count_response", answer)
    elif path == "/v1/models" and isinstance(answer, dict):
        keys |= _prefixed("models", answer)
        data = answer.get("data")
        for item in data if isinstance(data, list) else []:
            keys |= _prefixed("model", item)
    elif path == "/v1/models/{model_id}":
        keys |= _prefixed("model", answer)
    return keys


def _prefixed(kind: str, value: Any) -> set[str]:
    return {f"{kind}:{name}" for name in field_paths(value)}


def _sent_blocks(body: Any) -> set[str]:
    """Block types in a request's turns, tool_result contents included."""
    found: set[str] = set()
    messages = body.get("messages") if isinstance(body, dict) else None
    for message in messages if isinstance(messages, list) else []:  # generated bodies: any value
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and isinstance(block.get("type"), str):
                found.add(f"block:{block['type']}")
                inner = block.get("content")
                for item in inner if isinstance(inner, list) else []:
                    if isinstance(item, dict) and isinstance(item.get("type"), str):
                        found.add(f"block:{item['type']}")
    return found


def _message(message: Any) -> set[str]:
    if not isinstance(message, dict):
        return set()
    keys = _prefixed("response", message)
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and isinstance(block.get("type"), str):
            keys.add(f"block:{block['type']}")
    if isinstance(message.get("stop_reason"), str):
        keys.add(f"stop_reason:{message['stop_reason']}")
    return keys


def _error(body: Any) -> set[str]:
    if not isinstance(body, dict):
        return set()
    keys = _prefixed("error_body", body)
    error = body.get("error")
    if isinstance(error, dict) and isinstance(error.get("type"), str):
        keys.add(f"error:{error['type']}")
    return keys


def _streamed(text: str) -> set[str]:
    keys: set[str] = set()
    for event in parse_sse(text.encode("utf-8")).events:
        data = event.json
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            continue
        kind = data["type"]
        keys.add(f"event:{kind}")
        if kind == "message_start":
            keys |= _message(data.get("message"))
        elif kind == "content_block_start" and isinstance(data.get("content_block"), dict):
            keys.add(f"block:{data['content_block'].get('type')}")
        elif kind == "content_block_delta" and isinstance(data.get("delta"), dict):
            keys.add(f"delta:{data['delta'].get('type')}")
        elif kind == "message_delta":
            keys |= _message(data.get("delta")) | _prefixed("response", {"usage": data.get("usage")})
        elif kind == "error":
            keys |= _error(data)
    return keys
