"""MkDocs hooks (mkdocs.yml `hooks:`): the pages generated from the catalogue itself, at build
time, so that they cannot drift from what `plumbline` runs. A page holds a marker
`<!-- generated: NAME -->` where NAME's Markdown goes, and `<!-- count: AREA -->` (or `all`)
where a count of properties goes."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from conformance.catalogue import AREAS, REGISTRY, Property
from conformance.judging.verdicts import md_cell
from conformance.properties import load_all
from conformance.reporting.coverage_report import render_markdown
from conformance.reporting.levels import levels_markdown


def _property(prop: Property) -> list[str]:
    retired = " (retired)" if prop.retired else ""
    lines = [
        f"### {prop.id} · {prop.level.value}{retired} · {md_cell(prop.title)} {{#{prop.id}}}",
        "",
        md_cell(prop.citation.requirement),
        "",
        f"Cites <{prop.citation.url}>"
        + (f"; rests on {md_cell(prop.source)}" if prop.source else "")
        + (f"; invariant {prop.invariant} of the spec notes" if prop.invariant else "")
        + (f"; needs the target feature(s) {', '.join(prop.requires)}" if prop.requires else "")
        + ".",
        "",
    ]
    return lines


def catalogue_markdown() -> str:
    """Every property by area, in id order: id, level, title, requirement, citation."""
    load_all()
    lines = [f"{len(REGISTRY)} properties in {len(AREAS)} areas.", ""]
    for area in AREAS:
        props = sorted((p for p in REGISTRY.values() if p.id.split("-")[0] == area), key=lambda p: p.id)
        if props:
            lines += [f"## {area}", ""]
            for prop in props:
                lines += _property(prop)
    return "\n".join(lines)


def coverage_markdown() -> str:
    """The coverage page of `nox -s coverage`, under this page's own title."""
    load_all()
    page = render_markdown(REGISTRY.values()).split("\n")
    return "\n".join(page[1:])  # its `# Spec coverage` is this page's


GENERATED: dict[str, Callable[[], str]] = {
    "catalogue": catalogue_markdown,
    "levels": levels_markdown,
    "coverage": coverage_markdown,
}


COUNT = re.compile(r"<!-- count: ([A-Za-z]+) -->")


def count(area: str) -> int:
    """Properties judged today, of one area or (`all`) of all: for the counts a page states."""
    load_all()
    return sum(not p.retired and (area == "all" or p.id.split("-")[0] == area) for p in REGISTRY.values())


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    for name, render in GENERATED.items():
        marker = f"<!-- generated: {name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    return COUNT.sub(lambda match: str(count(match[1])), markdown)
