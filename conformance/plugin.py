"""The pytest plugin: target options, per-property verdicts, reports, the gate.

Loaded by the `plumbline` command (`-p conformance.plugin`), and by any pytest where Plumbline
is installed (the `pytest11` entry point, named `conformance.plugin` so that both ways load it
once). Without `--plumbline-target` it does nothing. With one, pytest's exit status is replaced
by the gate's (0 conformant, 1 new failure or stale baseline entry, 2 harness error); run from
a project's own pytest (`pytest --plumbline-target URL`), the catalogue is collected beside the
project's tests, and a failing test of the project's own also makes the exit status 1. The
fixtures the properties use (`target`, `model_info`) live in `properties/conftest.py`, so that
they exist only where properties are collected.

One process, or pytest-xdist workers (`plumbline --jobs N`, conformance/scheduling.py): what
every property builds on (the determinism probe, the optional features the selected properties
require) is asked once, before any property runs, by the process that gives the verdicts; the
workers read it from a file. A worker judges its properties and sends each Result on its test
report; the controller collects them, prints them in catalogue order and writes the reports.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import tempfile
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from rich.console import Console
from rich.markup import escape

from conformance import __version__
from conformance.alone import AloneLock
from conformance.catalogue import REGISTRY, Property, catalogue_hash, property_of
from conformance.cli import PROPERTIES_DIR
from conformance.concurrency import Concurrency, probe_concurrency
from conformance.determinism import Determinism, probe_determinism
from conformance.features import JUDGES, REQUEST_SHAPING, Features, Support, probe_subject
from conformance.hypothesis_profiles import register_profiles
from conformance.judging.checks import ConformanceFailure, NotJudged, Unsupported, note, take_notes
from conformance.judging.outcome import exception_line, judge, timed_out
from conformance.judging.passive import MetError, errors_met, judge_met, owned
from conformance.judging.verdicts import (
    EXIT_HARNESS,
    Result,
    Verdict,
    compute_gate,
    load_baseline,
    write_baseline,
)
from conformance.profile import Profile, load_profile
from conformance.reporting.console import print_context, print_summary, print_verdict
from conformance.reporting.progress import RunProgress
from conformance.reporting.reports import write_exchanges, write_reports
from conformance.scheduling import property_of_nodeid
from conformance.wire.target import API_VERSION, API_VERSIONS, Exchange, Target, TargetConfig

_STATE = pytest.StashKey["RunState"]()
# The run's config, for the hooks pytest gives none (pytest_runtest_logreport).
_CONFIG: list[pytest.Config] = []
# Opt-in: keep every exchange of every property, passing ones too, under exchanges/<ID>.json
# (the spec-coverage test checks declared coverage against them). Off, reports are unchanged.
KEEP_EXCHANGES_ENV = "PLUMBLINE_KEEP_EXCHANGES"
CONTEXT_KEY = "plumbline_context"  # xdist workerinput: the file with what the controller found out


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
    worker: bool  # an xdist worker: judges, gives no verdict of its own
    started: float = field(default_factory=time.monotonic)
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    results: dict[str, Result] = field(default_factory=dict)
    target: Target | None = None
    determinism: Determinism | None = None
    features: Features | None = None
    progress: RunProgress | None = None
    context_dir: Path | None = None  # the controller's: where the workers read the context
    other_failures: int = 0  # failed tests that are not properties (a project's own, beside them)
    met: list[MetError] = field(default_factory=list)  # the error statuses every property met
    held: dict[str, Result] = field(default_factory=dict)  # passive results, judged at the end
    internal_error: str | None = None  # the last line of an INTERNALERROR, when the run had one
    alone: AloneLock | None = None  # a worker's: how a timed-out property is judged again alone
    concurrency: Concurrency | None = None  # workers only: what two overlapping streams showed


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("plumbline", "Plumbline conformance")
    group.addoption("--plumbline-target", help="base URL of the server under test")
    group.addoption("--plumbline-model", help="model id to send (default: first in /v1/models)")
    group.addoption("--plumbline-api-key", default=None)
    group.addoption("--plumbline-second-api-key", default=None, help="a key of another workspace (ISO-*)")
    group.addoption("--plumbline-auth-header", choices=["x-api-key", "bearer"], default="x-api-key")
    group.addoption("--plumbline-timeout", type=float, default=120.0, help="seconds per answer")
    group.addoption("--plumbline-strict", action="store_true", help="SHOULD breakage gates too")
    group.addoption("--plumbline-profile", default=None, help="target profile (TOML)")
    group.addoption("--plumbline-report-dir", default="reports")
    group.addoption("--plumbline-run-id", default=None)
    group.addoption("--plumbline-baseline", default=None, help="expected failures (TOML)")
    group.addoption("--plumbline-update-baseline", action="store_true")
    group.addoption("--plumbline-seed", default=None, help="recorded in index.json")
    group.addoption(
        "--plumbline-api-version",
        choices=API_VERSIONS,
        default=API_VERSION,
        help=f"anthropic-version every request sends (default {API_VERSION}, the installed SDK's)",
    )


def pytest_configure(config: pytest.Config) -> None:
    url = config.getoption("plumbline_target")
    if not url:
        return  # not a conformance run (e.g. the project's own tests)
    _CONFIG[:] = [config]
    register_profiles(Path(config.getoption("plumbline_report_dir")))
    profile_file = config.getoption("plumbline_profile")
    profile = load_profile(Path(profile_file)) if profile_file else Profile()
    model = config.getoption("plumbline_model") or _first_model(url, config)
    target = TargetConfig(
        url=url,
        model=model,
        api_key=config.getoption("plumbline_api_key"),
        second_api_key=config.getoption("plumbline_second_api_key"),
        auth_header=config.getoption("plumbline_auth_header"),
        profile=profile,
        timeout=config.getoption("plumbline_timeout"),
        api_version=config.getoption("plumbline_api_version"),
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
        worker=hasattr(config, "workerinput"),
    )
    if not any(_within(arg, PROPERTIES_DIR) for arg in config.args):
        config.args.append(str(PROPERTIES_DIR))  # from a project's pytest: the catalogue joins its tests


def _within(arg: str, directory: Path) -> bool:
    path = Path(arg.split("::", 1)[0]).resolve()
    return path == directory or directory in path.parents


def _first_model(url: str, config: pytest.Config) -> str:
    """Without --model, use the first model the target lists."""
    key = config.getoption("plumbline_api_key")
    headers = {"anthropic-version": config.getoption("plumbline_api_version")}
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


# ---------------------------------------------------------------- what every property builds on


def _prepare(state: RunState, props: list[Property], *, workers: bool = False) -> None:
    """Before any property runs, in the process that gives the verdicts: what the requests may
    carry (greedy sampling, a prefill), the determinism probe, with `workers` what two
    overlapping streams show (conformance/concurrency.py), and the features the selected
    properties require, asked once and alone, shown once."""
    state.target = state.target or Target(state.config)
    state.features = Features(state.target)
    state.features.detect(REQUEST_SHAPING)
    _shape_requests(state.target, state.features)
    state.determinism = probe_determinism(state.target)
    state.target.deterministic = state.determinism.deterministic
    if workers:
        state.concurrency = probe_concurrency(state.target)
        state.console.print(
            f"concurrency: {escape(state.concurrency.detail)}{_consequence(state.concurrency)}"
        )
    state.features.detect(feature for prop in props for feature in (*prop.requires, *prop.detects))
    print_context(state.console, state.determinism, state.features.detected, state.config.api_version)
    # A passive property's verdict is shown last: it is given once every other one is in.
    order = [p.id for p in props if not p.passive] + [p.id for p in props if p.passive]
    state.progress = RunProgress(state.console, order, lambda result: print_verdict(state.console, result))


def _write_context(state: RunState) -> None:
    assert state.context_dir is not None
    assert state.determinism is not None
    assert state.features is not None
    context = {
        "determinism": state.determinism.as_dict(),
        "features": state.features.as_context(),
        "concurrency": state.concurrency.as_dict() if state.concurrency else None,
    }
    (state.context_dir / "context.json").write_text(json.dumps(context), encoding="utf-8")


def _read_context(state: RunState, target: Target, where: str) -> None:
    context = json.loads((Path(where) / "context.json").read_text(encoding="utf-8"))
    state.determinism = Determinism(**context["determinism"])
    target.deterministic = state.determinism.deterministic
    if context.get("concurrency"):
        state.concurrency = Concurrency(**context["concurrency"])
    state.features = Features(target)
    state.features.preset(context["features"])
    _shape_requests(target, state.features)


def _shape_requests(target: Target, features: Features) -> None:
    """What every request may carry, from what the target takes at the version judged."""
    target.greedy = features.support("sampling_parameters").supported
    target.prefill = features.support("prefill").supported


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    state = _state(config)
    if state is None:
        return None
    from conformance.properties import load_all
    from conformance.scheduling import PhasedScheduling

    load_all()  # the controller collects nothing itself: the catalogue, for the plan and results

    def prepare(props: list[Property]) -> bool:
        """What the run builds on; True where it must judge one request at a time."""
        _prepare(state, props, workers=True)
        _write_context(state)
        return state.concurrency is not None and state.concurrency.one_at_a_time

    return PhasedScheduling(config, log, prepare)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    state = _state(node.config)
    if state is None:
        return
    if state.context_dir is None:
        state.context_dir = Path(tempfile.mkdtemp(prefix="plumbline-context-"))
    node.workerinput[CONTEXT_KEY] = str(state.context_dir)


def session_target(config: pytest.Config) -> Target:
    """The run's Target, for the `target` fixture: a worker's reads what its controller found out."""
    state = _state(config)
    if state is None:
        raise pytest.UsageError("conformance properties need --plumbline-target")
    if state.worker:
        # Once per worker: the `features` fixture asks again, and its probes must go through the
        # same Target (and recorder) as the running property's requests.
        if state.target is None:
            where = config.workerinput[CONTEXT_KEY]  # type: ignore[attr-defined]
            state.target = Target(state.config)
            _read_context(state, state.target, where)
            state.alone = AloneLock(Path(where))
    elif state.target is None or state.features is None:
        _prepare(state, [])  # not collected through this plugin's hook (odd selections)
    assert state.target is not None
    return state.target


def session_features(config: pytest.Config) -> Features:
    """The run's knowledge of the target's optional features, for the `features` fixture."""
    session_target(config)
    state = _state(config)
    assert state is not None
    assert state.features is not None
    return state.features


def property_turn(config: pytest.Config, function: Any = None) -> contextlib.AbstractContextManager[None]:
    """Held while a property runs: beside the other workers' (shared), unless one of them is
    judging a property again alone (conformance/alone.py), or this one compares two answers on a
    target whose answers differ beside other requests (conformance/concurrency.py): then with
    the target to itself. One process: nothing to share."""
    state = _state(config)
    if state is None or state.alone is None:
        return contextlib.nullcontext()
    prop = property_of(function)
    if (
        prop is not None
        and prop.compares
        and state.concurrency is not None
        and state.concurrency.compare_alone
    ):
        return _alone(state.alone)
    return state.alone.shared()


@contextlib.contextmanager
def _alone(lock: AloneLock) -> Generator[None, None, None]:
    with lock.shared(), lock.alone():
        note("judged with the target to itself: its answers differ beside other requests (the run's probe)")
        yield


def _consequence(found: Concurrency) -> str:
    if found.one_at_a_time:
        return ": the run judges one request at a time"
    if found.compare_alone:
        return ": the comparisons of two answers run with the target to themselves"
    return ""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """A property that timed out while other workers' properties ran is judged again alone
    (a busy two-core machine is not the target's fault); one that met a 429 or 529 (the target
    limiting or busy: a gateway that cools a deployment down after the suite's invalid
    requests) is judged again once the target asked to be left (retry-after, at most
    LIMIT_WAIT_S); its second outcome is its verdict, and a second limit makes it SKIP."""
    try:
        return (yield)
    except Exception as exc:
        state = _state(item.config)
        prop = property_of(getattr(item, "obj", None))
        if state is None or state.target is None or prop is None:
            raise
        if state.alone is not None and timed_out(exc):
            with state.alone.alone():
                state.target.recorder.reset(prop.id)
                take_notes()  # the first try's
                note(
                    f"timed out while other properties ran ({exception_line(exc)[:160]}): judged again alone"
                )
                item.runtest()
            return None
        limit = _limited(prop, state.target)
        if limit is None or isinstance(exc, (NotJudged, Unsupported)):
            raise
        status, wait = limit
        time.sleep(wait)
        state.target.recorder.reset(prop.id)
        take_notes()
        note(f"the target answered HTTP {status} (limited or busy): judged again {wait:g} s later")
        try:
            item.runtest()
        except Exception as again:
            if isinstance(again, (NotJudged, Unsupported)) or _limited(prop, state.target) is None:
                raise
            raise NotJudged(
                f"the target answered HTTP {status} (limited or busy) both times: not judged"
            ) from again
        return None


LIMIT_WAIT_S = 30.0  # the longest a property waits for a limited target before its second try


def _limited(prop: Property, target: Target) -> tuple[int, float] | None:
    """(status, seconds to wait) where one of the property's requests met a 429 or 529: the
    target limiting or busy, which no property asks for, and which says nothing of its rule
    (ERR-031 judges those answers themselves). The RATE-* properties provoke 429s: theirs count."""
    if prop.area == "RATE":
        return None
    for exchange in target.recorder.exchanges:
        if exchange.status in (429, 529):
            headers = {k.lower(): v for k, v in exchange.response_headers.items()}
            try:
                wait = float(headers.get("retry-after", "5"))
            except ValueError:
                wait = 5.0
            return exchange.status, min(max(wait, 1.0), LIMIT_WAIT_S)
    return None


def enter_property(config: pytest.Config, function: Any, target: Target) -> None:
    """Before a property runs: its exchanges are recorded under its id. A feature it needs whose
    probe failed (accepted and not used, a 5xx, no answer) is one property's finding: that
    property (features.JUDGES) FAILs on the probe's exchange, the others SKIP naming it; a
    feature the target lacks makes it UNSUPPORTED."""
    prop = property_of(function)
    settled = target.settle_abandoned()
    target.recorder.reset(prop.id if prop else None)
    if settled is not None:
        what, waited = settled
        done = f"answered again after {waited:.1f} s" if waited is not None else "did not answer in time"
        note(f"before it, the target was left a request the suite gave up on ({what}); it {done}")
    state = _state(config)
    if prop is None or state is None or state.features is None:
        return
    # The features it `detects` it judges itself (SRVTOOL-015 each server tool's probe, CTX-005
    # each edit, DOC-005 citations): detected here so that they are known, nothing more.
    for feature in prop.detects:
        state.features.support(feature)
    needed = [state.features.support(feature) for feature in prop.requires]
    mine = [s for s in needed if s.failed and JUDGES.get(s.feature) == prop.id]
    others = [s for s in needed if s.failed and JUDGES.get(s.feature) != prop.id]
    if others:  # its probe's failure is another property's finding
        raise NotJudged("; ".join(s.reason for s in others), judged_by=JUDGES.get(others[0].feature))
    if mine:
        raise probe_failure(target, mine)
    absent = [s for s in needed if not s.supported]
    if absent:
        # One probe may speak for two features (tools and tool_calls): its words once.
        said = {support.detail: support.reason for support in reversed(absent)}
        raise Unsupported("; ".join(reversed(said.values())))


def probe_failure(target: Target, failed: list[Support]) -> ConformanceFailure:
    """The judge's verdict on its feature's failed probe, with the probe's exchange as evidence."""
    for support in failed:
        if support.evidence is not None:
            target.recorder.exchanges.append(Exchange.from_evidence(support.evidence))
    first = failed[0]
    return ConformanceFailure(
        f"{first.feature}: a request that uses it answered as if it were used, or refused with a 4xx",
        "; ".join(s.detail for s in failed),
        reason="feature-probe",
        subject=probe_subject(first),
    )


