"""ISO-*: workspaces. What a key of one workspace makes (a file, a batch, a skill), a key of
another workspace of the same target cannot see: retrieve, content or results, list, delete,
cancel all answer as if it did not exist (404 not_found_error; a list without it); and it is
still there, untouched, for the first key.

Each runs only with `--second-api-key` (a key of another workspace of the target: nothing else
tells that a target has two) and where the target serves what it makes (files, batches, skills).
The run's own key (`--api-key`) makes; the second only tries to reach.
"""

from __future__ import annotations

from typing import Any

import httpx

from conformance.catalogue import Level, prop
from conformance.generating.batches import BATCHES, batch_path, batch_request, cancel_quietly, id_of
from conformance.generating.files import uploaded
from conformance.generating.skills import made_skill, version_id
from conformance.judging.checks import Cases, expect, expect_error, expect_status, json_object
from conformance.wire.target import Target

GUIDE_FILES = "build-with-claude/files"
GUIDE_BATCHES = "build-with-claude/batch-processing"
GUIDE_SKILLS = "build-with-claude/skills-guide"
NOT_FOUND = "404 not_found_error (another workspace's)"


def _ids(response: httpx.Response, what: str) -> list[Any]:
    expect_status(response, 200)
    data = json_object(response, what).get("data")
    return [item.get("id") for item in data if isinstance(item, dict)] if isinstance(data, list) else []


def _unseen(
    target: Target,
    made_id: str,
    reach: list[tuple[str, str, dict[str, str]]],
    listing: tuple[str, dict[str, str]],
) -> None:
    """Every request of `reach` (method, path, extra headers), sent with the second key, is a 404
    not_found_error, and the list it sees holds no `made_id`."""
    cases = Cases()
    for method, path, extra in reach:
        with cases.case(f"{method} {path}"):
            answer = target.request(method, path, headers={**target.headers(second=True), **extra})
            expect_error(answer, 404, "not_found_error")
    with cases.case(f"GET {listing[0]}"):
        listed = target.request(
            "GET", listing[0], headers={**target.headers(second=True), **listing[1]}, params={"limit": "100"}
        )
        ids = _ids(listed, "the second workspace's list")
        expect(made_id not in ids, f"the second workspace's list without {made_id}", ids[:5], reason="listed")
    cases.check()


def _still_there(target: Target, path: str, headers: dict[str, str]) -> None:
    answer = target.request("GET", path, headers={**target.headers(), **headers})
    expect(
        answer.status_code == 200,
        f"GET {path} with the first key still 200 (the second workspace's requests left it untouched)",
        f"HTTP {answer.status_code}: {answer.text[:200]}",
        reason="first-lost",
    )


@prop(
    "ISO-001",
    Level.MUST,
    "A file one workspace uploaded is not found by another's key, and stays its own",
    url=GUIDE_FILES,
    requirement="A file uploaded with one workspace's key is, to a key of another workspace: GET "
    "/v1/files/{id}, its /content and DELETE a 404 not_found_error, and absent from GET /v1/files; "
    "afterwards the first key still retrieves it.",
    source='docs: Files API ("Files are scoped to the workspace of the API key"); errors: 404 '
    'not_found_error; SDK 2.17 workspace_id ("A credential that belongs to a specific Workspace")',
    requires=("workspaces", "files"),
    covers=("error:not_found_error",),
)
def test_iso_001_files(target: Target) -> None:
    beta = {"anthropic-beta": "files-api-2025-04-14"}
    with uploaded(target) as meta:
        file_id = str(meta.get("id"))
        reach = [
            ("GET", f"/v1/files/{file_id}", beta),
            ("GET", f"/v1/files/{file_id}/content", beta),
            ("DELETE", f"/v1/files/{file_id}", beta),
        ]
        _unseen(target, file_id, reach, ("/v1/files", beta))
        _still_there(target, f"/v1/files/{file_id}", beta)


@prop(
    "ISO-002",
    Level.MUST,
    "A batch one workspace created is not found by another's key, and stays its own",
    url=GUIDE_BATCHES,
    requirement="A Message Batch created with one workspace's key is, to a key of another workspace: "
    "retrieve, results, cancel and delete a 404 not_found_error, and absent from the batch list; "
    "afterwards the first key still retrieves it (not canceled by the other).",
    source='docs: batch processing ("Batches are scoped to a Workspace, allowing you to view all '
    'batches—and their results—that were created within the Workspace associated with your API key"); '
    "errors: 404 not_found_error",
    requires=("workspaces", "batches"),
    covers=("error:not_found_error",),
)
def test_iso_002_batches(target: Target) -> None:
    response = target.request(
        "POST", BATCHES, json_body={"requests": [batch_request(target, "plumbline-iso")]}
    )
    expect_status(response, 200)
    batch_id = id_of(json_object(response, "the created batch"))
    try:
        reach: list[tuple[str, str, dict[str, str]]] = [
            ("GET", batch_path(batch_id), {}),
            ("GET", batch_path(batch_id, "/results"), {}),
            ("POST", batch_path(batch_id, "/cancel"), {}),
            ("DELETE", batch_path(batch_id), {}),
        ]
        _unseen(target, batch_id, reach, (BATCHES, {}))
        found = target.request("GET", batch_path(batch_id))
        expect_status(found, 200)
        status = json_object(found, "the batch").get("processing_status")
        expect(
            status != "canceling",
            "the batch not canceled by the other workspace",
            status,
            reason="first-lost",
        )
    finally:
        cancel_quietly(target, batch_id)


@prop(
    "ISO-003",
    Level.MUST,
    "A skill one workspace created is not found by another's key, and stays its own",
    url=GUIDE_SKILLS,
    requirement="A custom skill created with one workspace's key is, to a key of another workspace: "
    "retrieve, its versions (list and retrieve) and deletes a 404 not_found_error, and absent from "
    "GET /v1/skills; afterwards the first key still retrieves it.",
    source='docs: skills guide (custom skills: "Private to your workspace"); SDK 2.17 BetaSkillSource '
    '("custom: authored by the platform user; private to their workspace"); errors: 404 not_found_error',
    requires=("workspaces", "skills"),
    covers=("error:not_found_error",),
)
def test_iso_003_skills(target: Target) -> None:
    beta = {"anthropic-beta": "skills-2025-10-02"}
    with made_skill(target, "plumbline-iso", "Private to one workspace.") as skill:
        skill_id = str(skill.get("id"))
        version = _latest(skill)
        reach = [
            ("GET", f"/v1/skills/{skill_id}", beta),
            ("GET", f"/v1/skills/{skill_id}/versions", beta),
            ("GET", f"/v1/skills/{skill_id}/versions/{version}", beta),
            ("DELETE", f"/v1/skills/{skill_id}/versions/{version}", beta),
            ("DELETE", f"/v1/skills/{skill_id}", beta),
        ]
        _unseen(target, skill_id, reach, ("/v1/skills", beta))
        _still_there(target, f"/v1/skills/{skill_id}/versions/{version}", beta)


def _latest(skill: dict[str, Any]) -> str:
    latest = skill.get("latest_version_id", skill.get("latest_version"))
    return latest if isinstance(latest, str) else version_id(skill)
