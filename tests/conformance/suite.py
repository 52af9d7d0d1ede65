"""Run the whole conformance suite as a user would (`python -m conformance`, forked from a warm
interpreter: warm_runs.py) and read its index.json: shared by the fault proofs, the structural
sweep and the end-to-end checks."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import warm_runs

API_KEY = "plumbline-proof-key"
# A key of the judged server's second workspace (conformance/wire/launcher.py writes its keys file).
SECOND_API_KEY = "plumbline-proof-second-key"
SCRIPTED_PROFILE = 'name = "scripted"\ndeterministic = true\n'
PROOF_PROFILE = """
name = "proof"
deterministic = true
max_silence_seconds = 2

[features]
mcp = true  # nothing but a profile declares the MCP connector (no probe can)
"""


def run_suite(
    url: str,
    report_dir: Path,
    *,
    profile: Path | None = None,
    model: str = "tiny-random",
    api_key: str | None = API_KEY,
    second_api_key: str | None = SECOND_API_KEY,
    extra: Sequence[str] = (),
    timeout: float = 900,
) -> tuple[int, dict[str, Any], str]:
    """(exit code, index.json, console output) of one run against `url`."""
    args = ["--target", url, "--model", model]
    # One process unless a test asks for workers: on a two-core machine that also runs the
    # target, the harness's own work is what workers would share (test_jobs.py judges --jobs).
    jobs = [] if "--jobs" in extra else ["--jobs", "1"]
    args += ["--report-dir", str(report_dir), "--seed", "1", *jobs, *extra]
    if api_key:
        args += ["--api-key", api_key]
    if second_api_key:
        args += ["--second-api-key", second_api_key]
    if profile is not None:
        args += ["--profile", str(profile)]
    env = {**os.environ, "PLUMBLINE_HYPOTHESIS_PROFILE": "ci"}
    code, stdout, stderr = warm_runs.run(args, env, timeout=timeout)  # python -m conformance ARGS
    output = stdout + stderr
    indexes = sorted(report_dir.glob("*/*/index.json"), key=lambda p: p.stat().st_mtime)
    assert indexes, f"no report written:\n{output[-6000:]}"
    return code, json.loads(indexes[-1].read_text()), output


def selecting(pids: Sequence[str]) -> list[str]:
    """`-k` for exactly these properties (their test functions are named after the ids)."""
    return ["-k", " or ".join(pid.lower().replace("-", "_") for pid in pids)]


def verdicts(index: dict[str, Any]) -> dict[str, str]:
    return {p["id"]: p["verdict"] for p in index["properties"]}
