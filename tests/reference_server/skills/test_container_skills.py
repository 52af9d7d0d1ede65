"""`container.skills` with the scripted engine and the real sandbox: a skill's version is
mounted read-only at /skills/<name>/ for the turn's runs, the model is told of it in the system
prompt, the response names it with the version it resolved to; `latest` follows new versions;
every refusal: no code execution tool, an Anthropic skill, an unknown skill or version, more than
8, one listed twice."""

from __future__ import annotations

import io
import sys

import pytest

from reference_server.engine.base import ToolCall
from tests.reference_server.server_tools.test_app_server_tools import body, calling, client_for, refused
from tests.reference_server.test_app import assert_error

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux's sandbox")

CODE = {"type": "code_execution_20250825", "name": "code_execution"}
SKILL_MD = b"---\nname: harbour-times\ndescription: Tells when boats leave the harbour.\n---\nRun times.py.\n"
RUN = "cat /skills/harbour-times/SKILL.md; python /skills/harbour-times/times.py"


def bash(command: str) -> ToolCall:
    return ToolCall("x", "bash_code_execution", {"command": command})


def upload(client, times: bytes, skill_id: str | None = None) -> dict:
    parts = [
        ("files[]", ("harbour-times/SKILL.md", io.BytesIO(SKILL_MD), "text/markdown")),
        ("files[]", ("harbour-times/times.py", io.BytesIO(times), "text/x-python")),
    ]
    path = "/v1/skills" if skill_id is None else f"/v1/skills/{skill_id}/versions"
    answer = client.post(path, files=parts)
    assert answer.status_code == 200, answer.text
    return answer.json()


def with_skills(*skills: dict, tools=(CODE,)) -> dict:
    return body(list(tools), "When do boats leave?", container={"skills": list(skills)})


def test_a_skill_is_mounted_read_only_and_named_in_the_response(tmp_path):
    client, engine = client_for(
        calling(bash(RUN + "; touch /skills/harbour-times/x")), code_execution=True, data_dir=tmp_path
    )
    with client:
        skill = upload(client, b"print('seven')")
        entry = {"type": "custom", "skill_id": skill["id"], "version": "latest"}
        message = client.post("/v1/messages", json=with_skills(entry)).json()
    ran = message["content"][1]["content"]
    assert ran["stdout"] == SKILL_MD.decode() + "seven\n"
    assert "Read-only file system" in ran["stderr"]
    assert message["container"]["skills"] == [
        {"type": "custom", "skill_id": skill["id"], "version": skill["latest_version_id"]}
    ]
    system = engine.requests[0].turns[0]
    assert system.role == "system"
    assert (
        "harbour-times: Tells when boats leave the harbour. (/skills/harbour-times/SKILL.md)" in system.text
    )


def test_latest_follows_new_versions_and_a_pinned_version_stays(tmp_path):
    client, _ = client_for(
        calling(bash("python /skills/harbour-times/times.py")), code_execution=True, data_dir=tmp_path
    )
    with client:
        skill = upload(client, b"print('seven')")
        first = skill["latest_version_id"]
        upload(client, b"print('eight')", skill["id"])
        latest = client.post(
            "/v1/messages", json=with_skills({"type": "custom", "skill_id": skill["id"]})
        ).json()
        pinned = client.post(
            "/v1/messages", json=with_skills({"type": "custom", "skill_id": skill["id"], "version": first})
        ).json()
        # A request naming the container without skills does not see them.
        later = client.post(
            "/v1/messages", json=body([CODE], "Again", container=latest["container"]["id"])
        ).json()
    assert latest["content"][1]["content"]["stdout"] == "eight\n"
    assert pinned["content"][1]["content"]["stdout"] == "seven\n"
    assert pinned["container"]["skills"][0]["version"] == first
    assert later["content"][1]["content"]["return_code"] != 0
    assert "skills" not in later["container"]


def test_each_refusal_says_why(tmp_path):
    client, _ = client_for("ok", code_execution=True, data_dir=tmp_path)
    with client:
        skill = upload(client, b"print(1)")
        custom = {"type": "custom", "skill_id": skill["id"]}
        refused(client.post("/v1/messages", json=with_skills(custom, tools=())), "need a code execution tool")
        refused(
            client.post("/v1/messages", json=with_skills({"type": "anthropic", "skill_id": "pptx"})),
            "not served by this server",
        )
        refused(client.post("/v1/messages", json=with_skills(custom, custom)), "listed twice")
        refused(client.post("/v1/messages", json=with_skills(*[custom] * 9)), "at most 8 skills")
        unknown = client.post(
            "/v1/messages", json=with_skills({"type": "custom", "skill_id": "skill_01nope"})
        )
        assert "no skill with id" in assert_error(unknown, 404, "not_found_error")["error"]["message"]
        missing = client.post("/v1/messages", json=with_skills({**custom, "version": "1"}))
        assert "has no version" in assert_error(missing, 404, "not_found_error")["error"]["message"]
