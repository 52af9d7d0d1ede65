"""Images served for real: the official SDK against the reference server on tiny-random-vlm
(a seeded tiny SmolVLM) over a real socket. Images are read by the vision tower, counted by the
model's own processor (count_tokens equals usage), and told apart; the capability says so."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from PIL import Image

from conformance.wire.launcher import reference_server
from reference_server.tools.builtin import COMPUTER_TYPES

# One worker runs this module (pytest-xdist): its servers start once, not once per worker.
pytestmark = [pytest.mark.mlx, pytest.mark.xdist_group("images_vlm_e2e")]
# The SDK sends anthropic-version 2026-10-21, which removed temperature: these tests decode
# greedily (temperature 0), so they speak 2023-06-01.
LEGACY = {"anthropic-version": "2023-06-01"}

MODEL = "tiny-random-vlm"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[anthropic.Anthropic]:
    pytest.importorskip("mlx_vlm")
    data = tmp_path_factory.mktemp("vlm")
    args = ["--data-dir", str(data)]
    with (
        reference_server(MODEL, log=data / "server.log", args=args) as url,
        anthropic.Anthropic(base_url=url, api_key="unused", default_headers=LEGACY, max_retries=0) as sdk,
    ):
        yield sdk


def image(color: tuple[int, int, int], size: tuple[int, int] = (48, 40)) -> dict[str, Any]:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, "PNG")
    data = base64.b64encode(buffer.getvalue()).decode()
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def ask(*blocks: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [*blocks, {"type": "text", "text": "What is in this image?"}]}]


def create(client: anthropic.Anthropic, messages: list[dict[str, Any]]) -> Any:
    return client.messages.create(
        model=MODEL, max_tokens=16, messages=messages, extra_body={"temperature": 0.0}
    )


def test_capabilities_say_images_are_read(client: anthropic.Anthropic) -> None:
    assert client.models.retrieve(MODEL).capabilities.image_input.supported is True


def test_an_image_is_read_and_counted(client: anthropic.Anthropic) -> None:
    messages = ask(image((200, 30, 30)))
    message = create(client, messages)
    counted = client.messages.count_tokens(model=MODEL, messages=messages).input_tokens
    text_only = client.messages.count_tokens(model=MODEL, messages=ask()).input_tokens
    assert message.usage.input_tokens == counted
    assert counted > text_only + 20  # 2x2 tiles and the global image, 4 tokens each, and markers
    assert message.content
    assert message.content[0].text


def test_stream_equals_create_at_temperature_zero(client: anthropic.Anthropic) -> None:
    messages = ask(image((30, 200, 30)))
    message = create(client, messages)
    with client.messages.stream(
        model=MODEL, max_tokens=16, messages=messages, extra_body={"temperature": 0.0}
    ) as stream:
        streamed = stream.get_final_message()
    assert streamed.content[0].text == message.content[0].text
    assert streamed.usage.input_tokens == message.usage.input_tokens
    assert streamed.usage.output_tokens == message.usage.output_tokens


def test_different_images_are_read_differently(client: anthropic.Anthropic) -> None:
    red = create(client, ask(image((200, 30, 30))))
    blue = create(client, ask(image((30, 30, 200))))
    assert red.usage.input_tokens == blue.usage.input_tokens
    assert red.content[0].text != blue.content[0].text
    # Greedy, and no prompt-cache reuse across images: the first answer again.
    assert create(client, ask(image((200, 30, 30)))).content[0].text == red.content[0].text


def test_url_sources_are_still_refused(client: anthropic.Anthropic) -> None:
    url = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    with pytest.raises(anthropic.BadRequestError, match="URL image sources are not supported"):
        create(client, ask(url))


def test_images_in_assistant_turns_are_refused(client: anthropic.Anthropic) -> None:
    messages = [*ask(), {"role": "assistant", "content": [image((1, 2, 3))]}]
    with pytest.raises(anthropic.BadRequestError, match="image input is not supported"):
        create(client, messages)


def test_computer_use_calls_stay_on_the_display_and_screenshots_are_read(client: anthropic.Anthropic) -> None:
    """computer_20251124 on the vision model: the forced call is an action of the documented
    set with its coordinates inside the display; a screenshot sent back in the tool_result is
    read (counted as an image: more input tokens than the same result without it)."""
    tool = {"type": "computer_20251124", "name": "computer", "display_width_px": 64, "display_height_px": 48}
    asked = [{"role": "user", "content": "Click the red square."}]
    call = client.beta.messages.create(
        model=MODEL,
        max_tokens=60,
        extra_body={"temperature": 0.0},
        messages=asked,
        tools=[tool],
        tool_choice={"type": "tool", "name": "computer"},
        betas=["computer-use-2025-11-24"],
    )
    (use,) = [b for b in call.content if b.type == "tool_use"]
    assert use.name == "computer"
    assert use.input["action"] in COMPUTER_TYPES["computer_20251124"]  # the documented actions
    for key in ("coordinate", "start_coordinate"):
        if key in use.input and call.stop_reason != "max_tokens":
            x, y = use.input[key]
            assert 0 <= x < 64
            assert 0 <= y < 48
    if call.stop_reason == "max_tokens":
        return  # a cut call is not sent back

    def result(*content: dict[str, Any]) -> list[dict[str, Any]]:
        done = {
            "type": "tool_result",
            "tool_use_id": use.id,
            "content": [{"type": "text", "text": "done"}, *content],
        }
        return [
            *asked,
            {"role": "assistant", "content": [use.model_dump()]},
            {"role": "user", "content": [done]},
        ]

    counted = [
        client.beta.messages.count_tokens(
            model=MODEL, messages=messages, tools=[tool], betas=["computer-use-2025-11-24"]
        ).input_tokens
        for messages in (result(), result(image((255, 0, 0), (64, 48))))
    ]
    assert counted[1] > counted[0]
