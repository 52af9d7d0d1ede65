"""Vision models on the engine: the tiny-random-vlm source, prompts with images rendered as
list-of-parts content, image tokens counted from image sizes, generation from images."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from tokenizers import Tokenizer, models, pre_tokenizers

from reference_server.engine.base import EngineRequest, ImagePart, Sampling, Turn
from reference_server.engine.errors import TokenizerError
from reference_server.engine.sources import is_vision_directory, resolve_model
from reference_server.engine.tiny_vlm import CHAT_TEMPLATE
from reference_server.engine.tokenizer import ChatTokenizer
from reference_server.engine.toolformat import plain_turns

GREEDY = Sampling(temperature=0)


def png(color: tuple[int, int, int], size: tuple[int, int] = (48, 40)) -> ImagePart:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, "PNG")
    data = buffer.getvalue()
    return ImagePart(data, "image/png", size[0], size[1], hashlib.sha256(data).hexdigest())


def word_tokenizer(*, parts: bool) -> ChatTokenizer:
    vocab = {"[UNK]": 0, "<image>": 1}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return ChatTokenizer(
        backend,
        chat_template=CHAT_TEMPLATE if parts else None,
        bos_token=None,
        eos_token=None,
        eos_token_ids=[],
        parts_content=parts,
    )


def test_tiny_random_vlm_resolves() -> None:
    source = resolve_model("tiny-random-vlm")
    assert (source.id, source.kind) == ("tiny-random-vlm", "tiny-random-vlm")


def test_vision_directory_is_detected_by_its_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert not is_vision_directory(tmp_path)
    assert resolve_model(str(tmp_path)).kind == "mlx-dir"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "smolvlm", "vision_config": {}}))
    assert is_vision_directory(tmp_path)
    assert resolve_model(str(tmp_path)).kind == "vlm-dir"


def test_images_render_as_parts_before_the_text() -> None:
    tokenizer = word_tokenizer(parts=True)
    turns = (Turn("user", "What is it?", images=(png((1, 2, 3)), png((4, 5, 6)))), Turn("assistant", "A"))
    text = tokenizer.render(turns)
    assert text == "<|im_start|>User:<image><image>What is it?<end_of_utterance>\nAssistant: A"
    # A turn without images still gets list content (a plain string would be dropped).
    assert "User: Hi" in tokenizer.render((Turn("user", "Hi"),))


def test_a_text_only_model_refuses_images() -> None:
    with pytest.raises(TokenizerError, match="does not read images"):
        word_tokenizer(parts=False).render((Turn("user", "What is it?", images=(png((1, 2, 3)),)),))


def test_plain_tool_rendering_keeps_images() -> None:
    image = png((1, 2, 3))
    turns = plain_turns((Turn("user", "Look", images=(image,)),), ())
    assert turns[-1].images == (image,)


@pytest.fixture(scope="module")
def vlm_engine(smollm2_gguf: Any) -> Iterator[Any]:
    pytest.importorskip("mlx_vlm")
    from reference_server.engine import load_engine

    engine = load_engine("tiny-random-vlm")
    try:
        yield engine
    finally:
        import asyncio

        asyncio.run(engine.aclose())


def ask(image: ImagePart | None, text: str = "What is in this image?", max_tokens: int = 12) -> EngineRequest:
    images = (image,) if image is not None else ()
    return EngineRequest("tiny-random-vlm", (Turn("user", text, images=images),), max_tokens, GREEDY)


def run(engine: Any, request: EngineRequest) -> tuple[int, int, str]:
    import asyncio

    async def go() -> tuple[int, int, str]:
        counted = await engine.count_tokens(request)
        generation = await engine.start(request)
        text = "".join([delta.text async for delta in generation])
        return counted, generation.usage.tokens, text

    return asyncio.run(go())


@pytest.mark.mlx
def test_card_says_vision(vlm_engine: Any) -> None:
    (card,) = vlm_engine.models()
    assert card.vision
    assert card.id == "tiny-random-vlm"


@pytest.mark.mlx
def test_image_tokens_are_counted_and_generation_agrees(vlm_engine: Any) -> None:
    counted, used, text = run(vlm_engine, ask(png((200, 30, 30))))
    text_only, _, _ = run(vlm_engine, ask(None))
    # 48x40 → 2x2 tiles of 4 tokens plus the global image, with their row/column markers.
    assert counted == used > text_only + 20
    assert text
    # The count follows the image's size: a larger image is cut into more tiles.
    small, _, _ = run(vlm_engine, ask(png((200, 30, 30), (20, 20))))
    large, large_used, _ = run(vlm_engine, ask(png((200, 30, 30), (400, 400))))
    assert small < counted < large == large_used


@pytest.mark.mlx
def test_several_images_in_one_prompt(vlm_engine: Any) -> None:
    one, _, _ = run(vlm_engine, ask(png((200, 30, 30))))
    turn = Turn("user", "Compare them.", images=(png((200, 30, 30)), png((30, 30, 200), (400, 90))))
    counted, used, text = run(vlm_engine, EngineRequest("tiny-random-vlm", (turn,), 8, GREEDY))
    assert counted == used > one
    assert text


@pytest.mark.mlx
def test_different_images_are_read_differently(vlm_engine: Any) -> None:
    red = run(vlm_engine, ask(png((200, 30, 30))))
    blue = run(vlm_engine, ask(png((30, 30, 200))))
    assert red[0] == blue[0]  # the same prompt tokens...
    assert red[2] != blue[2]  # ...but the vision tower sees different pixels
    assert run(vlm_engine, ask(png((200, 30, 30)))) == red  # greedy, no stale prefix reuse


@pytest.mark.mlx
def test_text_only_requests_on_a_vision_model_are_batched(vlm_engine: Any) -> None:
    assert vlm_engine.batching
    counted, used, text = run(vlm_engine, ask(None, "Hello"))
    assert counted == used
    assert text


@pytest.mark.mlx
def test_a_grammar_bounds_an_answer_about_an_image(vlm_engine: Any) -> None:
    from reference_server.engine.base import Grammar

    request = replace(ask(png((200, 30, 30)), max_tokens=8), constraint=Grammar('start: "yes" | "no"'))
    _, _, text = run(vlm_engine, request)
    assert text in {"yes", "no"}


@pytest.mark.mlx
def test_closing_an_image_generation_frees_the_worker(vlm_engine: Any) -> None:
    import asyncio
    import time

    async def go() -> list[Any]:
        stream = vlm_engine.generate(ask(png((200, 30, 30)), max_tokens=1500))
        seen = [await anext(stream) for _ in range(3)]
        await stream.aclose()
        return seen

    seen = asyncio.run(go())
    assert len(seen) == 3
    assert seen[-1].finish is None
    # Far sooner than the 1500 tokens asked for would take.
    deadline = time.monotonic() + 0.5
    while vlm_engine.active_requests and time.monotonic() < deadline:
        time.sleep(0.005)
    assert vlm_engine.active_requests == 0
    # The exclusive path is free again: the next request with an image runs to its end.
    assert run(vlm_engine, ask(png((30, 30, 200)), max_tokens=3))[2]
