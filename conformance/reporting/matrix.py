"""Several runs side by side: `plumbline matrix RUN_DIR... [--out DIR]`.

Reads each run's `index.json` (the truth; see reporting.py) and writes `matrix.html`, one
self-contained page (targets as columns, properties as rows grouped by area, each cell linked
to its evidence file), and `matrix.md`, the same table for a README or a CI step summary.
Runs of different suite versions or property sets share rows: the rows are the union, and a
property a run did not have is shown as "—".

Also home of `Run` and `load_run`, which `plumbline diff` (rundiff.py) shares.
"""

from __future__ import annotations

import html
import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from conformance.catalogue import AREAS, Level
from conformance.judging.verdicts import Verdict, first_line
from conformance.judging.verdicts import md_cell as _md

__all__ = [
    "ABSENT",
    "Cell",
    "Column",
    "Matrix",
    "Row",
    "Run",
    "RunError",
    "build_matrix",
    "load_run",
    "render_html",
    "render_markdown",
    "resolve_run_dir",
    "shared_statement",
    "write_matrix",
]

ABSENT = "—"  # the run did not have this property


class RunError(Exception):
    """A run directory that cannot be read: no index.json, or one that is not a run's."""


@dataclass(frozen=True, slots=True)
class Run:
    directory: Path
    index: dict[str, Any]

    @property
    def properties(self) -> dict[str, dict[str, Any]]:
        return {p["id"]: p for p in self.index["properties"]}

    @property
    def verdicts(self) -> dict[str, str]:
        return {p["id"]: p["verdict"] for p in self.index["properties"]}

    @property
    def target(self) -> dict[str, Any]:
        target = self.index.get("target")
        return target if isinstance(target, dict) else {}

    @property
    def slug(self) -> str:
        return str(self.target.get("slug") or self.directory.parent.name)

    @property
    def run_id(self) -> str:
        return str(self.index.get("run_id") or self.directory.name)

    @property
    def suite_version(self) -> str:
        suite = self.index.get("suite")
        return str(suite.get("version", "?")) if isinstance(suite, dict) else "?"

    @property
    def date(self) -> str:
        """When the run started, to the minute, in UTC; empty when unknown."""
        started = self.index.get("started_at")
        try:
            when = datetime.fromisoformat(str(started))
        except ValueError:
            return ""
        return (when.astimezone(UTC) if when.tzinfo else when).strftime("%Y-%m-%d %H:%M UTC")

    @property
    def label(self) -> str:
        return f"{self.slug} {self.run_id}"


def resolve_run_dir(path: Path) -> Path:
    """A run directory (holds index.json), or a target directory meaning its newest run.
    Run ids start with their UTC start time, so the newest is the greatest name."""
    if path.is_file() and path.name == "index.json":
        return path.parent
    if (path / "index.json").is_file():
        return path
    runs = sorted(p.parent for p in path.glob("*/index.json")) if path.is_dir() else []
    if not runs:
        raise RunError(f"{path}: no index.json there, nor in a run directory under it")
    return runs[-1]