@pytest.hookimpl(trylast=True)  # after -k and -m deselect: the plan is what will run
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    state = _state(config)
    if state is None:
        return
    props: dict[pytest.Item, Property] = {}
    for item in items:
        prop = property_of(getattr(item, "obj", None))
        if prop is not None:
            props[item] = prop
        elif _within(str(item.path), PROPERTIES_DIR):
            raise pytest.UsageError(f"{item.nodeid} is not a declared property (@prop)")
    # A project's own tests first, as collected; then the properties in catalogue order, the
    # passive ones last (they judge what the others met).
    ordered = sorted(props, key=lambda i: (props[i].passive, props[i].id))
    items[:] = [item for item in items if item not in props] + ordered
    if not state.worker:  # a worker's controller prepares (conformance/scheduling.py)
        _prepare(state, sorted(props.values(), key=lambda p: p.id))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:  # shown here because the plumbline command turns pytest's terminal off
        console = Console(stderr=True)
        console.print(f"[bold magenta]harness error while collecting {escape(report.nodeid)}[/]")
        console.print(escape(str(report.longrepr)))


# ---------------------------------------------------------------- verdicts


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """Where the property ran (this process or a worker): its Result rides on the report."""
    outcome = yield
    state = _state(item.config)
    prop = property_of(getattr(item, "obj", None))
    if state is None or prop is None:
        return
    report: pytest.TestReport = outcome.get_result()
    if call.when == "call" or (call.when == "setup" and not report.passed):
        result = judge(prop, call, report, state.target)
        if os.environ.get(KEEP_EXCHANGES_ENV) and state.target is not None:
            write_exchanges(state.report_dir, prop.id, state.target.recorder.exchanges)
        # As JSON text: execnet, which carries a worker's report to the controller, cannot encode
        # every value a target may send (an int below -2**31 crashed the whole run); text it can.
        report.plumbline = _to_wire(result.as_wire())  # type: ignore[attr-defined]
        if state.target is not None:  # what it met, for the passive properties (passive.py)
            met = owned(errors_met(prop.id, state.target.recorder.exchanges), result)
            report.plumbline_met = _to_wire([error.as_wire() for error in met])  # type: ignore[attr-defined]
        if result.verdict in (Verdict.UNSUPPORTED, Verdict.WARN, Verdict.SKIP):
            report.outcome = "skipped"  # pytest's own tally is not the gate
            report.longrepr = ("", 0, result.verdict.value)


