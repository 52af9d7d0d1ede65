"""Structural faults derived from `schemas/`: every documented field of every response shape
removed, set to null, or given the wrong JSON type, in turn; the body replaced by non-JSON;
the status replaced. Each is a `Fault` for `FaultProxy(url, everywhere=fault)`: a server with
exactly that one bug on every exchange, whatever the property.

The sweep (test_structural_sweep.py, scripts/sweep.py) runs the whole catalogue once per
fault and asks two things: no property ends in ERROR (a target's malformed answer is the
target's failure, never the harness's), and the fault's owner properties (the ones whose rule
it breaks, tables OWNERS and GRAMMAR_FIELDS) FAIL or WARN.

Field lists follow the schemas, not a hand list: a field is faulted as missing only where the
schema requires it, as null only where it does not allow null, and with a value of a JSON type
it does not allow. The walk descends into required, non-nullable objects and into the first
item of required arrays, at most MAX_DEPTH keys deep; a union is followed into its first
object branch (a text block, a text_delta, an invalid_request_error), which is the branch the
reference server sends.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from conformance.catalogue import REGISTRY
from conformance.cli import REFERENCE_PROFILE
from conformance.judging.schemas import load_openapi, schemas_dir
from conformance.profile import load_profile
from conformance.properties import load_all

from .fault_proxy import Fault, FaultProxy, Frame, Request, Response, running_proxy
from .faults import fault_catalogue
from .suite import run_suite

JSONPath = tuple[str | int, ...]
MAX_DEPTH = 3
NOT_JSON = "<html><body><h1>502 Bad Gateway</h1></body></html>"
EVENT_SHAPES = (
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
)
# Arrays the protocol keeps empty in a shape: faults inside their items would change nothing.
EMPTY_ARRAYS: dict[str, set[JSONPath]] = {"message_start": {("message", "content")}}

# (shape, family) -> the properties whose rule the fault breaks. Families: "field" (a field
# missing, null or of the wrong type), "non-json" (the body or one event's data), "status".
OWNERS: dict[tuple[str, str], tuple[str, ...]] = {
    ("message", "field"): ("MSG-001",),
    ("message", "non-json"): ("MSG-001",),
    ("message", "status"): ("MSG-001",),
    **{(event, "field"): ("STREAM-011",) for event in EVENT_SHAPES},
    **{(event, "non-json"): ("STREAM-010",) for event in EVENT_SHAPES},
    ("stream", "status"): ("STREAM-001",),
    ("error_event", "field"): ("STREAM-011",),
    ("error_event", "non-json"): ("STREAM-010",),
    ("error", "field"): ("ERR-023",),
    ("error", "non-json"): ("ERR-023",),
    ("error", "status"): ("ERR-023",),  # an error body sent with 200
    ("error", "status-422"): ("ERR-001",),  # a 400 sent as 422
    ("count_tokens", "field"): ("TOKENS-004",),
    ("count_tokens", "non-json"): ("TOKENS-004",),
    ("count_tokens", "status"): ("TOKENS-004",),
    ("model_list", "field"): ("MODELS-001",),
    ("model_list", "non-json"): ("MODELS-001",),
    ("model_list", "status"): ("MODELS-001",),
    ("model_info", "field"): ("MODELS-003",),
    ("model_info", "non-json"): ("MODELS-003",),
    ("model_info", "status"): ("MODELS-003",),
}
# Stream event fields that conformance/judging/grammar.py reads itself: it reports them under its own
# code, and validates an event against its schema (STREAM-011) only when the grammar found it
# sound (one cause, one failure). (shape, field path) -> owner, for every kind of fault.
GRAMMAR_FIELDS: dict[tuple[str, str], str] = {
    **{(event, "type"): "STREAM-002" for event in (*EVENT_SHAPES, "error_event")},  # name != data.type
    ("message_start", "message"): "STREAM-010",  # malformed-event
    ("content_block_start", "index"): "STREAM-010",
    ("content_block_start", "content_block"): "STREAM-010",
    ("content_block_start", "content_block.type"): "STREAM-010",
    ("content_block_start", "content_block.text"): "STREAM-008",  # block-start-not-empty
    ("content_block_delta", "index"): "STREAM-010",
    ("content_block_delta", "delta"): "STREAM-010",
    ("content_block_delta", "delta.type"): "STREAM-010",
    ("content_block_stop", "index"): "STREAM-010",
    ("message_delta", "delta"): "STREAM-010",
}
# message_start must come empty (STREAM-004, start-not-empty): these fields present and not
# empty (a wrong type, never their absence) are reported there.
START_FIELDS = {"message.content", "message.stop_reason", "message.stop_sequence"}


def field_owners(shape: str, fault: FieldFault) -> tuple[str, ...]:
    path = path_name(fault.path)
    if (shape, path) in GRAMMAR_FIELDS:
        return (GRAMMAR_FIELDS[(shape, path)],)
    if shape == "message_start" and path in START_FIELDS and fault.kind != "missing":
        return ("STREAM-004",)
    return OWNERS[(shape, "field")]


class StructuralFault(NamedTuple):
    name: str
    owners: tuple[str, ...]
    fault: Fault


# ------------------------------------------------------------------ the schema walk


@dataclass(frozen=True)
class FieldFault:
    path: JSONPath
    kind: str  # "missing", "null" or "wrong-type"
    value: Any = None


def _components() -> dict[str, Any]:
    schemas: dict[str, Any] = load_openapi()["components"]["schemas"]
    return schemas


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = _components()[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    schema = _resolve(schema)
    union = schema.get("anyOf") or schema.get("oneOf")
    if union is None:
        return [schema]
    return [branch for sub in union for branch in _branches(sub)]


_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


def _types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a schema allows (empty: unknown, i.e. anything)."""
    found: set[str] = set()
    for branch in _branches(schema):
        declared = branch.get("type")
        if isinstance(declared, str):
            found.add(declared)
        elif isinstance(declared, list):
            found.update(declared)
        elif "const" in branch:
            found.add("null" if branch["const"] is None else _JSON_TYPES[type(branch["const"])])
        elif "enum" in branch:
            found.update("null" if v is None else _JSON_TYPES[type(v)] for v in branch["enum"])
        else:
            return set()
    if "integer" in found:
        found.add("number")
    return found


