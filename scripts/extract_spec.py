"""Extract the Messages surface from Anthropic's full OpenAPI copy, for vendoring.

Usage: python scripts/extract_spec.py [SPEC] [--out FILE]

SPEC defaults to ../shared/spec/anthropic-openapi-2026-05.json (the 1.6 MB public copy the
official SDKs are generated from; see schemas/README.md for its provenance), FILE to
schemas/spec/anthropic-openapi-2026-05.messages.json. The extract keeps the GA paths of the
Messages surface (messages, count_tokens, models, batches) and every component they reach
through `$ref`s and discriminator mappings, plus the stream events and the error envelope that
no path names. Nothing else changes: kept values are the source's, in the source's key order,
serialised as the source is (two-space indent, UTF-8), so each kept value is byte-for-byte the
source's. The root key `x-plumbline-extract` records the source file's name, sha256, the paths
and the roots kept, so the extract can be checked against (or regenerated from) the original.

`scripts/derive_schemas.py` and `conformance/reporting/coverage.py` read the extract, so a fresh clone
needs nothing outside this repository.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from derive_schemas import GA_PATHS, reachable, refs_in

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO_ROOT.parent / "shared" / "spec" / "anthropic-openapi-2026-05.json"
DEFAULT_OUT = REPO_ROOT / "schemas" / "spec" / "anthropic-openapi-2026-05.messages.json"
# Components no path reaches that the suite reads: the stream events (a path documents only
# JSON) and the error envelope (named by derived files and the coverage universe).
EXTRA_ROOTS = ("MessageStreamEvent", "ErrorResponse")
# Root keys carried over unchanged; `webhooks` and every other path are left behind.
KEPT_ROOT_KEYS = ("openapi", "info", "servers")


def extract(source: dict[str, Any], name: str, sha256: str) -> dict[str, Any]:
    """The extract of `source` (parsed), with its provenance record."""
    paths = {p: item for p, item in source["paths"].items() if p in GA_PATHS}
    missing = sorted(set(GA_PATHS) - set(paths))
    if missing:
        raise ValueError(f"source lacks paths {missing}")
    schemas = source["components"]["schemas"]
    keep = reachable(schemas, refs_in(paths) | set(EXTRA_ROOTS))
    out: dict[str, Any] = {k: source[k] for k in source if k in KEPT_ROOT_KEYS or k == "paths"}
    out["paths"] = paths
    out["components"] = {"schemas": {k: v for k, v in schemas.items() if k in keep}}
    out["x-plumbline-extract"] = {
        "source": name,
        "sha256": sha256,
        "paths": list(paths),
        "extra_roots": list(EXTRA_ROOTS),
        "components": len(keep),
        "of_components": len(schemas),
        "script": "scripts/extract_spec.py",
    }
    return out


def render(document: dict[str, Any]) -> str:
    """The source's own serialisation (re-rendering the full source reproduces it exactly)."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; prints what it wrote."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("spec", nargs="?", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if not args.spec.is_file():
        print(f"spec not found: {args.spec}", file=sys.stderr)
        return 2
    raw = args.spec.read_bytes()
    source = json.loads(raw)
    if render(source).encode("utf-8") != raw:
        # Only then is every kept value guaranteed byte-for-byte the source's.
        print(f"warning: {args.spec.name} is not in the expected layout", file=sys.stderr)
    document = extract(source, args.spec.name, hashlib.sha256(raw).hexdigest())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    data = render(document).encode("utf-8")
    args.out.write_bytes(data)
    record = document["x-plumbline-extract"]
    print(f"{len(data):>8}  {args.out} ({len(record['paths'])} paths, {record['components']} components)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
