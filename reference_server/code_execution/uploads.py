"""`container_upload` blocks: Files API files put into the code execution container.

Before the request is read, each block becomes the text the model reads (where the file is),
and the files are noted (`uploaded`); once the turn's container is known (the one the request
names, else a new one), their bytes are written into it (`place`), named as uploaded. Blocking:
call both off the event loop.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TypeVar

from reference_server.errors import InvalidRequestError, NotFoundError
from reference_server.files.store import FileStore
from reference_server.protocol import ServerContentBlockParam, TextBlockParam
from reference_server.protocol.requests import PromptParams
from reference_server.sandbox.policy import WORKSPACE

from .containers import Container

__all__ = ["Upload", "has_uploads", "place", "uploaded"]

P = TypeVar("P", bound=PromptParams)


@dataclass(frozen=True, slots=True)
class Upload:
    file_id: str
    name: str  # its file name in the container's directory


def _is_upload(block: object) -> bool:
    return isinstance(block, ServerContentBlockParam) and block.type == "container_upload"


def has_uploads(params: PromptParams) -> bool:
    return any(
        _is_upload(block)
        for message in params.messages
        if not isinstance(message.content, str)
        for block in message.content
    )


def uploaded(params: P, store: FileStore | None) -> tuple[P, tuple[Upload, ...]]:
    """`params` with each container_upload block as the text the model reads, and the files;
    a 404 for an unknown file, a 400 outside a user message."""
    uploads: list[Upload] = []
    messages = []
    for m, message in enumerate(params.messages):
        if isinstance(message.content, str) or not any(_is_upload(b) for b in message.content):
            messages.append(message)
            continue
        content = []
        for i, block in enumerate(message.content):
            if not _is_upload(block):
                content.append(block)
                continue
            path = f"messages.{m}.content.{i}"
            if message.role != "user":
                raise InvalidRequestError(f"{path}: container_upload blocks may only appear in user messages")
            file_id = (block.model_extra or {}).get("file_id")
            if not isinstance(file_id, str):
                raise InvalidRequestError(f"{path}.file_id: Field required")
            record = store.get(file_id) if store is not None else None
            if record is None:
                raise NotFoundError(f"{path}.file_id: no file with id {file_id!r}")
            name = _name(record.filename, [u.name for u in uploads])
            uploads.append(Upload(file_id, name))
            text = f"[The file {name} is in the code execution container: {WORKSPACE}/{name}]"
            content.append(TextBlockParam(type="text", text=text))
        messages.append(message.model_copy(update={"content": content}))
    return params.model_copy(update={"messages": messages}), tuple(uploads)


def place(uploads: Sequence[Upload], container: Container, store: FileStore, owner: int | None) -> None:
    """Write the uploaded files into `container`'s directory (as `owner`, its runs' user)."""
    for upload in uploads:
        found = store.read(upload.file_id)
        if found is None:
            raise NotFoundError(f"container_upload: no file with id {upload.file_id!r}")
        target = container.directory / upload.name
        if target.is_symlink():  # a link the container's code made: never written through
            target.unlink()
        handle = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(handle, "wb") as out:
            out.write(found[1])
            if owner is not None:  # the file opened, never a link swapped in by its name
                os.fchown(out.fileno(), owner, owner)


def _name(filename: str, taken: Sequence[str]) -> str:
    """A plain file name (no directory), unique among this request's uploads."""
    base = PurePosixPath(filename.replace("\\", "/")).name.lstrip(".") or "upload"
    name, stem, suffix, n = base, PurePosixPath(base).stem, PurePosixPath(base).suffix, 1
    while name in taken:
        n += 1
        name = f"{stem}-{n}{suffix}"
    return name