def _wrong_value(types: set[str]) -> Any:
    """A value of a JSON type `types` does not allow; the realistic one where there is one."""
    if "string" not in types:
        if "number" in types:
            return "42"  # a number sent as a string
        if "boolean" in types:
            return "true"
        return "plumbline-wrong-type"
    if "number" not in types:
        return 42
    return [] if "array" not in types else {}


def _first_object(schema: dict[str, Any]) -> dict[str, Any] | None:
    return next((b for b in _branches(schema) if "properties" in b), None)


def field_faults(
    shape: str, schema: dict[str, Any], roots: Iterable[dict[str, Any]] = ()
) -> list[FieldFault]:
    """Every field fault of one shape, in schema order, depth-first.

    `roots` are the other shapes' root schemas: where one recurs inside this shape (a Message in
    message_start, a ModelInfo in the model list), its own shape already has every fault, so
    here only its required fields are faulted, as missing and as the wrong type.
    """
    out: list[FieldFault] = []
    others = [obj for obj in map(_first_object, roots) if obj is not None]
    _walk(shape, schema, (), out, others, recurring=False)
    return out


def _walk(
    shape: str,
    schema: dict[str, Any],
    prefix: JSONPath,
    out: list[FieldFault],
    others: list[dict[str, Any]],
    *,
    recurring: bool,
) -> None:
    obj = _first_object(schema)
    if obj is None:
        return
    recurring = recurring or (bool(prefix) and any(obj is other for other in others))
    required = set(obj.get("required", ()))
    depth = sum(isinstance(key, str) for key in prefix) + 1
    for name, sub in sorted(obj["properties"].items()):
        path = (*prefix, name)
        types = _types(sub)
        if recurring and name not in required:
            continue
        if name in required:
            out.append(FieldFault(path, "missing"))
        if types and "null" not in types and not recurring:
            out.append(FieldFault(path, "null"))
        if types:
            out.append(FieldFault(path, "wrong-type", _wrong_value(types)))
        if name not in required or "null" in types or depth >= MAX_DEPTH:
            continue
        if "object" in types:
            _walk(shape, sub, path, out, others, recurring=recurring)
        elif types == {"array"} and path not in EMPTY_ARRAYS.get(shape, set()):
            items = _resolve(sub).get("items")
            if isinstance(items, dict):
                _walk(shape, items, (*path, 0), out, others, recurring=recurring)


def path_name(path: JSONPath) -> str:
    return "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in path).lstrip(".")


