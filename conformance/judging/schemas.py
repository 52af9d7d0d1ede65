"""The machine-readable contract in `schemas/`, loaded and checked offline.

The files are derived from Anthropic's OpenAPI spec by `scripts/derive_schemas.py` (see
`schemas/README.md`). A wheel carries them as `conformance/_schemas/` (pyproject force-includes
the top-level `schemas/` there); a source checkout reads the repository's `schemas/` next to the
package. Nothing is fetched: every file is registered in a `referencing` registry under a fixed
base URI that never resolves on a network.

Validation results are data (`SchemaError`: where in the instance, what is wrong) so properties
can put them in a report. Errors inside a union (`oneOf`/`anyOf`) are reported from the branch
the instance was evidently meant for (its `type` or `role`, or the non-null branch), because the
raw jsonschema message for a union ("is not valid under any of the given schemas") says nothing.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

__all__ = [
    "EVENT_TYPES",
    "SCHEMA_BASE_URI",
    "SchemaError",
    "event_schema_path",
    "load_openapi",
    "openapi_path",
    "registry",
    "schemas_dir",
    "validate",
    "validate_component",
    "validate_error",
    "validate_event",
    "validate_request",
    "validate_response",
]

# `.invalid` is reserved (RFC 2606): a resolver that tried the network would fail at once.
SCHEMA_BASE_URI = "https://plumbline.invalid/schemas/"
# The stream event types the schemas describe. Others may appear (the API may add event types);
# validate_event does not judge them.
EVENT_TYPES = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
    }
)
_DISCRIMINATORS = ("type", "role")
_MAX_MESSAGE = 300
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


@dataclass(frozen=True)
class SchemaError:
    """One way an instance breaks its schema."""

    path: str
    """Where in the instance, as a JSON path: `$`, `$.content[0].type`."""
    message: str
    """What is wrong, in words."""
    keyword: str
    """The failing JSON Schema keyword (`required`, `const`, `enum`, `type`, ...)."""
    schema_path: str
    """Where in the schema, slash-separated from the validated root."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


# Required by the schema, typed optional by the official SDKs (a default of None) and newer than
# most servers: a client reads them as absent without failing, so leaving one out is a SHOULD
# where the schema is the only source (tests/conformance/test_schemas.py holds each to both facts).
NEWER_FIELDS: dict[str, str] = {
    "caller": "who called a tool: programmatic tool calling (allowed_callers), late 2025",
}
_REQUIRED = re.compile(r"^'([^']+)' is a required property$")


def newer_field(error: SchemaError) -> str | None:
    """The NEWER_FIELDS key whose absence `error` is, else None."""
    match = _REQUIRED.match(error.message) if error.keyword == "required" else None
    return match[1] if match and match[1] in NEWER_FIELDS else None


def schemas_dir() -> Path:
    """The directory holding openapi.json, error.schema.json and events/."""
    package = Path(__file__).resolve().parents[1]  # conformance/
    packaged = package / "_schemas"
    if (packaged / "openapi.json").is_file():
        return packaged
    return package.parent / "schemas"


def openapi_path() -> Path:
    """Path of the derived OpenAPI document, e.g. for `schemathesis.openapi.from_path`."""
    return schemas_dir() / "openapi.json"


def event_schema_path(event_type: str) -> Path:
    """Path of the JSON Schema for one stream event type."""
    if event_type not in EVENT_TYPES:
        raise KeyError(f"no schema for event type {event_type!r}")
    return schemas_dir() / "events" / f"{event_type}.schema.json"


@cache
def load_openapi() -> dict[str, Any]:
    """The derived OpenAPI document (parsed once; do not mutate it)."""
    document: dict[str, Any] = json.loads(openapi_path().read_text(encoding="utf-8"))
    return document


