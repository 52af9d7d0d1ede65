"""The spec coverage page: numbers per kind, the gaps, and every key with the properties that
exercise it; Markdown and one self-contained HTML page (`python -m conformance.reporting.coverage_report`,
or `nox -s coverage`). The keys and their universe are conformance/reporting/coverage.py's."""

from __future__ import annotations

import argparse
import html
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.reporting.coverage import KINDS, SPEC_PATH, covered_by, universe
from conformance.reporting.sdk_surface import surface_diff

__all__ = ["KindCount", "counts", "main", "render_html", "render_markdown", "summary_table"]


@dataclass(frozen=True, slots=True)
class KindCount:
    kind: str
    covered: int
    total: int
    overlay_covered: int  # keys SDK 2.14 adds (overlays), counted apart from the official copy
    overlay_total: int


def counts(declared: Mapping[str, list[str]]) -> list[KindCount]:
    """Covered and total keys per kind, official copy and overlay keys apart."""
    out = []
    for kind in KINDS:
        keys = [k for k in universe().values() if k.kind == kind]
        official = [k for k in keys if k.official]
        added = [k for k in keys if not k.official]
        out.append(
            KindCount(
                kind,
                sum(k.key in declared for k in official),
                len(official),
                sum(k.key in declared for k in added),
                len(added),
            )
        )
    return out


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f} %" if whole else "-"


def summary_table(declared: Mapping[str, list[str]]) -> str:
    """The numbers table (Markdown), as the coverage page (docs/coverage.md) shows it."""
    lines = [
        "| what | covered | of (official spec) | % | SDK 2.14 additions covered |",
        "|---|---:|---:|---:|---:|",
    ]
    rows = counts(declared)
    for row in rows:
        added = f"{row.overlay_covered} / {row.overlay_total}" if row.overlay_total else "-"
        share = _percent(row.covered, row.total)
        lines.append(f"| {KINDS[row.kind]} | {row.covered} | {row.total} | {share} | {added} |")
    covered, total = sum(r.covered for r in rows), sum(r.total for r in rows)
    added_c, added_t = sum(r.overlay_covered for r in rows), sum(r.overlay_total for r in rows)
    lines.append(
        f"| **all keys** | **{covered}** | **{total}** | **{_percent(covered, total)}** "
        f"| **{added_c} / {added_t}** |"
    )
    return "\n".join(lines) + "\n"


# Why each key no property exercises is left so: (a key prefix, the reason). Every gap has one
# (tests/conformance/test_coverage.py): a new gap needs its reason written here.
GAP_REASONS: tuple[tuple[str, str], ...] = (
    (
        "request:container.id",
        "the id in the object form of `container`: CODE-002 sends the id as a string, SKILL-004 the"
        " object with skills only",
    ),
    ("request:inference_geo", "a routing hint with no effect a client can observe on one machine"),
    ("request:system[].citations", "citations sent back in system text blocks are accepted, not judged yet"),
    (
        "count_request:system[].citations",
        "citations sent back in system text blocks are accepted, not judged yet",
    ),
    ("response:stop_details", "no honest refusal trigger on the reference server (issue 21)"),
    ("stop_reason:refusal", "no honest refusal trigger on the reference server (issue 21)"),
    ("error:", "errors a client cannot provoke and no run meets on its own (billing, permissions)"),
    ("request:diagnostics", "the cache diagnosis beta (cache-diagnosis-2026-04-07) is not served"),
    ("response:diagnostics", "the cache diagnosis beta (cache-diagnosis-2026-04-07) is not served"),
    ("request:speed", "the fast mode beta is not served: one speed"),
    ("count_request:speed", "the fast mode beta is not served: one speed"),
    ("response:usage.speed", "the fast mode beta is not served: one speed"),
    ("request:tools[].response_inclusion", "accepted but not applied: results are always included"),
    ("count_request:tools[].response_inclusion", "accepted but not applied: results are always included"),
    ("count_request:tools[].configs", "mcp_toolset configs are judged on create (SRVTOOL-011) only"),
)


def gap_reason(key: str) -> str | None:
    """Why `key` (a gap) is not exercised, or None when nobody said."""
    return next((why for prefix, why in GAP_REASONS if key.startswith(prefix)), None)


