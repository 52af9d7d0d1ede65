"""The DOC-*, IMG-* and CTX-* properties on a scripted target that serves documents, images,
citations and context management correctly (scripted_content.py): each PASSes there and FAILs
(MUST) or WARNs (SHOULD) on its own fault and on the extra faults of content_faults.py, and none
ERRORs; a target whose capabilities say a feature is absent gets UNSUPPORTED with the reason,
while one that claims it and breaks it FAILs. The files conformance/generating/content.py writes by hand
are opened here with Pillow and pypdf, so they are what they claim to be.

test_fault_proofs.py proves the same on the reference server for what it serves (documents and
context management; it refuses images and citations).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from pypdf import PdfReader

from conformance.catalogue import REGISTRY
from conformance.generating import content
from conformance.properties import load_all

from . import scripted_content, scripted_target
from .content_faults import EXTRA_CONTENT_FAULTS
from .fault_proxy import Fault, FaultProxy, Request, Response, running_proxy
from .faults import error
from .proofs import assert_each_fails_on_its_fault
from .suite import run_suite, verdicts

AREAS = ("DOC", "IMG", "CTX")
SELECTION = ["-k", "test_doc_ or test_img_ or test_ctx_"]


def judged() -> set[str]:
    load_all()
    return {pid for pid, prop in REGISTRY.items() if prop.area in AREAS}


@pytest.fixture(scope="module")
def content_url() -> Iterator[str]:
    with running_proxy(scripted_content.app) as url:
        yield url


def run(url: str, tmp_path: Path, profile: Path, selection: list[str] = SELECTION) -> tuple[int, dict, str]:
    return run_suite(url, tmp_path, profile=profile, model=scripted_target.MODEL, extra=selection)


# --- the hand-written files -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("write", "fmt"),
    [
        (content.png, "PNG"),
        (content.jpeg, "JPEG"),
        (content.gif, "GIF"),
        (content.webp, "WEBP"),
        (content.bmp, "BMP"),
    ],
)
@pytest.mark.parametrize(("width", "height"), [(1, 1), (13, 7), (400, 40)])
def test_images_are_what_they_claim(write, fmt, width, height):
    data = write(width, height)
    with Image.open(io.BytesIO(data)) as image:
        assert (image.format, image.size) == (fmt, (width, height))
        image.load()  # decodes every pixel
        assert image.convert("RGB").getpixel((width - 1, height - 1)) == (128, 128, 128)
    with Image.open(io.BytesIO(data)) as image:
        image.verify()


def test_padding_makes_a_large_png_of_the_same_pixels():
    data = content.png(1, 1, padding=6 * 1024 * 1024)
    assert len(data) > 6 * 1024 * 1024
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        assert image.size == (1, 1)


def test_pdf_pages_hold_their_text():
    pages = ["First (page) with \\ escapes.", "Second page.", *[f"Page {n}" for n in range(3, 102)]]
    reader = PdfReader(io.BytesIO(content.pdf(pages)))
    assert len(reader.pages) == 101
    assert [page.extract_text() for page in reader.pages] == pages
    with pytest.raises(ValueError, match="at least one page"):
        content.pdf([])


def test_squeeze_ignores_whitespace_only():
    assert content.squeeze(" a b\n c\t") == content.squeeze("abc") == "abc"
    assert content.squeeze("a.b") != content.squeeze("ab")


# --- the properties on the scripted content target ----------------------------------------------


@pytest.mark.slow
def test_a_correct_target_passes(content_url, profile, tmp_path):
    code, index, output = run(content_url, tmp_path, profile)
    got = verdicts(index)
    assert set(got) == judged(), output[-3000:]
    assert set(got.values()) == {"PASS"}, output[-6000:]
    detected = index["feature_support"]
    for feature in (
        "documents",
        "images",
        "citations",
        "context_management",
        "clear_thinking",
        "clear_tool_uses",
    ):
        assert detected[feature]["supported"] is True, feature
        assert detected[feature]["source"] == "probe", feature  # shown by a request that uses it
    assert code == 0


@pytest.mark.slow
def test_each_property_fails_on_its_fault(content_url, profile, tmp_path):
    assert_each_fails_on_its_fault(content_url, judged(), lambda url: run(url, tmp_path, profile))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXTRA_CONTENT_FAULTS))
def test_extra_faults_fail_their_property(content_url, profile, tmp_path, name):
    load_all()  # REGISTRY[pid] below, whatever ran before on this worker
    pid, fault = EXTRA_CONTENT_FAULTS[name]
    with running_proxy(FaultProxy(content_url, {pid: fault})) as url:
        code, index, output = run(url, tmp_path, profile, ["-k", REGISTRY[pid].selector])
    assert verdicts(index) == {pid: "FAIL"}, output[-3000:]
    assert code == 1


# --- what the target does decides ----------------------------------------------------------------


def _capabilities(change: dict[str, Any] | None) -> Any:
    """A response rewrite: the ModelInfo's capabilities updated with `change` (None: nulled)."""

    def apply(request: Request, response: Response) -> Response:
        data = response.json
        if response.status == 200 and isinstance(data, dict) and data.get("type") == "model":
            if change is None:
                data["capabilities"] = None
            else:
                data["capabilities"].update(change)
            return response.with_json(data)
        return response

    return apply


