"""What every feature's proof module asserts of a run through the fault proxy: each judged
property meets its own fault (faults.fault_catalogue) and breaks as its level says."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from conformance.catalogue import REGISTRY, Level

from .fault_proxy import FaultProxy, running_proxy
from .faults import fault_catalogue
from .suite import API_KEY, verdicts

Run = Callable[[str], tuple[int, dict[str, Any], str]]  # url -> (exit code, index.json, output)


def broken(pid: str) -> str:
    """The verdict a property must get under its fault: FAIL for a MUST, WARN otherwise."""
    return "FAIL" if REGISTRY[pid].level is Level.MUST else "WARN"


def assert_each_fails_on_its_fault(url: str, judged: Iterable[str], run: Run) -> tuple[dict[str, Any], str]:
    """Run `judged` against `url` through the proxy with every property's own fault: each breaks
    (`broken`), every fault is exercised, and the gate exits 1. Returns (index.json, output)."""
    proxy = FaultProxy(url, fault_catalogue(API_KEY))
    with running_proxy(proxy) as proxied:
        code, index, output = run(proxied)
    expected = {pid: broken(pid) for pid in judged}
    got = verdicts(index)
    wrong = {pid: got.get(pid) for pid in expected if got.get(pid) != expected[pid]}
    details = [p for p in index["properties"] if p["id"] in wrong]
    assert not wrong, f"{wrong}\n{json.dumps(details, indent=1)[:6000]}\n{output[-3000:]}"
    assert set(proxy.applied) == set(expected), "every fault was exercised"
    assert code == 1
    return index, output
