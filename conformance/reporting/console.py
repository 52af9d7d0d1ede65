"""What a run prints: what it found out first (determinism, optional features), one verdict line
per property with every broken sub-case under it, and the summary (tally, gate, shared causes,
the slowest properties). Requirement and target text is always printed literally."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from conformance.determinism import Determinism
from conformance.features import Support
from conformance.judging.verdicts import Result, Verdict, causes, first_line

__all__ = ["COLOURS", "print_context", "print_summary", "print_verdict", "verdict_details"]

COLOURS = {
    Verdict.PASS: "green",
    Verdict.FAIL: "bold red",
    Verdict.WARN: "yellow",
    Verdict.ERROR: "bold magenta",
    Verdict.UNSUPPORTED: "cyan",
    Verdict.SKIP: "dim",
}


def print_context(
    console: Console, determinism: Determinism | None, features: Mapping[str, Support], api_version: str
) -> None:
    console.print(f"[dim]anthropic-version: {escape(api_version)} (every request but VER-*'s)[/]")
    if determinism is not None:
        console.print(f"[dim]deterministic: {escape(determinism.detail)}[/]")
    for support in features.values():
        console.print(f"[dim]feature {escape(support.reason)}[/]")


def print_verdict(console: Console, result: Result) -> None:
    colour = COLOURS[result.verdict]
    title = escape(result.property.title)
    line = f"[{colour}]{result.verdict.value:<11}[/] {result.property.id:<11} {title}"
    console.print(f"{line} [dim]{result.duration:.1f}s[/]")
    for detail in verdict_details(result):
        console.print(f"            [dim]{escape(detail)}[/]")


def verdict_details(result: Result) -> list[str]:
    """The lines under a verdict on the console: every broken sub-case's Expected and Actual,
    the reason of a SKIP, an UNSUPPORTED or an ERROR, and the notes (sub-cases not judged)."""
    lines: list[str] = []
    if result.verdict in (Verdict.FAIL, Verdict.WARN):
        broken = result.subcases or [{"case": None, "expected": result.expected, "actual": result.actual}]
        for case in broken:
            weaker = f" ({case['level']})" if case.get("level") else ""
            prefix = f"[{case['case']}]{weaker} " if case.get("case") else ""
            if case.get("expected") or case.get("actual"):
                lines.append(f"{prefix}Expected: {first_line(case.get('expected'), 140)}")
                lines.append(f"{' ' * len(prefix)}Actual:   {first_line(case.get('actual'), 140)}")
        if not lines:
            lines.append(first_line(result.message, 150))
    elif result.verdict in (Verdict.ERROR, Verdict.SKIP, Verdict.UNSUPPORTED) and result.message:
        lines.append(first_line(result.message, 200))
    lines += [first_line(text, 240) for text in result.notes]
    return lines


def print_summary(
    console: Console, results: Iterable[Result], gate: Mapping[str, Any], where: Path, *, has_baseline: bool
) -> None:
    results = sorted(results, key=lambda r: r.property.id)
    console.rule("summary")
    if not results:
        console.print("[bold magenta]no property ran[/] (does -k match any id? see plumbline --list)")
    tally: dict[Verdict, int] = {}
    for result in results:
        tally[result.verdict] = tally.get(result.verdict, 0) + 1
    console.print("  ".join(f"[{COLOURS[v]}]{v.value} {n}[/]" for v, n in sorted(tally.items()) if n))
    for key, label in (
        ("new_failures", "new failures" if has_baseline else "failures"),
        ("stale_baseline_entries", "stale baseline entries (they pass now)"),
        ("expected_failures", "expected failures (baseline)"),
        ("harness_errors", "harness errors"),
    ):
        if gate[key]:
            console.print(f"{label}: {', '.join(gate[key])}")
    for cause, ids in causes(results):
        if len(ids) > 1:
            console.print(f"[dim]one cause, {len(ids)} properties ({', '.join(ids)}):[/] {escape(cause)}")
    slowest = sorted(results, key=lambda r: (-r.duration, r.property.id))[:10]
    if slowest:
        times = ", ".join(f"{r.property.id} {r.duration:.1f}s" for r in slowest)
        console.print(f"[dim]slowest: {times}[/]")
    console.print(f"report: {escape(str(where / 'report.html'))}")
    console.print(f"gate: exit {gate['exit_code']}")
