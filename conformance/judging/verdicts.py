"""Per-property verdicts and the CI gate computed from them and a baseline."""

from __future__ import annotations

import itertools
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
    "REFUSAL_KEY",
    "Cause",
    "Gate",
    "Result",
    "Verdict",
    "breakages_of",
    "cause_key",
    "cause_of",
    "causes",
    "causes_of",
    "compute_gate",
    "counts",
    "expects_refusal",
    "first_line",
    "gating",
    "load_baseline",
    "md_cell",
    "message_key",
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
    subject: str | None = None  # what the target did (checks.Breakage.subject)
    key: str | None = None  # what groups it with other failures, where set (checks.Breakage.key)
    subcases: list[dict[str, Any]] = field(default_factory=list)  # every broken sub-case (Breakage)
    judged_by: str | None = None  # SKIP: the property that judges the precondition that failed
    notes: list[str] = field(default_factory=list)  # e.g. sub-cases that could not be judged

    def as_wire(self) -> dict[str, Any]:
        """Plain data, to travel from an xdist worker to the controller on its test report."""
        return {
            "id": self.property.id,
            "verdict": self.verdict.value,
            "duration": self.duration,
            **{name: getattr(self, name) for name in _WIRE_FIELDS},
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any], prop: Property) -> Result:
        return cls(
            prop, Verdict(data["verdict"]), float(data["duration"]), **{n: data[n] for n in _WIRE_FIELDS}
        )


