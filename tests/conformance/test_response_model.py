"""MSG-024 (issue 42, point 5): the answer names the model asked for, the same streamed or not.
One gateway answered every request with its own default model, another named its backend's
model only when streaming; a model the profile's [aliases] map the requested name to is fine."""

from __future__ import annotations

import pytest

from .fault_proxy import Fault, FaultProxy, running_proxy
from .faults import edit_payloads
from .suite import run_suite, selecting

pytestmark = [pytest.mark.mlx, pytest.mark.slow]


def _judged(url: str, tmp_path, profile, fault: Fault) -> dict:
    with running_proxy(FaultProxy(url, everywhere=fault)) as proxied:
        _, index, _ = run_suite(proxied, tmp_path, profile=profile, extra=selecting(["MSG-024"]))
    [judged] = index["properties"]
    return judged


def test_a_model_named_only_when_streaming_fails_both_ways(tiny_random_url, proof_profile, tmp_path):
    fault = Fault(
        "the backend's model named in message_start",
        frames=edit_payloads("message_start", lambda p: p["message"].update(model="backend/smollm2")),
    )
    judged = _judged(tiny_random_url, tmp_path, proof_profile, fault)
    assert judged["verdict"] == "FAIL", judged
    assert {case["case"] for case in judged["subcases"]} == {
        "the stream's message_start",
        "streamed and not alike",
    }


def test_a_model_the_profile_aliases_the_name_to_is_the_model_asked_for(tiny_random_url, tmp_path):
    """The profile says the target answers `tiny-random` with `served-name`: naming it passes."""
    profile = tmp_path / "aliased.toml"
    profile.write_text('name = "proof"\ndeterministic = true\n\n[aliases]\n"tiny-random" = "served-name"\n')
    renamed = Fault(
        "the alias target named",
        response=lambda r, resp: (
            resp.with_json({**resp.json, "model": "served-name"})
            if isinstance(resp.json, dict) and resp.json.get("type") == "message"
            else resp
        ),
        frames=edit_payloads("message_start", lambda p: p["message"].update(model="served-name")),
    )
    assert _judged(tiny_random_url, tmp_path, profile, renamed)["verdict"] == "PASS"
