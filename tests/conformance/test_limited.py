"""A target that limits the run is not failed for it: LiteLLM put its deployment in cooldown
after the suite's deliberately invalid requests (its router counts them as the deployment's
failures) and answered 31 properties of one run 429 `rate_limit_error` "Try again in 5 seconds",
while the next run met none. A property that meets a 429 or 529 is judged again once the target
asked to be left; a second limit makes it SKIP, never FAIL (ERR-031 judges the answers)."""

from __future__ import annotations

import time

import pytest

from .fault_proxy import Fault, FaultProxy, Request, Response, running_proxy
from .faults import error
from .suite import run_suite, selecting, verdicts

pytestmark = [pytest.mark.mlx, pytest.mark.slow]


class Cooldown:
    """Every request of one property answered 429 (retry-after 1) for `seconds` from its first,
    or for ever (`seconds=None`)."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.started: float | None = None

    def __call__(self, request: Request) -> Request | Response:
        now = time.monotonic()
        self.started = self.started or now
        if self.seconds is None or now - self.started < self.seconds:
            limited = error(429, "rate_limit_error", "All deployments for selected model are in cooldown.")
            return Response(limited.status, {**limited.headers, "retry-after": "1"}, limited.body)
        return request


def test_a_limited_property_is_judged_again_and_never_failed_for_it(tiny_random_url, proof_profile, tmp_path):
    faults = {
        "MSG-002": Fault("a cooldown of 0.8 s", request=Cooldown(0.8)),
        "MSG-003": Fault("limited for ever", request=Cooldown(None)),
    }
    with running_proxy(FaultProxy(tiny_random_url, faults)) as url:
        code, index, output = run_suite(
            url, tmp_path, profile=proof_profile, extra=selecting(["MSG-002", "MSG-003"])
        )
    assert verdicts(index) == {"MSG-002": "PASS", "MSG-003": "SKIP"}, output[-3000:]
    by_id = {p["id"]: p for p in index["properties"]}
    assert "judged again 1 s later" in " ".join(by_id["MSG-002"]["notes"])
    assert "HTTP 429 (limited or busy) both times" in by_id["MSG-003"]["message"]
    assert code == 0
