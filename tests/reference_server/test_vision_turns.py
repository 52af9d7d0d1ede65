"""Image blocks on a vision model become the engine's image parts (no MLX): checked as before,
then kept, merged with their turn, and told apart by digest; a text-only model still refuses them.
The model list states image input per model."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from datetime import UTC, datetime

import pytest
from PIL import Image

from reference_server.catalog import ModelCatalog
from reference_server.engine.base import ModelCard
from reference_server.errors import InvalidRequestError
from reference_server.protocol import MessageCreateParams
from reference_server.validation import build_turns, parse_body


def png(color: str, size: tuple[int, int] = (6, 4)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


def block(data: bytes) -> dict[str, object]:
    source = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(data).decode()}
    return {"type": "image", "source": source}


def params(*messages: dict[str, object]) -> MessageCreateParams:
    body = {"model": "m", "max_tokens": 8, "messages": list(messages)}
    return parse_body(json.dumps(body).encode(), "application/json", MessageCreateParams)


def test_images_become_parts_of_user_turns() -> None:
    red, blue = png("red"), png("blue", (9, 3))
    first = {"role": "user", "content": [block(red), {"type": "text", "text": "And"}]}
    second = {"role": "user", "content": [block(blue), {"type": "text", "text": "this?"}]}
    (turn,) = build_turns(params(first, second), vision=True)
    assert turn.text == "And\n\nthis?"
    assert [(i.data, i.media_type, i.width, i.height) for i in turn.images] == [
        (red, "image/png", 6, 4),
        (blue, "image/png", 9, 3),
    ]
    assert turn.images[0].digest == hashlib.sha256(red).hexdigest() != turn.images[1].digest


def test_an_image_alone_is_a_turn() -> None:
    (turn,) = build_turns(params({"role": "user", "content": [block(png("red"))]}), vision=True)
    assert turn.text == ""
    assert len(turn.images) == 1


def test_a_text_only_model_refuses_images_after_checking_them() -> None:
    with pytest.raises(InvalidRequestError, match="image input is not supported"):
        build_turns(params({"role": "user", "content": [block(png("red"))]}))
    broken = block(b"not a png")
    with pytest.raises(InvalidRequestError, match="image"):
        build_turns(params({"role": "user", "content": [broken]}), vision=True)


def test_capabilities_follow_the_model_card() -> None:
    when = datetime(2024, 1, 1, tzinfo=UTC)
    cards = [
        ModelCard("text", "Text", when, 100, 100),
        ModelCard("eyes", "Eyes", when, 100, 100, vision=True),
    ]
    catalog = ModelCatalog(cards)
    assert catalog.info("eyes").capabilities.image_input.supported is True
    assert catalog.info("text").capabilities.image_input.supported is False
    assert catalog.info("eyes").capabilities.pdf_input == catalog.info("text").capabilities.pdf_input
