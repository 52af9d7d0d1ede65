"""The Files API on the scripted engine: upload, list (both cursors), metadata, delete,
download refused, file sources in messages and count_tokens, and the errors."""

from __future__ import annotations

import base64
import io
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from litestar.testing import TestClient

from reference_server.engine.scripted import ScriptedEngine
from reference_server.files.store import FileStore
from tests.reference_server.conftest import HEADERS, make_client
from tests.reference_server.test_documents import make_pdf

TEXT = "The harbour opens at six. Boats leave at seven."


def upload(
    client: TestClient, data: bytes, name: str = "notes.txt", mime: str = "text/plain"
) -> dict[str, Any]:
    response = client.post("/v1/files", files={"file": (name, io.BytesIO(data), mime)})
    assert response.status_code == 200, response.text
    return response.json()


def message(client: TestClient, source: dict[str, Any], path: str = "/v1/messages/count_tokens") -> Any:
    body: dict[str, Any] = {
        "model": "scripted",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "document", "source": source}, {"type": "text", "text": "Summarise."}],
            }
        ],
    }
    if path == "/v1/messages":
        body["max_tokens"] = 8
    return client.post(path, json=body)


def test_an_upload_is_metadata_listed_retrieved_and_deleted(client: TestClient) -> None:
    meta = upload(client, TEXT.encode(), name="dir/notes.txt")
    assert meta["id"].startswith("file_")
    assert meta["type"] == "file"
    assert (meta["filename"], meta["mime_type"], meta["size_bytes"]) == ("notes.txt", "text/plain", len(TEXT))
    assert meta["created_at"].endswith("Z")
    assert meta["downloadable"] is False
    assert client.get(f"/v1/files/{meta['id']}?beta=true").json() == meta
    assert meta in client.get("/v1/files").json()["data"]
    gone = client.delete(f"/v1/files/{meta['id']}")
    assert gone.json() == {"id": meta["id"], "type": "file_deleted"}
    again = client.get(f"/v1/files/{meta['id']}")
    assert again.status_code == 404
    assert again.json()["error"]["type"] == "not_found_error"
    assert client.delete(f"/v1/files/{meta['id']}").status_code == 404
    assert meta not in client.get("/v1/files").json()["data"]


def test_the_list_pages_newest_first_with_both_cursors(client: TestClient) -> None:
    ids = [upload(client, f"file {n}".encode())["id"] for n in range(5)]
    newest = list(reversed(ids))
    first = client.get("/v1/files", params={"limit": 2}).json()
    assert [f["id"] for f in first["data"]] == newest[:2]
    assert first["has_more"] is True
    assert (first["first_id"], first["last_id"]) == (newest[0], newest[1])
    by_page = client.get("/v1/files", params={"limit": 2, "page": first["next_page"]}).json()
    by_after = client.get("/v1/files", params={"limit": 2, "after_id": first["last_id"]}).json()
    assert [f["id"] for f in by_page["data"]] == [f["id"] for f in by_after["data"]] == newest[2:4]
    back = client.get("/v1/files", params={"limit": 2, "before_id": newest[2]}).json()
    assert [f["id"] for f in back["data"]] == newest[:2]
    last = client.get("/v1/files", params={"limit": 2, "after_id": newest[3]}).json()
    assert [f["id"] for f in last["data"]] == newest[4:]
    assert last["has_more"] is False
    assert last["next_page"] is None
    for bad in ({"limit": 0}, {"limit": 1001}, {"after_id": "file_nope"}, {"page": "nope"}):
        response = client.get("/v1/files", params=bad)
        assert response.status_code == 400, bad
        assert response.json()["error"]["type"] == "invalid_request_error"


def test_a_file_source_reads_as_the_same_content_inline(client: TestClient) -> None:
    meta = upload(client, TEXT.encode())
    inline = message(client, {"type": "text", "media_type": "text/plain", "data": TEXT}).json()
    by_file = message(client, {"type": "file", "file_id": meta["id"]}).json()
    assert by_file == inline
    created = message(client, {"type": "file", "file_id": meta["id"]}, "/v1/messages")
    assert created.status_code == 200
    assert created.json()["usage"]["input_tokens"] == inline["input_tokens"]


def test_unknown_deleted_and_mistyped_files_are_refused(client: TestClient) -> None:
    unknown = message(client, {"type": "file", "file_id": "file_unknown"})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["type"] == "not_found_error"
    assert "messages.0.content.0.source.file_id" in unknown.json()["error"]["message"]
    png = upload(client, b"\x89PNG\r\n\x1a\n", name="x.png", mime="image/png")
    mistyped = message(client, {"type": "file", "file_id": png["id"]})
    assert mistyped.status_code == 400
    assert "document block takes a PDF or plain text" in mistyped.text
    text = upload(client, TEXT.encode())
    client.delete(f"/v1/files/{text['id']}")
    assert message(client, {"type": "file", "file_id": text["id"]}).status_code == 404
    extra = message(client, {"type": "file", "file_id": png["id"], "x": 1})
    assert extra.status_code == 400
    assert "source.x" in extra.text


def test_uploads_are_not_downloadable(client: TestClient) -> None:
    meta = upload(client, TEXT.encode())
    response = client.get(f"/v1/files/{meta['id']}/content")
    assert response.status_code == 400
    assert "not downloadable" in response.json()["error"]["message"]
    assert client.get("/v1/files/file_unknown/content").status_code == 404


