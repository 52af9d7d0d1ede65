"""Reports of one run, all derived from `index.json` (the truth):

reports/<target>/<run-id>/
  index.json    target, suite version, seed, per-property verdict, duration, evidence file
  cases/ID.json evidence of each property that did not pass: request, response or raw
                stream, curl line
  summary.md    short, fits a CI step summary
  report.html   one self-contained page: counts, failures first with evidence folded
  junit.xml     one testcase per property
  exchanges/ID.json  every exchange of every property, only with PLUMBLINE_KEEP_EXCHANGES set
"""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conformance.judging.verdicts import Gate, Result, Verdict, cause_of, causes, counts, first_line
from conformance.judging.verdicts import md_cell as _md
from conformance.wire.target import Exchange

__all__ = ["RunInfo", "build_index", "slowest_properties", "write_exchanges", "write_reports"]

# Failures first, then what needs a look, then the rest.
_ORDER = {
    Verdict.FAIL: 0,
    Verdict.ERROR: 1,
    Verdict.WARN: 2,
    Verdict.UNSUPPORTED: 3,
    Verdict.SKIP: 4,
    Verdict.PASS: 5,
}

RunInfo = dict[str, Any]


def build_index(run: RunInfo, results: Sequence[Result], gate: Gate) -> dict[str, Any]:
    properties = []
    for result in sorted(results, key=lambda r: r.property.id):
        prop = result.property
        properties.append(
            {
                "id": prop.id,
                "level": prop.level.value,
                "title": prop.title,
                "citation": {"url": prop.citation.url, "requirement": prop.citation.requirement},
                "invariant": prop.invariant,
                "verdict": result.verdict.value,
                "duration_s": round(result.duration, 3),
                "reason": result.reason,
                "expected": result.expected,
                "actual": result.actual,
                "message": result.message,
                "cause": cause_of(result),
                "subject": result.subject,
                "subcases": result.subcases,
                "judged_by": result.judged_by,
                "notes": result.notes,
                "evidence_file": f"cases/{prop.id}.json" if result.evidence else None,
            }
        )
    return {
        "schema_version": 1,
        **run,
        "counts": counts(results),
        "gate": gate.as_dict(),
        "causes": [{"cause": cause, "properties": ids} for cause, ids in causes(results)],
        "properties": properties,
    }


def write_reports(directory: Path, run: RunInfo, results: Sequence[Result], gate: Gate) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    index = build_index(run, results, gate)
    cases = directory / "cases"
    for result in results:
        if result.evidence:
            cases.mkdir(exist_ok=True)
            payload = {"id": result.property.id, "exchanges": result.evidence}
            (cases / f"{result.property.id}.json").write_text(
                json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8"
            )
    (directory / "index.json").write_text(json.dumps(index, indent=2, ensure_ascii=False), encoding="utf-8")
    (directory / "summary.md").write_text(render_summary(index), encoding="utf-8")
    (directory / "junit.xml").write_text(render_junit(index, results), encoding="utf-8")
    (directory / "report.html").write_text(render_html(index, results), encoding="utf-8")
    return directory


def write_exchanges(directory: Path, property_id: str, exchanges: Sequence[Exchange]) -> Path:
    """Every exchange of one property, in the evidence format (opt-in; see the plugin)."""
    folder = directory / "exchanges"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{property_id}.json"
    payload = {"id": property_id, "exchanges": [exchange.as_evidence() for exchange in exchanges]}
    path.write_text(json.dumps(payload, indent=1, ensure_ascii=False), encoding="utf-8")
    return path


