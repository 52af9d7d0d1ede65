"""FILES-*: the Files API (beta `files-api-2025-04-14`): an upload answers its FileMetadata and
is retrievable and listed; a `file` source reads as the same content sent inline (equal
count_tokens); a deleted or unknown file is a 404 `not_found_error`, in the Files endpoints and
in a message. Each runs only on a target that serves the Files API (the profile, else a probe:
`GET /v1/files` answering 200); every file a property uploads is deleted once judged.

Docs: https://platform.claude.com/docs/en/build-with-claude/files; schema: the OpenAPI's
`BetaFileMetadataSchema`, `BetaFileListResponse`, `BetaFileDeleteResponse`.
"""

from __future__ import annotations

from typing import Any

import httpx

from conformance.catalogue import Level, prop
from conformance.generating.files import FILENAME, TEXT, headers, uploaded
from conformance.judging.checks import (
    expect,
    expect_equal,
    expect_error,
    expect_json,
    expect_status,
    json_object,
    not_judged,
    read_optional,
)
from conformance.judging.citing import citations_of
from conformance.wire.drivers import message_body
from conformance.wire.target import Target

GUIDE = "build-with-claude/files"
UNKNOWN_ID = "file_plumbline000000000000000000"
# The Files endpoints are beta paths outside the coverage universe (the Messages surface):
# these keys are the parts of it the properties exercise.
COUNT = "endpoint:POST /v1/messages/count_tokens"
MESSAGES = "endpoint:POST /v1/messages"
BETA_HEADER = "param:anthropic-beta"


def _file_id(meta: dict[str, Any]) -> str:
    file_id = meta.get("id")
    expect(isinstance(file_id, str) and file_id.startswith("file_"), "an id starting with file_", file_id)
    assert isinstance(file_id, str)
    return file_id


def _document_count(target: Target, source: dict[str, Any]) -> httpx.Response:
    body = {
        "model": target.model,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "document", "source": source, "title": "Harbour"},
                    {"type": "text", "text": "When do boats leave?"},
                ],
            }
        ],
    }
    return target.request("POST", "/v1/messages/count_tokens", json_body=body, headers=headers(target))


@prop(
    "FILES-001",
    Level.MUST,
    "An upload answers its FileMetadata, retrievable and listed",
    url=GUIDE,
    requirement="POST /v1/files answers a FileMetadata: type 'file', an id (file_), the filename "
    "sent, a mime_type, size_bytes equal to the bytes sent, an RFC 3339 created_at, downloadable a "
    "boolean where present; GET /v1/files/{id} answers the same object and GET /v1/files lists it.",
    source="docs and schema: OpenAPI BetaFileMetadataSchema required [created_at, filename, id, "
    "mime_type, size_bytes, type] (type const 'file'; size_bytes 'Size of the file in bytes'); "
    "Files API guide: upload, 'Get file metadata', 'List files'",
    requires=("files",),
    covers=(BETA_HEADER, "param:limit"),
)
def test_files_001_upload_metadata(target: Target) -> None:
    with uploaded(target) as meta:
        file_id = _file_id(meta)
        expect_equal(meta.get("type"), "file", "the upload's type")
        expect_equal(meta.get("filename"), FILENAME, "the upload's filename")
        expect(
            isinstance(meta.get("mime_type"), str) and meta["mime_type"], "a mime_type", meta.get("mime_type")
        )
        expect_equal(meta.get("size_bytes"), len(TEXT.encode()), "the upload's size_bytes (the bytes sent)")
        created = meta.get("created_at")
        expect(isinstance(created, str) and "T" in created, "an RFC 3339 created_at", created)
        if "downloadable" in meta:
            expect(isinstance(meta["downloadable"], bool), "downloadable a boolean", meta["downloadable"])
        found = target.request("GET", f"/v1/files/{file_id}", headers=headers(target))
        expect_status(found, 200)
        expect_equal(expect_json(found), meta, "GET /v1/files/{id} (the upload's metadata)")
        listed = target.request("GET", "/v1/files", headers=headers(target), params={"limit": "100"})
        expect_status(listed, 200)
        data = json_object(listed, "the file list").get("data")
        ids = [f.get("id") for f in data if isinstance(f, dict)] if isinstance(data, list) else []
        expect(file_id in ids, f"the newest files listed to include {file_id}", ids[:5])