def apply_field_fault(document: Any, fault: FieldFault) -> Any:
    """A copy of `document` with the fault applied; unchanged where the path's parent is absent."""
    document = copy.deepcopy(document)
    parent = document
    for key in fault.path[:-1]:
        if isinstance(key, int):
            if not (isinstance(parent, list) and len(parent) > key):
                return document
        elif not (isinstance(parent, dict) and key in parent):
            return document
        parent = parent[key]
    last = fault.path[-1]
    if not isinstance(parent, dict):
        return document
    if fault.kind == "missing":
        parent.pop(last, None)
    else:
        parent[last] = fault.value
    return document


# ------------------------------------------------------------------ where each shape lives


def _shape_schemas() -> dict[str, dict[str, Any]]:
    """Shape name -> its root schema, read from openapi.json's operations and the event and
    error schema files."""
    paths = load_openapi()["paths"]

    def ok(path: str, method: str) -> dict[str, Any]:
        schema: dict[str, Any] = paths[path][method]["responses"]["200"]["content"]["application/json"][
            "schema"
        ]
        return schema

    def file_ref(relative: str) -> dict[str, Any]:
        document = json.loads((schemas_dir() / relative).read_text(encoding="utf-8"))
        return {"$ref": document["$ref"]}

    shapes = {
        "message": ok("/v1/messages", "post"),
        "count_tokens": ok("/v1/messages/count_tokens", "post"),
        "model_list": ok("/v1/models", "get"),
        "model_info": ok("/v1/models/{model_id}", "get"),
        "error": file_ref("error.schema.json"),
        "error_event": file_ref("events/error.schema.json"),
    }
    shapes.update({event: file_ref(f"events/{event}.schema.json") for event in EVENT_SHAPES})
    return shapes


def _route(request: Request) -> str:
    return request.path.split("?", 1)[0]


def _select(shape: str, request: Request, response: Response) -> bool:
    """Is this complete (non-stream) response one of `shape`?"""
    route, data = _route(request), response.json
    if shape == "error":
        return response.status >= 400 and isinstance(data, dict)
    if response.status != 200 or not isinstance(data, dict):
        return False
    if shape == "message":
        return request.method == "POST" and route == "/v1/messages" and data.get("type") == "message"
    if shape == "count_tokens":
        return request.method == "POST" and route == "/v1/messages/count_tokens"
    if shape == "model_list":
        return request.method == "GET" and route == "/v1/models"
    if shape == "model_info":
        return request.method == "GET" and route.startswith("/v1/models/")
    raise KeyError(shape)


def _on(shape: str, change: Callable[[Response], Response]) -> Callable[[Request, Response], Response]:
    def apply(request: Request, response: Response) -> Response:
        return change(response) if _select(shape, request, response) else response

    return apply


def _edit_json(fault: FieldFault) -> Callable[[Response], Response]:
    return lambda response: response.with_json(apply_field_fault(response.json, fault))


def _body(text: str) -> Callable[[Response], Response]:
    def change(response: Response) -> Response:
        headers = {k: v for k, v in response.headers.items() if k != "content-length"}
        return Response(response.status, headers, text.encode())

    return change


def _status(status: int) -> Callable[[Response], Response]:
    return lambda response: Response(status, response.headers, response.body)


def _event_fields(kind: str, fault: FieldFault) -> Callable[[Request, list[Frame]], list[Frame]]:
    def apply(_: Request, frames: list[Frame]) -> list[Frame]:
        out = []
        for frame in frames:
            payload = frame.payload
            if isinstance(payload, dict) and payload.get("type") == kind:
                frame = Frame(frame.name, json.dumps(apply_field_fault(payload, fault)))
            out.append(frame)
        return out

    return apply


def _event_not_json(kind: str) -> Callable[[Request, list[Frame]], list[Frame]]:
    def apply(_: Request, frames: list[Frame]) -> list[Frame]:
        out, done = [], False
        for frame in frames:
            payload = frame.payload
            if not done and isinstance(payload, dict) and payload.get("type") == kind:
                frame, done = Frame(frame.name, NOT_JSON), True
            out.append(frame)
        return out

    return apply


ERROR_EVENT = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def _fail_midway(data: Callable[[], str]) -> Callable[[Request, list[Frame]], list[Frame]]:
    """The stream breaks off after its first content_block_delta (or message_start) with an
    error event carrying `data`: the only way an error event reaches the harness from a
    healthy server."""

    def apply(_: Request, frames: list[Frame]) -> list[Frame]:
        kinds = [f.payload.get("type") if isinstance(f.payload, dict) else None for f in frames]
        cut = next(
            (i for i, k in enumerate(kinds) if k == "content_block_delta"),
            kinds.index("message_start") if "message_start" in kinds else len(frames) - 1,
        )
        return [*frames[: cut + 1], Frame("error", data())]

    return apply