def _refuse(*kinds: str) -> Any:
    """A request rewrite: a 400 for any request holding a block of one of `kinds`."""

    def apply(request: Request) -> Request | Response:
        if any(f'"type": "{kind}"' in request.body.decode() for kind in kinds):
            return error(400, "invalid_request_error", f"{', '.join(kinds)}: not supported")
        return request

    return apply


def _refuse_citations(request: Request) -> Request | Response:
    if '"citations": {"enabled": true}' in request.body.decode():
        return error(400, "invalid_request_error", "citations: not supported")
    return request


def _drop(*kinds: str) -> Any:
    """A request rewrite: every block of `kinds` left out of every turn, without a word (a
    gateway that cannot translate them)."""

    def apply(request: Request) -> Request | Response:
        body = request.json
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return request
        for turn in body["messages"]:
            if isinstance(turn, dict) and isinstance(turn.get("content"), list):
                turn["content"] = [
                    b for b in turn["content"] if not (isinstance(b, dict) and b.get("type") in kinds)
                ]
        return request.with_json(body)

    return apply


def _no_citations(request: Request, response: Response) -> Response:
    """Every citation taken off the answer (a gateway that drops `citations` on the way)."""
    data = response.json
    if isinstance(data, dict) and isinstance(data.get("content"), list):
        for block in data["content"]:
            if isinstance(block, dict) and "citations" in block:
                block["citations"] = None
        return response.with_json(data)
    return response


NONE = {"supported": False}
ABSENT = {
    "pdf_input": NONE,
    "image_input": NONE,
    "citations": NONE,
    "context_management": {**NONE, "clear_thinking_20251015": NONE, "clear_tool_uses_20250919": NONE},
}


@pytest.mark.slow
def test_capabilities_null_change_nothing(content_url, profile, tmp_path):
    """A gateway declares nothing (`capabilities: null`, as the schema allows): every feature is
    still found served by what the target does, and every property PASSes."""
    fault = Fault("capabilities null", response=_capabilities(None))
    with running_proxy(FaultProxy(content_url, everywhere=fault)) as url:
        code, index, output = run(url, tmp_path, profile)
    assert set(verdicts(index).values()) == {"PASS"}, output[-3000:]
    assert code == 0


