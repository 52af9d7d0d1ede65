"""The catalogue's levels and what each MUST rests on, as the site's Levels page shows them.

Every MUST names its source (`@prop(source=...)`): a sentence of the docs (the API reference's
docstrings included) or a fact of the official OpenAPI schema. A rule the docs are silent on is
a SHOULD, its reasoning in the requirement; a MUST may hold weaker sub-cases (`Cases.case(...,
level=Level.SHOULD)`), which WARN rather than FAIL. `python -m conformance.reporting.levels` prints the
section; the site generates its Levels page from it (docs/hooks.py), so it cannot drift.
"""

from __future__ import annotations

import sys
from collections import Counter

from conformance.catalogue import AREAS, REGISTRY, RETIRED, Level, Property
from conformance.judging.verdicts import md_cell

__all__ = ["levels_markdown", "weaker_sub_cases"]


def weaker_sub_cases(prop: Property) -> bool:
    """Whether a MUST holds sub-cases declared weaker (`cases.case(..., level=Level.SHOULD)`):
    its requirement says so, naming them "SHOULD sub-case"."""
    return prop.level is Level.MUST and "SHOULD sub-case" in prop.citation.requirement


def levels_markdown() -> str:
    """Counts by area and level, then every MUST with its source (Markdown)."""
    from conformance.properties import load_all

    load_all()
    props = sorted(REGISTRY.values(), key=lambda p: p.id)
    musts = [p for p in props if p.level is Level.MUST]
    mixed = [p for p in musts if weaker_sub_cases(p)]
    shoulds, mays = (sum(p.level is level for p in props) for level in (Level.SHOULD, Level.MAY))
    lines = [
        f"{len(props)} properties: {len(musts)} MUST, {shoulds} SHOULD, {mays} MAY; "
        f"{len(mixed)} MUSTs hold SHOULD sub-cases ({', '.join(p.id for p in mixed)}). "
        f"Retired: {', '.join(sorted(RETIRED)) or 'none'}.",
        "",
        "| area | MUST | SHOULD |",
        "|---|---:|---:|",
    ]
    tally = Counter((p.area, p.level) for p in props)
    for area in AREAS:
        if tally[(area, Level.MUST)] or tally[(area, Level.SHOULD)]:
            lines.append(f"| {area} | {tally[(area, Level.MUST)]} | {tally[(area, Level.SHOULD)]} |")
    lines += [
        "",
        "<details><summary>Every MUST and what it rests on</summary>",
        "",
        "| id | title | source |",
        "|---|---|---|",
    ]
    for p in musts:
        lines.append(f"| {p.id} | {md_cell(p.title)} | {md_cell(p.source or '')} |")
    lines += ["", "</details>", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(levels_markdown())
