"""Derive Plumbline's `schemas/` from Anthropic's OpenAPI 3.1 spec.

Usage: python scripts/derive_schemas.py [SPEC] [--out DIR]

SPEC defaults to spec/anthropic-openapi-2026-05.messages.json, the vendored extract (written by
scripts/extract_spec.py) of a public copy of the spec the official SDKs are generated from
(tryAGI/Anthropic, file src/libs/Anthropic/openapi.yaml at commit ebea3ea4, 2026-05-06, MIT):
its Messages-surface paths and every component they reach, unchanged. The full copy (e.g.
../shared/spec/anthropic-openapi-2026-05.json) gives the same output. DIR defaults to the
repository's `schemas/`. The output is a pure function of SPEC and the overlays in
`schema_overlays*.py`: keys sorted, one fixed layout, so re-running gives no diff.

What is written:
- openapi.json: the GA operations the suite tests, every component they reach, doc-only keys
  removed, overlays applied;
- events/<type>.schema.json: one JSON Schema (draft 2020-12) per stream event type;
- error.schema.json: the error envelope of every non-2xx response.
The event and error files hold a relative `$ref` into openapi.json, so they stay tiny and a
file-based resolver (or conformance/judging/schemas.py, offline) finds what they point at.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

import schema_overlays
import schema_overlays_request  # noqa: F401  (importing registers its overlays)
import schema_overlays_wire  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SPEC = REPO_ROOT / "spec" / "anthropic-openapi-2026-05.messages.json"
DEFAULT_OUT = REPO_ROOT / "schemas"
SOURCE = {
    "repository": "https://github.com/tryAGI/Anthropic",
    "path": "src/libs/Anthropic/openapi.yaml",
    "commit": "ebea3ea43be1a34302d597874ba1926336effc78",
    "date": "2026-05-06",
    "license": "MIT",
    "overlaid_from": "anthropic (Python SDK) 2.14.0",
}

# GA paths only: the `?beta=true` twins are separate keys in the spec and are left out.
GA_PATHS = (
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/models",
    "/v1/models/{model_id}",
    "/v1/messages/batches",
    "/v1/messages/batches/{message_batch_id}",
    "/v1/messages/batches/{message_batch_id}/cancel",
    "/v1/messages/batches/{message_batch_id}/results",
)
# Components reached from no operation that the suite still needs: the stream events are only
# named by the SSE overlay, and this keeps them even if that overlay changes.
EXTRA_ROOTS = ("MessageStreamEvent", "ErrorEvent", "ErrorResponse")
EVENT_COMPONENTS = {
    "message_start": "MessageStartEvent",
    "content_block_start": "ContentBlockStartEvent",
    "content_block_delta": "ContentBlockDeltaEvent",
    "content_block_stop": "ContentBlockStopEvent",
    "message_delta": "MessageDeltaEvent",
    "message_stop": "MessageStopEvent",
    "ping": "Ping",
    "error": "ErrorEvent",
}
DIALECT = "https://json-schema.org/draft/2020-12/schema"

# Keywords that only document. `title` goes too: jsonschema never reads it, and it is most of
# what remains once descriptions are gone.
DOC_KEYWORDS = frozenset({"description", "title", "$comment", "externalDocs"})
# Examples help schemathesis's examples phase; big ones are prose, not test data.
MAX_EXAMPLE_BYTES = 400
# JSON Schema keywords whose value is a schema, a list of schemas, or a map of schemas. Everything
# else (const, enum, default, examples, required, discriminator, ...) is data and left untouched.
SCHEMA_KEYWORDS = frozenset(
    {
        "items",
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)
SCHEMA_LIST_KEYWORDS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
SCHEMA_MAP_KEYWORDS = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})


def is_doc_only(key: str) -> bool:
    """True for keys that document but never constrain (descriptions, vendor extensions)."""
    return key in DOC_KEYWORDS or key.startswith("x-")


def small(value: Any) -> bool:
    """True if an example is small enough to keep."""
    return len(json.dumps(value, sort_keys=True)) <= MAX_EXAMPLE_BYTES


def strip_schema(node: Any) -> Any:
    """Copy a schema without doc-only keywords, walking only schema-valued keywords.

    Property names such as `description` or `title` (tools and documents have them) must
    survive, so the walk knows which values are schemas and which are data.
    """
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if is_doc_only(key):
            continue
        if key in ("examples", "example"):
            if key == "examples" and isinstance(value, list):
                value = [v for v in value if small(v)]
                if not value:
                    continue
            elif not small(value):
                continue
            out[key] = copy.deepcopy(value)
        elif key in SCHEMA_KEYWORDS:
            out[key] = strip_schema(value)
        elif key in SCHEMA_LIST_KEYWORDS:
            out[key] = [strip_schema(v) for v in value]
        elif key in SCHEMA_MAP_KEYWORDS:
            out[key] = {name: strip_schema(v) for name, v in value.items()}
        else:
            out[key] = copy.deepcopy(value)
    return out


def strip_operation(operation: dict[str, Any]) -> dict[str, Any]:
    """Keep what a client or schemathesis needs from an operation: id, parameters, bodies."""
    out: dict[str, Any] = {"operationId": operation["operationId"]}
    if "parameters" in operation:
        out["parameters"] = [
            {k: strip_schema(v) if k == "schema" else v for k, v in p.items() if not is_doc_only(k)}
            for p in operation["parameters"]
        ]
    if "requestBody" in operation:
        out["requestBody"] = strip_media(operation["requestBody"])
    out["responses"] = {}
    for status, response in operation["responses"].items():
        stripped = strip_media(response)
        # OpenAPI requires a description on every response; keep only its first line.
        stripped["description"] = response.get("description", "").split("\n")[0]
        out["responses"][status] = stripped
    return out


def strip_media(holder: dict[str, Any]) -> dict[str, Any]:
    """Strip a request body or response object, keeping `required` and each media type."""
    out: dict[str, Any] = {k: v for k, v in holder.items() if k in ("required",)}
    if "content" in holder:
        out["content"] = {
            media: {k: strip_schema(v) for k, v in obj.items() if not is_doc_only(k)}
            for media, obj in holder["content"].items()
        }
    return out


def refs_in(node: Any) -> set[str]:
    """Names of every component schema referenced anywhere inside `node` (incl. mappings)."""
    found: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            target = item.get("$ref")
            if isinstance(target, str) and target.startswith("#/components/schemas/"):
                found.add(target.rsplit("/", 1)[1])
            # discriminator mappings name components too, and must not dangle
            mapping = item.get("mapping")
            if isinstance(mapping, dict):
                found.update(v.rsplit("/", 1)[1] for v in mapping.values() if isinstance(v, str))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def reachable(schemas: dict[str, Any], roots: set[str]) -> set[str]:
    """Every component reachable from `roots` through `$ref`s and discriminator mappings."""
    seen: set[str] = set()
    todo = set(roots)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo |= refs_in(schemas[name]) - seen
    return seen


def build_openapi(spec: dict[str, Any]) -> dict[str, Any]:
    """The derived OpenAPI document: selected paths, overlays, reachable components, stripped."""
    schemas = copy.deepcopy(spec["components"]["schemas"])
    paths = {p: copy.deepcopy(spec["paths"][p]) for p in GA_PATHS}
    for patch in schema_overlays.overlays():
        patch.apply(schemas, paths)
    paths = {p: {m: strip_operation(op) for m, op in item.items()} for p, item in paths.items()}
    keep = sorted(reachable(schemas, refs_in(paths) | set(EXTRA_ROOTS)))
    return {
        "openapi": spec["openapi"],
        "info": {
            "title": "Anthropic Messages API (Plumbline subset)",
            "version": "2026-05-06+sdk-2.14.0",
            "x-plumbline-source": SOURCE,
            "x-plumbline-overlays": [
                {"name": o.name, "summary": o.summary, "provenance": list(o.provenance)}
                for o in schema_overlays.overlays()
            ],
        },
        "servers": spec.get("servers", []),
        "paths": paths,
        "components": {"schemas": {name: strip_schema(schemas[name]) for name in keep}},
    }


def build_side_schemas() -> dict[str, dict[str, Any]]:
    """The event and error-envelope JSON Schemas, keyed by path relative to the output dir."""
    files: dict[str, dict[str, Any]] = {
        "error.schema.json": {
            "$schema": DIALECT,
            "$ref": "openapi.json#/components/schemas/ErrorResponse",
        }
    }
    for event, component in EVENT_COMPONENTS.items():
        files[f"events/{event}.schema.json"] = {
            "$schema": DIALECT,
            "$ref": f"../openapi.json#/components/schemas/{component}",
        }
    return files


def render(document: dict[str, Any]) -> str:
    """The one serialisation used for every file: sorted keys, one-space indent, UTF-8."""
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def derive(spec_path: Path, out_dir: Path) -> dict[str, int]:
    """Write every derived file under `out_dir`; return each file's size in bytes."""
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    files = {"openapi.json": build_openapi(spec), **build_side_schemas()}
    sizes: dict[str, int] = {}
    for relative, document in files.items():
        target = out_dir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        data = render(document).encode("utf-8")
        target.write_bytes(data)
        sizes[relative] = len(data)
    return sizes


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; prints what it wrote."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("spec", nargs="?", type=Path, default=DEFAULT_SPEC)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if not args.spec.is_file():
        print(f"spec not found: {args.spec}", file=sys.stderr)
        return 2
    sizes = derive(args.spec, args.out)
    for relative, size in sorted(sizes.items()):
        print(f"{size:>8}  {args.out / relative}")
    print(f"{sum(sizes.values()):>8}  total, {len(schema_overlays.overlays())} overlays")
    return 0


if __name__ == "__main__":
    sys.exit(main())
