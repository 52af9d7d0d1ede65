"""The Skills API (beta `skills-2025-10-02`), thin: create a skill from an upload, list, retrieve,
delete; each skill's versions the same, and a version's files as a zip.

Objects in SDK 2.17's shape (`BetaSkill`, `BetaSkillVersion`), with the fields of the older
OpenAPI shape (2026-05: `display_title`, `latest_version`, a version's `version` and
`directory`) beside them where they do not conflict; `source` is the SDK's object. Versions are
Unix timestamps in microseconds (skills guide: "Epoch timestamp: 1759178010641129 or latest").
A skill is deleted once its versions are (skills guide: delete every version first): before, a
400. Each path also answers with `?beta=true` (the query is not read) and without the beta header.
"""

from __future__ import annotations

import asyncio
import io
import zipfile
from typing import Any

from litestar import Request, Response, delete, get, post
from litestar.datastructures import UploadFile

from reference_server.errors import InvalidRequestError, NotFoundError
from reference_server.timestamps import rfc3339
from reference_server.validation import parse_limit
from reference_server.workspaces import workspace_of

from .bundle import MAX_BUNDLE_BYTES, read_bundle
from .store import NameChanged, SkillRecord, SkillStore, SkillVersionRecord

__all__ = ["skill_object", "skill_route_handlers", "version_object"]

PAGE_PREFIX = "page_"  # the opaque cursor: here, the last id (or version) of the page
MAX_DISPLAY_NAME = 255
AnyRequest = Request[Any, Any, Any]


def _store(request: AnyRequest) -> SkillStore:
    """The Skills API store as the request's workspace sees it."""
    store: SkillStore = request.app.state.skills
    return store.scoped(workspace_of(request))


def skill_object(record: SkillRecord) -> dict[str, Any]:
    return {
        "type": "skill",
        "id": record.id,
        "created_at": rfc3339(record.created_at),
        "updated_at": rfc3339(record.updated_at),
        "display_name": record.display_name,
        "display_title": record.display_name,
        "latest_version_id": record.latest_version,
        "latest_version": record.latest_version,
        "source": {"type": "custom"},
    }


def version_object(record: SkillVersionRecord) -> dict[str, Any]:
    return {
        "type": "skill_version",
        "id": record.version,
        "version": record.version,
        "skill_id": record.skill_id,
        "name": record.name,
        "directory": record.name,
        "description": record.description,
        "created_at": rfc3339(record.created_at),
    }


def _not_found(skill_id: str) -> NotFoundError:
    return NotFoundError(f"skill_id: no skill with id {skill_id!r}")


async def _bundle(request: AnyRequest) -> tuple[Any, str | None]:
    """The upload's checked bundle and its display name (None: not given)."""
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise InvalidRequestError("files: the upload must be multipart/form-data with `files[]` parts")
    form = await request.form()
    parts: list[tuple[str, bytes]] = []
    for key, value in form.multi_items():
        if key in ("files", "files[]") and isinstance(value, UploadFile):
            parts.append((value.filename or "", await value.read()))
    name = form.get("display_name", form.get("display_title"))
    if name is not None and (not isinstance(name, str) or len(name) > MAX_DISPLAY_NAME or "\n" in name):
        raise InvalidRequestError(f"display_name: one line of at most {MAX_DISPLAY_NAME} characters")
    return await asyncio.to_thread(read_bundle, parts), name or None


def _cursor(request: AnyRequest, maximum: int) -> tuple[int, str | None]:
    query = request.query_params
    limit = parse_limit(query.get("limit"))
    if not 1 <= limit <= maximum:
        raise InvalidRequestError(f"limit: Input should be between 1 and {maximum}")
    page = query.get("page")
    if page is not None and not page.startswith(PAGE_PREFIX):
        raise InvalidRequestError("page: not a cursor this server returned")
    return limit, page.removeprefix(PAGE_PREFIX) if page else None


def _listed(data: list[dict[str, Any]], has_more: bool) -> Response[Any]:
    last = data[-1]["id"] if data else None
    body = {
        "data": data,
        "has_more": has_more,
        "next_page": PAGE_PREFIX + last if has_more and last else None,
    }
    return Response(body, media_type="application/json")


# The body holds the bundle and the form's framing; the bundle's own size is checked.
@post(["/v1/skills"], status_code=200, request_max_body_size=MAX_BUNDLE_BYTES + (1 << 20))
async def create_skill(request: AnyRequest) -> Response[Any]:
    bundle, display_name = await _bundle(request)
    record = await asyncio.to_thread(_store(request).create, bundle, display_name)
    return Response(skill_object(record), media_type="application/json")


