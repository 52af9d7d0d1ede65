"""`plumbline`: judge a server that claims the Anthropic Messages API.

    plumbline --target http://127.0.0.1:8000 [--model M] [--api-key K] [--strict]
    plumbline                       # no target: start the reference server and judge it
    plumbline --list                # the catalogue, without running anything
    plumbline -k stream_003         # one property
    plumbline --jobs 1              # one property at a time (default: 4 at once)
    plumbline matrix RUN_DIR... [--out DIR]           # several runs side by side
    plumbline diff OLD NEW [--json FILE] [--md FILE]  # what changed between two runs

Exit status: 0 conformant (against the baseline), 1 a new failure or a stale baseline
entry, 2 harness error. `diff`: 1 on a new failure; `matrix` and `diff`: 2 on unreadable runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from conformance.versions import API_VERSIONS

__all__ = ["main"]

PACKAGE_DIR = Path(__file__).resolve().parent
PROPERTIES_DIR = PACKAGE_DIR / "properties"
REFERENCE_PROFILE = PACKAGE_DIR / "profiles" / "reference.toml"
DEFAULT_SERVER_MODEL = "smollm2-135m-instruct"
# The judged reference server pauses a server-tool turn after one generation, so that pause_turn
# and its resumption (SRVTOOL-010) are judged whatever the model does after a forced call, and
# its MCP connector may reach the MCP server the harness runs on loopback (SRVTOOL-011). Web
# fetch keeps refusing private addresses (SRVTOOL-007 judges that).
# Its web search runs on a small local index shipped with the reference profile (SRVTOOL-013).
WEB_INDEX = PACKAGE_DIR / "profiles" / "web-index"
# The pytest plugins a run loads (by module: plugin autoloading is off, see run_suite).
HYPOTHESIS_PLUGIN = "_hypothesis_pytestplugin"
XDIST_PLUGIN = "xdist.plugin"
NO_AUTOLOAD = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"
JUDGED_SERVER_ARGS = (
    # MSG-023 fills the window: 2048 tokens prefill in ~8 s on 2 cores, SmolLM2's own 8192 in
    # ~65 s per try (tiny-random's default is 2048 already).
    "--context-window",
    "2048",
    "--server-tool-iterations",
    "1",
    "--allow-private-mcp",
    "--web-search-index",
    str(WEB_INDEX),
    # Code execution in the host's sandbox (CODE-*; without one, refused with the reason).
    "--code-execution",
)
# Enough to keep a server busy while each worker waits on its answers; a server that batches
# requests answers four at once nearly as fast as one.
DEFAULT_JOBS = 4
# A worker costs a few seconds to start (pytest, the SDK, the catalogue): small selections run
# in one process.
PROPERTIES_PER_WORKER = 12


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="plumbline", description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", help="base URL of the server under test (default: start ours)")
    parser.add_argument("--model", help="model id to send (default: the first /v1/models lists)")
    parser.add_argument("--api-key", default=os.environ.get("PLUMBLINE_API_KEY"))
    parser.add_argument(
        "--second-api-key",
        default=os.environ.get("PLUMBLINE_SECOND_API_KEY"),
        help="a key of another workspace of the same target: the ISO-* properties judge that what one"
        " workspace makes the other cannot see (without it they are UNSUPPORTED)",
    )
    parser.add_argument("--auth-header", choices=["x-api-key", "bearer"], default="x-api-key")
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds to wait for one answer; a target that answers other requests but not one in "
        "time fails that property (default 120)",
    )
    parser.add_argument(
        "--api-version",
        choices=API_VERSIONS,
        help="the anthropic-version every request sends, raw and through the SDKs (default: what the "
        "installed SDK sends). VER-* send both on purpose, whatever this says",
    )
    parser.add_argument("--strict", action="store_true", help="SHOULD breakage fails the gate too")
    parser.add_argument(
        "--jobs",
        type=int,
        help=f"properties judged at once, by pytest-xdist workers (default: up to {DEFAULT_JOBS}, one "
        f"per {PROPERTIES_PER_WORKER} selected properties; 1: one at a time, in this process). Those "
        "that must run alone do so first, whatever the number",
    )
    parser.add_argument("--profile", type=Path, help="target profile (TOML)")
    parser.add_argument("--baseline", type=Path, help="expected failures (TOML); overrides the profile's")
    parser.add_argument("--update-baseline", action="store_true", help="write today's failures as expected")
    parser.add_argument("--list", action="store_true", help="print the catalogue and exit")
    parser.add_argument(
        "--version", action="store_true", help="print the suite's version and the catalogue's hash, and exit"
    )
    parser.add_argument("-k", dest="keyword", help="run matching properties only, e.g. stream_003")
    parser.add_argument("--report-dir", type=Path, default=Path("reports"))
    parser.add_argument("--seed", type=int, help="hypothesis seed (default: random, recorded)")
    parser.add_argument("--hypothesis-profile", choices=["ci", "default", "deep"])
    parser.add_argument(
        "--server-model",
        default=DEFAULT_SERVER_MODEL,
        help="model of the reference server started without --target",
    )
    parser.add_argument(
        "--server-arg",
        action="append",
        default=[],
        help="extra reference-server option (repeatable)",
    )
    parser.add_argument("--pytest-output", action="store_true", help="keep pytest's own terminal output")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Subcommands are dispatched on the first word, so `plumbline --target URL` keeps working.
    if argv and argv[0] in SUBCOMMANDS:
        return SUBCOMMANDS[argv[0]](argv[1:])
    args = build_parser().parse_args(argv)
    if args.list:
        print_catalogue(Console())
        return 0
    if args.version:
        print(version_line())
        return 0
    if args.hypothesis_profile:
        os.environ["PLUMBLINE_HYPOTHESIS_PROFILE"] = args.hypothesis_profile
    run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)
    with _target(args, run_id) as (url, model, profile):
        return run_suite(args, url=url, model=model, profile=profile, run_id=run_id)


@contextlib.contextmanager
def _target(args: argparse.Namespace, run_id: str) -> Iterator[tuple[str, str | None, Path | None]]:
    if args.target:
        yield args.target, args.model, args.profile
        return
    from conformance.wire.launcher import ServerFailedToStart, reference_server

    console = Console(stderr=True, soft_wrap=True)  # a path is never broken onto a line of its own
    # Our own server runs with a key, so the AUTH properties are judged too.
    args.api_key = args.api_key or secrets.token_urlsafe(16)
    # and a key of a second workspace, so the ISO properties are judged too.
    args.second_api_key = args.second_api_key or secrets.token_urlsafe(16)
    log = args.report_dir / "reference" / run_id / "server.log"
    console.print(escape(f"starting the reference server ({args.server_model}); log: {log}"))
    try:
        server_args = [*JUDGED_SERVER_ARGS, *args.server_arg]  # a --server-arg given wins (it comes last)
        with reference_server(
            args.server_model,
            log=log,
            args=server_args,
            api_key=args.api_key,
            second_api_key=args.second_api_key,
        ) as url:
            console.print(escape(f"reference server ready at {url}"))
            yield url, args.model or args.server_model, args.profile or REFERENCE_PROFILE
    except ServerFailedToStart as exc:
        console.print(f"[bold magenta]harness error:[/] {escape(str(exc))}")
        raise SystemExit(2) from None


def run_suite(
    args: argparse.Namespace, *, url: str, model: str | None, profile: Path | None, run_id: str
) -> int:
    import pytest

    seed = args.seed if args.seed is not None else secrets.randbelow(2**32)
    pytest_args = [
        str(PROPERTIES_DIR),
        "-c",
        str(PACKAGE_DIR / "pytest.ini"),
        "--rootdir",
        str(PACKAGE_DIR),
        "-p",
        "conformance.plugin",
        "-p",
        HYPOTHESIS_PLUGIN,
        "-p",
        "no:cacheprovider",
        f"--hypothesis-seed={seed}",
        f"--plumbline-target={url}",
        f"--plumbline-report-dir={args.report_dir}",
        f"--plumbline-run-id={run_id}",
        f"--plumbline-auth-header={args.auth_header}",
        f"--plumbline-timeout={args.timeout}",
        f"--plumbline-seed={seed}",
    ]
    if not args.pytest_output:
        pytest_args += ["-p", "no:terminal"]
    jobs = workers(args.jobs, selected(args.keyword))
    if jobs > 1:
        pytest_args += ["-p", XDIST_PLUGIN, "-n", str(jobs)]
    if args.api_version:
        pytest_args.append(f"--plumbline-api-version={args.api_version}")
    if model:
        pytest_args.append(f"--plumbline-model={model}")
    if args.api_key:
        pytest_args.append(f"--plumbline-api-key={args.api_key}")
    if args.second_api_key:
        pytest_args.append(f"--plumbline-second-api-key={args.second_api_key}")
    if args.strict:
        pytest_args.append("--plumbline-strict")
    if profile:
        pytest_args.append(f"--plumbline-profile={profile}")
    if args.baseline:
        pytest_args.append(f"--plumbline-baseline={args.baseline}")
    if args.update_baseline:
        pytest_args.append("--plumbline-update-baseline")
    if args.keyword:
        pytest_args += ["-k", args.keyword]
    # Only the plugins the harness names: others installed beside it (a test-order randomiser,
    # a rerunner of failures) would change what a run judges, and loading them all costs more
    # than a second a run. Set for the run only; xdist's workers, started within it, inherit it.
    autoload = os.environ.get(NO_AUTOLOAD)
    os.environ[NO_AUTOLOAD] = "1"
    try:
        return int(pytest.main(pytest_args))
    finally:
        if autoload is None:
            os.environ.pop(NO_AUTOLOAD, None)
        else:
            os.environ[NO_AUTOLOAD] = autoload


def selected(keyword: str | None) -> int:
    """How many properties `-k keyword` selects, matched as pytest matches it (a case-insensitive
    substring of the test's name or of its module's file name)."""
    from _pytest.mark.expression import Expression

    from conformance.catalogue import REGISTRY
    from conformance.properties import load_all

    load_all()
    if not keyword:
        return len(REGISTRY)
    expression = Expression.compile(keyword)
    count = 0
    for prop in REGISTRY.values():
        names = {prop.test_name.lower(), f"test_{_module_of(prop.test_name)}.py"}

        def matches(sub: str, /, **_: str | int | bool | None) -> bool:
            return any(sub.lower() in name for name in names)  # noqa: B023 (used at once)

        count += bool(expression.evaluate(matches))
    return count


def _module_of(test_name: str) -> str:
    import sys

    for name, module in sys.modules.items():
        if name.startswith("conformance.properties.test_") and hasattr(module, test_name):
            return name.rsplit(".test_", 1)[1]
    return ""


def workers(asked: int | None, properties: int) -> int:
    """The number of workers: as asked (never more than there are properties), else one per
    PROPERTIES_PER_WORKER selected, up to DEFAULT_JOBS."""
    if asked is not None:
        return max(1, min(asked, properties))
    return max(1, min(DEFAULT_JOBS, properties // PROPERTIES_PER_WORKER))


def version_line() -> str:
    """`plumbline 0.1.0 (catalogue 1a2b3c4d5e6f, 193 properties; anthropic SDK 2.17.0)`, and, in a
    checkout, what the SDK's types carry that the catalogue's spec lacks (sdk_surface.py)."""
    import anthropic

    from conformance import __version__
    from conformance.catalogue import REGISTRY, catalogue_hash
    from conformance.properties import load_all
    from conformance.reporting.sdk_surface import surface_diff

    load_all()
    judged = sum(not p.retired for p in REGISTRY.values())
    line = (
        f"plumbline {__version__} (catalogue {catalogue_hash()}, {judged} properties; "
        f"anthropic SDK {anthropic.__version__})"
    )
    diff = surface_diff()  # None in an installed wheel: the spec copy lives in a checkout
    return line if diff is None else f"{line}\n{diff.line()}"


def print_catalogue(console: Console) -> None:
    from conformance.catalogue import REGISTRY
    from conformance.properties import load_all

    load_all()
    table = Table(
        "id",
        "level",
        "title",
        "citation",
        title=f"Plumbline catalogue ({len(REGISTRY)} properties)",
    )
    for prop in sorted(REGISTRY.values(), key=lambda p: p.id):
        # Text, not markup: requirements quote patterns like ^[a-zA-Z0-9_-]{1,128}$.
        source = f"\nrests on {prop.source}" if prop.source else ""
        table.add_row(
            Text(prop.id),
            Text(prop.level.value),
            Text(prop.title),
            Text(f"{prop.citation.url}\n{prop.citation.requirement}{source}"),
        )
    console.print(table)


RUN_DIR_HELP = "a run directory (reports/<target>/<run-id>), or a target directory meaning its newest run"


def build_matrix_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plumbline matrix",
        description="Several runs side by side: writes matrix.html (self-contained) and matrix.md.",
    )
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help=RUN_DIR_HELP)
    parser.add_argument("--out", type=Path, default=Path("reports"), help="where to write (default: reports)")
    return parser


def build_diff_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plumbline diff",
        description="What changed between two runs. "
        "Exit 1 on a new failure, 0 otherwise, 2 on unreadable runs.",
    )
    parser.add_argument("old", type=Path, metavar="OLD", help=RUN_DIR_HELP)
    parser.add_argument("new", type=Path, metavar="NEW", help=RUN_DIR_HELP)
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the diff as JSON")
    parser.add_argument("--md", type=Path, metavar="FILE", help="write the diff as Markdown")
    return parser


def matrix_main(argv: Sequence[str]) -> int:
    from conformance.reporting.matrix import RunError, load_run, write_matrix

    args = build_matrix_parser().parse_args(argv)
    console = Console()
    try:
        runs = [load_run(path) for path in args.runs]
    except RunError as exc:
        Console(stderr=True, soft_wrap=True).print(f"[bold magenta]unreadable run:[/] {escape(str(exc))}")
        return 2
    page, table = write_matrix(runs, args.out)
    console.print(escape(f"matrix of {len(runs)} runs: {page} and {table}"))
    return 0


def diff_main(argv: Sequence[str]) -> int:
    import json

    from conformance.reporting.matrix import RunError, load_run
    from conformance.reporting.rundiff import diff_runs, print_diff, render_markdown

    args = build_diff_parser().parse_args(argv)
    try:
        diff = diff_runs(load_run(args.old), load_run(args.new))
    except RunError as exc:
        Console(stderr=True, soft_wrap=True).print(f"[bold magenta]unreadable run:[/] {escape(str(exc))}")
        return 2
    print_diff(diff, Console(), warnings=Console(stderr=True))
    for path, text in (
        (args.json, json.dumps(diff.as_dict(), indent=2, ensure_ascii=False) + "\n"),
        (args.md, render_markdown(diff)),
    ):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    return diff.exit_code


SUBCOMMANDS: dict[str, Callable[[Sequence[str]], int]] = {"matrix": matrix_main, "diff": diff_main}


if __name__ == "__main__":
    sys.exit(main())