def _is_stream(_: Request, response: Response) -> bool:
    return response.status == 200 and response.headers.get("content-type", "").startswith("text/event-stream")


# ------------------------------------------------------------------ the catalogue of faults


def _field_fault(shape: str, fault: FieldFault) -> Fault:
    why = f"{shape}: {path_name(fault.path)} {fault.kind}"
    if shape in EVENT_SHAPES:
        return Fault(why, frames=_event_fields(shape, fault))
    if shape == "error_event":
        return Fault(why, frames=_fail_midway(lambda: json.dumps(apply_field_fault(ERROR_EVENT, fault))))
    return Fault(why, response=_on(shape, _edit_json(fault)))


def _shape_extras(shape: str) -> Iterator[tuple[str, str, Fault]]:
    """(name, family, fault): the non-JSON body and the status faults of one shape."""
    if shape in EVENT_SHAPES:
        yield (
            f"{shape}:data:non-json",
            "non-json",
            Fault(f"{shape} data not JSON", frames=_event_not_json(shape)),
        )
        return
    if shape == "error_event":
        yield (
            "error_event:data:non-json",
            "non-json",
            Fault("error event data not JSON", frames=_fail_midway(lambda: NOT_JSON)),
        )
        return
    yield (
        f"{shape}:body:non-json",
        "non-json",
        Fault(f"{shape} body not JSON", response=_on(shape, _body(NOT_JSON))),
    )
    if shape == "error":
        yield (
            "error:status:200",
            "status",
            Fault("error body sent with 200", response=_on(shape, _status(200))),
        )
        to_422 = _on(shape, lambda r: _status(422)(r) if r.status == 400 else r)
        yield "error:status:400-to-422", "status-422", Fault("400 sent as 422", response=to_422)
        return
    for status in (500, 503):
        yield (
            f"{shape}:status:{status}",
            "status",
            Fault(f"{shape} with {status}", response=_on(shape, _status(status))),
        )


def structural_faults() -> list[StructuralFault]:
    """Every structural fault, named `<shape>:<field path>:<kind>` (or `:body:non-json`,
    `:status:<n>`), in a stable order."""
    out: list[StructuralFault] = []
    shapes = _shape_schemas()
    for shape, schema in shapes.items():
        roots = [root for other, root in shapes.items() if other != shape]
        for fault in field_faults(shape, schema, roots):
            name = f"{shape}:{path_name(fault.path)}:{fault.kind}"
            out.append(StructuralFault(name, field_owners(shape, fault), _field_fault(shape, fault)))
        for name, family, extra in _shape_extras(shape):
            out.append(StructuralFault(name, OWNERS[(shape, family)], extra))
    stream_500 = Fault(
        "stream 200 sent as 500",
        response=lambda r, resp: _status(500)(resp) if _is_stream(r, resp) else resp,
    )
    out.append(StructuralFault("stream:status:500", OWNERS[("stream", "status")], stream_500))
    return out


def catalogue_faults(api_key: str) -> list[StructuralFault]:
    """Each fault of faults.py, applied to every exchange; its owner is its own property. Not
    those of properties whose feature the reference server does not serve (its profile says
    `false`): they are UNSUPPORTED there, and proven on the scripted targets instead."""
    load_all()
    absent = load_profile(REFERENCE_PROFILE).absent
    return [
        StructuralFault(f"catalogue:{pid}", (pid,), fault)
        for pid, fault in fault_catalogue(api_key).items()
        if not absent & set(REGISTRY[pid].requires)
    ]


def all_faults(api_key: str) -> list[StructuralFault]:
    return [*structural_faults(), *catalogue_faults(api_key)]


def shape_of(name: str) -> str:
    return name.split(":", 1)[0]


