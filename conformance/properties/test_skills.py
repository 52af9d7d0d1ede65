"""SKILL-*: the Skills API (beta `skills-2025-10-02`) and `container.skills`. An upload of one
directory with a SKILL.md at its root answers a skill, retrievable and listed; its versions carry
the frontmatter's name and description, a new one becomes the latest; unknown ids are 404s and an
upload without SKILL.md a 400; a skill named in `container.skills` is there for the code the turn
runs, and the response names it.

Each runs only on a target that serves the Skills API (the profile, else a probe: `GET
/v1/skills` answering 200); every skill a property makes is deleted once judged (its versions
first, as the skills guide asks).

Objects are judged in SDK 2.17's shape (`BetaSkill`, `BetaSkillVersion`); the older shape of the
OpenAPI copy (2026-05: `display_title`, `latest_version`, `source` a string) is accepted too, so a
target on either is not blamed for the other.
"""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

from conformance.catalogue import Level, prop
from conformance.generating.code_execution import paused_call
from conformance.generating.skills import (
    BETA,
    SKILL,
    delete_skill,
    fresh_name,
    headers,
    latest_of,
    made_skill,
    skill_md,
    upload,
    version_id,
)
from conformance.judging.checks import (
    Cases,
    expect,
    expect_equal,
    expect_error,
    expect_status,
    json_object,
    not_judged,
    read,
)
from conformance.judging.code_results import RFC3339, expect_bash_result, result_for
from conformance.wire.drivers import create_json
from conformance.wire.target import Target

GUIDE = "build-with-claude/skills-guide"
UNKNOWN_ID = "skill_01plumbline00000000000000"
BETA_HEADER = "param:anthropic-beta"
VERSION = "the skill version"


def expect_skill(skill: dict[str, Any]) -> str:
    """A skill object's fields; its id."""
    expect_equal(skill.get("type"), "skill", "the skill's type", reason="type")
    skill_id: str = read(skill, "id", str, where=SKILL)
    for field in ("created_at", "updated_at"):
        when = read(skill, field, str, where=SKILL)
        expect(RFC3339.match(when) is not None, f"{field} in RFC 3339", when, reason="timestamp")
    title = skill.get("display_name", skill.get("display_title"))
    expect(isinstance(title, str), "a display_name (string)", title, reason="display-name")
    latest_of(skill)
    source = skill.get("source")
    kind = source.get("type") if isinstance(source, dict) else source
    expect_equal(kind, "custom", "the source of an uploaded skill", reason="source")
    return skill_id


@prop(
    "SKILL-001",
    Level.MUST,
    "An upload answers its skill, retrievable and listed",
    url=GUIDE,
    requirement="POST /v1/skills with one directory's files (SKILL.md at its root) answers a skill: type "
    "'skill', an id, RFC 3339 created_at and updated_at, a display_name, the latest version's id, source "
    "custom; GET /v1/skills/{id} answers the same object and GET /v1/skills lists it.",
    source='docs: api/skills/create ("All files must be in the same top-level directory and must include '
    'a SKILL.md file at the root of that directory"), skills guide "Using Skills"; SDK 2.17 BetaSkill {id, '
    "created_at, display_name, latest_version_id, source, type, updated_at}",
    requires=("skills",),
    covers=(BETA_HEADER,),
)
def test_skill_001_upload_answers_a_skill(target: Target) -> None:
    with made_skill(target, fresh_name(), "Says when boats leave the harbour.") as skill:
        skill_id = expect_skill(skill)
        found = target.request("GET", f"/v1/skills/{skill_id}", headers=headers(target))
        expect_status(found, 200)
        expect_equal(
            json_object(found, SKILL), skill, "GET /v1/skills/{id} (the upload's answer)", reason="retrieve"
        )
        listed = target.request("GET", "/v1/skills", headers=headers(target), params={"limit": "100"})
        expect_status(listed, 200)
        data = json_object(listed, "the skill list").get("data")
        ids = [s.get("id") for s in data if isinstance(s, dict)] if isinstance(data, list) else []
        expect(skill_id in ids, f"the newest skills listed to include {skill_id}", ids[:5], reason="listed")


