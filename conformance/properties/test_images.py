"""IMG-*: image input, checked as the Vision guide says, where the target serves images (the
profile, or `capabilities.image_input`): the four media types accepted; other types, and data
that is not an image of the declared type, refused; the size, dimension and count limits; and
images counted by count_tokens. A target that says it lacks images is ERR-027's to judge.

Images are flat grey files written by conformance/generating/content.py (PNG, JPEG, GIF, WebP, BMP), a few
pixels each, so the requests stay cheap; the large cases are large by their dimensions or by
padding, never by content a model must look at.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from conformance.catalogue import Level, prop
from conformance.generating.content import (
    ask,
    b64,
    bmp,
    count_input_tokens,
    expect_accepted,
    expect_refused,
    gif,
    image_block,
    jpeg,
    png,
    webp,
)
from conformance.judging.checks import Cases, expect, read_optional
from conformance.wire.target import Target

VISION = "build-with-claude/vision"
QUESTION = "What colour is this image? One word."
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_DIMENSION = 8000
MANY_IMAGES = 20  # above this many images in a request, each side is at most 2000 px
MANY_IMAGES_DIMENSION = 2000
MAX_IMAGES = 100  # for models with a context window of up to 200k tokens
MAX_IMAGES_WINDOW = 200_000

WRITERS: dict[str, Callable[[int, int], bytes]] = {
    "image/png": png,
    "image/jpeg": jpeg,
    "image/gif": gif,
    "image/webp": webp,
}
IMAGE_COVERS = ("endpoint:POST /v1/messages", "block:image", "error:invalid_request_error")


def images(*blocks: dict[str, Any], target: Target) -> dict[str, Any]:
    """A one-token request holding `blocks` and the question."""
    return ask(target, *blocks, question=QUESTION, max_tokens=1)


@prop(
    "IMG-001",
    Level.MUST,
    "JPEG, PNG, GIF and WebP images are accepted",
    url=f"{VISION}#faq",
    requirement="The supported image types are image/jpeg, image/png, image/gif and image/webp: "
    "a base64 image of each, with that media type, is accepted (a 200 and a Message).",
    source="docs and schema: OpenAPI Base64ImageSource/properties/media_type; build-with-claude/vision —"
    ' media_type enum [image/jpeg, image/png, image/gif, image/webp]; "Claude currently supports '
    'JPEG, PNG, GIF, and WebP image formats"',
    requires=("images",),
    covers=("endpoint:POST /v1/messages", "request:messages[].content", "block:image"),
)
def test_img_001_types_accepted(target: Target) -> None:
    cases = Cases()
    for media_type, write in WRITERS.items():
        with cases.case(media_type):
            block = image_block(write(16, 16), media_type)
            expect_accepted(target, images(block, target=target), f"an image of type {media_type}")
    cases.check()


@prop(
    "IMG-002",
    Level.MUST,
    "Other image media types are a 400",
    url=f"{VISION}#faq",
    requirement="An image whose media_type is not image/jpeg, image/png, image/gif or image/webp "
    "(a BMP, an SVG) is a 400 invalid_request_error, never taken.",
    source="schema: OpenAPI Base64ImageSource/properties/media_type — enum [image/jpeg, image/png, "
    "image/gif, image/webp]",
    invariant=19,
    requires=("images",),
    covers=IMAGE_COVERS,
)
def test_img_002_other_types_refused(target: Target) -> None:
    cases = Cases()
    svg = (
        b'<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16"><rect width="16" height="16"/></svg>'
    )
    for media_type, data in (("image/bmp", bmp(16, 16)), ("image/svg+xml", svg)):
        with cases.case(media_type):
            expect_refused(
                target, images(image_block(data, media_type), target=target), f"an image of type {media_type}"
            )
    cases.check()


@prop(
    "IMG-003",
    Level.MUST,
    "Image data must be an image of its declared type",
    url=f"{VISION}#faq",
    requirement="The base64 data of an image must be base64 (the schema's format: byte): data that "
    "is not is a 400 invalid_request_error. SHOULD sub-cases, refused by the live API but not "
    "stated by the docs: a PNG declared as JPEG (and each such mismatch), bytes that are no image.",
    source="schema: OpenAPI Base64ImageSource/properties/data; build-with-claude/vision — data: {type: "
    'string, format: byte}; live API message "Image does not match the provided media type '
    'image/png" (observed in many client error maps)',
    requires=("images",),
    covers=IMAGE_COVERS,
)
def test_img_003_data_matches_type(target: Target) -> None:
    cases = Cases()
    # Only data that is not base64 breaks the schema (format: byte); the live API also refuses
    # the rest ("Image does not match the provided media type"), which the docs do not state.
    should = Level.SHOULD
    mismatches = (
        ("PNG data declared image/jpeg", png(16, 16), "image/jpeg", should),
        ("JPEG data declared image/webp", jpeg(16, 16), "image/webp", should),
        ("WebP data declared image/gif", webp(16, 16), "image/gif", should),
        ("GIF data declared image/png", gif(16, 16), "image/png", should),
        ("bytes that are no image", b"These bytes are words, not pixels.", "image/png", should),
        ("data that is not base64", "%%% not base64 %%%", "image/png", None),
    )
    for name, data, media_type, level in mismatches:
        with cases.case(name, level=level):
            expect_refused(target, images(image_block(data, media_type), target=target), name)
    cases.check()


@prop(
    "IMG-004",
    Level.MUST,
    "Image dimensions over the limits are a 400",
    url=f"{VISION}#evaluate-image-size",
    requirement="An image may be at most 8000 px on a side (8000 is accepted, 8001 refused); in a "
    "request of more than 20 images, at most 2000 px. Over the limit is a 400 "
    "invalid_request_error.",
    source='docs: build-with-claude/vision#evaluate-image-size (Basics and limits) — "If you submit an '
    "image larger than 8000x8000 px, it will be rejected. If you submit more than 20 images in "
    'one API request, this limit is 2000x2000 px."',
    requires=("images",),
    covers=IMAGE_COVERS,
)
def test_img_004_dimension_limits(target: Target) -> None:
    cases = Cases()
    with cases.case(f"one image {MAX_DIMENSION} px wide"):
        expect_accepted(
            target, images(image_block(png(MAX_DIMENSION, 1), "image/png"), target=target), "8000 px"
        )
    with cases.case(f"one image {MAX_DIMENSION + 1} px wide"):
        wide = image_block(png(MAX_DIMENSION + 1, 1), "image/png")
        expect_refused(target, images(wide, target=target), f"an image {MAX_DIMENSION + 1} px wide")
    many = [image_block(png(MANY_IMAGES_DIMENSION, 1), "image/png")] * (MANY_IMAGES + 1)
    with cases.case(f"{MANY_IMAGES + 1} images {MANY_IMAGES_DIMENSION} px wide"):
        expect_accepted(
            target, images(*many, target=target), f"{len(many)} images of {MANY_IMAGES_DIMENSION} px"
        )
    with cases.case(f"{MANY_IMAGES + 1} images, one {MANY_IMAGES_DIMENSION + 1} px wide"):
        over = [*many[:-1], image_block(png(MANY_IMAGES_DIMENSION + 1, 1), "image/png")]
        expect_refused(target, images(*over, target=target), f"{len(over)} images, one over 2000 px")
    cases.check()


@prop(
    "IMG-005",
    Level.MUST,
    "More than 100 images in a request is a 400",
    url=f"{VISION}#faq",
    requirement="A request may hold up to 100 images (models with a context window of up to 200k "
    "tokens): 101 images is a 400 invalid_request_error.",
    source='docs: build-with-claude/vision#basics-and-limits — "100 per request on the API, for models '
    'with a 200k-token context window. 600 per request on the API, for all other models."',
    requires=("images",),
    covers=(*IMAGE_COVERS, "endpoint:GET /v1/models/{model_id}", "model:max_input_tokens"),
)
def test_img_005_image_count(target: Target, model_info: dict[str, Any] | None) -> None:
    window = read_optional(model_info, "max_input_tokens", int, where="the ModelInfo")
    if window is not None and window > MAX_IMAGES_WINDOW:
        pytest.skip(f"the model's window is {window} tokens; the 100-image limit is for up to 200k")
    tiny = image_block(png(1, 1), "image/png")
    expect_refused(target, images(*[tiny] * (MAX_IMAGES + 1), target=target), f"{MAX_IMAGES + 1} images")


@prop(
    "IMG-006",
    Level.SHOULD,
    "An image over 5 MB is a 400",
    url=f"{VISION}#faq",
    requirement="An image may be at most 5 MB: a larger one (in a request well under the 32 MB "
    "request limit) is a 400 invalid_request_error."
    " The live API's message says 5 MB; later copies of the vision page say 10 MB of base64 on the Claude"
    " API: the limit is not settled in the docs, so this is a SHOULD.",
    requires=("images",),
    covers=IMAGE_COVERS,
)
def test_img_006_image_size(target: Target) -> None:
    """A 1x1 PNG padded to 5.5 MB with a chunk readers skip: over the limit whether it is
    counted before or after base64 (7.3 MB)."""
    heavy = png(1, 1, padding=MAX_IMAGE_BYTES + MAX_IMAGE_BYTES // 10)
    expect_refused(target, images(image_block(b64(heavy), "image/png"), target=target), "an image of 5.5 MB")


@prop(
    "IMG-007",
    Level.MUST,
    "Images count in count_tokens",
    url=f"{VISION}#calculate-image-costs",
    requirement="count_tokens counts images like the rest of the prompt, by their size "
    "(about width x height / 750 tokens): an image adds input tokens, a larger one more.",
    source="docs: build-with-claude/vision#calculate-image-costs; build-with-claude/token-counting — "
    '"tokens = (width px * height px)/750"; token counting "accepts ... images"',
    invariant=52,
    requires=("images",),
    covers=(
        "endpoint:POST /v1/messages/count_tokens",
        "count_request:messages",
        "count_response:input_tokens",
        "block:image",
    ),
)
def test_img_007_counted(target: Target) -> None:
    counts = [count_input_tokens(target, ask(target, question=QUESTION))[0]]
    for side in (40, 400):
        body = ask(target, image_block(png(side, side), "image/png"), question=QUESTION)
        counts.append(count_input_tokens(target, body)[0])
    expect(
        counts[0] < counts[1] < counts[2],
        "input_tokens: no image < a 40x40 image < a 400x400 image",
        f"input_tokens {counts[0]}, {counts[1]}, {counts[2]}",
        reason="image-not-counted",
    )
