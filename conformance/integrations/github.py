"""The GitHub Action's judging step (action.yml at the repository root).

`python -m conformance.integrations.github` reads the action's inputs from the environment
(`INPUT_*`, as action.yml maps them; the API key as `PLUMBLINE_API_KEY`, which plumbline reads
itself, so that it is never on a command line), runs `plumbline` with them into the report directory, and
then tells GitHub what happened:

- the run's summary.md is appended to the job summary (`$GITHUB_STEP_SUMMARY`);
- each new failure, and each property the harness could not judge (ERROR), is one `::error`
  workflow command: property id, title, what was seen;
- `exit-code`, `report-dir` and `run-dir` are written to the step's outputs (`$GITHUB_OUTPUT`);

and it exits with plumbline's own code (0 conformant, 1 a new failure, 2 a harness error).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conformance.cli import main as plumbline

__all__ = ["annotation", "main", "plumbline_args"]

# The longest line an annotation shows of what the target did.
ANNOTATION_CHARS = 300


def plumbline_args(env: Mapping[str, str]) -> list[str]:
    """The `plumbline` command line the inputs ask for."""
    args = ["--target", env["INPUT_TARGET"], "--report-dir", env["INPUT_REPORT_DIR"]]
    for name in ("MODEL", "PROFILE", "BASELINE", "JOBS", "API_VERSION"):
        if env.get(f"INPUT_{name}"):
            args += [f"--{name.lower().replace('_', '-')}", env[f"INPUT_{name}"]]
    if env.get("INPUT_STRICT", "false").strip().lower() == "true":
        args.append("--strict")
    return args + shlex.split(env.get("INPUT_ARGS", ""))


def _escape(text: str, *, property_value: bool = False) -> str:
    """A workflow command's escaping: data escapes %, CR and LF; a property also : and ,."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_value else text


def annotation(prop: Mapping[str, Any]) -> str:
    """`::error title=MSG-001 …::what was seen`, on one line."""
    seen = prop.get("message") or (
        f"got {prop['actual']}" if prop.get("actual") is not None else prop["verdict"]
    )
    line = " ".join(str(seen).split())
    if len(line) > ANNOTATION_CHARS:
        line = line[: ANNOTATION_CHARS - 1] + "…"
    title = _escape(f"{prop['id']} {prop['title']}", property_value=True)
    return f"::error title={title}::{_escape(line)}"


def _newest_run(report_dir: Path) -> Path | None:
    runs = sorted(report_dir.glob("*/*/index.json"), key=lambda path: path.stat().st_mtime)
    return runs[-1].parent if runs else None


def _append(path: str | None, text: str) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(text)


def main(env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    if not env.get("INPUT_TARGET"):
        print("::error title=Plumbline::the `target` input is required (the base URL of the server to judge)")
        return 2
    report_dir = Path(env["INPUT_REPORT_DIR"])
    code = plumbline(plumbline_args(env))
    run_dir = _newest_run(report_dir)
    _append(
        env.get("GITHUB_OUTPUT"),
        f"exit-code={code}\nreport-dir={report_dir}\nrun-dir={run_dir or ''}\n",
    )
    if run_dir is None:
        print(f"::error title=Plumbline::no report was written (exit code {code}); see the step's log")
        return code
    _append(env.get("GITHUB_STEP_SUMMARY"), (run_dir / "summary.md").read_text(encoding="utf-8") + "\n")
    index = json.loads((run_dir / "index.json").read_text(encoding="utf-8"))
    flagged = {*index["gate"]["new_failures"], *index["gate"]["harness_errors"]}
    for prop in index["properties"]:
        if prop["id"] in flagged:
            print(annotation(prop))
    return code


if __name__ == "__main__":
    sys.exit(main())
