"""`container.skills` (beta `skills-2025-10-02`): the request's skills resolved to versions and
loaded into its code execution container.

Each entry is `{type, skill_id, version?}` (SDK 2.17 BetaSkillParams); at most 8 per request
(skills guide). `custom` skills come from this server's Skills API store, `version` omitted or
`latest` meaning the newest; `anthropic` skills (pptx, xlsx, ...) are Anthropic's own and are not
served here: a 400 saying so. A skill is read-only at `/skills/<name>/` in every run of the turn,
and the model is told of it as the docs describe skills working: its name and description in the
system prompt, its SKILL.md to read when a task needs it. The response's `container.skills` names
each with the version it resolved to.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from reference_server.errors import InvalidRequestError, NotFoundError
from reference_server.protocol import ContainerParam, PromptParams, TextBlockParam

from .store import SkillStore

__all__ = [
    "MAX_SKILLS",
    "SKILLS_ROOT",
    "LoadedSkill",
    "requested_skills",
    "resolve_skills",
    "with_skill_note",
]

MAX_SKILLS = 8
SKILLS_ROOT = "/skills"  # where a run sees them (read-only)
P = TypeVar("P", bound=PromptParams)


@dataclass(frozen=True, slots=True)
class LoadedSkill:
    skill_id: str
    version: str
    name: str
    description: str
    directory: Path  # the version's files on the host

    @property
    def path(self) -> str:
        return f"{SKILLS_ROOT}/{self.name}"

    def response(self) -> dict[str, str]:
        """The response's `container.skills` entry."""
        return {"type": "custom", "skill_id": self.skill_id, "version": self.version}


def requested_skills(container: str | ContainerParam | None) -> list[dict[str, Any]]:
    if isinstance(container, ContainerParam) and container.skills:
        return container.skills
    return []


def resolve_skills(entries: list[dict[str, Any]], store: SkillStore | None) -> tuple[LoadedSkill, ...]:
    """Each entry's skill version (a 400 for a malformed entry or an Anthropic skill, a 404 for an
    unknown skill or version)."""
    if len(entries) > MAX_SKILLS:
        raise InvalidRequestError(f"container.skills: at most {MAX_SKILLS} skills per request")
    loaded: list[LoadedSkill] = []
    for index, entry in enumerate(entries):
        where = f"container.skills.{index}"
        kind, skill_id, version = entry.get("type"), entry.get("skill_id"), entry.get("version", "latest")
        if kind not in ("custom", "anthropic"):
            raise InvalidRequestError(f"{where}.type: Input should be 'anthropic' or 'custom'")
        if not isinstance(skill_id, str) or not skill_id:
            raise InvalidRequestError(f"{where}.skill_id: Field required")
        if not isinstance(version, str) or not version:
            raise InvalidRequestError(f"{where}.version: Input should be a version or 'latest'")
        if kind == "anthropic":
            raise InvalidRequestError(
                f"{where}: Anthropic's skills ({skill_id!r}) are not served by this server; upload a"
                " custom skill through the Skills API"
            )
        if any(s.skill_id == skill_id for s in loaded):
            raise InvalidRequestError(f"{where}.skill_id: {skill_id!r} is listed twice")
        found = store.version(skill_id, version) if store is not None else None
        if found is None:
            if store is None or store.get(skill_id) is None:
                raise NotFoundError(f"{where}.skill_id: no skill with id {skill_id!r}")
            raise NotFoundError(f"{where}.version: skill {skill_id!r} has no version {version!r}")
        if any(s.name == found.name for s in loaded):
            raise InvalidRequestError(f"{where}: two skills named {found.name!r} cannot share a container")
        loaded.append(LoadedSkill(skill_id, found.version, found.name, found.description, found.directory))
    return tuple(loaded)


def with_skill_note(params: P, skills: tuple[LoadedSkill, ...]) -> P:
    """`params` with the skills' names and descriptions at the end of the system prompt."""
    if not skills:
        return params
    lines = [
        "Skills are available in the code execution container, each a read-only directory whose"
        " SKILL.md says how to use it. When a task matches a skill, read its SKILL.md first:",
        *(f"- {s.name}: {s.description} ({s.path}/SKILL.md)" for s in skills),
    ]
    note = "\n".join(lines)
    system = params.system
    if system is None:
        updated: Any = note
    elif isinstance(system, str):
        updated = f"{system}\n\n{note}"
    else:
        updated = [*system, TextBlockParam(type="text", text=note)]
    return params.model_copy(update={"system": updated})
