"""The Skills API on the scripted engine: create from an upload (SDK 2.17's multipart form), list
with its cursor, retrieve, versions (new, listed, `latest`, a zip of the files), deletes in the
documented order, and each refusal: no SKILL.md, two top-level directories, bad frontmatter, a
path out of the directory, another skill's name, unknown ids. The store keeps what it holds
across a restart."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import pytest
from litestar.testing import TestClient

from reference_server.engine.scripted import ScriptedEngine
from tests.reference_server.conftest import HEADERS, make_client
from tests.reference_server.test_app import assert_error

SKILL_MD = b"---\nname: harbour-times\ndescription: Tells when boats leave the harbour.\n---\nRun times.py.\n"


def files(skill_md: bytes = SKILL_MD, top: str = "harbour-times", **more: bytes) -> list[tuple[str, Any]]:
    parts = [("files[]", (f"{top}/SKILL.md", io.BytesIO(skill_md), "text/markdown"))]
    parts += [("files[]", (f"{top}/{path}", io.BytesIO(data), "text/plain")) for path, data in more.items()]
    return parts


def create(client: TestClient, parts: list[tuple[str, Any]], **form: str) -> Any:
    return client.post("/v1/skills", files=parts, data=form)


@pytest.fixture
def client(tmp_path):
    with make_client(ScriptedEngine("ok", model_id="scripted"), data_dir=tmp_path) as test_client:
        test_client.headers.update(HEADERS)
        yield test_client


def test_a_skill_is_created_retrieved_listed_and_versioned(client):
    made = create(client, files(**{"times.py": b"print('seven')"}), display_name="Harbour")
    assert made.status_code == 200, made.text
    skill = made.json()
    assert skill["type"] == "skill"
    assert skill["id"].startswith("skill_")
    assert skill["display_name"] == "Harbour"
    assert skill["source"] == {"type": "custom"}
    assert skill["latest_version_id"].isdigit()
    assert skill["created_at"].endswith("Z")
    assert client.get(f"/v1/skills/{skill['id']}").json() == skill
    assert [s["id"] for s in client.get("/v1/skills").json()["data"]] == [skill["id"]]

    first = client.get(f"/v1/skills/{skill['id']}/versions/latest").json()
    assert first == {
        "type": "skill_version",
        "id": skill["latest_version_id"],
        "version": skill["latest_version_id"],
        "skill_id": skill["id"],
        "name": "harbour-times",
        "directory": "harbour-times",
        "description": "Tells when boats leave the harbour.",
        "created_at": first["created_at"],
    }
    newer = client.post(f"/v1/skills/{skill['id']}/versions", files=files(**{"times.py": b"print('eight')"}))
    assert newer.status_code == 200, newer.text
    second = newer.json()
    assert int(second["id"]) > int(first["id"])
    assert client.get(f"/v1/skills/{skill['id']}").json()["latest_version_id"] == second["id"]
    listed = client.get(f"/v1/skills/{skill['id']}/versions").json()
    assert [v["id"] for v in listed["data"]] == [second["id"], first["id"]]

    archive = client.get(f"/v1/skills/{skill['id']}/versions/{first['id']}/content")
    assert archive.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(archive.content)) as opened:
        assert sorted(opened.namelist()) == ["harbour-times/SKILL.md", "harbour-times/times.py"]
        assert opened.read("harbour-times/times.py") == b"print('seven')"


def test_the_display_name_defaults_to_the_skills_name_and_a_name_to_its_directory(client):
    skill = create(client, files(b"---\ndescription: No name given.\n---\n", top="tide-tables")).json()
    assert skill["display_name"] == "tide-tables"
    assert client.get(f"/v1/skills/{skill['id']}/versions/latest").json()["name"] == "tide-tables"


def test_a_skill_is_deleted_after_its_versions(client):
    skill = create(client, files()).json()
    refused = client.delete(f"/v1/skills/{skill['id']}")
    assert (
        "delete each version first" in assert_error(refused, 400, "invalid_request_error")["error"]["message"]
    )
    version = skill["latest_version_id"]
    gone = client.delete(f"/v1/skills/{skill['id']}/versions/{version}")
    assert gone.json() == {"type": "skill_version_deleted", "id": version}
    assert_error(client.get(f"/v1/skills/{skill['id']}/versions/{version}"), 404, "not_found_error")
    assert client.delete(f"/v1/skills/{skill['id']}").json() == {"type": "skill_deleted", "id": skill["id"]}
    assert_error(client.get(f"/v1/skills/{skill['id']}"), 404, "not_found_error")
    assert client.get("/v1/skills").json()["data"] == []


def test_the_list_pages_with_its_cursor(client):
    made = [create(client, files()).json()["id"] for _ in range(3)]
    first = client.get("/v1/skills", params={"limit": 2}).json()
    assert [s["id"] for s in first["data"]] == made[::-1][:2]
    assert first["has_more"] is True
    rest = client.get("/v1/skills", params={"limit": 2, "page": first["next_page"]}).json()
    assert [s["id"] for s in rest["data"]] == [made[0]]
    assert rest["has_more"] is False
    assert rest["next_page"] is None
    assert client.get("/v1/skills", params={"source": "anthropic"}).json()["data"] == []
    assert_error(client.get("/v1/skills", params={"limit": 0}), 400, "invalid_request_error")


@pytest.mark.parametrize(
    ("parts", "words"),
    [
        (
            [("files[]", ("harbour-times/times.py", io.BytesIO(b"x"), "text/plain"))],
            "is required at the root",
        ),
        (files(**{"../escape.py": b"x"}), "must be a path inside"),
        ([*files(), ("files[]", ("other/notes.md", io.BytesIO(b"x"), "text/plain"))], "same top-level"),
        ([("files[]", ("SKILL.md", io.BytesIO(SKILL_MD), "text/markdown"))], "must be a path inside"),
        (files(b"no frontmatter\n"), "YAML frontmatter"),
        (files(b"---\nname: Harbour Times\ndescription: d\n---\n"), "lowercase letters"),
        (files(b"---\nname: claude-helper\ndescription: d\n---\n"), "reserved words"),
        (files(b"---\nname: harbour-times\n---\n"), "description must be"),
        (files(b"---\nname: harbour-times\ndescription: <b>bold</b>\n---\n"), "XML tags"),
        ([], "at least one file"),
        (files(**{"scripts": b"x", "scripts/run.py": b"y"}), "both as a file and as a directory"),
    ],
)
def test_a_bad_upload_is_a_400_naming_the_problem(client, parts, words):
    # Without a file, the form holds only the display name.
    answer = client.post("/v1/skills", files=parts or [("display_name", (None, b"x"))])
    assert words in assert_error(answer, 400, "invalid_request_error")["error"]["message"]


def test_a_version_keeps_the_skills_name_and_unknown_ids_are_404s(client):
    skill = create(client, files()).json()
    renamed = client.post(
        f"/v1/skills/{skill['id']}/versions",
        files=files(b"---\nname: tide-tables\ndescription: d\n---\n", top="tide-tables"),
    )
    assert "every version of this skill is named 'harbour-times'" in renamed.json()["error"]["message"]
    for tail in ("", "/versions", "/versions/latest"):
        assert_error(client.get(f"/v1/skills/skill_01nothing{tail}"), 404, "not_found_error")
    assert_error(client.get(f"/v1/skills/{skill['id']}/versions/123"), 404, "not_found_error")
    assert_error(client.delete("/v1/skills/skill_01nothing"), 404, "not_found_error")


def test_skills_outlive_a_restart(tmp_path):
    engine = ScriptedEngine("ok", model_id="scripted")
    with make_client(engine, data_dir=tmp_path) as client:
        client.headers.update(HEADERS)
        skill = create(client, files(**{"times.py": b"print(7)"})).json()
    with make_client(engine, data_dir=tmp_path) as client:
        client.headers.update(HEADERS)
        assert client.get(f"/v1/skills/{skill['id']}").json() == skill
        archive = client.get(f"/v1/skills/{skill['id']}/versions/latest/content").content
        assert zipfile.ZipFile(io.BytesIO(archive)).read("harbour-times/times.py") == b"print(7)"