def combined(name: str, faults: Iterable[StructuralFault]) -> StructuralFault:
    """Several faults at once, each on its own response shape, so that one run of the suite
    judges them all: every hook of each applied in turn (a request hook that answers ends the
    chain), and the owners of every one must fail."""
    parts = [f.fault for f in faults]
    owners = tuple(dict.fromkeys(owner for f in faults for owner in f.owners))

    def request(req: Request) -> Request | Response:
        for part in parts:
            if part.request is not None:
                out = part.request(req)
                if isinstance(out, Response):
                    return out
                req = out
        return req

    def response(req: Request, resp: Response) -> Response:
        for part in parts:
            resp = part.response(req, resp) if part.response is not None else resp
        return resp

    def frames(req: Request, frames: list[Frame]) -> list[Frame]:
        for part in parts:
            frames = part.frames(req, frames) if part.frames is not None else frames
        return frames

    def stream_bytes(data: bytes) -> bytes:
        for part in parts:
            data = part.stream_bytes(data) if part.stream_bytes is not None else data
        return data

    def headers(values: dict[str, str]) -> dict[str, str]:
        for part in parts:
            values = part.headers(values) if part.headers is not None else values
        return values

    fault = Fault(
        "; ".join(part.why for part in parts),
        request=request,
        response=response,
        frames=frames,
        stream_bytes=stream_bytes,
        silence=max((part.silence for part in parts), default=0.0),
        headers=headers,
    )
    return StructuralFault(name, owners, fault)


# ------------------------------------------------------------------ one run of the suite


@dataclass
class Outcome:
    """One suite run through one fault."""

    name: str
    owners: dict[str, str | None]  # owner id -> its verdict
    errors: dict[str, str] = field(default_factory=dict)  # ERROR property id -> its message
    verdicts: dict[str, str] = field(default_factory=dict)
    exit_code: int | None = None
    seconds: float = 0.0
    problem: str | None = None  # the run itself broke (timeout, no report)

    @property
    def owners_failed(self) -> bool:
        return all(v in ("FAIL", "WARN") for v in self.owners.values())

    @property
    def ok(self) -> bool:
        return self.problem is None and not self.errors and self.owners_failed

    def explain(self) -> str:
        lines = [f"{self.name}: exit {self.exit_code}, {self.seconds:.0f} s"]
        if self.problem:
            lines.append(f"  run broke: {self.problem}")
        for pid, message in sorted(self.errors.items()):
            lines.append(f"  ERROR {pid}: {headline(message)}")
            lines.extend(f"      {line}" for line in message.strip().splitlines()[-8:])
        for pid, verdict in sorted(self.owners.items()):
            if verdict not in ("FAIL", "WARN"):
                lines.append(f"  owner {pid} is {verdict}, not FAIL/WARN")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "owners": self.owners,
            "owners_failed": self.owners_failed,
            "errors": self.errors,
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 1),
            "problem": self.problem,
            "verdicts": self.verdicts,
        }


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')


def headline(message: str) -> str:
    """One line for an ERROR's message: a traceback's exception and the innermost frame in
    conformance/ (where the harness broke), else the message's first line."""
    lines = [line for line in message.splitlines() if line.strip()]
    if not lines:
        return "<no message>"
    frames = [m for m in map(_FRAME.match, lines) if m]
    if not frames:
        return lines[0].strip()
    exception = next((line.strip() for line in reversed(lines) if not line[:1].isspace()), lines[-1].strip())
    ours = [m for m in frames if "/conformance/" in m["file"].replace("\\", "/")]
    frame = (ours or frames)[-1]
    return f"{exception} (at {Path(frame['file']).name}:{frame['line']} in {frame['func']})"


def judge(
    fault: StructuralFault,
    upstream: str,
    report_dir: Path,
    *,
    profile: Path | None = None,
    timeout: float = 900,
    extra: Sequence[str] = (),
) -> Outcome:
    """Run the whole suite (or the selection `extra` makes) through
    `FaultProxy(upstream, everywhere=fault)`."""
    started = time.monotonic()
    outcome = Outcome(fault.name, dict.fromkeys(fault.owners))
    try:
        with running_proxy(FaultProxy(upstream, everywhere=fault.fault)) as url:
            code, index, _ = run_suite(url, report_dir, profile=profile, timeout=timeout, extra=extra)
    except subprocess.TimeoutExpired:
        outcome.problem = f"the suite ran over {timeout:.0f} s"
    except AssertionError as exc:  # run_suite found no report
        outcome.problem = str(exc)[:2000]
    else:
        outcome.exit_code = code
        outcome.verdicts = {p["id"]: p["verdict"] for p in index["properties"]}
        outcome.errors = {
            p["id"]: str(p.get("message") or "") for p in index["properties"] if p["verdict"] == "ERROR"
        }
        outcome.owners = {pid: outcome.verdicts.get(pid) for pid in fault.owners}
    outcome.seconds = time.monotonic() - started
    return outcome
