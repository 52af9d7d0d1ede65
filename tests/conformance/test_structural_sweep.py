"""No property ends in ERROR, whatever shape the target's answers take.

A target's malformed answer is the target's failure (FAIL or WARN), never a harness error.
Each case runs the whole catalogue against the reference server (tiny-random) through
`FaultProxy(url, everywhere=fault)`: one structural fault from structural.py (a field
missing, null or of the wrong type; a non-JSON body; a replaced status) or one fault of
faults.py, applied to every exchange. Each asserts that no property is ERROR and that the
fault's owner properties FAIL or WARN.

This file runs a fast selection spanning every shape: CI its `fields` group over the property
families that read those shapes, `nox -s deep` every group over the whole catalogue. The full sweep (every structural fault and every fault of faults.py) is `nox -s sweep`
(scripts/sweep.py), too slow for CI.
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from conformance.catalogue import REGISTRY
from conformance.properties import load_all

from .structural import (
    EVENT_SHAPES,
    StructuralFault,
    all_faults,
    combined,
    judge,
    shape_of,
    structural_faults,
)
from .suite import API_KEY

# One fault per family and response shape, combined so that each group is one run of the whole
# catalogue (about a minute here): fields missing, null or mistyped in a Message, two stream
# events, an error body, a count and a model list; a non-JSON body and non-JSON event data, with
# a replaced status on a third shape. Every other structural fault, and the faults of faults.py
# applied everywhere, run one at a time in `nox -s sweep`.
GROUPS = {
    "fields": (
        "message:usage:missing",
        "message_start:message.usage.input_tokens:wrong-type",
        "message_delta:usage.output_tokens:null",
        "error:error:missing",
        "count_tokens:input_tokens:wrong-type",
        "model_list:data:missing",
    ),
    "non-json-and-status": (
        "count_tokens:body:non-json",
        "content_block_delta:data:non-json",
        "message:status:500",
    ),
}
FAST = tuple(name for names in GROUPS.values() for name in names)
SHAPES = {
    "message",
    "count_tokens",
    "model_list",
    "model_info",
    "error",
    "error_event",
    "stream",
    *EVENT_SHAPES,
}


def _by_name() -> dict[str, StructuralFault]:
    return {fault.name: fault for fault in all_faults(API_KEY)}


# ------------------------------------------------------------------ no server


def test_every_shape_has_faults_with_unique_names_and_known_owners() -> None:
    faults = structural_faults()
    per_shape = collections.Counter(shape_of(f.name) for f in faults)
    assert set(per_shape) == SHAPES, per_shape
    names = [f.name for f in all_faults(API_KEY)]
    assert len(names) == len(set(names)), [n for n, c in collections.Counter(names).items() if c > 1]
    load_all()
    unknown = {f.name: f.owners for f in faults if not f.owners or not set(f.owners) <= set(REGISTRY)}
    assert not unknown, unknown
    for shape in SHAPES - {"stream"}:
        kinds = {f.name.rsplit(":", 1)[1] for f in faults if shape_of(f.name) == shape}
        assert {"missing", "non-json"} <= kinds, (shape, kinds)
    assert set(FAST) <= set(names)
    for group in GROUPS.values():  # a combined run needs each fault on its own shape
        assert len({shape_of(name) for name in group}) == len(group), group


def test_fields_follow_the_schemas() -> None:
    names = {f.name for f in structural_faults()}
    # Required fields go missing; nullable ones are never "set to null"; optional ones never go missing.
    assert "message:usage.input_tokens:missing" in names
    assert "message:stop_reason:wrong-type" in names
    assert "message:stop_reason:null" not in names  # null is allowed
    assert "message:stop_details:missing" not in names  # not required
    assert "content_block_delta:delta.text:wrong-type" in names  # first union branch: text_delta
    assert "model_list:data[0].id:missing" in names
    assert "message_delta:delta.stop_reason:missing" in names
    assert not any(n.startswith("message_start:message.content[0]") for n in names)  # always empty there


def test_owners_follow_the_stream_grammar() -> None:
    owners = {f.name: f.owners for f in structural_faults()}
    assert owners["message_delta:usage.output_tokens:null"] == ("STREAM-011",)  # schema
    assert owners["message_start:type:missing"] == ("STREAM-002",)  # the grammar reads `type` first
    assert owners["content_block_delta:index:wrong-type"] == ("STREAM-010",)  # malformed-event
    assert owners["message_start:message.stop_reason:wrong-type"] == ("STREAM-004",)  # not empty
    assert owners["message_start:message.stop_reason:missing"] == ("STREAM-011",)


# ------------------------------------------------------------------ against the reference server


# CI's representative: the `fields` group over the families whose answers it breaks, its owners
# among them (about half the catalogue); `nox -s deep` runs each group over the whole catalogue
# (about 80 s each in CI).
CORE = "msg_ or stream_ or err_ or tokens_ or models_"
CASES = [
    pytest.param("fields", CORE, id="fields-core"),
    *(pytest.param(group, None, marks=pytest.mark.deep, id=group) for group in sorted(GROUPS)),
]


@pytest.mark.mlx
@pytest.mark.slow
@pytest.mark.parametrize(("group", "selection"), CASES)
def test_no_error_under_fault(
    group: str, selection: str | None, tiny_random_url: str, proof_profile: Path, tmp_path: Path
) -> None:
    faults = _by_name()
    fault = combined(group, [faults[name] for name in GROUPS[group]])
    extra = ["-k", selection] if selection else []
    outcome = judge(fault, tiny_random_url, tmp_path, profile=proof_profile, extra=extra)
    if not outcome.ok:  # no assert: its introspection would print every verdict of the run
        pytest.fail(outcome.explain(), pytrace=False)
