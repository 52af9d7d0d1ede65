"""The short soak of `nox -s soak` (scripts/soak.py): concurrent streaming clients on
tiny-random, a quarter hanging up mid-stream, with every check of the long one."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.mlx

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "soak.py"


def test_short_soak_passes_every_check() -> None:
    spec = importlib.util.spec_from_file_location("soak_script", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    report = asyncio.run(module.soak("tiny-random", clients=16, requests=64, max_tokens=24))
    assert report.abandoned > 0, "no client hung up: the run proves nothing about freeing"
    assert report.completed > 0
    assert report.as_json()["passed"], report.as_json()
