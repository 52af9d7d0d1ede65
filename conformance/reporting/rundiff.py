"""What changed between two runs: `plumbline diff OLD NEW [--json FILE] [--md FILE]`.

A property whose verdict changed is in one of:
- new failures: PASS, SKIP, UNSUPPORTED or absent before, FAIL, WARN or ERROR now;
- fixed: FAIL, WARN or ERROR before, PASS, SKIP or UNSUPPORTED now;
- other verdict changes: the rest (FAIL → ERROR, WARN → FAIL, SKIP → PASS, ...).
Apart from those, `added` and `retired` list the properties of one run only (the property
sets differ), so an added property that fails is both added and a new failure.
A new failure gates a release: exit 1; otherwise 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from conformance.judging.verdicts import EXIT_CONFORMANT, EXIT_FAILED, Verdict, first_line
from conformance.judging.verdicts import md_cell as _md
from conformance.reporting.matrix import Run

__all__ = ["BROKEN", "RunDiff", "Transition", "diff_runs", "print_diff", "render_markdown"]

BROKEN = frozenset({Verdict.FAIL.value, Verdict.WARN.value, Verdict.ERROR.value})


@dataclass(frozen=True, slots=True)
class Transition:
    id: str
    level: str
    title: str
    old: str | None  # None: the old run did not have the property
    new: str | None
    detail: str  # first line of what broke now (or before, for a fix)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "level": self.level,
            "title": self.title,
            "old": self.old,
            "new": self.new,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class RunDiff:
    old: dict[str, str]  # target slug, url, model, suite version, run id, directory
    new: dict[str, str]
    new_failures: tuple[Transition, ...]
    fixed: tuple[Transition, ...]
    changed: tuple[Transition, ...]
    added: tuple[Transition, ...]
    retired: tuple[Transition, ...]
    unchanged: int
    warnings: tuple[str, ...]

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if self.new_failures else EXIT_CONFORMANT

    def categories(self) -> list[tuple[str, tuple[Transition, ...]]]:
        return [
            ("new failures", self.new_failures),
            ("fixed", self.fixed),
            ("other verdict changes", self.changed),
            ("added", self.added),
            ("retired", self.retired),
        ]

    def as_dict(self) -> dict[str, Any]:
        return {
            "old": self.old,
            "new": self.new,
            "exit_code": self.exit_code,
            "warnings": list(self.warnings),
            "new_failures": [t.as_dict() for t in self.new_failures],
            "fixed": [t.as_dict() for t in self.fixed],
            "changed": [t.as_dict() for t in self.changed],
            "added": [t.as_dict() for t in self.added],
            "retired": [t.as_dict() for t in self.retired],
            "unchanged": self.unchanged,
        }


def _describe(run: Run) -> dict[str, str]:
    return {
        "target": run.slug,
        "url": str(run.target.get("url", "")),
        "model": str(run.target.get("model", "")),
        "api_version": str(run.target.get("api_version") or ""),
        "suite_version": run.suite_version,
        "run_id": run.run_id,
        "directory": str(run.directory),
    }


def _detail(prop: dict[str, Any] | None) -> str:
    if prop is None:
        return ""
    return first_line(prop.get("actual") or prop.get("message"), 200)


def diff_runs(old: Run, new: Run) -> RunDiff:
    before, after = old.properties, new.properties
    new_failures: list[Transition] = []
    fixed: list[Transition] = []
    changed: list[Transition] = []
    added: list[Transition] = []
    retired: list[Transition] = []
    unchanged = 0
    for pid in sorted(set(before) | set(after)):
        was, now = before.get(pid), after.get(pid)
        latest = now or was
        assert latest is not None  # pid comes from one of the two runs
        old_verdict = was["verdict"] if was else None
        new_verdict = now["verdict"] if now else None
        broken_now = new_verdict in BROKEN
        transition = Transition(
            pid,
            str(latest.get("level", "")),
            str(latest.get("title", "")),
            old_verdict,
            new_verdict,
            _detail(now) if broken_now or not was else _detail(was),
        )
        if was is None:
            added.append(transition)
        if now is None:
            retired.append(transition)
        if old_verdict == new_verdict:
            unchanged += 1
        elif broken_now and old_verdict not in BROKEN:
            new_failures.append(transition)
        elif new_verdict is not None and old_verdict in BROKEN and not broken_now:
            fixed.append(transition)
        elif was is not None and now is not None:
            changed.append(transition)
    warnings = []
    if old.slug != new.slug:
        warnings.append(f"the runs judge different targets: {old.slug} and {new.slug}")
    versions = (old.target.get("api_version"), new.target.get("api_version"))
    if versions[0] != versions[1]:
        warnings.append(
            f"the runs judge different API versions: anthropic-version {versions[0] or 'unrecorded'} and "
            f"{versions[1] or 'unrecorded'} (2026-10-21 refuses sampling parameters and more)"
        )
    if old.suite_version != new.suite_version:
        warnings.append(
            f"suite {old.suite_version} → {new.suite_version}: the suite itself may have added, "
            "retired or changed properties"
        )
    return RunDiff(
        _describe(old),
        _describe(new),
        tuple(new_failures),
        tuple(fixed),
        tuple(changed),
        tuple(added),
        tuple(retired),
        unchanged,
        tuple(warnings),
    )


def _verdict(value: str | None) -> str:
    return value if value is not None else "absent"


def _run_line(run: dict[str, str]) -> str:
    return (
        f"{run['target']} · {run['url']} · model {run['model']} · "
        f"suite {run['suite_version']} · run {run['run_id']}"
    )


def render_markdown(diff: RunDiff) -> str:
    verdict = "new failures: exit 1" if diff.exit_code else "no new failure: exit 0"
    lines = [
        f"# Plumbline diff: {verdict}",
        "",
        f"- old: {_md(_run_line(diff.old))}",
        f"- new: {_md(_run_line(diff.new))}",
        "",
    ]
    lines += [f"> **Warning:** {_md(w)}" for w in diff.warnings]
    if diff.warnings:
        lines.append("")
    for name, items in diff.categories():
        lines += [f"## {name.capitalize()} ({len(items)})", ""]
        if not items:
            lines += ["none", ""]
            continue
        lines += ["| id | level | title | old | new | detail |", "|---|---|---|---|---|---|"]
        lines += [
            f"| {t.id} | {_md(t.level)} | {_md(t.title)} | {_verdict(t.old)} | {_verdict(t.new)} "
            f"| {_md(t.detail)} |"
            for t in items
        ]
        lines.append("")
    lines += [f"{diff.unchanged} properties unchanged.", ""]
    return "\n".join(lines)


_STYLE = {"new failures": "bold red", "fixed": "green", "other verdict changes": "yellow"}


def print_diff(diff: RunDiff, console: Console, warnings: Console | None = None) -> None:
    """The diff on the console; requirement texts and details are printed literally."""
    for warning in diff.warnings:
        (warnings or console).print(f"[bold yellow]warning:[/] {escape(warning)}")
    console.print(escape(f"old: {_run_line(diff.old)}"))
    console.print(escape(f"new: {_run_line(diff.new)}"))
    for name, items in diff.categories():
        if not items:
            continue
        table = Table("id", "level", "title", "old → new", "detail", title=f"{name} ({len(items)})")
        for t in items:
            table.add_row(
                Text(t.id),
                Text(t.level),
                Text(t.title),
                Text(f"{_verdict(t.old)} → {_verdict(t.new)}"),
                Text(t.detail),
                style=_STYLE.get(name),
            )
        console.print(table)
    tally = ", ".join(f"{len(items)} {name}" for name, items in diff.categories())
    console.print(escape(f"{tally}, {diff.unchanged} unchanged"))
    if diff.new_failures:
        ids = ", ".join(t.id for t in diff.new_failures)
        console.print(f"[bold red]new failures:[/] {escape(ids)} (exit 1)")
    else:
        console.print("[green]no new failure[/] (exit 0)")
