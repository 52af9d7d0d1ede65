"""The pytest plugin: target options and fixtures, per-property verdicts, reports, the gate.

Loaded by the `plumbline` command (`-p conformance.plugin`); pytest's exit status is
replaced by the gate's (0 conformant, 1 new failure or stale baseline entry, 2 harness
error).
"""

from __future__ import annotations

import os
import platform
import time
import traceback
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import pytest
from rich.console import Console
from rich.markup import escape

from conformance import __version__
from conformance.catalogue import Property, property_of
from conformance.checks import ConformanceFailure, NotJudged, Unsupported, request_label, take_notes
from conformance.determinism import Determinism, probe_determinism
from conformance.features import Features
from conformance.hypothesis_profiles import register_profiles
from conformance.profile import Profile, load_profile
from conformance.reporting import write_exchanges, write_reports
from conformance.target import Target, TargetConfig
from conformance.verdicts import (
    EXIT_HARNESS,
    Result,
    Verdict,
    causes,
    compute_gate,
    first_line,
    load_baseline,
    verdict_for_breakage,
    write_baseline,
)

_STATE = pytest.StashKey["RunState"]()
# Opt-in: keep every exchange of every property, passing ones too, under exchanges/<ID>.json
# (the spec-coverage test checks declared coverage against them). Off, reports are unchanged.
KEEP_EXCHANGES_ENV = "PLUMBLINE_KEEP_EXCHANGES"
_COLOURS = {
    Verdict.PASS: "green",
    Verdict.FAIL: "bold red",
    Verdict.WARN: "yellow",
    Verdict.ERROR: "bold magenta",
    Verdict.UNSUPPORTED: "cyan",
    Verdict.SKIP: "dim",
}


@dataclass
class RunState:
    config: TargetConfig
    strict: bool
    report_dir: Path
    run_id: str
    seed: str | None
    baseline_path: Path | None
    update_baseline: bool
    console: Console
    started: float = field(default_factory=time.monotonic)
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    results: dict[str, Result] = field(default_factory=dict)
    target: Target | None = None
    determinism: Determinism | None = None
    told_determinism: bool = False
    features: Features | None = None
    told_features: set[str] = field(default_factory=set)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("plumbline", "Plumbline conformance")
    group.addoption("--plumbline-target", help="base URL of the server under test")
    group.addoption("--plumbline-model", help="model id to send (default: first in /v1/models)")
    group.addoption("--plumbline-api-key", default=None)
    group.addoption("--plumbline-auth-header", choices=["x-api-key", "bearer"], default="x-api-key")
    group.addoption("--plumbline-timeout", type=float, default=120.0, help="seconds per answer")
    group.addoption("--plumbline-strict", action="store_true", help="SHOULD breakage gates too")
    group.addoption("--plumbline-profile", default=None, help="target profile (TOML)")
    group.addoption("--plumbline-report-dir", default="reports")
    group.addoption("--plumbline-run-id", default=None)
    group.addoption("--plumbline-baseline", default=None, help="expected failures (TOML)")
    group.addoption("--plumbline-update-baseline", action="store_true")
    group.addoption("--plumbline-seed", default=None, help="recorded in index.json")


def pytest_configure(config: pytest.Config) -> None:
    url = config.getoption("plumbline_target")
    if not url:
        return  # not a conformance run (e.g. the project's own tests)
    register_profiles(Path(config.getoption("plumbline_report_dir")))
    profile_file = config.getoption("plumbline_profile")
    profile = load_profile(Path(profile_file)) if profile_file else Profile()
    model = config.getoption("plumbline_model") or _first_model(url, config)
    target = TargetConfig(
        url=url,
        model=model,
        api_key=config.getoption("plumbline_api_key"),
        auth_header=config.getoption("plumbline_auth_header"),
        profile=profile,
        timeout=config.getoption("plumbline_timeout"),
    )
    baseline = config.getoption("plumbline_baseline")
    run_id = config.getoption("plumbline_run_id") or datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    config.stash[_STATE] = RunState(
        config=target,
        strict=config.getoption("plumbline_strict"),
        report_dir=Path(config.getoption("plumbline_report_dir")) / target.slug / run_id,
        run_id=run_id,
        seed=config.getoption("plumbline_seed"),
        baseline_path=Path(baseline) if baseline else profile.baseline,
        update_baseline=config.getoption("plumbline_update_baseline"),
        console=Console(highlight=False, soft_wrap=True),
    )


