"""Documents and images end to end: the official SDK against the reference server on
tiny-random over a real socket. Documents are read (text, content and PDF sources, counted
like any prompt text); images are checked as the API checks them, then refused by the
text-only model, as `capabilities.image_input` says."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from PIL import Image

from conformance.wire.launcher import reference_server
from tests.reference_server.test_documents import encrypted_pdf, make_pdf

# One worker runs this module (pytest-xdist): its servers start once, not once per worker.
pytestmark = [pytest.mark.mlx, pytest.mark.xdist_group("documents_e2e")]
# The SDK sends anthropic-version 2026-10-21, which removed temperature: these tests decode
# greedily (temperature 0), so they speak 2023-06-01.
LEGACY = {"anthropic-version": "2023-06-01"}

MODEL = "tiny-random"
GREEDY = {"temperature": 0.0}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[anthropic.Anthropic]:
    data = tmp_path_factory.mktemp("documents")
    args = ["--data-dir", str(data)]
    with (
        reference_server(MODEL, log=data / "server.log", args=args) as url,
        anthropic.Anthropic(base_url=url, api_key="unused", default_headers=LEGACY, max_retries=0) as sdk,
    ):
        yield sdk


def user(*blocks: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [*blocks, {"type": "text", "text": "Summarise."}]}]


def pdf(raw: bytes) -> dict[str, Any]:
    data = base64.b64encode(raw).decode()
    return {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}}


def count(client: anthropic.Anthropic, messages: list[dict[str, Any]]) -> int:
    return client.messages.count_tokens(model=MODEL, messages=messages).input_tokens


def test_a_text_document_is_read_and_counted(client):
    source = {"type": "text", "media_type": "text/plain", "data": "The meeting moved to Thursday at noon."}
    document = {"type": "document", "source": source, "title": "Memo", "context": "From the office"}
    messages = user(document)
    counted = count(client, messages)
    assert counted > count(client, user()) + 8  # the text, the title and the context
    message = client.messages.create(model=MODEL, max_tokens=4, messages=messages, extra_body=GREEDY)
    assert message.usage.input_tokens == counted


def test_a_pdf_is_read_page_by_page(client):
    one = user(pdf(make_pdf(["First page."])))
    two = user(pdf(make_pdf(["First page.", "Second page, longer than the first."])))
    assert count(client, two) > count(client, one) + 8
    message = client.messages.create(model=MODEL, max_tokens=4, messages=two, extra_body=GREEDY)
    assert message.usage.input_tokens == count(client, two)


def test_documents_the_server_cannot_read_are_400s(client):
    with pytest.raises(anthropic.BadRequestError, match="encrypted"):
        client.messages.create(model=MODEL, max_tokens=4, messages=user(pdf(encrypted_pdf())))
    url = {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
    with pytest.raises(anthropic.BadRequestError, match="no network access"):
        client.messages.create(model=MODEL, max_tokens=4, messages=user(url))


def png(size: tuple[int, int] = (8, 8)) -> str:
    out = io.BytesIO()
    Image.new("RGB", size, "blue").save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode()


def test_images_are_validated_then_refused_by_a_text_only_model(client):
    good = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png()}}
    with pytest.raises(anthropic.BadRequestError, match="image input is not supported"):
        client.messages.create(model=MODEL, max_tokens=4, messages=user(good))
    mislabeled = {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": png()}}
    with pytest.raises(anthropic.BadRequestError, match="does not match the provided media type image/gif"):
        client.messages.create(model=MODEL, max_tokens=4, messages=user(mislabeled))
    assert client.models.retrieve(MODEL).capabilities.image_input.supported is False
    assert client.models.retrieve(MODEL).capabilities.pdf_input.supported is True
