"""Files a property uploads to a target (the Files API, beta `files-api-2025-04-14`), as the SDK
sends them, and deleted once judged."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx

from conformance.judging.checks import expect_status, json_object
from conformance.wire.target import Target

__all__ = ["BETA", "FILENAME", "TEXT", "headers", "upload", "uploaded"]

BETA = "files-api-2025-04-14"
TEXT = "The harbour opens at six. Boats leave at seven. The café on the quay closes at noon."
FILENAME = "plumbline-harbour.txt"


def headers(target: Target, **extra: str) -> dict[str, str]:
    return {**target.headers(), "anthropic-beta": BETA, **extra}


def upload(target: Target, data: bytes, filename: str = FILENAME, mime: str = "text/plain") -> httpx.Response:
    """POST /v1/files with one multipart `file` part, as the SDK sends it."""
    built = httpx.Request("POST", "http://x/v1/files", files={"file": (filename, data, mime)})
    body = built.read()
    sent = headers(target, **{"content-type": built.headers["content-type"]})
    return target.request("POST", "/v1/files", content=body, headers=sent)


@contextlib.contextmanager
def uploaded(
    target: Target, data: bytes = TEXT.encode(), filename: str = FILENAME
) -> Iterator[dict[str, Any]]:
    """An uploaded file's metadata (the upload must be a 200 JSON object); deleted on exit."""
    response = upload(target, data, filename)
    expect_status(response, 200)
    meta = json_object(response, "the upload's answer")
    try:
        yield meta
    finally:
        if isinstance(meta.get("id"), str):
            with contextlib.suppress(httpx.HTTPError):
                target.request("DELETE", f"/v1/files/{meta['id']}", headers=headers(target))