def _first_model(url: str, config: pytest.Config) -> str:
    """Without --model, use the first model the target lists."""
    key = config.getoption("plumbline_api_key")
    headers = {"anthropic-version": "2023-06-01"}
    if key:
        headers["x-api-key"] = key
    try:
        response = httpx.get(f"{url.rstrip('/')}/v1/models", headers=headers, timeout=30)
        return str(response.json()["data"][0]["id"])
    except Exception as exc:
        raise pytest.UsageError(
            f"--model not given and {url}/v1/models did not name one ({exc}); pass --model"
        ) from exc


def _state(config: pytest.Config) -> RunState | None:
    return config.stash.get(_STATE, None)


@pytest.fixture(scope="session")
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    state = _state(request.config)
    if state is None:
        raise pytest.UsageError("conformance properties need --plumbline-target")
    state.target = Target(state.config)
    state.determinism = probe_determinism(state.target)
    state.target.deterministic = state.determinism.deterministic
    state.features = Features(state.target)
    yield state.target
    state.target.close()


@pytest.fixture(autouse=True)
def _property_context(request: pytest.FixtureRequest, target: Target) -> None:
    prop = property_of(request.function)
    target.recorder.reset(prop.id if prop else None)
    state = _state(request.config)
    if prop is not None and prop.requires and state is not None and state.features is not None:
        absent = [s for s in map(state.features.support, prop.requires) if not s.supported]
        if absent:
            raise Unsupported("; ".join(support.reason for support in absent))


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    if _state(config) is None:
        return
    for item in items:
        if property_of(getattr(item, "obj", None)) is None:
            raise pytest.UsageError(f"{item.nodeid} is not a declared property (@prop)")
    items.sort(key=lambda item: property_of(getattr(item, "obj", None)).id)  # type: ignore[union-attr]


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:  # shown here because the plumbline command turns pytest's terminal off
        console = Console(stderr=True)
        console.print(f"[bold magenta]harness error while collecting {escape(report.nodeid)}[/]")
        console.print(escape(str(report.longrepr)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    state = _state(item.config)
    prop = property_of(getattr(item, "obj", None))
    if state is None or prop is None:
        return
    report: pytest.TestReport = outcome.get_result()
    if call.when == "call" or (call.when == "setup" and not report.passed):
        result = _result(prop, call, report, state)
        state.results[prop.id] = result
        if os.environ.get(KEEP_EXCHANGES_ENV) and state.target is not None:
            write_exchanges(state.report_dir, prop.id, state.target.recorder.exchanges)
        _print_progress(state, result)
        if result.verdict in (Verdict.UNSUPPORTED, Verdict.WARN, Verdict.SKIP):
            report.outcome = "skipped"  # pytest's own tally is not the gate
            report.longrepr = ("", 0, result.verdict.value)


def _result(
    prop: Property, call: pytest.CallInfo[None], report: pytest.TestReport, state: RunState
) -> Result:
    exchanges = state.target.recorder.exchanges if state.target else []
    result = Result(prop, Verdict.PASS, call.duration, notes=take_notes())
    if report.passed:
        return result
    excinfo = call.excinfo
    if report.skipped and (excinfo is None or not isinstance(excinfo.value, Unsupported)):
        result.verdict = Verdict.SKIP
        result.message = _skip_reason(report)
        return result
    assert excinfo is not None
    exc = _root_cause(excinfo.value)
    result.evidence = [exchange.as_evidence() for exchange in exchanges[-4:]]
    broken = verdict_for_breakage(prop.level)
    if isinstance(exc, Unsupported):
        result.verdict, result.message, result.evidence = Verdict.UNSUPPORTED, str(exc), []
    elif isinstance(exc, NotJudged):
        result.verdict, result.message, result.judged_by = Verdict.SKIP, str(exc), exc.judged_by
        result.evidence = []  # the evidence is the judging property's
    elif isinstance(exc, ConformanceFailure):
        result.verdict = verdict_for_breakage(exc.strongest(prop.level))
        result.reason, result.expected, result.actual = exc.reason, exc.expected, exc.actual
        result.subject = exc.subject
        result.subcases = [b.as_dict() for b in exc.subcases]
    elif isinstance(exc, anthropic.APIStatusError):
        result.verdict = broken
        result.reason = "unexpected-error-status"
        result.expected = "a successful response to a valid request"
        result.actual = f"HTTP {exc.status_code}: {exc.message}"
        result.subject = f"{request_label(exc.request)} answered HTTP {exc.status_code} (through the SDK)"
    elif isinstance(exc, anthropic.APIResponseValidationError):
        result.verdict = broken
        result.reason = "sdk-rejected-response"
        result.expected = "a response the official SDK (strict) accepts"
        result.actual = str(exc)[:500]
    elif (transport := _transport_error(exc)) is not None:
        _judge_transport(result, transport, broken, state.target)
    elif isinstance(exc, AssertionError):
        result.verdict = broken
        result.reason = "assertion"
        result.actual = str(exc)[:500]
    else:
        result.verdict = Verdict.ERROR
        result.reason = "harness"
        result.message = _exception_line(exc) + "\n" + "".join(traceback.format_exception(exc)[-6:])
    return result


_UNREACHABLE = (httpx.ConnectError, httpx.ConnectTimeout, httpx2.ConnectError, httpx2.ConnectTimeout)
_CLOSED = (
    httpx.RemoteProtocolError,
    httpx.ReadError,
    httpx.WriteError,
    httpx2.RemoteProtocolError,
    httpx2.ReadError,
    httpx2.WriteError,
)
_SLOW = (httpx.ReadTimeout, httpx.WriteTimeout, httpx2.ReadTimeout, httpx2.WriteTimeout)


def _transport_error(exc: BaseException) -> BaseException | None:
    """The transport exception behind `exc` (the SDK wraps httpx2's in APIConnectionError)."""
    if isinstance(exc, anthropic.APIConnectionError):
        return exc.__cause__ or exc
    if isinstance(exc, httpx.TransportError | httpx2.TransportError):
        return exc
    return None


def _judge_transport(result: Result, exc: BaseException, broken: Verdict, target: Target | None) -> None:
    """A target that accepted the connection and then closed it without an answer, or that
    answers other requests but not this one in time, fails the property; a target that cannot
    be reached at all, or no longer answers anything, is an ERROR (nobody's verdict)."""
    line = _exception_line(exc)
    if isinstance(exc, _CLOSED):
        result.verdict, result.reason = broken, "connection-closed"
        result.expected = "an answer to the request"
        result.actual = f"the target closed the connection without a complete answer ({line})"
    elif isinstance(exc, (*_SLOW, anthropic.APITimeoutError)) and target is not None and target.alive():
        result.verdict, result.reason = broken, "timeout"
        result.expected = f"an answer within {target.config.timeout:g} s"
        result.actual = f"no complete answer in time, while the target answers other requests ({line})"
    else:
        result.verdict, result.reason = Verdict.ERROR, "transport"
        unreachable = isinstance(exc, _UNREACHABLE)
        result.message = f"{line} ({'the target is unreachable' if unreachable else 'transport failure'})"


def _exception_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _root_cause(exc: BaseException) -> BaseException:
    """Hypothesis may raise an ExceptionGroup of distinct failures: judge by the first
    conformance failure in it."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if isinstance(_root_cause(inner), ConformanceFailure):
                return _root_cause(inner)
        return _root_cause(exc.exceptions[0])
    return exc


def _skip_reason(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return str(report.longrepr or "")


def _print_progress(state: RunState, result: Result) -> None:
    if state.determinism is not None and not state.told_determinism:
        state.told_determinism = True  # printed here: output inside fixtures is captured
        state.console.print(f"[dim]deterministic: {escape(state.determinism.detail)}[/]")
    for name, support in (state.features.detected if state.features else {}).items():
        if name not in state.told_features:
            state.told_features.add(name)
            state.console.print(f"[dim]feature {escape(support.reason)}[/]")
    colour = _COLOURS[result.verdict]
    title = escape(result.property.title)
    line = f"[{colour}]{result.verdict.value:<11}[/] {result.property.id:<11} {title}"
    state.console.print(f"{line} [dim]{result.duration:.1f}s[/]")
    for detail in verdict_details(result):
        state.console.print(f"            [dim]{escape(detail)}[/]")


def verdict_details(result: Result) -> list[str]:
    """The lines under a verdict on the console: every broken sub-case's Expected and Actual,
    the reason of a SKIP or an ERROR, and the notes (sub-cases not judged)."""
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
    elif result.verdict in (Verdict.ERROR, Verdict.SKIP) and result.message:
        lines.append(first_line(result.message, 200))
    lines += [first_line(text, 200) for text in result.notes]
    return lines


def pytest_sessionstart(session: pytest.Session) -> None:
    state = _state(session.config)
    if state is None:
        return
    cfg = state.config
    state.console.rule(escape(f"Plumbline {__version__} — {cfg.url} — model {cfg.model}"))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = _state(session.config)
    if state is None:
        return
    results = sorted(state.results.values(), key=lambda r: r.property.id)
    harness_failed = exitstatus in (
        pytest.ExitCode.INTERRUPTED,  # collection errors end here
        pytest.ExitCode.INTERNAL_ERROR,
        pytest.ExitCode.USAGE_ERROR,
        pytest.ExitCode.NO_TESTS_COLLECTED,
    )
    baseline = load_baseline(state.baseline_path)
    gate = compute_gate(results, baseline, strict=state.strict, harness_failed=harness_failed)
    run = {
        "run_id": state.run_id,
        "suite": {"name": "plumbline", "version": __version__, "sdk": anthropic.__version__},
        "target": {
            "url": state.config.url,
            "model": state.config.model,
            "slug": state.config.slug,
            "profile": str(state.config.profile.source) if state.config.profile.source else None,
            "deterministic": state.target.deterministic if state.target else None,
            "features": sorted(state.config.profile.features),
        },
        "determinism": state.determinism.as_dict() if state.determinism else None,
        "feature_support": {
            name: support.as_dict()
            for name, support in sorted((state.features.detected if state.features else {}).items())
        },
        "seed": state.seed,
        "strict": state.strict,
        "baseline": str(state.baseline_path) if state.baseline_path else None,
        "baseline_found": state.baseline_path is not None and state.baseline_path.exists(),
        "started_at": state.started_at,
        "duration_s": round(time.monotonic() - state.started, 1),
        "python": platform.python_version(),
    }
    directory = write_reports(state.report_dir, run, results, gate)
    if state.update_baseline and state.baseline_path is not None:
        written = write_baseline(state.baseline_path, results, strict=state.strict, target=state.config.slug)
        state.console.print(
            f"baseline: {written} expected failure(s) written to {escape(str(state.baseline_path))}"
        )
    _print_summary(state, results, gate.as_dict(), directory)
    session.exitstatus = EXIT_HARNESS if harness_failed else gate.exit_code


def _print_summary(state: RunState, results: list[Result], gate: dict[str, Any], where: Path) -> None:
    console = state.console
    console.rule("summary")
    if not results:
        console.print("[bold magenta]no property ran[/] (does -k match any id? see plumbline --list)")
    tally: dict[Verdict, int] = {}
    for result in results:
        tally[result.verdict] = tally.get(result.verdict, 0) + 1
    console.print("  ".join(f"[{_COLOURS[v]}]{v.value} {n}[/]" for v, n in sorted(tally.items()) if n))
    has_baseline = state.baseline_path is not None and state.baseline_path.exists()
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
