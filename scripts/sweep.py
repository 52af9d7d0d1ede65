"""The full structural-fault sweep: the whole catalogue once per fault, through the fault proxy.

Every structural fault of tests/conformance/structural.py (each documented field of each
response shape missing, null, of the wrong type; non-JSON bodies; replaced statuses) and every
fault of tests/conformance/faults.py, each applied to every exchange of one suite run against
the reference server on tiny-random. A control run through the proxy with no fault comes first.

    python scripts/sweep.py [--jobs 2] [--only SUBSTRING ...] [--out DIR]

Writes, under --out (default reports/sweep/<UTC time>/): results.jsonl (one line per fault, as
it finishes), summary.json and summary.md (per fault, the ERROR properties with their message
and whether the owners failed). Exit 0 when no property ERRORs and every owner FAILs or WARNs.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import re
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from conformance.wire.launcher import reference_server  # noqa: E402
from tests.conformance.fault_proxy import Fault  # noqa: E402
from tests.conformance.structural import (  # noqa: E402
    Outcome,
    StructuralFault,
    all_faults,
    headline,
    judge,
    shape_of,
)
from tests.conformance.suite import API_KEY, PROOF_PROFILE  # noqa: E402

CONTROL = StructuralFault("control:no-fault", (), Fault("the proxy changes nothing"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=2, help="suites at once, each with its own server")
    parser.add_argument("--only", nargs="*", default=[], help="run faults whose name contains one of these")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--timeout", type=float, default=600, help="seconds for one suite run")
    parser.add_argument("--summarize", type=Path, help="only rewrite the summaries of DIR/results.jsonl")
    args = parser.parse_args(argv)
    if args.summarize is not None:
        # Owners are re-read from today's fault list: the recorded verdicts are the data.
        owners = {f.name: f.owners for f in [CONTROL, *all_faults(API_KEY)]}
        lines = (args.summarize / "results.jsonl").read_text().splitlines()
        recorded = [_outcome(json.loads(line), owners) for line in lines if line.strip()]
        return summarize(args.summarize, recorded, None, args.jobs)
    os.chdir(ROOT)  # `python -m conformance` and `python -m reference_server` run from the checkout
    logging.getLogger("uvicorn.error").addFilter(_OneLineProxyCrashes())

    faults = [CONTROL, *all_faults(API_KEY)]
    if args.only:
        faults = [f for f in faults if any(part in f.name for part in args.only)]
    out: Path = args.out or ROOT / "reports" / "sweep" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out.mkdir(parents=True, exist_ok=True)
    profile = out / "proof.toml"
    profile.write_text(PROOF_PROFILE)
    counts = Counter(shape_of(f.name) for f in faults)
    print(f"{len(faults)} runs, {args.jobs} at once: {dict(counts)}\nwriting {out}", flush=True)

    started = time.monotonic()
    outcomes: list[Outcome] = []
    with ExitStack() as stack:
        servers: queue.Queue[str] = queue.Queue()
        for i in range(max(1, args.jobs)):
            log = out / f"server-{i}.log"
            servers.put(
                stack.enter_context(
                    reference_server("tiny-random", log=log, api_key=API_KEY, args=["--ping-interval", "0.5"])
                )
            )

        def run(fault: StructuralFault) -> Outcome:
            url = servers.get()
            try:
                report_dir = out / "runs" / re.sub(r"[^A-Za-z0-9._-]+", "_", fault.name)
                return judge(fault, url, report_dir, profile=profile, timeout=args.timeout)
            except Exception as exc:  # one broken run must not end a sweep of hours
                return Outcome(
                    fault.name, dict.fromkeys(fault.owners), problem=f"{type(exc).__name__}: {exc}"
                )
            finally:
                servers.put(url)

        with (
            ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool,
            (out / "results.jsonl").open("w") as sink,
        ):
            futures = [pool.submit(run, fault) for fault in faults]
            for done, future in enumerate(as_completed(futures), 1):
                outcome = future.result()
                outcomes.append(outcome)
                sink.write(json.dumps(outcome.to_json()) + "\n")
                sink.flush()
                mark = "ok " if outcome.ok else "BAD"
                errors = ",".join(sorted(outcome.errors)) or "-"
                print(
                    f"[{done}/{len(faults)}] {mark} {outcome.name} ({outcome.seconds:.0f} s) "
                    f"ERROR: {errors}; owners: {outcome.owners}",
                    flush=True,
                )
    order = {f.name: i for i, f in enumerate(faults)}
    outcomes.sort(key=lambda o: order[o.name])
    return summarize(out, outcomes, time.monotonic() - started, args.jobs)


def summarize(out: Path, outcomes: list[Outcome], wall: float | None, jobs: int) -> int:
    """Write summary.json and summary.md; `wall` None: unknown (summarized afterwards)."""
    counts = Counter(shape_of(o.name) for o in outcomes)
    summary = {
        "wall_s": None if wall is None else round(wall, 1),
        "jobs": jobs,
        "faults_per_shape": dict(counts),
        "outcomes": [o.to_json() for o in outcomes],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "summary.md").write_text(markdown(outcomes, counts, wall, jobs))
    print(f"\n{out / 'summary.md'}\n{out / 'summary.json'}")
    return 0 if all(o.ok for o in outcomes) else 1


def _outcome(data: dict[str, Any], owners: dict[str, tuple[str, ...]]) -> Outcome:
    names = owners.get(data["name"], tuple(data["owners"]))
    return Outcome(
        data["name"],
        {pid: data["verdicts"].get(pid) for pid in names} if data["verdicts"] else dict.fromkeys(names),
        errors=data["errors"],
        verdicts=data["verdicts"],
        exit_code=data["exit_code"],
        seconds=data["seconds"],
        problem=data["problem"],
    )


class _OneLineProxyCrashes(logging.Filter):
    """A fault hook that crashes (e.g. on a request body that is a JSON list) makes the proxy
    answer 500, and uvicorn logs a whole traceback: keep its last line only. uvicorn re-applies
    its logging config whenever a proxy starts, so a filter (which it keeps) rather than a level."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("Exception in ASGI application") and record.exc_info:
            error = record.exc_info[1]
            record.msg, record.args = f"fault proxy answered 500: {type(error).__name__}: {error}", ()
            record.exc_info, record.exc_text = None, None
        return True