_WIRE_FIELDS = (
    "reason",
    "expected",
    "actual",
    "message",
    "evidence",
    "subject",
    "key",
    "subcases",
    "judged_by",
    "notes",
)


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
    """Record today's gating failures as the expected ones; returns how many. An existing
    baseline's header comment and the reasons of the entries that still fail are kept: they
    are words a person wrote, and only the failures new to the baseline get today's evidence."""
    failing = sorted(
        (r for r in results if r.property.id in gating(results, strict=strict)),
        key=lambda r: r.property.id,
    )
    kept = load_baseline(path)
    header = _comment_header(path) or [
        f"# Expected failures of {target}: the gate passes while exactly these fail.",
        "# Written by `plumbline --update-baseline`; edit the reasons freely (they are kept).",
    ]
    lines = [*header, "", "[expected_failures]"]
    for result in failing:
        reason = kept.get(result.property.id) or result.actual or result.message or result.verdict.value
        lines.append(f"{_toml_key(result.property.id)} = {_toml_string(reason[:300])}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(failing)


def _comment_header(path: Path) -> list[str]:
    """The comment lines a baseline file opens with (none when it does not exist)."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return list(itertools.takewhile(lambda line: line.startswith("#"), lines))


def md_cell(text: str) -> str:
    """Text shown literally in a Markdown table cell (no markup, no cell breaks)."""
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return "".join(f"\\{ch}" if ch in "`*_[]<>#" else ch for ch in text)


def first_line(text: str | None, limit: int = 200) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


_STATUS = re.compile(r"^HTTP (\d{3})\b")
# Only the grouping key is normalised, never the text shown: ids, hex runs and long numbers
# differ between requests of one cause; small numbers (a status, a count of 0) are the cause.
_IDS = (
    (re.compile(r"\b(?:msg|toolu|srvtoolu|msgbatch|req|file|chatcmpl|call|batch)[_-][A-Za-z0-9_-]+"), "<id>"),
    (re.compile(r"\b[0-9a-fA-F-]{16,}\b"), "<hex>"),
)
_NOISE = (*_IDS, (re.compile(r"\d{4,}"), "N"))
# A target's own message says what it refused; its numbers and the values it quotes back
# (`max_tokens: 100000 > 64000`, `'plumbline-nope'`) are the request's, not the cause. A quote
# opens and closes only beside a non-word character, so "doesn't" opens nothing.
_MESSAGE_NOISE = (
    *_IDS,
    (re.compile(r"(?<!\w)'[^'\n]*'(?!\w)|(?<!\w)\"[^\"\n]*\"(?!\w)|`[^`\n]*`"), "<v>"),
    (re.compile(r"\d+"), "<n>"),
)
# The key of a request that should have been refused and was answered (checks.refusal_key).
REFUSAL_KEY = "not refused: "


@dataclass(frozen=True, slots=True)
class Cause:
    """What the target did, in words several broken properties (or sub-cases) share."""

    key: str  # what groups it: the rule broken and the target's message, normalised
    text: str  # the first occurrence, as the target did it


def cause_key(text: str) -> str:
    for pattern, replacement in _NOISE:
        text = pattern.sub(replacement, text)
    return text


def message_key(text: str, limit: int = 500) -> str:
    """A target's own message, for a grouping key: ids, every number and every quoted value
    out, whitespace collapsed, case folded. The same refusal met by several properties (each
    with its own request, numbers and values) is then one cause, and two different refusals
    two."""
    for pattern, replacement in _MESSAGE_NOISE:
        text = pattern.sub(replacement, text)
    return " ".join(text.split()).casefold()[:limit]


def breakages_of(result: Result) -> list[dict[str, Any]]:
    """Each broken rule of a FAIL or WARN: its sub-cases, or the failure itself."""
    if result.verdict not in (Verdict.FAIL, Verdict.WARN):
        return []
    if result.subcases:
        return result.subcases
    return [
        {
            "expected": result.expected,
            "actual": result.actual,
            "reason": result.reason,
            "subject": result.subject,
            "key": result.key,
        }
    ]


# The Expected of a check that wanted the request refused (a 4xx).
_REFUSAL = re.compile(r"^(?:HTTP status 4\d\d|a 4xx)\b")


def expects_refusal(breakage: dict[str, Any]) -> bool:
    """Whether a broken rule wanted its request refused with a 4xx."""
    return bool(_REFUSAL.match(str(breakage.get("expected") or "")))


def _unrefused(breakage: dict[str, Any]) -> str | None:
    """The status of a request that should have been refused and was answered (2xx) or
    crashed on (5xx), else None."""
    status = _STATUS.match(first_line(breakage.get("actual"), 200))
    wrong = breakage.get("reason") == "wrong-status" and expects_refusal(breakage)
    return status[1] if wrong and status and status[1][0] in "25" else None


def _cause(breakage: dict[str, Any], rule: str) -> Cause:
    """The cause of one broken rule: its text is the subject the check named, else words built
    from the failure's reason and values; its key is the check's own (`key`: the route, status
    and normalised message of an answer, whatever the transport), else the text normalised.

    A request that should have been refused and was answered (or crashed on) is named by the
    rule it broke (`rule`: the property's title and the sub-case), not by the answer: a server
    that validates nothing answers every such request alike, and each missing check is a cause
    of its own. It is keyed by the request itself (the check's `not refused:` key, a
    fingerprint of what was sent) where the check knew it: properties that send the same
    invalid request (ERR-001's and ERR-023's body without max_tokens) meet one missing check,
    whatever their rules' words; different requests are different checks, even where one rule
    sends them. The rule and sub-case key it where the request is not known."""
    key = breakage.get("key") or None
    if status := _unrefused(breakage):
        case = breakage.get("case")
        text = f"answered HTTP {status}, not refused: {rule}" + (f" [{case}]" if case else "")
        return Cause(key if key and key.startswith(REFUSAL_KEY) else cause_key(text), text)
    if key and key.startswith(REFUSAL_KEY):
        key = None  # a fingerprint keys only a request that should have been refused
    reason, actual = breakage.get("reason"), first_line(breakage.get("actual"), 200)
    if breakage.get("subject"):
        text = str(breakage["subject"])
    elif reason == "wrong-status" and (status_line := _STATUS.match(actual)):
        text = f"answered HTTP {status_line[1]}"
    elif reason in ("missing-field", "wrong-type", "stop-reason", "schema"):
        text = f"{reason}: {actual}"
    else:
        text = f"{reason or 'mismatch'}: expected {first_line(breakage.get('expected'), 120)}, got {actual}"
    return Cause(key or cause_key(text), text)


def causes_of(result: Result) -> list[Cause]:
    """What broke: one cause per broken rule (the exception line of an ERROR)."""
    if result.verdict is Verdict.ERROR:
        text = first_line(result.message, 160) or "error"
        return [Cause(cause_key(text), text)]
    return [_cause(breakage, result.property.title) for breakage in breakages_of(result)]


def cause_of(result: Result) -> str | None:
    """The first cause of a broken property, in the target's own words; None if it did not break."""
    found = causes_of(result)
    return found[0].text if found else None


def causes(results: Iterable[Result]) -> list[tuple[str, list[str]]]:
    """Broken properties grouped by what the target did (the first wording of each group names
    it), the groups that several properties share first."""
    names: dict[str, str] = {}
    groups: dict[str, list[str]] = defaultdict(list)
    for result in sorted(results, key=lambda r: r.property.id):
        for cause in causes_of(result):
            names.setdefault(cause.key, cause.text)
            if result.property.id not in groups[cause.key]:
                groups[cause.key].append(result.property.id)
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[1][0]))
    return [(names[key], ids) for key, ids in ordered]


def counts(results: Iterable[Result]) -> dict[str, int]:
    tally = Counter(r.verdict.value for r in results)
    return {verdict.value: tally.get(verdict.value, 0) for verdict in Verdict}


def _toml_key(key: str) -> str:
    return f'"{key}"'


def _toml_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    escaped = "".join(ch if ch >= " " else f"\\u{ord(ch):04x}" for ch in escaped)
    return f'"{escaped}"'
