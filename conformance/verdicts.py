"""Per-property verdicts and the CI gate computed from them and a baseline."""

from __future__ import annotations

import re
import tomllib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from conformance.catalogue import Level, Property

__all__ = [
    "EXIT_CONFORMANT",
    "EXIT_FAILED",
    "EXIT_HARNESS",
    "Gate",
    "Result",
    "Verdict",
    "cause_of",
    "causes",
    "compute_gate",
    "counts",
    "first_line",
    "gating",
    "load_baseline",
    "md_cell",
    "verdict_for_breakage",
    "write_baseline",
]

EXIT_CONFORMANT = 0
EXIT_FAILED = 1
EXIT_HARNESS = 2


class Verdict(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"  # a MUST broken
    WARN = "WARN"  # a SHOULD or MAY broken; gates only under --strict
    UNSUPPORTED = "UNSUPPORTED"  # the target declares the optional feature absent
    SKIP = "SKIP"  # not applicable to this target or run
    ERROR = "ERROR"  # harness or transport trouble: never the target's fault


@dataclass(slots=True)
class Result:
    property: Property
    verdict: Verdict
    duration: float
    reason: str | None = None
    expected: str | None = None
    actual: str | None = None
    message: str | None = None
    evidence: list[dict[str, Any]] = field(default_factory=list)


def verdict_for_breakage(level: Level) -> Verdict:
    return Verdict.FAIL if level is Level.MUST else Verdict.WARN


@dataclass(frozen=True, slots=True)
class Gate:
    exit_code: int
    new_failures: tuple[str, ...]
    stale_entries: tuple[str, ...]
    expected_failures: tuple[str, ...]
    errors: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "new_failures": list(self.new_failures),
            "stale_baseline_entries": list(self.stale_entries),
            "expected_failures": list(self.expected_failures),
            "harness_errors": list(self.errors),
        }


def gating(results: Iterable[Result], *, strict: bool) -> set[str]:
    """Ids whose breakage gates: every FAIL, and every WARN under --strict."""
    wanted = {Verdict.FAIL, Verdict.WARN} if strict else {Verdict.FAIL}
    return {r.property.id for r in results if r.verdict in wanted}


def compute_gate(
    results: Sequence[Result], baseline: Mapping[str, str], *, strict: bool, harness_failed: bool
) -> Gate:
    """0: every gating property passes or fails exactly as the baseline lists; 1: a new failure
    or a stale baseline entry (it passes now); 2: a harness error."""
    failing = gating(results, strict=strict)
    passing = {r.property.id for r in results if r.verdict is Verdict.PASS}
    errors = tuple(sorted(r.property.id for r in results if r.verdict is Verdict.ERROR))
    new = tuple(sorted(failing - set(baseline)))
    stale = tuple(sorted(set(baseline) & passing))
    expected = tuple(sorted(failing & set(baseline)))
    if harness_failed or errors:
        code = EXIT_HARNESS
    elif new or stale:
        code = EXIT_FAILED
    else:
        code = EXIT_CONFORMANT
    return Gate(code, new, stale, expected, errors)


def load_baseline(path: Path | None) -> dict[str, str]:
    """`{property id: reason}` from a baseline TOML (`[expected_failures]`); none → empty."""
    if path is None or not path.exists():
        return {}
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    entries = data.get("expected_failures", {})
    if not isinstance(entries, dict):
        raise ValueError(f"{path}: [expected_failures] must be a table of id = reason")
    return {str(key): str(value) for key, value in entries.items()}


def write_baseline(path: Path, results: Sequence[Result], *, strict: bool, target: str) -> int:
    """Record today's gating failures as the expected ones; returns how many."""
    failing = sorted(
        (r for r in results if r.property.id in gating(results, strict=strict)),
        key=lambda r: r.property.id,
    )
    lines = [
        f"# Expected failures of {target}: the gate passes while exactly these fail.",
        "# Written by `plumbline --update-baseline`; edit the reasons freely.",
        "",
        "[expected_failures]",
    ]
    for result in failing:
        reason = result.actual or result.message or result.verdict.value
        lines.append(f"{_toml_key(result.property.id)} = {_toml_string(reason[:300])}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(failing)


def md_cell(text: str) -> str:
    """Text shown literally in a Markdown table cell (no markup, no cell breaks)."""
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return "".join(f"\\{ch}" if ch in "`*_[]<>#" else ch for ch in text)


def first_line(text: str | None, limit: int = 200) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


_STATUS = re.compile(r"^HTTP (\d{3})\b")


def cause_of(result: Result) -> str | None:
    """What broke, in words shared by every property it broke: the status of a wrong-status
    failure, the field of a missing or mistyped one, the first schema error, the exception of
    an ERROR. None for a result that did not break."""
    if result.verdict is Verdict.ERROR:
        return first_line(result.message, 160) or "error"
    if result.verdict not in (Verdict.FAIL, Verdict.WARN):
        return None
    actual = re.sub(r"^\d+ of \d+ sub-cases broken: \[[^]]*\] ", "", first_line(result.actual, 300))
    if result.reason == "wrong-status" and (status := _STATUS.match(actual)):
        return f"HTTP {status[1]} where another status was expected"
    if result.reason == "schema":
        return f"schema: {first_line(actual.split('; ', 1)[0], 160)}"
    if result.reason in ("missing-field", "wrong-type", "stop-reason"):
        return f"{result.reason}: {first_line(actual, 160)}"  # names the field or the value
    # Otherwise the rule and the value together, numbers masked: "output_tokens <= N, got N".
    expected = re.sub(r"^every sub-case holds; \[[^]]*\] ", "", first_line(result.expected, 120))
    return re.sub(
        r"\d+", "N", f"{result.reason or 'mismatch'}: expected {expected}, got {first_line(actual, 80)}"
    )


def causes(results: Iterable[Result]) -> list[tuple[str, list[str]]]:
    """Broken properties grouped by cause, the biggest groups first."""
    groups: dict[str, list[str]] = defaultdict(list)
    for result in results:
        cause = cause_of(result)
        if cause is not None:
            groups[cause].append(result.property.id)
    return sorted(((cause, sorted(ids)) for cause, ids in groups.items()), key=lambda g: (-len(g[1]), g[0]))


def counts(results: Iterable[Result]) -> dict[str, int]:
    tally = Counter(r.verdict.value for r in results)
    return {verdict.value: tally.get(verdict.value, 0) for verdict in Verdict}


def _toml_key(key: str) -> str:
    return f'"{key}"'


def _toml_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    escaped = "".join(ch if ch >= " " else f"\\u{ord(ch):04x}" for ch in escaped)
    return f'"{escaped}"'
