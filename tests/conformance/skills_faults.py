"""The faults of the SKILL-* properties (part of faults.fault_catalogue): skills answered in
another API's shape, versions without their SKILL.md's name and description, an unknown skill
answered 400, and a gateway that drops `container.skills` on the way to the server."""

from __future__ import annotations

from typing import Any

from .fault_proxy import Fault, Request, Response
from .faults import error

__all__ = ["skills_fault_catalogue"]


def _is_skills(request: Request) -> bool:
    return request.path.startswith("/v1/skills")


def _other_shape(request: Request, response: Response) -> Response:
    """OpenAI's skill object (`object`, `name`, `default_version`, Unix seconds) for Anthropic's."""
    data = response.json
    if not _is_skills(request) or not isinstance(data, dict) or data.get("type") != "skill":
        return response
    return response.with_json(
        {
            "id": data.get("id"),
            "object": "skill",
            "name": data.get("display_name"),
            "default_version": "1",
            "latest_version": "1",
            "created_at": 1765000000,
        }
    )


def _bare_versions(request: Request, response: Response) -> Response:
    """skill_version objects holding only their ids (name and description left out)."""
    data = response.json
    if not _is_skills(request) or not isinstance(data, dict):
        return response
    versions = data.get("data") if isinstance(data.get("data"), list) else [data]
    for version in versions:
        if isinstance(version, dict) and version.get("type") == "skill_version":
            version.pop("name", None)
            version.pop("description", None)
    return response.with_json(data)


def _not_found_as_400(request: Request, response: Response) -> Response:
    if _is_skills(request) and response.status == 404:
        return error(400, "invalid_request_error", "skill not found")
    return response


def _drop_container_skills(request: Request) -> Request:
    body = request.json
    container = body.get("container") if isinstance(body, dict) else None
    if not request.path.startswith("/v1/messages") or not isinstance(container, dict):
        return request
    kept: dict[str, Any] = {k: v for k, v in container.items() if k != "skills"}
    return request.with_json({**body, "container": kept})


def skills_fault_catalogue() -> dict[str, Fault]:
    return {
        "SKILL-001": Fault(
            "skills answered as OpenAI skill objects (object, default_version)", response=_other_shape
        ),
        "SKILL-002": Fault("skill versions without SKILL.md's name and description", response=_bare_versions),
        "SKILL-003": Fault("an unknown skill answered 400 invalid_request_error", response=_not_found_as_400),
        "SKILL-004": Fault("container.skills dropped by the gateway", request=_drop_container_skills),
    }
