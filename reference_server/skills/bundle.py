"""A skill's upload read and checked: the files of one top-level directory with a `SKILL.md` at
its root, whose YAML frontmatter names the skill and says what it does.

Rules (Skills API docs: "All files must be in the same top-level directory and must include a
SKILL.md file at the root of that directory"; the Agent Skills frontmatter rules the skills
guide gives): `name` 1-64 lowercase letters, digits and hyphens, without the reserved words
"anthropic" and "claude" (absent: the directory's name); `description` 1-1024 characters;
neither holds an XML tag. Paths are relative, without `..`, empty parts or backslashes. Every
violation is a 400 naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

import yaml

from reference_server.errors import InvalidRequestError, RequestTooLargeError

__all__ = ["MAX_BUNDLE_BYTES", "MAX_BUNDLE_FILES", "Bundle", "read_bundle"]

MAX_BUNDLE_BYTES = 8 * 1024 * 1024  # all files together (this server's bound)
MAX_BUNDLE_FILES = 500
SKILL_FILE = "SKILL.md"
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_RESERVED = ("anthropic", "claude")
_TAG = re.compile(r"<[^>]*>")
_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(\r?\n|\Z)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Bundle:
    """A checked upload: the skill's name and description, and its files relative to the
    top-level directory (which is `directory`)."""

    name: str
    description: str
    directory: str
    files: tuple[tuple[str, bytes], ...]


def read_bundle(parts: list[tuple[str, bytes]]) -> Bundle:
    """`parts`: (the part's filename, its bytes), as uploaded."""
    if not parts:
        raise InvalidRequestError("files: at least one file is required, including SKILL.md")
    if len(parts) > MAX_BUNDLE_FILES:
        raise InvalidRequestError(f"files: at most {MAX_BUNDLE_FILES} files per upload")
    if sum(len(data) for _, data in parts) > MAX_BUNDLE_BYTES:
        raise RequestTooLargeError(f"files: the upload exceeds {MAX_BUNDLE_BYTES} bytes in all")
    tops: set[str] = set()
    files: dict[str, bytes] = {}
    for index, (raw, data) in enumerate(parts):
        top, rest = _split(raw, index)
        tops.add(top)
        if rest in files:
            raise InvalidRequestError(f"files.{index}: {raw!r} is uploaded twice")
        files[rest] = data
    for path in files:  # a file where another's directory would be
        if any(other.startswith(path + "/") for other in files):
            raise InvalidRequestError(f"files: {path!r} is uploaded both as a file and as a directory")
    if len(tops) != 1:
        raise InvalidRequestError(
            f"files: all files must be in the same top-level directory (got {', '.join(sorted(tops))})"
        )
    skill_md = files.get(SKILL_FILE)
    if skill_md is None:
        raise InvalidRequestError(
            f"files: a {SKILL_FILE} file is required at the root of the top-level directory"
        )
    directory = tops.pop()
    name, description = _frontmatter(skill_md, directory)
    return Bundle(name, description, directory, tuple(sorted(files.items())))


def _split(raw: str, index: int) -> tuple[str, str]:
    """(top-level directory, path below it) of an uploaded file's name."""
    where = f"files.{index}"
    if "\\" in raw or raw.startswith("/") or "\x00" in raw:
        raise InvalidRequestError(f"{where}: {raw!r} is not a relative path with / separators")
    parts = PurePosixPath(raw).parts
    if any(part in ("", ".", "..") for part in parts) or len(parts) < 2:
        raise InvalidRequestError(
            f"{where}: {raw!r} must be a path inside the skill's top-level directory (e.g. my-skill/SKILL.md)"
        )
    return parts[0], "/".join(parts[1:])


def _frontmatter(skill_md: bytes, directory: str) -> tuple[str, str]:
    """(name, description) of SKILL.md's frontmatter; without a name, the directory's (SDK 2.17:
    the name is "set at creation from the first upload's SKILL.md frontmatter `name` (or its
    enclosing directory)")."""
    where = f"{SKILL_FILE} frontmatter"
    try:
        text = skill_md.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequestError(f"{SKILL_FILE}: not UTF-8 text") from None
    found = _FRONTMATTER.match(text.lstrip("\ufeff"))
    if found is None:
        raise InvalidRequestError(f"{SKILL_FILE}: it must begin with YAML frontmatter between --- lines")
    try:
        meta = yaml.safe_load(found.group(1))
    except yaml.YAMLError as exc:
        raise InvalidRequestError(f"{where}: not valid YAML ({type(exc).__name__})") from None
    if not isinstance(meta, dict):
        raise InvalidRequestError(f"{where}: must be a mapping with name and description")
    name, description = meta.get("name", directory), meta.get("description")
    if not isinstance(name, str) or not 1 <= len(name) <= 64 or not _NAME.match(name):
        raise InvalidRequestError(f"{where}: name must be 1-64 lowercase letters, digits and hyphens")
    if any(word in name for word in _RESERVED):
        raise InvalidRequestError(
            f"{where}: name may not contain the reserved words {' or '.join(_RESERVED)}"
        )
    if not isinstance(description, str) or not 1 <= len(description.strip()) <= 1024:
        raise InvalidRequestError(f"{where}: description must be 1-1024 characters")
    if _TAG.search(name) or _TAG.search(description):
        raise InvalidRequestError(f"{where}: name and description may not hold XML tags")
    return name, description.strip()
