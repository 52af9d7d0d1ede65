"""Workspaces on the scripted engine: a keys file's keys, each in its workspace; files, skills,
batches (and their results) and code execution containers made with one key are a 404 to
another workspace's key everywhere they can be named (retrieve, content, list, delete, cancel,
file sources, container_upload, container, container.skills) and still the first key's;
`anthropic-workspace-id`; rate limits per key; /metrics by workspace, never by key; reloads;
the keys file's errors, which never show a key."""

from __future__ import annotations

import contextlib
import io
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from reference_server.app import create_app
from reference_server.engine.base import ToolCall
from reference_server.engine.scripted import ScriptedEngine
from reference_server.settings import Settings
from reference_server.workspaces import KeyFileError, KeyRing
from tests.reference_server.server_tools.test_app_server_tools import calling
from tests.reference_server.test_app import assert_error

A_KEY, B_KEY, OLD_KEY = "sk-team-a-0123456789", "sk-team-b-0123456789", "sk-default-0123456789"
KEYS = f"""
[[key]]
key = "{A_KEY}"
workspace = "wrkspc_team_a"
rate_limit_rpm = 1000

[[key]]
key = "{B_KEY}"
workspace = "wrkspc_team_b"
"""
VERSION = {"anthropic-version": "2023-06-01"}
FILES_BETA = {"anthropic-beta": "files-api-2025-04-14"}
CODE = {"type": "code_execution_20250825", "name": "code_execution"}
SKILL_MD = b"---\nname: harbour-times\ndescription: Boats.\n---\nBody.\n"


def keys_file(tmp_path: Path, text: str = KEYS) -> Path:
    path = tmp_path / "keys.toml"
    path.write_text(text)
    return path


def client_for(tmp_path: Path, reply: Any = "ok", **settings: Any) -> TestClient:
    engine = ScriptedEngine(reply, model_id="scripted", context_window=4096)
    app = create_app(Settings(data_dir=tmp_path, keys_file=keys_file(tmp_path), **settings), engine=engine)
    return TestClient(app)


def as_key(key: str, **more: str) -> dict[str, str]:
    return {**VERSION, "x-api-key": key, **more}


def message(content: Any, **fields: Any) -> dict[str, Any]:
    return {
        "model": "scripted",
        "max_tokens": 600,
        "messages": [{"role": "user", "content": content}],
        **fields,
    }


