"""The IMG-* properties and computer use (SRVTOOL-016) on the reference server serving a vision
model (tiny-random-vlm, a seeded tiny SmolVLM): each PASSes there, read from `capabilities.image_input`, and FAILs through the fault
proxy under its own fault (faults.fault_catalogue), as test_content_proofs.py proves on the
scripted content target. (The default model is text-only: test_fault_proofs.py has IMG-* as
UNSUPPORTED there.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.catalogue import REGISTRY, Level
from conformance.properties import load_all
from conformance.wire.launcher import reference_server

from .fault_proxy import FaultProxy, running_proxy
from .faults import fault_catalogue
from .suite import API_KEY, run_suite, verdicts

pytestmark = pytest.mark.mlx

MODEL = "tiny-random-vlm"
SELECTION = ["-k", "test_img_ or srvtool_016"]


def image_properties() -> set[str]:
    """The properties that need a model that reads images: IMG-*, and computer use (SRVTOOL-016:
    its screenshots come back as images, so a text-only model refuses the tool)."""
    load_all()
    return {pid for pid, prop in REGISTRY.items() if prop.area == "IMG"} | {"SRVTOOL-016"}


@pytest.fixture(scope="module")
def vlm_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("mlx_vlm")
    log = tmp_path_factory.mktemp("tiny-random-vlm") / "server.log"
    with reference_server(MODEL, log=log, api_key=API_KEY) as url:
        yield url


def test_the_vision_model_passes_every_image_property(
    vlm_url: str, proof_profile: Path, tmp_path: Path
) -> None:
    code, index, output = run_suite(vlm_url, tmp_path, profile=proof_profile, model=MODEL, extra=SELECTION)
    got = verdicts(index)
    assert set(got) == image_properties(), output[-3000:]
    assert set(got.values()) == {"PASS"}, json.dumps(index["properties"], indent=1)[:6000]
    assert code == 0


def test_each_image_property_fails_on_its_fault(vlm_url: str, proof_profile: Path, tmp_path: Path) -> None:
    expected = image_properties()
    catalogue = fault_catalogue(API_KEY)
    proxy = FaultProxy(vlm_url, {pid: catalogue[pid] for pid in expected})
    with running_proxy(proxy) as url:
        code, index, _output = run_suite(url, tmp_path, profile=proof_profile, model=MODEL, extra=SELECTION)
    got = verdicts(index)
    want = {pid: "FAIL" if REGISTRY[pid].level is Level.MUST else "WARN" for pid in expected}
    assert got == want, json.dumps(index["properties"], indent=1)[:6000]
    assert set(proxy.applied) == expected, "every fault was exercised"
    assert code == 1
