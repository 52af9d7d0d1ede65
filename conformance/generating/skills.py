"""Skills a property makes on a target (the Skills API, beta `skills-2025-10-02`): uploaded as the
SDK sends them, deleted once judged (versions first, as the skills guide asks), and the fields
that name a skill's versions in either shape (SDK 2.17's, or the older OpenAPI's)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import Any

import httpx

from conformance.judging.checks import expect, expect_status, json_object, read
from conformance.wire.target import Target

__all__ = [
    "BETA",
    "SKILL",
    "delete_skill",
    "fresh_name",
    "headers",
    "latest_of",
    "made_skill",
    "skill_md",
    "upload",
    "version_id",
]

BETA = "skills-2025-10-02"
SKILL = "the skill"


def headers(target: Target, beta: str = BETA) -> dict[str, str]:
    return {**target.headers(), "anthropic-beta": beta}


def skill_md(name: str, description: str, body: str = "") -> bytes:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}\n".encode()


def upload(target: Target, parts: list[tuple[str, bytes]], path: str = "/v1/skills") -> httpx.Response:
    """POST a skill's files as the SDK sends them: one `files[]` part each, named by its path."""
    files = [("files[]", (name, data, "text/plain")) for name, data in parts]
    built = httpx.Request("POST", "http://x/v1/skills", files=files)
    body = built.read()
    sent = {**headers(target), "content-type": built.headers["content-type"]}
    return target.request("POST", path, content=body, headers=sent)


def delete_skill(target: Target, skill_id: str) -> None:
    """Delete the skill's versions, then the skill (a target that deletes both at once is fine)."""
    with contextlib.suppress(httpx.HTTPError, ValueError):
        listed = target.request("GET", f"/v1/skills/{skill_id}/versions", headers=headers(target))
        versions = listed.json().get("data", []) if listed.status_code == 200 else []
        for version in versions:
            vid = version.get("id") or version.get("version")
            target.request("DELETE", f"/v1/skills/{skill_id}/versions/{vid}", headers=headers(target))
        target.request("DELETE", f"/v1/skills/{skill_id}", headers=headers(target))


@contextlib.contextmanager
def made_skill(target: Target, name: str, description: str, body: str = "") -> Iterator[dict[str, Any]]:
    """A skill made from one SKILL.md (the upload must be a 200 JSON object); deleted on exit."""
    response = upload(target, [(f"{name}/SKILL.md", skill_md(name, description, body))])
    expect_status(response, 200)
    skill = json_object(response, "the upload's answer")
    try:
        yield skill
    finally:
        if isinstance(skill.get("id"), str):
            delete_skill(target, skill["id"])


def fresh_name() -> str:
    """A skill name no other run uses."""
    return f"plumbline-{secrets.token_hex(3)}"


def latest_of(skill: dict[str, Any]) -> str:
    """The skill's newest version (SDK 2.17 `latest_version_id`, or the older `latest_version`)."""
    field = "latest_version_id" if "latest_version_id" in skill else "latest_version"
    latest: str = read(skill, field, str, where=SKILL)
    return latest


def version_id(version: dict[str, Any]) -> str:
    """A version's identifier in paths (SDK 2.17 `id`; the older shape's `version`)."""
    found = version.get("id") if isinstance(version.get("id"), str) else version.get("version")
    expect(isinstance(found, str) and bool(found), "a version identifier (`id`)", found, reason="version-id")
    assert isinstance(found, str)
    return found