@get(["/v1/skills"])
async def list_skills(request: AnyRequest) -> Response[Any]:
    limit, after = _cursor(request, 100)
    source = request.query_params.get("source")
    found = await asyncio.to_thread(_store(request).page, after=after, limit=limit, source=source)
    if found is None:
        raise InvalidRequestError("page: not a cursor this server returned")
    records, has_more = found
    return _listed([skill_object(r) for r in records], has_more)


@get(["/v1/skills/{skill_id:str}"])
async def get_skill(request: AnyRequest) -> Response[Any]:
    skill_id = request.path_params["skill_id"]
    record = await asyncio.to_thread(_store(request).get, skill_id)
    if record is None:
        raise _not_found(skill_id)
    return Response(skill_object(record), media_type="application/json")


@delete(["/v1/skills/{skill_id:str}"], status_code=200)
async def delete_skill(request: AnyRequest) -> Response[Any]:
    skill_id = request.path_params["skill_id"]
    deleted = await asyncio.to_thread(_store(request).delete, skill_id)
    if deleted is None:
        raise _not_found(skill_id)
    if not deleted:
        raise InvalidRequestError(
            f"skill_id: skill {skill_id!r} still has versions; delete each version first"
        )
    return Response({"type": "skill_deleted", "id": skill_id}, media_type="application/json")


@post(
    ["/v1/skills/{skill_id:str}/versions"],
    status_code=200,
    request_max_body_size=MAX_BUNDLE_BYTES + (1 << 20),
)
async def create_version(request: AnyRequest) -> Response[Any]:
    skill_id = request.path_params["skill_id"]
    bundle, _ = await _bundle(request)
    try:
        record = await asyncio.to_thread(_store(request).add_version, skill_id, bundle)
    except NameChanged as exc:
        raise InvalidRequestError(
            f"files: SKILL.md names {bundle.name!r}; every version of this skill is named {exc.args[0]!r}"
        ) from None
    if record is None:
        raise _not_found(skill_id)
    return Response(version_object(record), media_type="application/json")


@get(["/v1/skills/{skill_id:str}/versions"])
async def list_versions(request: AnyRequest) -> Response[Any]:
    skill_id = request.path_params["skill_id"]
    limit, after = _cursor(request, 1000)
    found = await asyncio.to_thread(_store(request).versions, skill_id, after=after, limit=limit)
    if found is None:
        if await asyncio.to_thread(_store(request).get, skill_id) is None:
            raise _not_found(skill_id)
        raise InvalidRequestError("page: not a cursor this server returned")
    records, has_more = found
    return _listed([version_object(r) for r in records], has_more)


async def _version(request: AnyRequest, skill_id: str, version: str) -> SkillVersionRecord:
    record = await asyncio.to_thread(_store(request).version, skill_id, version)
    if record is None:
        if await asyncio.to_thread(_store(request).get, skill_id) is None:
            raise _not_found(skill_id)
        raise NotFoundError(f"version: skill {skill_id!r} has no version {version!r}")
    return record


@get(["/v1/skills/{skill_id:str}/versions/{version:str}"])
async def get_version(request: AnyRequest) -> Response[Any]:
    skill_id, version = request.path_params["skill_id"], request.path_params["version"]
    return Response(version_object(await _version(request, skill_id, version)), media_type="application/json")


@delete(["/v1/skills/{skill_id:str}/versions/{version:str}"], status_code=200)
async def delete_version(request: AnyRequest) -> Response[Any]:
    skill_id, version = request.path_params["skill_id"], request.path_params["version"]
    record = await _version(request, skill_id, version)  # `latest` resolves to the newest
    if not await asyncio.to_thread(_store(request).delete_version, skill_id, record.version):
        raise NotFoundError(f"version: skill {skill_id!r} has no version {version!r}")
    return Response({"type": "skill_version_deleted", "id": record.version}, media_type="application/json")


@get(["/v1/skills/{skill_id:str}/versions/{version:str}/content"])
async def download_version(request: AnyRequest) -> Response[Any]:
    skill_id, version = request.path_params["skill_id"], request.path_params["version"]
    record = await _version(request, skill_id, version)
    data = await asyncio.to_thread(_zipped, record)
    disposition = f'attachment; filename="{record.name}.zip"'
    return Response(data, media_type="application/zip", headers={"content-disposition": disposition})


def _zipped(record: SkillVersionRecord) -> bytes:
    """The version's files under its top-level directory, as uploaded."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(record.directory.rglob("*")):
            if path.is_file() and not path.is_symlink():
                archive.write(path, f"{record.name}/{path.relative_to(record.directory).as_posix()}")
    return out.getvalue()


skill_route_handlers = [
    create_skill,
    list_skills,
    get_skill,
    delete_skill,
    create_version,
    list_versions,
    get_version,
    delete_version,
    download_version,
]
