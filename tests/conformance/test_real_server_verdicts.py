"""Issue 33: what real servers showed the harness. Each deviation a peer made (a stream cut
short, a tool type accepted and ignored, a 500 on a probe, ids of another API, a prefill echoed,
a cause that several properties restated) is injected by the fault proxy in front of the
reference server (tiny-random), and the run must give one honest verdict for it."""

from __future__ import annotations

import pytest

from .fault_proxy import Fault, FaultProxy, Frame, Request, running_proxy
from .suite import run_suite, verdicts

pytestmark = [pytest.mark.mlx, pytest.mark.slow]


def _cut_after_start(_: Request, frames: list[Frame]) -> list[Frame]:
    """A backend that cut every stream short under load: message_start, then nothing."""
    return frames[:1]


def test_a_stream_with_no_content_block_gives_no_pass_to_the_block_rules(
    tiny_random_url, proof_profile, tmp_path
):
    """STREAM-008 and STREAM-011 passed on such streams: every block rule is SKIP, saying why
    and naming STREAM-009, which FAILs the cut stream."""
    cut = Fault("every stream cut after message_start", frames=_cut_after_start)
    selection = "stream_005 or stream_006 or stream_007 or stream_008 or stream_009 or stream_011 or stream_020"
    with running_proxy(FaultProxy(tiny_random_url, everywhere=cut)) as url:
        code, index, output = run_suite(url, tmp_path, profile=proof_profile, extra=["-k", selection])
    by_id = {p["id"]: p for p in index["properties"]}
    assert by_id["STREAM-009"]["verdict"] == "FAIL", output[-3000:]
    for pid in ("STREAM-005", "STREAM-006", "STREAM-007", "STREAM-008", "STREAM-011", "STREAM-020"):
        assert by_id[pid]["verdict"] == "SKIP", (pid, by_id[pid])
        assert by_id[pid]["judged_by"] == "STREAM-009"
        assert "nothing to judge" in by_id[pid]["message"]
    assert code == 1
    assert verdicts(index).keys() == by_id.keys()