def load_run(path: Path) -> Run:
    directory = resolve_run_dir(path)
    try:
        index = json.loads((directory / "index.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RunError(f"{directory / 'index.json'}: {exc}") from None
    properties = index.get("properties") if isinstance(index, dict) else None
    if not isinstance(properties, list) or not all(
        isinstance(p, dict) and isinstance(p.get("id"), str) and isinstance(p.get("verdict"), str)
        for p in properties
    ):
        raise RunError(f"{directory / 'index.json'}: not a plumbline index (no properties with verdicts)")
    return Run(directory, index)


@dataclass(frozen=True, slots=True)
class Cell:
    verdict: str  # a Verdict value, or ABSENT
    evidence: str | None = None  # the evidence file, relative to the page
    note: str = ""  # first line of what broke, or why it was not judged


@dataclass(frozen=True, slots=True)
class Row:
    id: str
    area: str
    level: str
    title: str
    requirement: str
    url: str
    cells: tuple[Cell, ...]

    @property
    def differs(self) -> bool:
        return len({c.verdict for c in self.cells}) > 1


@dataclass(frozen=True, slots=True)
class Column:
    slug: str
    url: str
    model: str
    api_version: str  # the anthropic-version judged ("" for runs recorded before it was)
    suite_version: str
    run_id: str
    date: str
    report: str  # the run's report.html, relative to the page
    scores: tuple[tuple[str, int, int], ...]  # (level, passed, properties of that level)

    @property
    def score_text(self) -> str:
        return " · ".join(f"{level} {passed}/{total} pass" for level, passed, total in self.scores)


@dataclass(frozen=True, slots=True)
class Matrix:
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    shared: tuple[str, ...]  # property ids every run had
    suite_versions: tuple[str, ...]

    @property
    def areas(self) -> list[str]:
        return list(dict.fromkeys(row.area for row in self.rows))


def _relative(target: Path, page_dir: Path) -> str:
    return quote(Path(os.path.relpath(target.resolve(), page_dir.resolve())).as_posix())


def _area_order(property_id: str) -> tuple[int, str]:
    area = property_id.split("-", 1)[0]
    # Areas of a newer suite that this one does not know go last, by name.
    return (AREAS.index(area) if area in AREAS else len(AREAS), property_id)


def _cell(prop: dict[str, Any] | None, run: Run, page_dir: Path) -> Cell:
    if prop is None:
        return Cell(ABSENT, note="not in this run")
    evidence = prop.get("evidence_file")
    return Cell(
        prop["verdict"],
        _relative(run.directory / evidence, page_dir) if isinstance(evidence, str) else None,
        first_line(prop.get("actual") or prop.get("message"), 200),
    )


def _column(run: Run, page_dir: Path) -> Column:
    levels = Counter(str(p.get("level")) for p in run.index["properties"])
    passed = Counter(str(p.get("level")) for p in run.index["properties"] if p["verdict"] == Verdict.PASS)
    known = [level.value for level in Level]
    order = known + sorted(set(levels) - set(known))
    return Column(
        slug=run.slug,
        url=str(run.target.get("url", "")),
        model=str(run.target.get("model", "")),
        api_version=str(run.target.get("api_version") or ""),
        suite_version=run.suite_version,
        run_id=run.run_id,
        date=run.date,
        report=_relative(run.directory / "report.html", page_dir),
        scores=tuple((level, passed[level], levels[level]) for level in order if levels[level]),
    )


def build_matrix(runs: Sequence[Run], page_dir: Path) -> Matrix:
    """The union of the runs' properties, one cell per (property, run); links are relative
    to `page_dir`, where the page will be written."""
    per_run = [run.properties for run in runs]
    ids = sorted(set().union(*per_run), key=_area_order)
    rows = []
    for pid in ids:
        # Level, title and citation as the last run that has the property states them.
        latest = next(props[pid] for props in reversed(per_run) if pid in props)
        citation = latest.get("citation") or {}
        rows.append(
            Row(
                id=pid,
                area=pid.split("-", 1)[0],
                level=str(latest.get("level", "")),
                title=str(latest.get("title", "")),
                requirement=str(citation.get("requirement", "")),
                url=str(citation.get("url", "")),
                cells=tuple(
                    _cell(props.get(pid), run, page_dir) for props, run in zip(per_run, runs, strict=True)
                ),
            )
        )
    shared = set(per_run[0]).intersection(*per_run[1:]) if per_run else set()
    return Matrix(
        columns=tuple(_column(run, page_dir) for run in runs),
        rows=tuple(rows),
        shared=tuple(sorted(shared, key=_area_order)),
        suite_versions=tuple(dict.fromkeys(run.suite_version for run in runs)),
    )


def shared_statement(matrix: Matrix) -> str:
    """What the runs have in common, in one sentence."""
    runs = len(matrix.columns)
    versions = ", ".join(matrix.suite_versions)
    text = f"{len(matrix.shared)} of {len(matrix.rows)} properties are shared by all {runs} runs"
    if len(matrix.shared) < len(matrix.rows):
        text += f"; {ABSENT} marks a property a run did not have"
    plural = "s" if len(matrix.suite_versions) > 1 else ""
    return f"{text} (suite version{plural} {versions})."


# --- Markdown ------------------------------------------------------------------------------


def render_markdown(matrix: Matrix) -> str:
    lines = ["# Plumbline conformance matrix", "", shared_statement(matrix), ""]
    lines += [
        "| # | target | URL | model | anthropic-version | suite | run | date | score |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n, col in enumerate(matrix.columns, start=1):
        lines.append(
            f"| {n} | {_md(col.slug)} | {_md(col.url)} | {_md(col.model)} | {_md(col.api_version or '—')} "
            f"| {_md(col.suite_version)} "
            f"| {_md(col.run_id)} | {_md(col.date)} | {_md(col.score_text)} |"
        )
    lines += [
        "",
        "| id | level | title | " + " | ".join(f"#{n} {_md(c.slug)}" for n, c in _numbered(matrix)) + " |",
    ]
    lines.append("|---|---|---|" + "---|" * len(matrix.columns))
    for row in matrix.rows:
        cells = " | ".join(cell.verdict for cell in row.cells)
        lines.append(f"| {row.id} | {_md(row.level)} | {_md(row.title)} | {cells} |")
    return "\n".join(lines) + "\n"


def _numbered(matrix: Matrix) -> list[tuple[int, Column]]:
    return list(enumerate(matrix.columns, start=1))


# --- HTML ----------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem;color:#1d1d1f}h1{font-size:1.4rem}
table{border-collapse:collapse}td,th{text-align:left;padding:.3rem .5rem;border-bottom:1px solid #e5e5e5;
vertical-align:top}thead th{vertical-align:bottom;font-weight:normal;font-size:12px;min-width:9rem}
thead th b{font-size:14px}tr.area th{background:#f6f8fa;font-size:13px;padding-top:.8rem}
td.v{text-align:center;font-weight:600;font-size:12px;white-space:nowrap}td.v a{color:inherit}
.PASS{background:#e3f5e1}.FAIL{background:#fde2e1}.WARN{background:#fff3cd}.ERROR{background:#f3d9fa}
.UNSUPPORTED,.SKIP{background:#eceff1}.absent{color:#999}.muted{color:#666}code{font-size:12px}
.filters label{margin-right:1rem}.filters{margin:1rem 0}
"""

# Filters: each row carries its area, level and the set of verdicts it shows.
_JS = """
const f={area:'',level:'',verdict:''};
for(const s of document.querySelectorAll('select[data-filter]'))
s.onchange=()=>{f[s.dataset.filter]=s.value;apply()};
function apply(){for(const r of document.querySelectorAll('tr.prop')){const d=r.dataset;
r.hidden=!((!f.area||d.area==f.area)&&(!f.level||d.level==f.level)&&(!f.verdict||
(f.verdict=='differs'?d.differs=='1':d.verdicts.split(' ').includes(f.verdict))))}
for(const h of document.querySelectorAll('tr.area'))
h.hidden=!document.querySelector(`tr.prop[data-area="${h.dataset.area}"]:not([hidden])`)}
"""


def _css_class(verdict: str) -> str:
    return "absent" if verdict == ABSENT else "".join(ch for ch in verdict if ch.isalnum())


def _select(name: str, options: Sequence[tuple[str, str]]) -> str:
    choices = "".join(
        f'<option value="{html.escape(v)}">{html.escape(label)}</option>' for v, label in options
    )
    return (
        f'<label>{name} <select data-filter="{name}"><option value="">all</option>{choices}</select></label>'
    )


def _header(n: int, col: Column) -> str:
    esc = html.escape
    return (
        f'<th><b>{esc(col.slug)}</b> <span class="muted">#{n}</span><br>{esc(col.url)}<br>'
        f"model <code>{esc(col.model)}</code><br>anthropic-version {esc(col.api_version or '—')}<br>"
        f"suite {esc(col.suite_version)}<br>"
        f'run <a href="{esc(col.report)}">{esc(col.run_id)}</a><br>{esc(col.date)}<br>'
        f"<b>{esc(col.score_text)}</b></th>"
    )


def _cell_html(row: Row, n: int, cell: Cell) -> str:
    esc = html.escape
    text = esc(cell.verdict)
    if cell.evidence:
        text = f'<a href="{esc(cell.evidence)}">{text}</a>'
    title = f' title="{esc(cell.note)}"' if cell.note else ""
    return (
        f'<td class="v {_css_class(cell.verdict)}" data-property="{esc(row.id)}" data-run="{n}"{title}>'
        f"{text}</td>"
    )


def render_html(matrix: Matrix) -> str:
    esc = html.escape
    span = 3 + len(matrix.columns)
    body = []
    for area in matrix.areas:
        body.append(f'<tr class="area" data-area="{esc(area)}"><th colspan="{span}">{esc(area)}</th></tr>')
        for row in (r for r in matrix.rows if r.area == area):
            verdicts = " ".join(sorted({_css_class(c.verdict) for c in row.cells}))
            body.append(
                f'<tr class="prop" data-area="{esc(area)}" data-level="{esc(row.level)}" '
                f'data-verdicts="{esc(verdicts)}" data-differs="{int(row.differs)}">'
                f'<th><a href="{esc(row.url)}"><code>{esc(row.id)}</code></a></th><td>{esc(row.level)}</td>'
                f'<td title="{esc(row.requirement)}">{esc(row.title)}</td>'
                + "".join(_cell_html(row, n, cell) for n, cell in enumerate(row.cells, start=1))
                + "</tr>"
            )
    levels = list(dict.fromkeys([*(lv.value for lv in Level), *(r.level for r in matrix.rows)]))
    verdict_options = [(v.value, v.value) for v in Verdict] + [("absent", f"{ABSENT} (not in a run)")]
    filters = (
        _select("area", [(a, a) for a in matrix.areas])
        + _select("level", [(lv, lv) for lv in levels if any(r.level == lv for r in matrix.rows)])
        + _select("verdict", [*verdict_options, ("differs", "differs between runs")])
    )
    shared = ", ".join(matrix.shared) or "none"
    return (
        "<!doctype html><html lang=en><meta charset=utf-8>"
        f"<title>Plumbline matrix — {len(matrix.columns)} runs</title><style>{_CSS}</style>"
        "<h1>Plumbline conformance matrix</h1>"
        f"<p>{esc(shared_statement(matrix))}</p>"
        f"<details><summary>the shared property set</summary><p><code>{esc(shared)}</code></p></details>"
        f'<p class="filters">{filters}</p>'
        "<table><thead><tr><th>id</th><th>level</th><th>property</th>"
        + "".join(_header(n, col) for n, col in _numbered(matrix))
        + "</tr></thead><tbody>"
        + "".join(body)
        + f"</tbody></table><script>{_JS}</script></html>\n"
    )


def write_matrix(runs: Sequence[Run], out: Path) -> tuple[Path, Path]:
    """Write `matrix.html` and `matrix.md` into `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    matrix = build_matrix(runs, out)
    page, table = out / "matrix.html", out / "matrix.md"
    page.write_text(render_html(matrix), encoding="utf-8")
    table.write_text(render_markdown(matrix), encoding="utf-8")
    return page, table
