"""Run the whole conformance suite as a user would (`python -m conformance`) and read its
index.json: shared by the fault proofs, the structural sweep and the end-to-end checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

API_KEY = "plumbline-proof-key"
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
    extra: Sequence[str] = (),
    timeout: float = 900,
) -> tuple[int, dict[str, Any], str]:
    """(exit code, index.json, console output) of one run against `url`."""
    command = [sys.executable, "-m", "conformance", "--target", url, "--model", model]
    # One process unless a test asks for workers: on a two-core machine that also runs the
    # target, the harness's own work is what workers would share (test_jobs.py judges --jobs).
    jobs = [] if "--jobs" in extra else ["--jobs", "1"]
    command += ["--report-dir", str(report_dir), "--seed", "1", *jobs, *extra]
    if api_key:
        command += ["--api-key", api_key]
    if profile is not None:
        command += ["--profile", str(profile)]
    env = {**os.environ, "PLUMBLINE_HYPOTHESIS_PROFILE": "ci"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    output = done.stdout + done.stderr
    indexes = sorted(report_dir.glob("*/*/index.json"), key=lambda p: p.stat().st_mtime)
    assert indexes, f"no report written:\n{output[-6000:]}"
    return done.returncode, json.loads(indexes[-1].read_text()), output


def selecting(pids: Sequence[str]) -> list[str]:
    """`-k` for exactly these properties (their test functions are named after the ids)."""
    return ["-k", " or ".join(pid.lower().replace("-", "_") for pid in pids)]


def verdicts(index: dict[str, Any]) -> dict[str, str]:
    return {p["id"]: p["verdict"] for p in index["properties"]}
