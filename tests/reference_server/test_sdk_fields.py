"""Fields the SDK 2.17 request types carry that the server once refused as unknown: each taken
with its documented meaning, or refused by name. `container` (a string, or an object with an id
and skills), `speed` on count_tokens, and `transformations.oversized_image` on images."""

from __future__ import annotations

from typing import Any

import pytest

from reference_server.content.images import check_image
from reference_server.errors import InvalidRequestError
from reference_server.protocol import ImageBlockParam

from .test_app import assert_error, body
from .test_images import PATH, base64_source, encoded


@pytest.mark.parametrize("container", ["container_011", {"id": "container_011"}, {"skills": []}, None])
def test_a_container_without_skills_is_taken(client, container):
    assert client.post("/v1/messages", json=body(container=container)).status_code == 200


def test_anthropic_skills_are_refused_by_name(client):
    # Custom skills load from the Skills API (tests/reference_server/skills/); Anthropic's are not served.
    skills = {"skills": [{"type": "anthropic", "skill_id": "pptx", "version": "latest"}]}
    response = client.post("/v1/messages", json=body(container=skills))
    message = assert_error(response, 400, "invalid_request_error")["error"]["message"]
    assert message.startswith("container.skills.0: Anthropic's skills ('pptx') are not served")
    unknown = client.post("/v1/messages", json=body(container={"id": "c", "size": 2}))
    assert assert_error(unknown, 400, "invalid_request_error")["error"]["message"].startswith("container")


@pytest.mark.parametrize("speed", ["standard", "fast", None])
def test_count_tokens_takes_speed(client, speed):
    counted = {k: v for k, v in body(speed=speed).items() if k != "max_tokens"}
    response = client.post("/v1/messages/count_tokens", json=counted)
    assert response.status_code == 200, response.text
    assert response.json()["input_tokens"] > 0


def test_count_tokens_checks_speed(client):
    counted = {k: v for k, v in body(speed="turbo").items() if k != "max_tokens"}
    assert_error(client.post("/v1/messages/count_tokens", json=counted), 400, "invalid_request_error")


def image(size: tuple[int, int], **transformations: Any) -> ImageBlockParam:
    raw: dict[str, Any] = {"type": "image", "source": base64_source(encoded(size, "PNG"))}
    if transformations:
        raw["transformations"] = transformations
    return ImageBlockParam.model_validate(raw)


@pytest.mark.parametrize("transformations", [{}, {"oversized_image": "downsize"}, {"oversized_image": None}])
def test_an_oversized_image_is_downsized_by_default(transformations):
    info = check_image(image((3000, 1500), **transformations), PATH)
    assert (info.width, info.height) == (3000, 1500)
    assert info.tokens <= 1600  # counted as the scaled image the model reads


def test_oversized_image_error_refuses_naming_the_sizes():
    with pytest.raises(InvalidRequestError) as caught:
        check_image(image((3000, 1500), oversized_image="error"), PATH)
    message = caught.value.message
    assert message.startswith(f"{PATH}: image is 3000x1500 px, over the model's maximum image size")
    assert "the largest that fits at its aspect ratio is 1549x774 px" in message


@pytest.mark.parametrize("size", [(1000, 1000), (1568, 100), (200, 200)])
def test_oversized_image_error_takes_an_image_that_fits(size):
    assert check_image(image(size, oversized_image="error"), PATH).width == size[0]


def test_an_unknown_transformation_is_refused():
    with pytest.raises(ValueError, match="oversized_image"):
        image((10, 10), oversized_image="crop")