def _to_wire(data: Any) -> str:
    return json.dumps(data, default=str, ensure_ascii=False)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Where the verdicts are given (this process, or the xdist controller)."""
    state = _state(_CONFIG[0]) if _CONFIG else None
    if state is None or state.worker:
        return
    wire = getattr(report, "plumbline", None)
    if not isinstance(wire, str):
        crashed = property_of_nodeid(report.nodeid) if report.failed else None
        if crashed is not None:  # xdist's report of a worker that died while judging it
            _record(state, _not_judged(crashed, f"its worker died while judging it ({report.longrepr})"))
        else:
            state.other_failures += report.failed  # not a property: pytest's own verdict counts
        return
    data = json.loads(wire)
    result = Result.from_wire(data, REGISTRY[data["id"]])
    state.met += [MetError.from_wire(error) for error in json.loads(getattr(report, "plumbline_met", "[]"))]
    if result.property.passive:
        state.held[result.property.id] = result
    else:
        _record(state, result)
    planned = state.progress.order if state.progress is not None else []
    if state.held and all(pid in state.results for pid in planned if pid not in state.held):
        _release_passive(state)


def _record(state: RunState, result: Result) -> None:
    state.results[result.property.id] = result
    if state.progress is None:  # a result before any plan (not expected): shown at once
        print_verdict(state.console, result)
    else:
        state.progress.record(result)


def _not_judged(prop: Property, why: str) -> Result:
    """The verdict of a property the run planned but never judged: an ERROR that says why."""
    return Result(prop, Verdict.ERROR, 0.0, reason="not-judged", message=f"not judged: {why}")


def _record_unjudged(state: RunState, why: str) -> None:
    """Every planned property without a verdict, as an ERROR in every report (a run cut short
    must not read as a complete one)."""
    planned = state.progress.order if state.progress is not None else []
    for pid in planned:
        if pid not in state.results and pid not in state.held:
            _record(state, _not_judged(REGISTRY[pid], why))


def _release_passive(state: RunState) -> None:
    """Every other result is in (or the run is over): the passive properties' verdicts."""
    for result in state.held.values():
        _record(state, judge_met(result, state.met))
    state.held.clear()


