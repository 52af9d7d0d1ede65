"""The Files API end to end: the official SDK (`client.beta.files`) against the reference
server on tiny-random over a real socket: upload, list, a file as a document source in a
message and in count_tokens (counted as the same text inline), delete, then refused."""

from __future__ import annotations

import io
from collections.abc import Iterator

import anthropic
import pytest

from conformance.wire.launcher import reference_server

pytestmark = pytest.mark.mlx
# The SDK sends anthropic-version 2026-10-21, which removed temperature: these tests decode
# greedily (temperature 0), so they speak 2023-06-01.
LEGACY = {"anthropic-version": "2023-06-01"}

MODEL = "tiny-random"
TEXT = "The harbour opens at six. Boats leave at seven. The café closes at noon."
BETA = ["files-api-2025-04-14"]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[anthropic.Anthropic]:
    data = tmp_path_factory.mktemp("files")
    with (
        reference_server(MODEL, log=data / "server.log", args=["--data-dir", str(data)]) as url,
        anthropic.Anthropic(base_url=url, api_key="unused", default_headers=LEGACY, max_retries=0) as sdk,
    ):
        yield sdk


def test_an_uploaded_file_is_listed_used_counted_deleted_and_then_refused(
    client: anthropic.Anthropic,
) -> None:
    uploaded = client.beta.files.upload(
        file=("harbour.txt", io.BytesIO(TEXT.encode()), "text/plain"), betas=BETA
    )
    assert uploaded.id.startswith("file_")
    assert (uploaded.filename, uploaded.mime_type, uploaded.size_bytes) == (
        "harbour.txt",
        "text/plain",
        len(TEXT.encode()),
    )
    assert uploaded.id in [f.id for f in client.beta.files.list(betas=BETA)]
    assert client.beta.files.retrieve_metadata(uploaded.id, betas=BETA) == uploaded

    def user(source: dict[str, str]) -> list[anthropic.types.beta.BetaMessageParam]:
        document = {"type": "document", "source": source, "title": "Harbour"}
        return [{"role": "user", "content": [document, {"type": "text", "text": "When do boats leave?"}]}]  # type: ignore[list-item]

    by_file = user({"type": "file", "file_id": uploaded.id})
    inline = user({"type": "text", "media_type": "text/plain", "data": TEXT})
    counted = client.beta.messages.count_tokens(model=MODEL, messages=by_file, betas=BETA)
    assert (
        counted.input_tokens == client.beta.messages.count_tokens(model=MODEL, messages=inline).input_tokens
    )
    answer = client.beta.messages.create(
        model=MODEL, max_tokens=8, messages=by_file, betas=BETA, extra_body={"temperature": 0.0}
    )
    assert answer.usage.input_tokens == counted.input_tokens
    assert answer.content

    assert client.beta.files.delete(uploaded.id, betas=BETA).id == uploaded.id
    with pytest.raises(anthropic.NotFoundError):
        client.beta.files.retrieve_metadata(uploaded.id, betas=BETA)
    with pytest.raises(anthropic.NotFoundError) as refused:
        client.beta.messages.create(model=MODEL, max_tokens=8, messages=by_file, betas=BETA)
    assert uploaded.id in refused.value.message
    assert uploaded.id not in [f.id for f in client.beta.files.list(betas=BETA)]


def test_a_paged_listing_walks_every_file_once(client: anthropic.Anthropic) -> None:
    ids = {client.beta.files.upload(file=(f"n{n}.txt", io.BytesIO(b"x"), "text/plain")).id for n in range(5)}
    walked = [f.id for f in client.beta.files.list(limit=2)]  # the SDK follows next_page
    assert ids <= set(walked)
    assert len(walked) == len(set(walked))