def first_line(text: str, limit: int = 200) -> str:
    line = headline(text).replace("|", "\\|")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def markdown(outcomes: list[Outcome], counts: Counter[str], wall: float | None, jobs: int) -> str:
    bad_owner = [o for o in outcomes if not o.owners_failed and o.problem is None]
    with_errors = [o for o in outcomes if o.errors]
    broken = [o for o in outcomes if o.problem]
    lines = [
        "# Structural-fault sweep",
        "",
        f"{len(outcomes)} suite runs"
        + (f" in {wall / 60:.1f} min ({jobs} at once). " if wall is not None else ". ")
        + f"{len(with_errors)} runs with an ERROR property, {len(bad_owner)} whose owners did not "
        f"FAIL/WARN, {len(broken)} that broke.",
        "",
        "| shape | faults |",
        "|---|---|",
        *(f"| {shape} | {n} |" for shape, n in counts.items()),
        "",
    ]
    control = next((o for o in outcomes if o.name == CONTROL.name), None)
    if control is not None:
        odd = {pid: v for pid, v in control.verdicts.items() if v != "PASS"}
        lines += [f"Control (proxy, no fault): not PASS: {odd or 'none'}", ""]
    by_property: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for outcome in with_errors:
        for pid, message in outcome.errors.items():
            by_property[pid].append((outcome.name, first_line(message)))
    if by_property:
        lines += ["## ERRORs by property", "", "| property | runs | distinct first lines |", "|---|---|---|"]
        for pid, hits in sorted(by_property.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            distinct = list(dict.fromkeys(line for _, line in hits))
            shown = "<br>".join(f"`{line}`" for line in distinct[:4]) + (
                f" (+{len(distinct) - 4} more)" if len(distinct) > 4 else ""
            )
            lines.append(f"| {pid} | {len(hits)} | {shown} |")
        lines += [
            "",
            "## ERRORs by fault",
            "",
            "| fault | property | first line of the message |",
            "|---|---|---|",
        ]
        for outcome in with_errors:
            for pid, message in sorted(outcome.errors.items()):
                lines.append(f"| {outcome.name} | {pid} | `{first_line(message)}` |")
        lines.append("")
    if bad_owner:
        lines += ["## Owners that did not FAIL or WARN", "", "| fault | owner verdicts |", "|---|---|"]
        lines += [f"| {o.name} | {o.owners} |" for o in bad_owner]
        lines.append("")
    if broken:
        lines += ["## Runs that broke", "", "| fault | problem |", "|---|---|"]
        lines += [f"| {o.name} | {first_line(o.problem or '')} |" for o in broken]
        lines.append("")
    lines += ["## Every run", "", "| fault | ERROR | owners | exit | s |", "|---|---|---|---|---|"]
    for o in outcomes:
        owners = ", ".join(f"{pid} {v}" for pid, v in o.owners.items()) or "-"
        errors = ", ".join(sorted(o.errors)) or "-"
        lines.append(f"| {o.name} | {errors} | {owners} | {o.exit_code} | {o.seconds:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