def test_upload_errors(scripted_engine: ScriptedEngine, tmp_path: Path) -> None:
    with make_client(scripted_engine, max_file_bytes=100, data_dir=tmp_path) as small:
        small.headers.update(HEADERS)
        too_big = small.post("/v1/files", files={"file": ("a.txt", io.BytesIO(b"x" * 101), "text/plain")})
        assert too_big.status_code == 413
        assert too_big.json()["error"]["type"] == "request_too_large"
        assert small.get("/v1/files").json()["data"] == []  # nothing half stored
        missing = small.post("/v1/files", files={"other": ("a.txt", io.BytesIO(b"x"), "text/plain")})
        assert missing.status_code == 400
        assert "file: Field required" in missing.text
        not_form = small.post("/v1/files", json={"file": "x"})
        assert not_form.status_code == 400
        unnamed = small.post("/v1/files", files={"file": ("/", io.BytesIO(b"%PDF"), "application/pdf")})
        assert unnamed.json()["filename"] == "unnamed.pdf"
        bad_name = small.post("/v1/files", files={"file": ("a|b.txt", io.BytesIO(b"x"), "text/plain")})
        assert bad_name.status_code == 400


def test_a_pdf_file_source_counts_as_the_base64_pdf(client: TestClient) -> None:
    small_pdf = make_pdf(["Page one says hello.", "Page two says goodbye."])
    meta = upload(client, small_pdf, name="doc.pdf", mime="application/pdf")
    inline = message(
        client,
        {"type": "base64", "media_type": "application/pdf", "data": base64.b64encode(small_pdf).decode()},
    )
    assert message(client, {"type": "file", "file_id": meta["id"]}).json() == inline.json()


def test_a_kill_mid_upload_leaves_nothing_listed(tmp_path: Path) -> None:
    """A child process dies (SIGKILL) while writing an upload's bytes; reopening the store lists
    nothing and sweeps the temporary file."""
    script = (
        "import sys, os, signal\n"
        "from pathlib import Path\n"
        "from reference_server.files.store import FileStore\n"
        "store = FileStore.open(Path(sys.argv[1]))\n"
        "def chunks():\n"
        "    yield b'x' * 1000\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "    yield b'never'\n"
        "store.add(chunks(), filename='a.txt', mime_type='text/plain', now=0.0)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=False)
    assert done.returncode == -signal.SIGKILL
    assert any((tmp_path / "files").iterdir())  # the half-written temporary file
    store = FileStore.open(tmp_path)
    assert store.page(after_id=None, before_id=None, limit=10) == ([], False)
    assert not any((tmp_path / "files").iterdir())
    store.close()
    assert os.path.exists(tmp_path / "files.sqlite3")


def test_citations_of_a_file_document_in_a_tool_result_name_the_file(tmp_path: Path) -> None:
    """Document 0 is read from a file inside a tool_result, document 1 is inline text."""
    engine = ScriptedEngine(
        "<cite 0>The harbour opens at six. </cite><cite 1>Ferries leave at noon.</cite>",
        model_id="scripted",
        context_window=4096,
    )
    tool = {"name": "lookup", "description": "Looks up notes", "input_schema": {"type": "object"}}
    with make_client(engine, data_dir=tmp_path) as client:
        client.headers.update(HEADERS)
        meta = upload(client, TEXT.encode())
        cited = {"enabled": True}
        returned = {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": [
                {"type": "document", "source": {"type": "file", "file_id": meta["id"]}, "citations": cited}
            ],
        }
        inline = {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "Ferries leave at noon."},
            "citations": cited,
        }
        body = {
            "model": "scripted",
            "max_tokens": 200,
            "tools": [tool],
            "tool_choice": {"type": "none"},
            "messages": [
                {"role": "user", "content": "When?"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}],
                },
                {"role": "user", "content": [returned, inline]},
            ],
        }
        response = client.post("/v1/messages", json=body)
    assert response.status_code == 200, response.text
    citations = [block["citations"][0] for block in response.json()["content"]]
    assert [(c["document_index"], c["file_id"]) for c in citations] == [(0, meta["id"]), (1, None)]


def test_a_store_written_before_downloadable_files_keeps_every_row(tmp_path: Path) -> None:
    """A files.sqlite3 of the schema before code execution (no `downloadable` column) opens with
    its rows and bytes, each not downloadable."""
    import sqlite3

    (tmp_path / "files").mkdir()
    old = sqlite3.connect(tmp_path / "files.sqlite3")
    old.executescript(
        "CREATE TABLE files (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,"
        " filename TEXT NOT NULL, mime_type TEXT NOT NULL, size_bytes INTEGER NOT NULL,"
        " created_at REAL NOT NULL, deleted INTEGER NOT NULL DEFAULT 0);"
        "INSERT INTO files (id, filename, mime_type, size_bytes, created_at)"
        " VALUES ('file_old', 'notes.txt', 'text/plain', 5, 1.0);"
    )
    old.commit()
    old.close()
    (tmp_path / "files" / "file_old").write_bytes(b"hello")
    store = FileStore.open(tmp_path)
    try:
        found = store.read("file_old")
        assert found is not None
        record, data = found
        assert (record.filename, record.downloadable, data) == ("notes.txt", False, b"hello")
        new = store.add([b"x"], filename="out.txt", mime_type="text/plain", now=2.0, downloadable=True)
        assert store.get(new.id) == new
    finally:
        store.close()
