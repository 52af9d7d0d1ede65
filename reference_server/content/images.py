"""Image content blocks checked the way the real API checks them, before any model sees them.

Limits, from the Vision guide (https://platform.claude.com/docs/en/build-with-claude/vision):
100 images per API request (models with a 200k-token window), 8000x8000 px per image, and
2000x2000 px once a request holds more than 20 images. The 5 MB cap per image is the API's
(observed message `…image.source.base64: image exceeds 5 MB maximum: 6291456 bytes >
5242880 bytes`, spec §5.1); it counts the base64 text, which is what crosses the wire.

Error messages copy the live API's wording where it is known; paths drop the union tags
(`image`, `base64`) the way `validation.error_path` does.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from PIL import Image, UnidentifiedImageError

from reference_server.errors import InvalidRequestError
from reference_server.protocol import ImageBlockParam

__all__ = [
    "IMAGE_MEDIA_TYPES",
    "MANY_IMAGES_MAX_DIMENSION",
    "MANY_IMAGES_THRESHOLD",
    "MAX_IMAGES_PER_REQUEST",
    "MAX_IMAGE_BYTES",
    "MAX_IMAGE_DIMENSION",
    "ImageInfo",
    "check_image",
    "check_image_count",
    "image_tokens",
    "max_dimension",
    "require_fields",
    "strict_base64",
]

MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_IMAGES_PER_REQUEST = 100
MAX_IMAGE_DIMENSION = 8000
MANY_IMAGES_THRESHOLD = 20
MANY_IMAGES_MAX_DIMENSION = 2000

# Token estimate (Vision guide, "Evaluate image size" / "Calculate image costs").
PIXELS_PER_TOKEN = 750
MAX_LONG_EDGE = 1568
MAX_IMAGE_TOKENS = 1600

# Declared media type → the format name Pillow reports for such data (MPO is a camera JPEG).
IMAGE_MEDIA_TYPES: Mapping[str, frozenset[str]] = {
    "image/jpeg": frozenset({"JPEG", "MPO"}),
    "image/png": frozenset({"PNG"}),
    "image/gif": frozenset({"GIF"}),
    "image/webp": frozenset({"WEBP"}),
}
_MEDIA_TYPE_CHOICES = "'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"


@dataclass(frozen=True)
class ImageInfo:
    """What the server learned about one valid image: enough to count and to budget it."""

    media_type: str
    width: int
    height: int
    tokens: int


def image_tokens(width: int, height: int) -> int:
    """Input tokens one image costs: `tokens = (width px * height px) / 750`, after the
    downscaling the API applies first.

    Vision guide (https://platform.claude.com/docs/en/build-with-claude/vision): an image
    whose long edge is over 1568 px, or that is over ~1,600 tokens, "will first be scaled
    down, preserving aspect ratio, until it's within the size limits", and "if your image
    does not need to be resized, you can estimate the number of tokens used through this
    algorithm: tokens = (width px * height px)/750". Rounding up matches the guide's own
    examples: 200x200 px → ~54 tokens, 1000x1000 px → ~1334, 1092x1092 px → ~1590.
    """
    if width < 1 or height < 1:
        raise ValueError(f"image dimensions must be positive, got {width}x{height}")
    scale = _fitting_scale(width, height)
    if scale < 1.0:
        width, height = _scaled(width, scale), _scaled(height, scale)
    return math.ceil(width * height / PIXELS_PER_TOKEN)


def _fitting_scale(width: int, height: int) -> float:
    """The factor the API scales an image by before the model sees it (1.0: it fits)."""
    return min(
        1.0,
        MAX_LONG_EDGE / max(width, height),
        math.sqrt(MAX_IMAGE_TOKENS * PIXELS_PER_TOKEN / (width * height)),
    )


def _scaled(side: int, scale: float) -> int:
    """Whole pixels after scaling, rounding down; the epsilon keeps 3000 * (1568 / 3000) at
    1568 rather than the float's 1567.9999…"""
    return max(1, math.floor(side * scale + 1e-9))


def max_dimension(count: int) -> int:
    """The largest side allowed per image when a request holds `count` images."""
    return MANY_IMAGES_MAX_DIMENSION if count > MANY_IMAGES_THRESHOLD else MAX_IMAGE_DIMENSION


def check_image_count(n: int) -> None:
    """A request may hold at most 100 images (counted over every message)."""
    if n > MAX_IMAGES_PER_REQUEST:
        raise InvalidRequestError(
            f"messages: A maximum of {MAX_IMAGES_PER_REQUEST} images may be provided per request, found {n}"
        )


def check_image(block: ImageBlockParam, path: str, *, image_count: int = 1) -> ImageInfo:
    """The image's facts, or a 400 naming the field at fault. `path` is the block's path
    (`messages.0.content.1`); `image_count` is how many images the whole request holds,
    which decides the dimension limit."""
    source = block.source
    kind = source_type(source, f"{path}.source", ("base64", "url"))
    if kind == "url":
        raise InvalidRequestError(
            f"{path}.source: URL image sources are not supported: this server has no network "
            "access; send the image as base64 data"
        )
    if kind == "file":
        raise InvalidRequestError(
            f"{path}.source: file sources need the Files API, which this server does not serve; "
            "send the image as base64 data"
        )
    require_fields(source, f"{path}.source", ("type", "media_type", "data"))
    media_type = _media_type(source["media_type"], f"{path}.source.media_type")
    raw = _image_bytes(source["data"], f"{path}.source.data")
    width, height = _open_image(raw, media_type, path, max_dimension(image_count))
    if block.transformations is not None and block.transformations.oversized_image == "error":
        _refuse_oversized(width, height, path)
    return ImageInfo(media_type, width, height, image_tokens(width, height))


def _refuse_oversized(width: int, height: int, path: str) -> None:
    """`transformations.oversized_image: "error"`: an image the API would scale down before the
    model sees it (`image_tokens`' limits) is a 400 naming its size and the largest that fits."""
    scale = _fitting_scale(width, height)
    if scale < 1.0:
        fits = f"{_scaled(width, scale)}x{_scaled(height, scale)}"
        raise InvalidRequestError(
            f"{path}: image is {width}x{height} px, over the model's maximum image size (long edge"
            f" {MAX_LONG_EDGE} px, about {MAX_IMAGE_TOKENS} tokens); the largest that fits at its"
            f' aspect ratio is {fits} px (transformations.oversized_image is "error": send it'
            ' scaled, or "downsize" to have it scaled)'
        )


def source_type(source: Mapping[str, Any], path: str, expected: tuple[str, ...]) -> str:
    """The source's `type` tag; `file` (beta, Files API) passes through for a clear refusal."""
    kind = source.get("type")
    if kind is None:
        raise InvalidRequestError(f"{path}: Unable to extract tag using discriminator 'type'")
    if kind == "file" or kind in expected:
        return str(kind)
    tags = ", ".join(f"'{tag}'" for tag in expected)
    raise InvalidRequestError(
        f"{path}: Input tag {kind!r} found using 'type' does not match any of the expected tags: {tags}"
    )


def require_fields(source: Mapping[str, Any], path: str, fields: tuple[str, ...]) -> None:
    """Exactly `fields`, all strings: the schema's `additionalProperties: false` sources,
    worded the way pydantic words the rest of the request."""
    for key in fields:
        if key not in source:
            raise InvalidRequestError(f"{path}.{key}: Field required")
        if not isinstance(source[key], str):
            raise InvalidRequestError(f"{path}.{key}: Input should be a valid string")
    for key in source:
        if key not in fields:
            raise InvalidRequestError(f"{path}.{key}: Extra inputs are not permitted")


def strict_base64(data: str, path: str) -> bytes:
    """Standard base64 with padding and nothing else: the spec's `format: byte`."""
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        hint = " (send the bare base64 payload, not a data: URL)" if data.startswith("data:") else ""
        raise InvalidRequestError(f"{path}: invalid base64 data: {exc}{hint}") from None


def _media_type(media_type: str, path: str) -> str:
    if media_type not in IMAGE_MEDIA_TYPES:
        raise InvalidRequestError(f"{path}: Input should be {_MEDIA_TYPE_CHOICES}")
    return media_type


def _image_bytes(data: str, path: str) -> bytes:
    if not data:
        raise InvalidRequestError(f"{path}: image cannot be empty")
    if len(data) > MAX_IMAGE_BYTES:
        raise InvalidRequestError(
            f"{path}: image exceeds 5 MB maximum: {len(data)} bytes > {MAX_IMAGE_BYTES} bytes"
        )
    return strict_base64(data, path)


def _open_image(raw: bytes, media_type: str, path: str, limit: int) -> tuple[int, int]:
    """Pillow reads the header (dimensions, format) and verifies the data; the dimension
    check comes before verify so an oversized image costs no decoding."""
    too_big = _too_big(path, limit)
    try:
        with warnings.catch_warnings():
            # Pillow's bomb guard (~89 Mpx) sits above our 64 Mpx limit: either means too big.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(raw))
    except (Image.DecompressionBombWarning, Image.DecompressionBombError):
        raise InvalidRequestError(too_big) from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        raise InvalidRequestError(
            f"{path}.source.data: Could not process image: the data is not a JPEG, PNG, GIF or WebP image"
        ) from None
    with image:
        if image.format not in IMAGE_MEDIA_TYPES[media_type]:
            raise InvalidRequestError(
                f"{path}.source: Image does not match the provided media type {media_type}"
            )
        width, height = image.size
        if max(width, height) > limit:
            raise InvalidRequestError(too_big)
        _verify(image, path)
    return width, height


def _too_big(path: str, limit: int) -> str:
    scope = " for many-image requests" if limit < MAX_IMAGE_DIMENSION else ""
    return (
        f"{path}.source.data: At least one of the image dimensions exceed max allowed size{scope}: "
        f"{limit} pixels"
    )


def _verify(image: Image.Image, path: str) -> None:
    try:
        image.verify()
    except Exception as exc:  # Pillow's decoders raise whatever the broken data provokes.
        raise InvalidRequestError(f"{path}.source.data: Could not process image: {exc}") from None