def render_markdown(properties: Iterable[Any]) -> str:
    """The coverage page: provenance, numbers, every key with its properties, the gaps.
    `properties` are catalogue Property objects (id, covers, unobserved)."""
    props = sorted(properties, key=lambda p: p.id)
    declared = covered_by((p.id, p.covers) for p in props)
    unobserved = [(p.id, key, why) for p in props for key, why in p.unobserved]
    spec = json.loads(SPEC_PATH.read_text(encoding="utf-8"))["x-plumbline-extract"]
    keys = universe()
    lines = [
        "# Spec coverage",
        "",
        "Which parts of the Messages surface of Anthropic's official OpenAPI copy the Plumbline",
        "properties exercise. Generated by `nox -s coverage` from the `covers` each property declares",
        "(`conformance/catalogue.py`) and the vendored spec extract; `tests/conformance/test_coverage.py`",
        "holds every declaration to the spec and to what the property sent and saw on the reference",
        "server. Do not edit by hand.",
        "",
        f"- Spec: `spec/{SPEC_PATH.name}`, extracted from `{spec['source']}`",
        f"  (sha256 `{spec['sha256'][:16]}…`) by `scripts/extract_spec.py`,",
        f"  paths {', '.join(f'`{p}`' for p in spec['paths'])}.",
        "- Keys marked † are not in the official copy: SDK 2.14 has them, and `schemas/` adds them",
        "  by overlay (`schemas/README.md`). They are counted apart.",
        f"- Properties: {len(props)}, declaring {sum(len(p.covers) for p in props)} keys.",
        "- Key notation: `conformance/reporting/coverage.py`.",
        "",
        "## Numbers",
        "",
        summary_table(declared),
        "## Gaps",
        "",
        "Keys of the spec that no property exercises, by kind:",
        "",
    ]
    for kind, label in KINDS.items():
        gaps = [k for k in keys.values() if k.kind == kind and k.key not in declared]
        if gaps:
            lines += [f"- **{label}** ({len(gaps)}):"]
            for k in gaps:
                name = k.key.split(":", 1)[1] + ("" if k.official else "†")
                lines.append(f"  - `{name}`: {gap_reason(k.key) or 'no reason given'}")
            lines.append("")
    lines += ["## Every key", ""]
    for kind, label in KINDS.items():
        lines += [f"### {label}", "", "| key | properties |", "|---|---|"]
        for key in (k for k in keys.values() if k.kind == kind):
            name = key.key.split(":", 1)[1] + ("" if key.official else " †")
            note = f" ({key.note})" if key.note else ""
            ids = ", ".join(declared.get(key.key, [])) or "**gap**"
            lines.append(f"| `{name}`{note} | {ids} |")
        lines.append("")
    lines += _sdk_section()
    if unobserved:
        lines += [
            "## Declared but not shown by the reference server",
            "",
            "The coverage test checks every other declaration against the reference server's run.",
            "",
            *(f"- {pid} `{key}`: {why}" for pid, key, why in unobserved),
            "",
        ]
    return "\n".join(lines)


def _sdk_section() -> list[str]:
    """What the installed SDK's types carry that the spec (copy and overlays) lacks."""
    diff = surface_diff()
    if diff is None:
        return []
    lines = [
        f"## What anthropic SDK {diff.sdk} types that the spec lacks",
        "",
        "Read from the installed SDK's own request, response and event types",
        "(`conformance/reporting/sdk_surface.py`): a new SDK release shows here what the catalogue",
        "cannot cover yet, until the spec copy or an overlay has it.",
        "",
    ]
    if not diff.count:
        return [*lines, "Nothing: every key it types is in the spec.", ""]
    lines += [f"- `{key}` ({where})" for key, where in diff.keys.items()]
    lines += [f"- tool type `{name}`" for name in diff.tools]
    return [*lines, ""]


def render_html(markdown: str) -> str:
    """The same page as one self-contained HTML file (headings, lists, tables, code, bold)."""
    body: list[str] = []
    table: list[list[str]] = []

    def inline(text: str) -> str:
        text = html.escape(text, quote=False)
        text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
        return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", text)

    def flush() -> None:
        if table:
            head, *rows = table
            body.append("<table><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head) + "</tr>")
            body.extend("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in r) + "</tr>" for r in rows)
            body.append("</table>")
            table.clear()

    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if not all(set(c) <= set("-:") for c in cells):
                table.append(cells)
            continue
        flush()
        heading = re.match(r"^(#+) (.*)$", line)
        if heading:
            level = len(heading[1])
            body.append(f"<h{level}>{inline(heading[2])}</h{level}>")
        elif line.startswith(("- ", "  ")):
            body.append(f"<p class=item>{inline(line.strip())}</p>")
        elif line:
            body.append(f"<p>{inline(line)}</p>")
    flush()
    style = (
        "body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em}"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;"
        "text-align:left;vertical-align:top}code{font-size:90%}p.item{margin:.2em 0 .2em 1em}"
    )
    return (
        '<!doctype html><html lang="en"><meta charset="utf-8"><title>Plumbline spec coverage</title>'
        f"<style>{style}</style><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m conformance.reporting.coverage_report [--out DIR]`: write coverage.md and coverage.html."""
    from conformance.catalogue import REGISTRY
    from conformance.properties import load_all

    parser = argparse.ArgumentParser(description="Write the spec coverage report.")
    parser.add_argument("--out", type=Path, default=Path("reports"))
    args = parser.parse_args(argv)
    load_all()
    markdown = render_markdown(REGISTRY.values())
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "coverage.md").write_text(markdown, encoding="utf-8")
    (args.out / "coverage.html").write_text(render_html(markdown), encoding="utf-8")
    print(summary_table(covered_by((p.id, p.covers) for p in REGISTRY.values())), end="")
    print(f"written: {args.out / 'coverage.md'}, {args.out / 'coverage.html'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