def _why_unjudged(state: RunState, exitstatus: int) -> str:
    if state.internal_error:
        return f"the run stopped on a harness error before it was judged ({state.internal_error})"
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        return "the run was interrupted before it was judged"
    return f"the run ended before it was judged (pytest exit status {int(exitstatus)})"


# `E   RuntimeError: words` in a formatted traceback (a worker's internal error reaches the
# controller as text).
_RAISED = re.compile(r"^(?:E\s+)?((?:[A-Za-z_][\w.]*)(?:Error|Exception|Exit|Interrupt)\b.*)$")


def _raised(text: str) -> str | None:
    """The last exception line of a formatted traceback, if it holds one."""
    found = [m[1] for m in map(_RAISED.match, (line.strip() for line in text.splitlines())) if m]
    return found[-1][:300] if found else None


def pytest_internalerror(excrepr: Any, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """The first one is kept, to say why the properties not judged yet never were (an xdist
    worker's internal error ends the whole run; what follows it is its aftermath)."""
    state = _state(_CONFIG[0]) if _CONFIG else None
    if state is not None and not state.worker and state.internal_error is None:
        state.internal_error = _raised(str(excinfo.value)) or exception_line(excinfo.value)


def pytest_sessionstart(session: pytest.Session) -> None:
    state = _state(session.config)
    if state is None or state.worker:
        return
    cfg = state.config
    state.console.rule(
        escape(f"Plumbline {__version__} (catalogue {catalogue_hash()}) — {cfg.url} — model {cfg.model}")
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = _state(session.config)
    if state is None or state.worker:
        return
    _record_unjudged(state, _why_unjudged(state, exitstatus))
    _release_passive(state)  # a run cut short: judged on what it met
    if state.progress is not None:
        state.progress.close()
    if state.context_dir is not None:
        shutil.rmtree(state.context_dir, ignore_errors=True)
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
        "suite": {
            "name": "plumbline",
            "version": __version__,
            "catalogue": catalogue_hash(),
            "sdk": anthropic.__version__,
        },
        "target": {
            "url": state.config.url,
            "model": state.config.model,
            "slug": state.config.slug,
            "api_version": state.config.api_version,
            "profile": str(state.config.profile.source) if state.config.profile.source else None,
            "deterministic": state.target.deterministic if state.target else None,
            "features": sorted(state.config.profile.features),
        },
        "determinism": state.determinism.as_dict() if state.determinism else None,
        "concurrency": state.concurrency.as_dict() if state.concurrency else None,
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
    has_baseline = bool(run["baseline_found"])
    print_summary(state.console, results, gate.as_dict(), directory, has_baseline=has_baseline)
    session.exitstatus = (
        EXIT_HARNESS if harness_failed else max(gate.exit_code, int(state.other_failures > 0))
    )