@prop(
    "SKILL-002",
    Level.MUST,
    "A version carries SKILL.md's name and description, and a new version becomes the latest",
    url=GUIDE,
    requirement="GET /v1/skills/{id}/versions/latest answers a skill_version with the skill's id and the "
    "name and description of its SKILL.md frontmatter, as does the version's own id; POST "
    "/v1/skills/{id}/versions with new files answers a new version that the skill then names as its "
    "latest, listed first by GET /v1/skills/{id}/versions.",
    source='docs: skills guide ("Epoch timestamp ... or latest"), api/skills/versions; SDK 2.17 '
    "BetaSkillVersion {id, created_at, description (extracted from SKILL.md), name, skill_id, type}, "
    'BetaSkill.latest_version_id ("what latest references resolve to")',
    requires=("skills",),
    covers=(BETA_HEADER,),
)
def test_skill_002_versions(target: Target) -> None:
    name, description = fresh_name(), "Reads the tide tables."
    with made_skill(target, name, description) as skill:
        skill_id = read(skill, "id", str, where=SKILL)
        first = latest_of(skill)
        cases = Cases()
        with cases.case("latest"):
            got = target.request("GET", f"/v1/skills/{skill_id}/versions/latest", headers=headers(target))
            expect_status(got, 200)
            version = json_object(got, VERSION)
            expect_equal(version.get("type"), "skill_version", "the version's type", reason="type")
            expect_equal(
                version_id(version), first, "the latest version's id (the skill's latest)", reason="latest"
            )
            expect_equal(version.get("skill_id"), skill_id, "the version's skill_id", reason="skill-id")
            expect_equal(version.get("name"), name, "the version's name (SKILL.md's)", reason="name")
            expect_equal(
                version.get("description"), description, "the version's description", reason="description"
            )
        with cases.case("by id"):
            got = target.request("GET", f"/v1/skills/{skill_id}/versions/{first}", headers=headers(target))
            expect_status(got, 200)
            expect_equal(
                version_id(json_object(got, VERSION)), first, "the version asked for", reason="by-id"
            )
        with cases.case("new version"):
            made = upload(
                target,
                [(f"{name}/SKILL.md", skill_md(name, description, "Second."))],
                f"/v1/skills/{skill_id}/versions",
            )
            expect_status(made, 200)
            second = version_id(json_object(made, "the new version"))
            expect(second != first, "a new version id", second, reason="new-version")
            now = target.request("GET", f"/v1/skills/{skill_id}", headers=headers(target))
            expect_status(now, 200)
            expect_equal(
                latest_of(json_object(now, SKILL)),
                second,
                "the skill's latest after a new version",
                reason="latest-moves",
            )
            listed = target.request("GET", f"/v1/skills/{skill_id}/versions", headers=headers(target))
            expect_status(listed, 200)
            data = json_object(listed, "the version list").get("data")
            ids = [version_id(v) for v in data if isinstance(v, dict)] if isinstance(data, list) else []
            expect(ids[:2] == [second, first], "the versions listed newest first", ids[:3], reason="listed")
        cases.check()


