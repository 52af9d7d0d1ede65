"""The property catalogue: one property = one test function with a stable id.

Ids are `AREA-NNN`, never renumbered or reused (a retired id stays here, marked retired).
The test function is named `test_<area>_<nnn>_<slug>`, so `-k stream_003` selects one.
Each property cites the public docs page (with anchor) and states the requirement in our
own words; `invariant` points at the numbered invariant of the project's spec notes.

`covers` names the parts of the Messages surface the property exercises, as coverage keys
(`request:max_tokens`, `block:tool_use`, ...; the notation is in conformance/reporting/coverage.py). A
property declares what its rule is about: the request fields whose handling it judges (not the
`model`/`messages`/`max_tokens` every request carries, unless they are the subject), the
endpoints it calls, and the response fields, block, delta and event types, stop reasons and
error types it reads and judges. Generated properties declare what every run exercises, not
what a lucky draw may reach. tests/conformance/test_coverage.py holds each key to the official
spec and to what the property sent and saw on the reference server; a key the property judges
but that server never shows (an error event, a ping) is listed in `unobserved` with the reason.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

__all__ = [
    "AREAS",
    "COVERAGE_KINDS",
    "REGISTRY",
    "RETIRED",
    "SOURCE_KINDS",
    "Citation",
    "Level",
    "Property",
    "catalogue_hash",
    "prop",
    "property_of",
]

AREAS = (
    "MSG",
    "STREAM",
    "ERR",
    "TOOL",
    "STRUCT",
    "THINK",
    "DOC",  # documents and citations
    "IMG",  # images
    "CTX",  # context management edits
    "SRVTOOL",  # Anthropic's own tools: server tools (tool search, web fetch), bash, text editor
    "CODE",  # code execution: containers and the sub-tools run in them
    "TOKENS",
    "MODELS",
    "BATCH",
    "FILES",  # the Files API (beta) and file sources in messages
    "SKILL",  # the Skills API (beta) and skills loaded into a code execution container
    "ISO",  # workspaces: what one workspace's key makes, another's cannot see
    "RATE",  # rate limits: the ratelimit headers, 429 with retry-after, the SDK's retry
    "HDR",
    "AUTH",
    "FUZZ",
    "SDK",  # properties judged through the TypeScript SDK (conformance/wire/tsdriver.py)
    "VER",  # the API versions (anthropic-version 2023-06-01 and 2026-10-21)
)

# The kinds of coverage key (`kind:name`); conformance/reporting/coverage.py defines each one's universe.
COVERAGE_KINDS = frozenset(
    {
        "endpoint",
        "param",
        "request",
        "response",
        "count_request",
        "count_response",
        "models",
        "model",
        "error_body",
        "block",
        "delta",
        "event",
        "stop_reason",
        "error",
    }
)

DOCS = "https://platform.claude.com/docs/en"
_ID = re.compile(r"^(?P<area>[A-Z]+)-(?P<number>\d{3})$")

F = TypeVar("F", bound=Callable[..., Any])


class Level(StrEnum):
    """RFC 2119 strength. A broken MUST is a FAIL; a broken SHOULD or MAY is a WARN."""

    MUST = "MUST"
    SHOULD = "SHOULD"
    MAY = "MAY"


@dataclass(frozen=True, slots=True)
class Citation:
    url: str  # public docs page with anchor
    requirement: str  # the normative sentence, in our words

    def __post_init__(self) -> None:
        if not self.url.startswith("https://") or not self.requirement:
            raise ValueError(f"a citation needs an https URL and a requirement: {self!r}")


@dataclass(frozen=True, slots=True)
class Property:
    id: str
    level: Level
    title: str
    citation: Citation
    invariant: int | None = None  # number in the spec notes' §9, where one applies
    source: str | None = None  # a MUST's basis: "docs: <url> — <sentence>" or "schema: <path> — <fact>"
    requires: tuple[str, ...] = ()  # optional target features; absent → UNSUPPORTED
    detects: tuple[str, ...] = ()  # features whose detection it reads, without requiring them
    alone: bool = False  # judged only while the target serves nothing else (conformance/scheduling.py)
    # Compares two answers to the same request: judged alone where the run found that answers
    # given beside other requests differ (conformance/concurrency.py).
    compares: bool = False
    passive: bool = False  # judged at the run's end from what every property met (judging/passive.py)
    covers: tuple[str, ...] = ()  # coverage keys (see the module docstring)
    unobserved: tuple[tuple[str, str], ...] = ()  # (key of covers, why the reference never shows it)
    retired: bool = False
    test_name: str = field(default="", compare=False)

    @property
    def area(self) -> str:
        return self.id.split("-", 1)[0]

    @property
    def selector(self) -> str:
        """What `-k` takes to run this property alone, e.g. `test_stream_003_` (the short
        `tool_001` also matches `srvtool_001`)."""
        return f"test_{self.id.lower().replace('-', '_')}_"


REGISTRY: dict[str, Property] = {}

# What a MUST may rest on: a sentence of the docs (the API reference's docstrings included) or a
# fact of the official OpenAPI schema (a `required`, a type, an enum, a pattern, a bound).
SOURCE_KINDS = ("docs: ", "schema: ", "docs and schema: ")

# Ids that no property holds any more, with why; never reused.
RETIRED: dict[str, str] = {
    "MSG-014": "it asked that unknown beta names be tolerated, but the beta-headers page documents "
    "a 400 invalid_request_error for an invalid beta name",
}


def prop(
    property_id: str,
    level: Level,
    title: str,
    *,
    url: str,
    requirement: str,
    invariant: int | None = None,
    source: str | None = None,
    requires: tuple[str, ...] = (),
    detects: tuple[str, ...] = (),
    alone: bool = False,
    compares: bool = False,
    passive: bool = False,
    covers: tuple[str, ...] = (),
    unobserved: dict[str, str] | None = None,
) -> Callable[[F], F]:
    """Declare the decorated test function as property `property_id`. A MUST names its `source`:
    the docs sentence or the official schema's fact it rests on (a rule the docs are silent on
    is a SHOULD, its reasoning in `requirement`). `alone`: its judgement depends on the target
    being otherwise idle (timing, a load it puts on the target), so it never runs beside another.
    `compares`: it judges two answers to one request alike (stream and create), which holds only
    where the target answers alike whatever else it serves: where the run found it does not
    (conformance/concurrency.py), the property runs with the target to itself.
    `passive`: it judges what the whole run meets (conformance/judging/passive.py), so its verdict is
    given last, once every other property's exchanges are in. `detects`: features whose detection
    (conformance/features.py) it judges, asked before the run as `requires` are."""
    match = _ID.match(property_id)
    if match is None or match["area"] not in AREAS:
        raise ValueError(f"bad property id {property_id!r}: want AREA-NNN with AREA in {AREAS}")
    if property_id in RETIRED:
        raise ValueError(f"{property_id} is retired ({RETIRED[property_id]}): ids are never reused")
    if level is Level.MUST and not (source or "").startswith(SOURCE_KINDS):
        raise ValueError(f"{property_id}: a MUST needs a source starting with one of {SOURCE_KINDS}")
    _check_covers(property_id, covers, unobserved or {})
    if not url.startswith("http"):
        url = f"{DOCS}/{url.lstrip('/')}"

    def register(function: F) -> F:
        expected = f"test_{match['area'].lower()}_{match['number']}_"
        if not function.__name__.startswith(expected):
            raise ValueError(f"{function.__name__} must be named {expected}<slug> for {property_id}")
        existing = REGISTRY.get(property_id)
        if existing is not None and existing.test_name != function.__name__:
            raise ValueError(f"property id {property_id} is used twice")
        item = Property(
            id=property_id,
            level=level,
            title=title,
            citation=Citation(url, requirement),
            invariant=invariant,
            source=source,
            requires=requires,
            detects=detects,
            alone=alone,
            compares=compares,
            passive=passive,
            covers=covers,
            unobserved=tuple(sorted((unobserved or {}).items())),
            test_name=function.__name__,
        )
        REGISTRY[property_id] = item
        function._plumbline_property = item  # type: ignore[attr-defined]
        return function

    return register


def _check_covers(property_id: str, covers: tuple[str, ...], unobserved: dict[str, str]) -> None:
    """Well-formed keys, no duplicates, and every unobserved key declared with a reason."""
    for key in covers:
        kind, _, name = key.partition(":")
        if kind not in COVERAGE_KINDS or not name or name != name.strip():
            raise ValueError(
                f"{property_id}: bad coverage key {key!r} (want kind:name, kind in {COVERAGE_KINDS})"
            )
    if len(set(covers)) != len(covers):
        raise ValueError(f"{property_id}: a coverage key is declared twice")
    for key, why in unobserved.items():
        if key not in covers or not why:
            raise ValueError(f"{property_id}: unobserved {key!r} must be in covers, with a reason")


def property_of(function: object) -> Property | None:
    found = getattr(function, "_plumbline_property", None)
    return found if isinstance(found, Property) else None


def catalogue_hash() -> str:
    """What a run's verdicts mean, in 12 hex digits: a digest of every property's id, level,
    title, citation and retirement, as loaded. Two runs with the same hash were judged by the
    same rules; `plumbline --version` and index.json carry it."""
    from conformance.properties import load_all  # here: the property modules import this one

    load_all()
    rules = [
        [p.id, p.level.value, p.title, p.citation.url, p.citation.requirement, p.retired]
        for p in sorted(REGISTRY.values(), key=lambda p: p.id)
    ]
    return hashlib.sha256(json.dumps(rules, ensure_ascii=False).encode()).hexdigest()[:12]
