"""Image blocks: the API's format, size, dimension and count rules, and its token formula."""

from __future__ import annotations

import base64
import io
from typing import Any

import pytest
from PIL import Image

from reference_server.content.images import (
    MAX_IMAGE_BYTES,
    ImageInfo,
    check_image,
    check_image_count,
    image_tokens,
    max_dimension,
)
from reference_server.errors import InvalidRequestError
from reference_server.protocol import ImageBlockParam

PATH = "messages.1.content.0"


def encoded(size: tuple[int, int], fmt: str, mode: str = "RGB") -> str:
    buffer = io.BytesIO()
    Image.new(mode, size, color=1 if mode == "1" else (200, 30, 30)).save(buffer, format=fmt)
    return base64.b64encode(buffer.getvalue()).decode()


def base64_source(data: str, media_type: str = "image/png") -> dict[str, Any]:
    return {"type": "base64", "media_type": media_type, "data": data}


def block(source: dict[str, Any]) -> ImageBlockParam:
    return ImageBlockParam.model_validate({"type": "image", "source": source})


def refusal(source: dict[str, Any], image_count: int = 1) -> str:
    with pytest.raises(InvalidRequestError) as caught:
        check_image(block(source), PATH, image_count=image_count)
    assert caught.value.status_code == 400
    assert caught.value.error_type == "invalid_request_error"
    return caught.value.message


# --- valid images ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "media_type"),
    [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"), ("WEBP", "image/webp")],
)
def test_each_supported_format_is_measured(fmt: str, media_type: str) -> None:
    info = check_image(block(base64_source(encoded((300, 150), fmt), media_type)), PATH)
    assert info == ImageInfo(media_type=media_type, width=300, height=150, tokens=60)


def test_largest_single_image_side_is_accepted() -> None:
    info = check_image(block(base64_source(encoded((8000, 2), "PNG", mode="1"))), PATH)
    assert (info.width, info.height) == (8000, 2)


def test_many_image_request_accepts_2000_px() -> None:
    source = base64_source(encoded((2000, 10), "PNG"))
    assert check_image(block(source), PATH, image_count=21).width == 2000


# --- refusals --------------------------------------------------------------------------------


def test_png_declared_as_jpeg_is_a_mismatch() -> None:
    message = refusal(base64_source(encoded((10, 10), "PNG"), "image/jpeg"))
    assert message == f"{PATH}.source: Image does not match the provided media type image/jpeg"


def test_gif_declared_as_webp_is_a_mismatch() -> None:
    message = refusal(base64_source(encoded((10, 10), "GIF"), "image/webp"))
    assert message == f"{PATH}.source: Image does not match the provided media type image/webp"


def test_over_8000_px_is_refused() -> None:
    message = refusal(base64_source(encoded((8001, 2), "PNG", mode="1")))
    assert message == (
        f"{PATH}.source.data: At least one of the image dimensions exceed max allowed size: 8000 pixels"
    )


def test_over_2000_px_is_refused_when_more_than_20_images() -> None:
    source = base64_source(encoded((10, 2001), "PNG"))
    assert check_image(block(source), PATH, image_count=20).height == 2001
    assert refusal(source, image_count=21) == (
        f"{PATH}.source.data: At least one of the image dimensions exceed max allowed size "
        "for many-image requests: 2000 pixels"
    )


def test_decompression_bomb_is_a_dimension_refusal() -> None:
    message = refusal(base64_source(encoded((9500, 9500), "PNG", mode="1")))
    assert message.endswith("exceed max allowed size: 8000 pixels")


def test_over_5_mb_is_refused_before_decoding() -> None:
    data = "A" * (MAX_IMAGE_BYTES + 4)
    assert refusal(base64_source(data)) == (
        f"{PATH}.source.data: image exceeds 5 MB maximum: 5242884 bytes > 5242880 bytes"
    )