def _ordered(index: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(index["properties"], key=lambda p: (_ORDER[Verdict(p["verdict"])], p["id"]))


def render_summary(index: dict[str, Any]) -> str:
    target = index["target"]
    tally = index["counts"]
    gate = index["gate"]
    lines = [
        f"# Plumbline conformance: {target['url']} ({target['model']})",
        "",
        " · ".join(f"**{name}** {count}" for name, count in tally.items() if count),
        "",
        f"Gate: exit {gate['exit_code']}"
        + (f" — {_failures_label(index)}: {', '.join(gate['new_failures'])}" if gate["new_failures"] else "")
        + (
            f" — stale baseline: {', '.join(gate['stale_baseline_entries'])}"
            if gate["stale_baseline_entries"]
            else ""
        ),
        "",
    ]
    if target.get("deterministic") is not None and index.get("determinism"):
        lines += [
            f"Deterministic: {str(target['deterministic']).lower()} ({index['determinism']['detail']})",
            "",
        ]
    if index.get("concurrency"):
        lines += [f"Concurrency: {index['concurrency']['mode']} ({_md(index['concurrency']['detail'])})", ""]
    features = index.get("feature_support") or {}
    if features:
        lines += ["Optional features:", ""]
        lines += [
            f"- {name}: {_served(f)} ({f['source']}: {_md(f['detail'])})" for name, f in features.items()
        ]
        lines.append("")
    shared = [c for c in index.get("causes", []) if len(c["properties"]) > 1]
    if shared:
        lines += ["Causes shared by several properties:", ""]
        lines += [f"- {_md(c['cause'])}: {', '.join(c['properties'])}" for c in shared]
        lines.append("")
    broken = [p for p in _ordered(index) if p["verdict"] in ("FAIL", "ERROR", "WARN")]
    if broken:
        lines += ["| verdict | id | level | title | expected | actual |", "|---|---|---|---|---|---|"]
        for p in broken:
            for case, expected, actual in _broken_rows(p):
                title = _md(p["title"] + (f" [{case}]" if case else ""))
                lines.append(
                    f"| {p['verdict']} | {p['id']} | {p['level']} | {title} "
                    f"| {_md(first_line(expected, 120))} | {_md(first_line(actual, 160))} |"
                )
        lines.append("")
    for verdict, heading in (("UNSUPPORTED", "Not served (UNSUPPORTED)"), ("SKIP", "Not judged (SKIP)")):
        listed = [p for p in _ordered(index) if p["verdict"] == verdict]
        if listed:
            lines += [f"{heading}:", ""]
            lines += [f"- {p['id']}: {_md(first_line(p['message'], 200))}" for p in listed]
            lines.append("")
    slowest = slowest_properties(index)
    if slowest:
        lines += ["Slowest: " + ", ".join(f"{p['id']} {p['duration_s']:.1f} s" for p in slowest), ""]
    lines += [
        f"{len(index['properties'])} properties · anthropic-version {_api_version(index)} · "
        f"suite {_suite(index)} · seed {index['seed']} · {index['duration_s']} s · run {index['run_id']}",
        "",
    ]
    return "\n".join(lines)


def _broken_rows(p: dict[str, Any]) -> list[tuple[str | None, str | None, str | None]]:
    """(sub-case, expected, actual) of each broken rule of a property: one row each."""
    if p.get("subcases"):
        rows: list[tuple[str | None, str | None, str | None]] = []
        for c in p["subcases"]:
            weaker = f" ({c['level']})" if c.get("level") else ""
            rows.append((f"{c.get('case')}{weaker}", c.get("expected"), c.get("actual")))
        return rows
    return [(None, p["expected"], p["actual"] or p["message"])]


def slowest_properties(index: dict[str, Any], count: int = 10) -> list[dict[str, Any]]:
    """The properties that took longest, slowest first: where a run's time goes."""
    return sorted(index["properties"], key=lambda p: (-p["duration_s"], p["id"]))[:count]


def _failures_label(index: dict[str, Any]) -> str:
    """A run gated by a baseline has new failures; a first run, without one, just failures."""
    return "new failures" if index.get("baseline_found") else "failures"


def render_junit(index: dict[str, Any], results: Sequence[Result]) -> str:
    tally = index["counts"]
    suite = ET.Element(
        "testsuite",
        name="plumbline",
        tests=str(len(results)),
        failures=str(tally["FAIL"]),
        errors=str(tally["ERROR"]),
        skipped=str(tally["UNSUPPORTED"] + tally["SKIP"]),
        time=str(index["duration_s"]),
    )
    for p in index["properties"]:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"plumbline.{p['id'].split('-')[0].lower()}",
            name=f"{p['id']} {p['title']}",
            time=str(p["duration_s"]),
        )
        props = ET.SubElement(case, "properties")
        for key in ("id", "level", "verdict"):
            ET.SubElement(props, "property", name=key, value=str(p[key]))
        ET.SubElement(props, "property", name="citation", value=p["citation"]["url"])
        text = "\n".join(
            x
            for x in (
                p["expected"] and f"Expected: {p['expected']}",
                p["actual"] and f"Actual: {p['actual']}",
                p["message"],
            )
            if x
        )
        if p["verdict"] == "FAIL":
            headline = f"Expected: {first_line(p['expected'], 100)} | Actual: {first_line(p['actual'], 100)}"
            ET.SubElement(case, "failure", message=headline).text = text
        elif p["verdict"] == "ERROR":
            ET.SubElement(case, "error", message=first_line(p["message"], 200) or "error").text = text
        elif p["verdict"] in ("UNSUPPORTED", "SKIP"):
            ET.SubElement(case, "skipped", message=f"{p['verdict']}: {p['message'] or ''}")
        elif p["verdict"] == "WARN":
            ET.SubElement(case, "system-out").text = f"WARN (SHOULD broken)\n{text}"
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:72rem;padding:0 1rem;color:#1d1d1f}
h1{font-size:1.4rem}.counts span{display:inline-block;margin:0 .4rem .4rem 0;padding:.2rem .6rem;
border-radius:1rem;font-weight:600}table{border-collapse:collapse;width:100%}td,th{text-align:left;
padding:.35rem .5rem;border-bottom:1px solid #e5e5e5;vertical-align:top}
.PASS{background:#e3f5e1}.FAIL{background:#fde2e1}.WARN{background:#fff3cd}.ERROR{background:#f3d9fa}
.UNSUPPORTED,.SKIP{background:#eceff1}details{margin:.3rem 0}pre{white-space:pre-wrap;
background:#f6f8fa;padding:.5rem;border-radius:4px;max-height:28rem;overflow:auto}
code{font-size:12px}.muted{color:#666}
"""


def render_html(index: dict[str, Any], results: Sequence[Result]) -> str:
    evidence = {r.property.id: r.evidence for r in results}
    target = index["target"]
    esc = html.escape
    chips = "".join(
        f'<span class="{name}">{name} {count}</span>' for name, count in index["counts"].items() if count
    )
    rows = []
    for p in _ordered(index):
        detail = ""
        if p["verdict"] not in ("PASS",):
            parts = []
            if p["expected"] or p["actual"]:
                parts.append(
                    f"<pre>Expected: {esc(p['expected'] or '')}\nActual:   {esc(p['actual'] or '')}</pre>"
                )
            if p["message"]:
                parts.append(f"<pre>{esc(p['message'])}</pre>")
            for text in p.get("notes") or []:
                parts.append(f'<p class="muted">{esc(text)}</p>')
            for n, exchange in enumerate(evidence.get(p["id"], []), start=1):
                parts.append(
                    f"<details><summary>exchange {n}: {esc(exchange['request']['method'])} "
                    f"{esc(exchange['request']['url'])} → {exchange['response']['status']}</summary>"
                    f"<pre>{esc(exchange['curl'])}</pre>"
                    f"<pre>{esc(json.dumps(exchange['response'], indent=2, ensure_ascii=False))}</pre>"
                    "</details>"
                )
            detail = f"<details><summary>evidence</summary>{''.join(parts)}</details>" if parts else ""
        rows.append(
            f'<tr><td class="{p["verdict"]}">{p["verdict"]}</td><td><code>{p["id"]}</code></td>'
            f"<td>{p['level']}</td><td>{esc(p['title'])}"
            f'<div class="muted"><a href="{esc(p["citation"]["url"])}">docs</a> — '
            f"{esc(p['citation']['requirement'])}</div>{detail}</td>"
            f"<td>{p['duration_s']}</td></tr>"
        )
    gate = index["gate"]
    shared = [c for c in index.get("causes", []) if len(c["properties"]) > 1]
    cause_list = "".join(
        f"<li>{esc(c['cause'])}: <code>{esc(', '.join(c['properties']))}</code></li>" for c in shared
    )
    causes_html = f"<h2>Causes shared by several properties</h2><ul>{cause_list}</ul>" if shared else ""
    features = index.get("feature_support") or {}
    feature_list = "".join(
        f"<li><code>{esc(name)}</code>: {_served(f)} ({esc(f['source'])}: {esc(f['detail'])})</li>"
        for name, f in features.items()
    )
    features_html = f"<h2>Optional features</h2><ul>{feature_list}</ul>" if features else ""
    slow = ", ".join(
        f"<code>{esc(p['id'])}</code> {p['duration_s']:.1f} s" for p in slowest_properties(index)
    )
    slow_html = f"<p>Slowest: {slow}</p>" if slow else ""
    return (
        "<!doctype html><html lang=en><meta charset=utf-8>"
        f"<title>Plumbline — {esc(target['url'])}</title><style>{_CSS}</style>"
        f"<h1>Plumbline conformance report</h1>"
        f"<p>{esc(target['url'])} · model <code>{esc(target['model'])}</code> · "
        f"anthropic-version <code>{esc(_api_version(index))}</code> · suite {esc(_suite(index))} · "
        f"seed {index['seed']} · run {esc(index['run_id'])} · "
        f"{index['duration_s']} s</p>"
        f'<p class="counts">{chips}</p>'
        + features_html
        + causes_html
        + slow_html
        + f"<p>Gate: exit {gate['exit_code']} · "
        f"{_failures_label(index)}: {esc(', '.join(gate['new_failures']) or 'none')}"
        f" · stale baseline entries: {esc(', '.join(gate['stale_baseline_entries']) or 'none')}</p>"
        "<table><tr><th>verdict</th><th>id</th><th>level</th><th>property</th><th>s</th></tr>"
        + "".join(rows)
        + "</table></html>\n"
    )


def _served(support: dict[str, Any]) -> str:
    """A feature's state in words: a failed probe (features.JUDGES) left it unjudged."""
    return "not judged" if support.get("failed") else "served" if support["supported"] else "not served"


def _api_version(index: dict[str, Any]) -> str:
    """The anthropic-version the run judged (runs recorded before it was: unknown)."""
    return str(index["target"].get("api_version") or "unknown")


def _suite(index: dict[str, Any]) -> str:
    """`0.1.0 (catalogue 5b2aec1d9f7a)`; runs recorded before the hash existed show the version."""
    suite = index["suite"]
    catalogue = suite.get("catalogue")
    return f"{suite['version']} (catalogue {catalogue})" if catalogue else str(suite["version"])