def upload_file(client: TestClient, key: str) -> str:
    answer = client.post(
        "/v1/files",
        files={"file": ("notes.txt", b"The harbour opens at six.", "text/plain")},
        headers=as_key(key),
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id"])


def test_a_file_is_its_workspaces_alone(tmp_path):
    with client_for(tmp_path) as client:
        file_id = upload_file(client, A_KEY)
        b = as_key(B_KEY, **FILES_BETA)
        for method, path in (
            ("GET", f"/v1/files/{file_id}"),
            ("GET", f"/v1/files/{file_id}/content"),
            ("DELETE", f"/v1/files/{file_id}"),
        ):
            assert_error(client.request(method, path, headers=b), 404, "not_found_error")
        assert client.get("/v1/files", headers=b).json()["data"] == []
        assert_error(
            client.get("/v1/files", params={"after_id": file_id}, headers=b), 400, "invalid_request_error"
        )
        source = [
            {"type": "document", "source": {"type": "file", "file_id": file_id}},
            {"type": "text", "text": "Hi"},
        ]
        assert_error(client.post("/v1/messages", json=message(source), headers=b), 404, "not_found_error")
        assert_error(
            client.post(
                "/v1/messages/count_tokens",
                json={k: v for k, v in message(source).items() if k != "max_tokens"},
                headers=b,
            ),
            404,
            "not_found_error",
        )
        a = as_key(A_KEY, **FILES_BETA)
        assert client.get(f"/v1/files/{file_id}", headers=a).status_code == 200
        assert [f["id"] for f in client.get("/v1/files", headers=a).json()["data"]] == [file_id]
        assert client.post("/v1/messages", json=message(source), headers=a).status_code == 200


def test_a_skill_is_its_workspaces_alone(tmp_path):
    with client_for(tmp_path) as client:
        parts = [("files[]", ("harbour-times/SKILL.md", io.BytesIO(SKILL_MD), "text/markdown"))]
        skill = client.post("/v1/skills", files=parts, headers=as_key(A_KEY)).json()
        version = skill["latest_version_id"]
        b = as_key(B_KEY)
        for method, path in (
            ("GET", f"/v1/skills/{skill['id']}"),
            ("GET", f"/v1/skills/{skill['id']}/versions"),
            ("GET", f"/v1/skills/{skill['id']}/versions/{version}"),
            ("GET", f"/v1/skills/{skill['id']}/versions/{version}/content"),
            ("DELETE", f"/v1/skills/{skill['id']}/versions/{version}"),
            ("DELETE", f"/v1/skills/{skill['id']}"),
        ):
            assert_error(client.request(method, path, headers=b), 404, "not_found_error")
        again = [("files[]", ("harbour-times/SKILL.md", io.BytesIO(SKILL_MD), "text/markdown"))]
        assert_error(
            client.post(f"/v1/skills/{skill['id']}/versions", files=again, headers=b), 404, "not_found_error"
        )
        assert client.get("/v1/skills", headers=b).json()["data"] == []
        assert client.get(f"/v1/skills/{skill['id']}", headers=as_key(A_KEY)).json() == skill


def test_a_batch_and_its_results_are_its_workspaces_alone(tmp_path):
    with client_for(tmp_path) as client:
        body = {"requests": [{"custom_id": "one", "params": message("Hi")}]}
        batch = client.post("/v1/messages/batches", json=body, headers=as_key(A_KEY)).json()
        a, b = as_key(A_KEY), as_key(B_KEY)
        deadline = time.monotonic() + 10
        while (
            client.get(f"/v1/messages/batches/{batch['id']}", headers=a).json()["processing_status"]
            != "ended"
        ):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for method, path in (
            ("GET", f"/v1/messages/batches/{batch['id']}"),
            ("GET", f"/v1/messages/batches/{batch['id']}/results"),
            ("POST", f"/v1/messages/batches/{batch['id']}/cancel"),
            ("DELETE", f"/v1/messages/batches/{batch['id']}"),
        ):
            assert_error(client.request(method, path, headers=b), 404, "not_found_error")
        assert client.get("/v1/messages/batches", headers=b).json()["data"] == []
        assert (
            '"custom_id":"one"' in client.get(f"/v1/messages/batches/{batch['id']}/results", headers=a).text
        )
        assert client.delete(f"/v1/messages/batches/{batch['id']}", headers=a).status_code == 200


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux's sandbox")
def test_a_container_and_what_its_code_wrote_are_its_workspaces_alone(tmp_path):
    writes = calling(ToolCall("x", "bash_code_execution", {"command": "echo secret > out.txt"}))
    with client_for(tmp_path, writes, code_execution=True) as client:
        first = client.post("/v1/messages", json=message("Go", tools=[CODE]), headers=as_key(A_KEY)).json()
        container = first["container"]["id"]
        written = first["content"][1]["content"]["content"][0]["file_id"]
        b = as_key(B_KEY, **FILES_BETA)
        named = client.post("/v1/messages", json=message("Go", tools=[CODE], container=container), headers=b)
        assert_error(named, 404, "not_found_error")
        assert_error(client.get(f"/v1/files/{written}/content", headers=b), 404, "not_found_error")
        assert (
            client.get(f"/v1/files/{written}/content", headers=as_key(A_KEY, **FILES_BETA)).content
            == b"secret\n"
        )
        upload = [{"type": "container_upload", "file_id": upload_file(client, A_KEY)}]
        assert_error(
            client.post("/v1/messages", json=message(upload, tools=[CODE]), headers=b), 404, "not_found_error"
        )
        parts = [("files[]", ("harbour-times/SKILL.md", io.BytesIO(SKILL_MD), "text/markdown"))]
        skill = client.post("/v1/skills", files=parts, headers=as_key(A_KEY)).json()
        skills = {"skills": [{"type": "custom", "skill_id": skill["id"]}]}
        assert_error(
            client.post("/v1/messages", json=message("Go", tools=[CODE], container=skills), headers=b),
            404,
            "not_found_error",
        )
        again = client.post(
            "/v1/messages", json=message("Go", tools=[CODE], container=container), headers=as_key(A_KEY)
        )
        assert again.json()["container"]["id"] == container


def test_the_workspace_header_must_name_the_keys_own(tmp_path):
    with client_for(tmp_path) as client:
        own = client.post(
            "/v1/messages",
            json=message("Hi"),
            headers=as_key(A_KEY, **{"anthropic-workspace-id": "wrkspc_team_a"}),
        )
        assert own.status_code == 200
        for named in ("wrkspc_team_b", "wrkspc_nobody"):  # the same answer: existence is not disclosed
            other = client.post(
                "/v1/messages", json=message("Hi"), headers=as_key(A_KEY, **{"anthropic-workspace-id": named})
            )
            assert_error(other, 403, "permission_error")
        assert_error(
            client.post("/v1/messages", json=message("Hi"), headers=as_key("sk-nobody-0123456789")),
            401,
            "authentication_error",
        )


@contextlib.contextmanager
def one_a_minute_for_a(tmp_path: Path) -> Iterator[TestClient]:
    """A server where key A may send one request a minute, and has: its next is a 429."""
    text = KEYS.replace("rate_limit_rpm = 1000", "rate_limit_rpm = 1")
    engine = ScriptedEngine("ok", model_id="scripted", context_window=4096)
    app = create_app(Settings(data_dir=tmp_path, keys_file=keys_file(tmp_path, text)), engine=engine)
    with TestClient(app) as client:
        assert client.post("/v1/messages", json=message("Hi"), headers=as_key(A_KEY)).status_code == 200
        assert_error(
            client.post("/v1/messages", json=message("Hi"), headers=as_key(A_KEY)), 429, "rate_limit_error"
        )
        yield client


def test_rate_limits_are_each_keys_own_and_metrics_name_workspaces_never_keys(tmp_path):
    with one_a_minute_for_a(tmp_path) as client:
        answered = client.post("/v1/messages", json=message("Hi"), headers=as_key(B_KEY))
        assert answered.status_code == 200
        assert "anthropic-ratelimit-requests-limit" not in answered.headers  # B has no limits
        page = client.get("/metrics", headers=as_key(A_KEY)).text
    assert 'workspace="wrkspc_team_a"' in page
    assert 'workspace="wrkspc_team_b"' in page
    assert A_KEY not in page
    assert B_KEY not in page


def test_a_reload_swaps_the_keys_and_a_bad_file_keeps_them(tmp_path):
    with client_for(tmp_path) as client:
        keyfile = client.app.state.keyfile
        (tmp_path / "keys.toml").write_text(KEYS.replace(B_KEY, "sk-team-b-rotated-0001"))
        assert keyfile.reload()
        assert_error(
            client.post("/v1/messages", json=message("Hi"), headers=as_key(B_KEY)),
            401,
            "authentication_error",
        )
        assert (
            client.post(
                "/v1/messages", json=message("Hi"), headers=as_key("sk-team-b-rotated-0001")
            ).status_code
            == 200
        )
        (tmp_path / "keys.toml").write_text("[[key]]\nkey = 1\n")
        assert not keyfile.reload()
        assert client.post("/v1/messages", json=message("Hi"), headers=as_key(A_KEY)).status_code == 200


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "want one or more [[key]] tables"),
        (f'[[key]]\nkey = "{A_KEY}"\n', "`workspace` must be"),
        ('[[key]]\nkey = "short"\nworkspace = "w"\n', "at least 8 printable ASCII"),
        ('[[key]]\nkey = "sk-clé-0123456789"\nworkspace = "w"\n', "at least 8 printable ASCII"),
        (f'[[key]]\nkey = "{A_KEY}"\nworkspace = " w"\n', "no outer spaces"),
        (f'[[key]]\nkey = "{A_KEY}"\nworkspace = "w"\nrate_limit_rpm = 0\n', "positive integer"),
        (f'[[key]]\nkey = "{A_KEY}"\nworkspace = "w"\nrole = "admin"\n', "unknown field(s) role"),
        (KEYS + f'\n[[key]]\nkey = "{A_KEY}"\nworkspace = "w"\n', "a key is listed twice"),
        ("[[key]\n", "not valid TOML"),
        (f'[[key]]\nkey = "{A_KEY}\x01"\nworkspace = "w"\n', "not valid TOML (at line 2"),
    ],
)
def test_a_bad_keys_file_is_refused_without_showing_a_key(tmp_path, text, words):
    with pytest.raises(KeyFileError) as refused:
        KeyRing.from_file(keys_file(tmp_path, text))
    assert words in str(refused.value)
    assert A_KEY not in str(refused.value)
    ring = KeyRing.from_file(keys_file(tmp_path), api_key=OLD_KEY)
    assert [e.workspace for e in ring.entries] == ["wrkspc_team_a", "wrkspc_team_b", "default"]
    assert A_KEY not in repr(ring)


def test_a_reload_that_changes_a_keys_limits_gives_it_new_buckets(tmp_path):
    with one_a_minute_for_a(tmp_path) as client:
        keys_file(tmp_path, KEYS)  # back to 1000 a minute
        assert client.app.state.keyfile.reload()
        assert client.post("/v1/messages", json=message("Hi"), headers=as_key(A_KEY)).status_code == 200