def test_truncated_png_is_refused() -> None:
    raw = base64.b64decode(encoded((64, 64), "PNG"))
    data = base64.b64encode(raw[: len(raw) - 20]).decode()
    assert refusal(base64_source(data)).startswith(f"{PATH}.source.data: Could not process image")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            {"type": "url", "url": "https://example.com/cat.png"},
            f"{PATH}.source: URL image sources are not supported: this server has no network access",
            id="url",
        ),
        pytest.param(
            {"type": "file", "file_id": "file_123"},
            f"{PATH}.source: file sources need the Files API, which this server does not serve",
            id="file",
        ),
        pytest.param(
            {"media_type": "image/png", "data": "AAAA"},
            f"{PATH}.source: Unable to extract tag using discriminator 'type'",
            id="no-type",
        ),
        pytest.param(
            {"type": "text", "data": "x"},
            f"{PATH}.source: Input tag 'text' found using 'type' does not match any of the expected "
            "tags: 'base64', 'url'",
            id="unknown-type",
        ),
        pytest.param(
            base64_source("AAAA", "image/bmp"),
            f"{PATH}.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or "
            "'image/webp'",
            id="unsupported-media-type",
        ),
        pytest.param(
            {"type": "base64", "data": "AAAA"},
            f"{PATH}.source.media_type: Field required",
            id="missing-media-type",
        ),
        pytest.param(
            {"type": "base64", "media_type": "image/png"},
            f"{PATH}.source.data: Field required",
            id="missing-data",
        ),
        pytest.param(
            {**base64_source("AAAA"), "detail": "high"},
            f"{PATH}.source.detail: Extra inputs are not permitted",
            id="extra-field",
        ),
        pytest.param(base64_source(""), f"{PATH}.source.data: image cannot be empty", id="empty"),
        pytest.param(
            base64_source("iVBORw0KGgo=\n"), f"{PATH}.source.data: invalid base64 data", id="not-strict"
        ),
        pytest.param(
            base64_source("data:image/png;base64,AAAA"),
            f"{PATH}.source.data: invalid base64 data",
            id="data-url",
        ),
        pytest.param(
            base64_source(base64.b64encode(b"definitely not an image").decode()),
            f"{PATH}.source.data: Could not process image: the data is not a JPEG, PNG, GIF or WebP image",
            id="not-an-image",
        ),
        pytest.param(
            base64_source(encoded((4, 4), "BMP")),
            f"{PATH}.source: Image does not match the provided media type image/png",
            id="bmp-as-png",
        ),
    ],
)
def test_bad_sources_are_refused_naming_the_field(source: dict[str, Any], expected: str) -> None:
    assert refusal(source).startswith(expected)


def test_data_url_gets_a_hint() -> None:
    assert refusal(base64_source("data:image/png;base64,AAAA")).endswith("not a data: URL)")


# --- counts and tokens -----------------------------------------------------------------------


def test_image_count_limit() -> None:
    check_image_count(100)
    with pytest.raises(InvalidRequestError) as caught:
        check_image_count(101)
    assert caught.value.message == "messages: A maximum of 100 images may be provided per request, found 101"


@pytest.mark.parametrize(("count", "limit"), [(1, 8000), (20, 8000), (21, 2000), (100, 2000)])
def test_max_dimension(count: int, limit: int) -> None:
    assert max_dimension(count) == limit


@pytest.mark.parametrize(
    ("size", "tokens"),
    [
        # The Vision guide's own examples: 200x200 ~54, 1000x1000 ~1334, 1092x1092 ~1590.
        ((200, 200), 54),
        ((1000, 1000), 1334),
        ((1092, 1092), 1590),
        ((1, 1), 1),
        # Long edge over 1568 px: scaled to 1568x522 first.
        ((3000, 1000), 1092),
        # Square over ~1,600 tokens: scaled to 1095x1095.
        ((1568, 1568), 1599),
        ((8000, 8000), 1599),
    ],
)
def test_image_tokens(size: tuple[int, int], tokens: int) -> None:
    assert image_tokens(*size) == tokens


@pytest.mark.parametrize("size", [(8000, 10), (10, 8000), (4000, 3000), (1569, 1)])
def test_downscaled_images_stay_within_the_budget(size: tuple[int, int]) -> None:
    assert 1 <= image_tokens(*size) <= 1600


def test_image_tokens_needs_positive_dimensions() -> None:
    with pytest.raises(ValueError, match="positive"):
        image_tokens(0, 10)
