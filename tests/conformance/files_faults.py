"""The faults of the FILES-* properties (part of faults.fault_catalogue): an upload answered in
OpenAI's file shape, file sources dropped on the way to the model, and a deleted or unknown file
answered as a 400 instead of the documented 404."""

from __future__ import annotations

from typing import Any

from .fault_proxy import Fault, Request, Response
from .faults import drop_blocks, error, message_json

__all__ = ["files_fault_catalogue"]


def _openai_upload(request: Request, response: Response) -> Response:
    """OpenAI's FileObject (`object`, `bytes`, `purpose`) for Anthropic's FileMetadata."""
    data = response.json
    if request.method != "POST" or not request.path.startswith("/v1/files") or not isinstance(data, dict):
        return response
    openai = {
        "id": data.get("id"),
        "object": "file",
        "bytes": data.get("size_bytes"),
        "filename": data.get("filename"),
        "purpose": "user_data",
    }
    return response.with_json(openai)


def _null_file_ids(_: Request, data: dict[str, Any]) -> None:
    for block in data.get("content") or []:
        for citation in (block.get("citations") or []) if isinstance(block, dict) else []:
            if isinstance(citation, dict) and "file_id" in citation:
                citation["file_id"] = None


def _is_file_document(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and isinstance(block.get("source"), dict)
        and block["source"].get("type") == "file"
    )


def _not_found_as_400(request: Request, response: Response) -> Response:
    if response.status == 404:
        return error(400, "invalid_request_error", "file not found")
    return response


def files_fault_catalogue() -> dict[str, Fault]:
    return {
        "FILES-001": Fault("uploads answered as OpenAI FileObjects (object, bytes)", response=_openai_upload),
        "FILES-002": Fault(
            "file sources dropped before the model reads them", request=drop_blocks(_is_file_document)
        ),
        "FILES-003": Fault("a missing file answered 400 invalid_request_error", response=_not_found_as_400),
        "FILES-004": Fault(
            "citations of a file's document with file_id null", response=message_json(_null_file_ids)
        ),
    }