@cache
def registry() -> Registry[Any]:
    """Every schema file as a draft 2020-12 resource under SCHEMA_BASE_URI, nothing remote."""
    root = schemas_dir()
    resources = []
    for file in sorted(root.rglob("*.json")):
        contents = json.loads(file.read_text(encoding="utf-8"))
        uri = SCHEMA_BASE_URI + file.relative_to(root).as_posix()
        resources.append((uri, Resource.from_contents(contents, DRAFT202012)))
    return Registry().with_resources(resources).crawl()


def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not _RFC3339.match(value):
        return False
    try:
        datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
    except ValueError:
        return False
    return True


@cache
def _format_checker() -> FormatChecker:
    # jsonschema checks date-time only with an optional dependency; the spec's timestamps
    # (created_at, expires_at, ...) are RFC 3339, so check them ourselves.
    checker = FormatChecker()
    checker.checks("date-time")(_is_date_time)
    return checker


@cache
def _validator(target: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": target}, registry=registry(), format_checker=_format_checker())


def validate(target: str, instance: object) -> list[SchemaError]:
    """Validate against any schema by URI-reference relative to the schemas directory.

    `target` looks like `openapi.json#/components/schemas/Message` or
    `events/ping.schema.json`.
    """
    validator = _validator(SCHEMA_BASE_URI + target)
    found: list[SchemaError] = []
    for error in sorted(validator.iter_errors(instance), key=_order):
        found.extend(_to_schema_errors(error))
    return _dedupe(found)


def validate_component(name: str, instance: object) -> list[SchemaError]:
    """Validate against `#/components/schemas/<name>` of openapi.json."""
    if name not in load_openapi()["components"]["schemas"]:
        raise KeyError(f"no component schema {name!r}")
    return validate(f"openapi.json#/components/schemas/{name}", instance)


def validate_error(body: object) -> list[SchemaError]:
    """Validate an HTTP error body against the error envelope (error.schema.json)."""
    return validate("error.schema.json", body)


def validate_event(event: object) -> list[SchemaError]:
    """Validate one stream event's parsed `data` by its `type`.

    An event whose `type` is a string the schemas do not know yields no errors: the API may add
    event types, and the stream grammar records those. A non-object, or one without a string
    `type`, is an error.
    """
    if not isinstance(event, Mapping):
        return [SchemaError("$", f"event is {_kind(event)}, not an object", "type", "type")]
    kind = event.get("type")
    if not isinstance(kind, str):
        message = "event has no `type`" if kind is None else "event `type` is not a string"
        return [SchemaError("$", message, "required", "required")]
    if kind not in EVENT_TYPES:
        return []
    return validate(f"events/{kind}.schema.json", event)


def validate_request(operation: str, body: object) -> list[SchemaError]:
    """Validate a JSON request body of an operation (`messages_post` or `POST /v1/messages`)."""
    path, method = _find_operation(operation)
    request = load_openapi()["paths"][path][method].get("requestBody")
    if request is None or "application/json" not in request.get("content", {}):
        raise KeyError(f"{operation} documents no JSON request body")
    return validate(
        _pointer("paths", path, method, "requestBody", "content", "application/json", "schema"),
        body,
    )


def validate_response(
    operation: str, status: int, body: object, *, media_type: str = "application/json"
) -> list[SchemaError]:
    """Validate a response body of an operation for a status code.

    `operation` is an operationId (`messages_post`) or `METHOD /path` (`POST /v1/messages`).
    The status is looked up exactly, then as `4XX`/`5XX`, then `default`. For
    `text/event-stream`, `body` is one event's parsed data (see validate_event); for
    `application/x-jsonl` (batch results), one line's parsed object. A status or media type
    the operation does not document is itself reported as an error.
    """
    path, method = _find_operation(operation)
    responses: dict[str, Any] = load_openapi()["paths"][path][method]["responses"]
    key = next((k for k in (str(status), f"{status // 100}XX", "default") if k in responses), None)
    if key is None:
        documented = ", ".join(sorted(responses))
        return [
            SchemaError(
                "$",
                f"status {status} is not documented ({documented})",
                "responses",
                _pointer("paths", path, method, "responses"),
            )
        ]
    content = responses[key].get("content", {})
    if media_type not in content:
        documented = ", ".join(sorted(content)) or "no body"
        return [
            SchemaError(
                "$",
                f"media type {media_type} is not documented for {key} ({documented})",
                "content",
                _pointer("paths", path, method, "responses", key, "content"),
            )
        ]
    if media_type == "text/event-stream":
        return validate_event(body)
    return validate(_pointer("paths", path, method, "responses", key, "content", media_type, "schema"), body)


# --- helpers ------------------------------------------------------------------------------------


def _pointer(*parts: str) -> str:
    escaped = (p.replace("~", "~0").replace("/", "~1") for p in parts)
    return "openapi.json#/" + "/".join(escaped)


def _find_operation(operation: str) -> tuple[str, str]:
    paths: dict[str, Any] = load_openapi()["paths"]
    method, _, path = operation.partition(" ")
    if path:
        if path in paths and method.lower() in paths[path]:
            return path, method.lower()
    else:
        for candidate, item in paths.items():
            for verb, op in item.items():
                if op.get("operationId") == operation:
                    return candidate, verb
    raise KeyError(f"unknown operation {operation!r}")


def _kind(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return names.get(type(value), type(value).__name__)


def _order(error: ValidationError) -> tuple[str, str]:
    return (_json_path(error.absolute_path), error.message)


def _json_path(parts: Iterable[str | int]) -> str:
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out


def _short(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


def _schema_error(error: ValidationError, message: str | None = None) -> SchemaError:
    return SchemaError(
        path=_json_path(error.absolute_path),
        message=_short(message or error.message),
        keyword=str(error.validator),
        schema_path="/".join(str(p) for p in error.absolute_schema_path),
    )


def _to_schema_errors(error: ValidationError) -> list[SchemaError]:
    """Flatten an error, descending into the union branch the instance was meant for."""
    if error.validator not in ("anyOf", "oneOf") or not error.context:
        return [_schema_error(error)]
    branches: dict[object, list[ValidationError]] = defaultdict(list)
    for sub in error.context:
        branches[sub.relative_schema_path[0]].append(sub)
    plausible = [errs for errs in branches.values() if not any(map(_rules_out, errs))]
    if len(plausible) == 1:
        return [leaf for sub in plausible[0] for leaf in _to_schema_errors(sub)]
    if not plausible:
        return [_schema_error(error, _no_branch_message(error))]
    # Several branches fit equally: report what they all agree on, if anything.
    common = set.intersection(*({(tuple(e.relative_path), e.message) for e in errs} for errs in plausible))
    agreed = [e for e in plausible[0] if (tuple(e.relative_path), e.message) in common]
    if agreed:
        return [leaf for sub in agreed for leaf in _to_schema_errors(sub)]
    return [_schema_error(error, f"matches none of the {len(branches)} alternatives")]


def _rules_out(error: ValidationError) -> bool:
    """True if this error shows its branch was meant for a different kind of instance."""
    relative = list(error.relative_path)
    if not relative and error.validator == "type":
        return True  # e.g. the null branch of a nullable field
    return len(relative) == 1 and relative[0] in _DISCRIMINATORS and error.validator in ("const", "enum")


def _no_branch_message(error: ValidationError) -> str:
    instance = error.instance
    for key in _DISCRIMINATORS:
        if isinstance(instance, dict) and key in instance:
            expected: set[str] = set()
            for sub in error.context or ():
                if list(sub.relative_path) == [key]:
                    value = sub.validator_value
                    expected.update(value if isinstance(value, list) else [value])
            allowed = ", ".join(sorted(str(v) for v in expected))
            return f"unknown {key} {json.dumps(instance[key])} (expected one of: {allowed})"
    return f"{_kind(instance)} matches none of the alternatives"


def _dedupe(errors: list[SchemaError]) -> list[SchemaError]:
    seen: set[tuple[str, str]] = set()
    out = []
    for error in errors:
        if (error.path, error.message) not in seen:
            seen.add((error.path, error.message))
            out.append(error)
    return out
