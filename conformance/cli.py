"""`plumbline`: judge a server that claims the Anthropic Messages API.

    plumbline --target http://127.0.0.1:8000 [--model M] [--api-key K] [--strict]
    plumbline                       # no target: start the reference server and judge it
    plumbline --list                # the catalogue, without running anything
    plumbline -k stream_003         # one property

Exit status: 0 conformant (against the baseline), 1 a new failure or a stale baseline
entry, 2 harness error.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

__all__ = ["main"]

PACKAGE_DIR = Path(__file__).resolve().parent
PROPERTIES_DIR = PACKAGE_DIR / "properties"
REFERENCE_PROFILE = PACKAGE_DIR / "profiles" / "reference.toml"
DEFAULT_SERVER_MODEL = "smollm2-135m-instruct"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="plumbline", description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", help="base URL of the server under test (default: start ours)")
    parser.add_argument("--model", help="model id to send (default: the first /v1/models lists)")
    parser.add_argument("--api-key", default=os.environ.get("PLUMBLINE_API_KEY"))
    parser.add_argument("--auth-header", choices=["x-api-key", "bearer"], default="x-api-key")
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds to wait for one answer; a target that answers other requests but not one in "
        "time fails that property (default 120)",
    )
    parser.add_argument("--strict", action="store_true", help="SHOULD breakage fails the gate too")
    parser.add_argument("--profile", type=Path, help="target profile (TOML)")
    parser.add_argument("--baseline", type=Path, help="expected failures (TOML); overrides the profile's")
    parser.add_argument("--update-baseline", action="store_true", help="write today's failures as expected")
    parser.add_argument("--list", action="store_true", help="print the catalogue and exit")
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
    args = build_parser().parse_args(argv)
    if args.list:
        print_catalogue(Console())
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
    from conformance.launcher import ServerFailedToStart, reference_server

    console = Console(stderr=True)
    # Our own server runs with a key, so the AUTH properties are judged too.
    args.api_key = args.api_key or secrets.token_urlsafe(16)
    log = args.report_dir / "reference" / run_id / "server.log"
    console.print(escape(f"starting the reference server ({args.server_model}); log: {log}"))
    try:
        with reference_server(args.server_model, log=log, args=args.server_arg, api_key=args.api_key) as url:
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
    if model:
        pytest_args.append(f"--plumbline-model={model}")
    if args.api_key:
        pytest_args.append(f"--plumbline-api-key={args.api_key}")
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
    return int(pytest.main(pytest_args))


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
        table.add_row(
            Text(prop.id),
            Text(prop.level.value),
            Text(prop.title),
            Text(f"{prop.citation.url}\n{prop.citation.requirement}"),
        )
    console.print(table)


if __name__ == "__main__":
    sys.exit(main())