@pytest.mark.slow
def test_refused_features_are_unsupported_in_the_targets_words(content_url, profile, tmp_path):
    """Every feature refused with a 400, as its capabilities say: UNSUPPORTED, with the refusal."""

    def refuse(request: Request) -> Request | Response:
        body = request.body.decode()
        if '"context_management"' in body:
            return error(400, "invalid_request_error", "context_management: not supported")
        return _refuse("document", "image", "search_result")(request)

    fault = Fault("nothing served", request=refuse, response=_capabilities(ABSENT))
    with running_proxy(FaultProxy(content_url, everywhere=fault)) as url:
        code, index, output = run(url, tmp_path, profile)
    assert set(verdicts(index).values()) == {"UNSUPPORTED"}, output[-3000:]
    messages = {p["id"]: p["message"] for p in index["properties"]}
    words = "got HTTP 400: invalid_request_error: document, image, search_result: not supported"
    assert messages["DOC-001"] == (
        f"documents not served (probe: a request with a plain-text document {words} "
        "(declared: pdf_input.supported false))"
    )
    assert messages["IMG-001"].startswith(
        "images not served (probe: a request with a 200x200 PNG image got HTTP 400"
    )
    assert "context_management: not supported" in messages["CTX-003"]
    assert code == 0


@pytest.mark.slow
def test_a_dropped_document_is_one_failure(content_url, profile, tmp_path):
    """A gateway that drops every document and search_result block without a word (and declares
    nothing): DOC-002, whose rule that breaks, FAILs on the run's probe; every other property
    that needs documents SKIPs naming it."""
    fault = Fault(
        "documents dropped", request=_drop("document", "search_result"), response=_capabilities(None)
    )
    with running_proxy(FaultProxy(content_url, everywhere=fault)) as url:
        code, index, output = run(url, tmp_path, profile, ["-k", "test_doc_"])
    got = verdicts(index)
    assert got.pop("DOC-002") == "FAIL", output[-3000:]
    assert set(got.values()) == {"SKIP"}, output[-3000:]
    assert {p["judged_by"] for p in index["properties"] if p["verdict"] == "SKIP"} == {"DOC-002"}
    [failed] = [p for p in index["properties"] if p["id"] == "DOC-002"]
    assert failed["evidence_file"], failed  # the probe's exchange
    assert [c["cause"] for c in index["causes"]] == ["documents accepted, not used"]
    assert index["feature_support"]["documents"]["failed"] is True
    assert code == 1


@pytest.mark.slow
def test_features_claimed_and_refused_fail(content_url, profile, tmp_path):
    """Capabilities saying documents and images are served, every one refused: one FAIL each,
    by the feature's judge (DOC-002, IMG-007); the others SKIP naming it."""
    fault = Fault("documents and images refused", request=_refuse("document", "image"))
    with running_proxy(FaultProxy(content_url, everywhere=fault)) as url:
        code, index, output = run(url, tmp_path, profile, ["-k", "doc_001 or doc_002 or img_001 or img_007"])
    assert verdicts(index) == {
        "DOC-001": "SKIP",
        "DOC-002": "FAIL",
        "IMG-001": "SKIP",
        "IMG-007": "FAIL",
    }, output[-3000:]
    assert code == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "verdicts_wanted"),
    [
        ("refused", {"DOC-005": "PASS", "DOC-006": "UNSUPPORTED"}),
        ("dropped", {"DOC-005": "WARN", "DOC-006": "SKIP"}),
        ("declared absent, served", {"DOC-005": "PASS", "DOC-006": "PASS"}),
    ],
)
def test_citations_are_honoured_or_refused(content_url, profile, tmp_path, fault, verdicts_wanted):
    """The reference server's case once: documents served, citations not. Refusing citations is
    what DOC-005 asks (the citation properties are then UNSUPPORTED); dropping them silently
    WARNs DOC-005 once (a SHOULD: the docs do not say a model must refuse them), and --strict
    fails the gate for it; serving them is served, whatever the capabilities say."""
    said_absent = _capabilities({"citations": NONE})
    faults = {
        "refused": Fault("citations refused", request=_refuse_citations, response=said_absent),
        "dropped": Fault("citations dropped", response=_no_citations),
        "declared absent, served": Fault("citations said absent", response=said_absent),
    }
    with running_proxy(FaultProxy(content_url, everywhere=faults[fault])) as url:
        code, index, output = run(url, tmp_path, profile, ["-k", "doc_005 or doc_006", "--strict"])
    assert verdicts(index) == verdicts_wanted, output[-3000:]
    assert code == (1 if "WARN" in verdicts_wanted.values() else 0)