@prop(
    "FILES-002",
    Level.MUST,
    "A file source reads as the same content inline",
    url=GUIDE,
    requirement="A document block whose source is {type: 'file', file_id} of an uploaded plain text "
    "file is read as that text: count_tokens gives the same input_tokens as the same document with "
    "a text source holding the file's content.",
    source="docs: Files API guide, 'Use a file in messages': reference the uploaded file in a "
    "document block with a file source instead of sending its content; the content the model reads "
    "is the file's",
    requires=("files", "documents"),
    covers=(COUNT, BETA_HEADER, "block:document", "count_response:input_tokens"),
)
def test_files_002_file_source_reads_as_inline(target: Target) -> None:
    inline = _document_count(target, {"type": "text", "media_type": "text/plain", "data": TEXT})
    expect_status(inline, 200)
    wanted = json_object(inline, "count_tokens of the inline document").get("input_tokens")
    with uploaded(target) as meta:
        by_file = _document_count(target, {"type": "file", "file_id": _file_id(meta)})
        expect_status(by_file, 200)
        got = json_object(by_file, "count_tokens of the file document").get("input_tokens")
        expect_equal(got, wanted, "input_tokens of the file source (those of the same text inline)")


@prop(
    "FILES-003",
    Level.MUST,
    "A deleted or unknown file is a not_found_error",
    url=GUIDE,
    requirement="DELETE /v1/files/{id} answers {id, type: 'file_deleted'}; after it, GET "
    "/v1/files/{id} and a message whose document names the file are 404 not_found_error, as is a "
    "file_id that never existed.",
    source="docs and schema: OpenAPI BetaFileDeleteResponse (type const 'file_deleted'); Files API "
    "guide, 'Error handling': 'File not found (404): The specified file_id doesn't exist'",
    requires=("files",),
    covers=(COUNT, "block:document", "error:not_found_error"),
)
def test_files_003_deleted_and_unknown_files(target: Target) -> None:
    with uploaded(target) as meta:
        file_id = _file_id(meta)
        gone = target.request("DELETE", f"/v1/files/{file_id}", headers=headers(target))
        expect_status(gone, 200)
        answer = json_object(gone, "the delete's answer")
        expect_equal(
            (answer.get("id"), answer.get("type")), (file_id, "file_deleted"), "the delete's id and type"
        )
        expect_error(
            target.request("GET", f"/v1/files/{file_id}", headers=headers(target)), 404, "not_found_error"
        )
        expect_error(_document_count(target, {"type": "file", "file_id": file_id}), 404, "not_found_error")
    expect_error(_document_count(target, {"type": "file", "file_id": UNKNOWN_ID}), 404, "not_found_error")


@prop(
    "FILES-004",
    Level.SHOULD,
    "A citation of a file's document names the file",
    url=GUIDE,
    requirement="With citations enabled on a document whose source is an uploaded file, each "
    "citation of that document carries the file's id in file_id (the field every document "
    "citation has; null for a document sent inline). The schema has the field without a "
    "description, so this is a SHOULD.",
    requires=("files", "documents", "citations"),
    covers=(MESSAGES, BETA_HEADER, "block:document", "block:text"),
)
def test_files_004_citations_name_the_file(target: Target) -> None:
    with uploaded(target) as meta:
        file_id = _file_id(meta)
        document = {
            "type": "document",
            "source": {"type": "file", "file_id": file_id},
            "title": "Harbour",
            "citations": {"enabled": True},
        }
        question = {"type": "text", "text": "When do boats leave? Quote the document."}
        body = message_body(
            target, max_tokens=160, messages=[{"role": "user", "content": [document, question]}]
        )
        response = target.request("POST", "/v1/messages", json_body=body, headers=headers(target))
        expect_status(response, 200)
        message = json_object(response, "the Message")
        citations = citations_of(message)
        if not citations:
            not_judged("no citation came", judged_by="DOC-008")
        for n, citation in enumerate(citations):
            said = read_optional(citation, "file_id", str, where=f"citation {n}")
            expect_equal(said, file_id, f"citation {n}: file_id (the uploaded file's)")
