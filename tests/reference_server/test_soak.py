"""The short soak of `nox -s soak` (scripts/soak.py): concurrent streaming clients on
tiny-random, a quarter hanging up mid-stream, with every check of the long one. It runs in its
own process, as `nox -s soak` does, so that the memory figure is the server's alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.mlx

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "soak.py"


def test_short_soak_passes_every_check() -> None:
    args = ["--model", "tiny-random", "--clients", "16", "--requests", "64", "--max-tokens", "24"]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.stdout.strip(), done.stderr[-2000:]
    report = json.loads(done.stdout[done.stdout.index("{") :])
    assert report["abandoned"] > 0, "no client hung up: the run proves nothing about freeing"
    assert report["completed"] > 0
    # One check at a time, so a failure names the one that broke.
    assert report["server_errors"] == []
    assert report["error_events"] == []
    assert report["mismatches"] == []
    assert report["drained_in_s"] is not None
    assert report["drained_in_s"] <= 1.0
    assert report["memory_growth"] <= 0.10, report
    assert report["passed"]
    assert done.returncode == 0
