"""The Files API (beta `files-api-2025-04-14`), thin: upload, list, metadata, delete, download.

Each path also answers with `?beta=true` (the SDK's form; the query string's `beta` is not
read), and the beta header is not required: SDK 2.14's `client.beta.files` sends none by itself.
Docs: https://platform.claude.com/docs/en/build-with-claude/files (500 MB per file; uploaded
files are not downloadable, only files a tool created are).
"""

from __future__ import annotations

import asyncio
import mimetypes
import time
from collections.abc import Iterator
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from litestar import Request, Response, delete, get, post
from litestar.datastructures import UploadFile

from reference_server.errors import InvalidRequestError, NotFoundError, RequestTooLargeError
from reference_server.files.store import CursorNotFound, FileRecord, FileStore
from reference_server.timestamps import rfc3339
from reference_server.validation import parse_limit
from reference_server.workspaces import workspace_of

__all__ = ["MAX_FILE_BYTES", "file_metadata", "file_route_handlers"]

MAX_FILE_BYTES = 500 * 1024 * 1024
MAX_FILENAME_CHARS = 500  # the schema's maxLength
PAGE_PREFIX = "page_"  # SDK 2.14's opaque cursor (`next_page`): here, the last id of the page
_FORBIDDEN = set('<>:"|?*\\/') | {chr(n) for n in range(32)}
AnyRequest = Request[Any, Any, Any]


def _store(request: AnyRequest) -> FileStore:
    """The Files API store as the request's workspace sees it."""
    store: FileStore = request.app.state.files
    return store.scoped(workspace_of(request))


def _limit(request: AnyRequest) -> int:
    limit: int = request.app.state.settings.max_file_bytes
    return limit


def file_metadata(record: FileRecord) -> dict[str, Any]:
    """A FileMetadata object (RFC 3339 `created_at`; uploads are never downloadable, files code
    execution wrote are)."""
    created = rfc3339(record.created_at)
    return {
        "id": record.id,
        "type": "file",
        "filename": record.filename,
        "mime_type": record.mime_type,
        "size_bytes": record.size_bytes,
        "created_at": created,
        "downloadable": record.downloadable,
    }


def _found(record: FileRecord | None, file_id: str) -> FileRecord:
    if record is None:
        raise NotFoundError(f"file_id: no file with id {file_id!r}")
    return record


def _filename(raw: str | None, mime_type: str) -> str:
    """The final path component of the part's filename; `unnamed` + the type's extension when
    it is absent or empty; the API's length and character rules."""
    name = PureWindowsPath(PurePosixPath(raw or "").name).name
    if not name:
        return "unnamed" + (mimetypes.guess_extension(mime_type) or "")
    if len(name) > MAX_FILENAME_CHARS:
        raise InvalidRequestError(f"file: the filename is longer than {MAX_FILENAME_CHARS} characters")
    if any(ch in _FORBIDDEN for ch in name):
        raise InvalidRequestError(
            'file: the filename may not contain < > : " | ? * \\ / or control characters'
        )
    return name


def _mime_type(upload: UploadFile) -> str:
    declared = (upload.content_type or "").split(";")[0].strip().lower()
    if declared and declared != "application/octet-stream":
        return declared
    guessed, _ = mimetypes.guess_type(upload.filename or "")
    return guessed or "application/octet-stream"


def _chunks(upload: UploadFile, limit: int) -> Iterator[bytes]:
    upload.file.seek(0)
    size = 0
    while chunk := upload.file.read(1 << 20):
        size += len(chunk)
        if size > limit:
            raise RequestTooLargeError(f"file: the file exceeds the maximum size of {limit} bytes")
        yield chunk


# The body may hold a 500 MB file (and the form's framing); the file's own size is checked.
@post(["/v1/files"], status_code=200, request_max_body_size=MAX_FILE_BYTES + (1 << 20))
async def upload_file(request: AnyRequest) -> Response[Any]:
    content_type = request.headers.get("content-type", "")
    if not content_type.startswith("multipart/form-data"):
        raise InvalidRequestError("file: the upload must be multipart/form-data with a `file` part")
    form = await request.form()
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise InvalidRequestError("file: Field required")
    mime_type = _mime_type(upload)
    name = _filename(upload.filename, mime_type)
    record = await asyncio.to_thread(
        _store(request).add,
        _chunks(upload, _limit(request)),
        filename=name,
        mime_type=mime_type,
        now=time.time(),
    )
    return Response(file_metadata(record), media_type="application/json")


@get(["/v1/files"])
async def list_files(request: AnyRequest) -> Response[Any]:
    query = request.query_params
    limit = parse_limit(query.get("limit"))
    if not 1 <= limit <= 1000:
        raise InvalidRequestError("limit: Input should be between 1 and 1000")
    after_id, before_id, cursor = query.get("after_id"), query.get("before_id"), query.get("page")
    if cursor is not None:
        if not cursor.startswith(PAGE_PREFIX) or after_id is not None or before_id is not None:
            raise InvalidRequestError("page: not a cursor this server returned")
        after_id = cursor.removeprefix(PAGE_PREFIX)
    if after_id is not None and before_id is not None:
        raise InvalidRequestError("after_id and before_id cannot both be set")
    try:
        records, has_more = await asyncio.to_thread(
            _store(request).page, after_id=after_id, before_id=before_id, limit=limit
        )
    except CursorNotFound as exc:
        raise InvalidRequestError(f"{exc.args[0]}: no file with that id") from None
    data = [file_metadata(record) for record in records]
    last = data[-1]["id"] if data else None
    body = {
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": last,
        "has_more": has_more,
        "next_page": PAGE_PREFIX + last if has_more and last else None,
    }
    return Response(body, media_type="application/json")


@get(["/v1/files/{file_id:str}"])
async def get_file(request: AnyRequest) -> Response[Any]:
    file_id = request.path_params["file_id"]
    record = _found(await asyncio.to_thread(_store(request).get, file_id), file_id)
    return Response(file_metadata(record), media_type="application/json")


@delete(["/v1/files/{file_id:str}"], status_code=200)
async def delete_file(request: AnyRequest) -> Response[Any]:
    file_id = request.path_params["file_id"]
    if not await asyncio.to_thread(_store(request).delete, file_id):
        raise NotFoundError(f"file_id: no file with id {file_id!r}")
    return Response({"id": file_id, "type": "file_deleted"}, media_type="application/json")


@get(["/v1/files/{file_id:str}/content"])
async def download_file(request: AnyRequest) -> Response[Any]:
    file_id = request.path_params["file_id"]
    found = await asyncio.to_thread(_store(request).read, file_id)
    record = _found(found[0] if found else None, file_id)
    # As the API: files a client uploaded cannot be downloaded back; files code wrote can.
    if not record.downloadable:
        raise InvalidRequestError(f"file_id: file {file_id!r} is not downloadable (it was uploaded)")
    assert found is not None
    data = found[1]
    disposition = f'attachment; filename="{record.filename}"'
    return Response(data, media_type=record.mime_type, headers={"content-disposition": disposition})


file_route_handlers = [upload_file, list_files, get_file, delete_file, download_file]