@prop(
    "SKILL-003",
    Level.MUST,
    "An unknown skill is a 404 not_found_error; an upload without SKILL.md a 400",
    url=GUIDE,
    requirement="GET /v1/skills/{id} and GET /v1/skills/{id}/versions for an id no skill has answer 404 "
    "not_found_error; POST /v1/skills whose files hold no SKILL.md at the directory's root answers 400 "
    "invalid_request_error (and makes no skill).",
    source='docs: api/skills/create ("must include a SKILL.md file at the root of that directory"); '
    'errors: 404 not_found_error "The requested resource was not found", 400 invalid_request_error',
    requires=("skills",),
    covers=(BETA_HEADER, "error:not_found_error", "error:invalid_request_error"),
)
def test_skill_003_errors(target: Target) -> None:
    cases = Cases()
    for path in (f"/v1/skills/{UNKNOWN_ID}", f"/v1/skills/{UNKNOWN_ID}/versions"):
        with cases.case(f"GET {path}"):
            expect_error(target.request("GET", path, headers=headers(target)), 404, "not_found_error")
    with cases.case("no SKILL.md"):
        name = fresh_name()
        answer = upload(target, [(f"{name}/notes.md", b"No frontmatter, no SKILL.md.\n")])
        if answer.status_code == 200:
            with contextlib.suppress(ValueError, AttributeError):
                delete_skill(target, answer.json()["id"])
        expect_error(answer, 400, "invalid_request_error")
    cases.check()


@prop(
    "SKILL-004",
    Level.MUST,
    "A skill in container.skills is there for the turn's code, and the response names it",
    url=GUIDE,
    requirement="A request with a code execution tool and container.skills [{type: custom, skill_id}] runs "
    "its code where the skill's files are: a bash call that looks for the skill's SKILL.md (under a "
    "directory named as the skill, the version's `name`) prints it; the response's container.skills "
    "names the skill (type, skill_id, version).",
    source='docs: skills guide ("You specify Skills in the container parameter with a skill_id, type, and '
    'optional version, and they execute in the code execution environment"); SDK 2.17 BetaContainer.'
    'skills [BetaContainerSkill {skill_id, type, version}], BetaSkillVersion.name ("the top-level '
    "directory of the Skill's mounted files\")",
    requires=("skills", "code_execution"),
    covers=(
        "request:container.skills",
        "request:container.skills[].skill_id",
        "request:container.skills[].type",
        "request:container.skills[].version",
        "response:container.skills",
        "response:container.skills[].skill_id",
        "response:container.skills[].type",
        "response:container.skills[].version",
    ),
)
def test_skill_004_loaded_into_the_container(target: Target) -> None:
    name, nonce = fresh_name(), secrets.token_hex(4)
    with made_skill(target, name, "Prints a nonce.", f"nonce {nonce}") as skill:
        skill_id = read(skill, "id", str, where=SKILL)
        # Where the API mounts skills is not documented: the first SKILL.md under a directory
        # named as the skill, near the root.
        command = f"cat \"$(find / -maxdepth 5 -path '*/{name}/SKILL.md' -print -quit 2>/dev/null)\""
        tool_id = "srvtoolu_plumbline_skill"
        entry = {"type": "custom", "skill_id": skill_id, "version": "latest"}
        body = paused_call(
            target, "bash_code_execution", {"command": command}, tool_id, container={"skills": [entry]}
        )
        message = create_json(target, body, headers=headers(target, f"code-execution-2025-08-25,{BETA}"))
        ran = expect_bash_result(result_for(message, tool_id, "bash_code_execution_tool_result"))
        if ran is None:
            not_judged("the bash call did not run (judged by CODE-001)", judged_by="CODE-001")
        expect(
            nonce in ran["stdout"],
            f"the skill's SKILL.md printed (it holds {nonce!r})",
            {k: ran[k] for k in ("stdout", "stderr", "return_code")},
            reason="skill-files",
        )
        container = read(message, "container", dict, where="the Message")
        skills = read(container, "skills", list, where="the Message's container")
        named = [s for s in skills if isinstance(s, dict) and s.get("skill_id") == skill_id]
        expect(len(named) == 1, f"container.skills naming {skill_id} once", skills, reason="response-skills")
        expect_equal(named[0].get("type"), "custom", "the loaded skill's type", reason="response-skills")
        expect(
            isinstance(named[0].get("version"), str) and named[0]["version"],
            "the loaded skill's version",
            named[0].get("version"),
            reason="response-skills",
        )
