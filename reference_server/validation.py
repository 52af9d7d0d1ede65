"""Request validation the way the real API reports it: a 400 `invalid_request_error` whose
message starts with the dotted path of the offending field (`messages.0.content.1.text: …`).

Schema-level checks come from the pydantic models in `protocol.py`; the rules a schema
cannot express (non-empty turns, whitespace, features this server lacks) live here.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from reference_server.content import (
    ImageInfo,
    RenderedDocument,
    check_image,
    check_image_count,
    check_pdf_page_total,
    render_document,
    render_search_result,
)
from reference_server.engine.base import CacheMark, CacheTTL, ImagePart, ToolCall, Turn
from reference_server.errors import InvalidRequestError
from reference_server.protocol import (
    UNION_TAGS,
    CacheControlEphemeralParam,
    DocumentBlockParam,
    ImageBlockParam,
    MessageParam,
    PromptParams,
    RedactedThinkingBlockParam,
    SearchResultBlockParam,
    ServerContentBlockParam,
    TextBlockParam,
    ThinkingBlockParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
)
from reference_server.server_tools.history import (
    CALL_TYPES,
    RESULT_TYPES,
    code_caller,
    server_call,
    server_result_turn,
)
from reference_server.server_tools.results import Opener
from reference_server.tools.definitions import ToolDefinition
from reference_server.tools.history import check_tool_pairing, tool_call, tool_result_turn

__all__ = [
    "BodyProblem",
    "build_turns",
    "check_cache_breakpoints",
    "check_stop_sequences",
    "error_path",
    "json_object",
    "parse_body",
    "parse_limit",
]

ParamsT = TypeVar("ParamsT", bound=BaseModel)
_Block = TypeVar("_Block", bound=BaseModel)

# Blocks in one message, and consecutive same-role messages, are joined with a blank line.
BLOCK_SEPARATOR = "\n\n"


class BodyProblem(Exception):
    """Why a request body is not a JSON object; each dialect words it its own way."""

    def __init__(self, kind: Literal["content-type", "json", "not-object"], detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


def json_object(raw: bytes, content_type: str | None) -> dict[str, Any]:
    """The body as a JSON object, or a BodyProblem: wrong content type, not JSON, not an object."""
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise BodyProblem("content-type", f"expected application/json, got {content_type or 'nothing'}")
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BodyProblem("json", str(exc)) from None
    if not isinstance(data, dict):
        raise BodyProblem("not-object", "expected a JSON object")
    return data


def parse_body(raw: bytes, content_type: str | None, model: type[ParamsT]) -> ParamsT:
    """Bytes → validated params, or the first problem as an InvalidRequestError."""
    try:
        data = json_object(raw, content_type)
    except BodyProblem as problem:
        if problem.kind == "content-type":
            raise InvalidRequestError(f"content-type: {problem.detail}") from None
        if problem.kind == "json":
            raise InvalidRequestError(f"The request body is not valid JSON: {problem.detail}") from None
        raise InvalidRequestError("The request body must be a JSON object") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        path = error_path(first["loc"])
        raise InvalidRequestError(f"{path}: {first['msg']}" if path else first["msg"]) from None


def parse_limit(raw: str | None, default: int = 20) -> int:
    """The `limit` query parameter of list endpoints (range checked by the list itself)."""
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidRequestError("limit: Input should be a valid integer") from None


def error_path(loc: Sequence[int | str]) -> str:
    """pydantic's error location as the API's dotted path, without union-branch tags."""
    return ".".join(str(part) for part in loc if part not in UNION_TAGS)


MAX_CACHE_BREAKPOINTS = 4


def check_cache_breakpoints(params: PromptParams) -> None:
    """At most four blocks may carry cache_control (the top-level marker counts as one)."""
    found = int(params.cache_control is not None)
    if isinstance(params.system, list):
        found += sum(block.cache_control is not None for block in params.system)
    for message in params.messages:
        if not isinstance(message.content, str):
            found += sum(getattr(block, "cache_control", None) is not None for block in message.content)
    found += sum(
        isinstance(tool, dict) and tool.get("cache_control") is not None for tool in params.tools or ()
    )
    if found > MAX_CACHE_BREAKPOINTS:
        raise InvalidRequestError(
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {found}."
        )


def check_stop_sequences(stop_sequences: Sequence[str] | None) -> tuple[str, ...]:
    stops = tuple(stop_sequences or ())
    for i, stop in enumerate(stops):
        if not stop.strip():
            raise InvalidRequestError(
                f"stop_sequences.{i}: each stop sequence must contain non-whitespace characters"
            )
    return stops


def build_turns(
    params: PromptParams,
    *,
    tools: Mapping[str, ToolDefinition] | None = None,
    thinking: Mapping[tuple[int, int], str] | None = None,
    opener: Opener | None = None,
    vision: bool = False,
    documents: list[RenderedDocument] | None = None,
) -> tuple[Turn, ...]:
    """System prompt and messages → the engine's turns.

    Consecutive same-role messages are combined into one turn (the API documents this).
    A final assistant message is a prefill; an empty one is simply no prefill. tool_use blocks
    become the assistant turn's calls and tool_result blocks `tool` turns, paired by id as the
    API checks them (tools/history.py). Thinking blocks are dropped, except those in `thinking`
    (by message and block index, already verified: thinking/history.py), rendered as that text.
    The request's documents, as rendered, are appended to `documents` (what citations quote).
    """
    if not params.messages:
        raise InvalidRequestError("messages: at least one message is required")
    tools = tools or {}
    names = check_tool_pairing(params.messages, have_tools=bool(tools))
    code = _CodeCalls(_code_made(params.messages))
    media = _Media(images=_count_images(params.messages), vision=vision)
    check_image_count(media.images)
    turns: list[Turn] = []
    system = _system_turn(params)
    if system is not None:
        turns.append(system)
    last = len(params.messages) - 1
    for index, message in enumerate(params.messages):
        kept = {j: text for (i, j), text in (thinking or {}).items() if i == index}
        pieces = _message_turns(message, f"messages.{index}", names, kept, media, tools, opener, code)
        if not pieces:
            if message.role == "assistant" and (index == last or _only_thinking(message)):
                continue  # no prefill; or an answer cut short in its thinking, sent back
            if code.only_code_calls(message):
                continue  # calls code made and their results: no turn of the model's
            raise InvalidRequestError(
                f"messages.{index}: all messages must have non-empty content except for the"
                " optional final assistant message"
            )
        text = pieces[-1].text
        if index == last and message.role == "assistant" and text != text.rstrip():
            raise InvalidRequestError("messages: final assistant content cannot end with trailing whitespace")
        for piece in pieces:
            _append(turns, piece)
    if all(turn.role == "system" for turn in turns):
        raise InvalidRequestError("messages: at least one user or assistant message is required")
    check_pdf_page_total(media.pdf_pages)
    if documents is not None:
        documents.extend(media.documents + media.search_results)
    return _place_request_marks(params, turns)


@dataclass(slots=True)
class _Media:
    """Per-request limits of images and PDF pages (counted over every message)."""

    images: int
    pdf_pages: int = 0
    vision: bool = False  # the model reads images (else they are refused after the checks)
    documents: list[RenderedDocument] = field(default_factory=list)  # in document_index order
    search_results: list[RenderedDocument] = field(default_factory=list)  # search_result_index order


@dataclass(slots=True)
class _CodeCalls:
    """Programmatic tool calling in the history (server_tools/history.py): the tool_use blocks
    code made (id -> the code execution call's id), and the code execution calls they paused,
    whose result comes in a later assistant message than the call."""

    made: dict[str, str]
    paused: dict[str, ToolCall] = field(default_factory=dict)

    def made_by_code(self, block: object) -> bool:
        """A call code made, or its result."""
        return (isinstance(block, ToolUseBlockParam) and block.id in self.made) or (
            isinstance(block, ToolResultBlockParam) and block.tool_use_id in self.made
        )

    def only_code_calls(self, message: MessageParam) -> bool:
        content = message.content
        return not isinstance(content, str) and bool(content) and all(map(self.made_by_code, content))


def _code_made(messages: Sequence[MessageParam]) -> dict[str, str]:
    """The tool_use blocks code made: id -> the code execution call whose code made it (a
    server_tool_use earlier in the conversation, else a 400)."""
    made: dict[str, str] = {}
    calls: set[str] = set()
    for index, message in enumerate(messages):
        for position, block in enumerate(() if isinstance(message.content, str) else message.content):
            path = f"messages.{index}.content.{position}"
            if isinstance(block, ServerContentBlockParam) and block.type == "server_tool_use":
                calls.add(str((block.model_extra or {}).get("id")))
            elif isinstance(block, ToolUseBlockParam) and (caller := code_caller(block, path)) is not None:
                if caller not in calls:
                    raise InvalidRequestError(
                        f"{path}.caller.tool_id: {caller!r} names no server_tool_use earlier in the"
                        " conversation"
                    )
                made[block.id] = caller
    return made


def _count_images(messages: Sequence[MessageParam]) -> int:
    return sum(
        isinstance(block, ImageBlockParam)
        for message in messages
        if not isinstance(message.content, str)
        for block in message.content
    )


def _marks(control: CacheControlEphemeralParam | None, offset: int) -> tuple[CacheMark, ...]:
    return () if control is None else (CacheMark(offset, control.ttl or "5m"),)


def _place_request_marks(params: PromptParams, turns: list[Turn]) -> tuple[Turn, ...]:
    """Breakpoints not on a block: a tool definition's (this server renders tools with the system
    prompt, so it caches the prefix up to the first message) and the top-level automatic one
    (the end of the last block)."""
    tool_ttls: list[CacheTTL] = [
        "1h" if tool["cache_control"].get("ttl") == "1h" else "5m"
        for tool in params.tools or ()
        if isinstance(tool, dict) and isinstance(tool.get("cache_control"), dict)
    ]
    if tool_ttls:
        first = next(i for i, turn in enumerate(turns) if turn.role != "system")
        marks = tuple(CacheMark(0, ttl) for ttl in tool_ttls)
        turns[first] = replace(turns[first], cache_marks=marks + turns[first].cache_marks)
    if params.cache_control is not None:
        last = turns[-1]
        extra = _marks(params.cache_control, len(last.text))
        turns[-1] = replace(last, cache_marks=last.cache_marks + extra)
    return tuple(turns)


def _append(turns: list[Turn], turn: Turn) -> None:
    previous = turns[-1] if turns else None
    mergeable = turn.role in ("system", "user", "assistant") and not (previous and previous.tool_calls)
    if previous is not None and previous.role == turn.role and mergeable:
        shift = len(previous.text) + (len(BLOCK_SEPARATOR) if previous.text and turn.text else 0)
        text = BLOCK_SEPARATOR.join(t for t in (previous.text, turn.text) if t)
        marks = previous.cache_marks + tuple(replace(m, offset=m.offset + shift) for m in turn.cache_marks)
        images = previous.images + turn.images
        turns[-1] = Turn(turn.role, text, tool_calls=turn.tool_calls, cache_marks=marks, images=images)
    else:
        turns.append(turn)


def _joined(
    pieces: Sequence[tuple[str, CacheControlEphemeralParam | None]],
) -> tuple[str, tuple[CacheMark, ...]]:
    """Block texts joined with the separator, and a mark at the end of each block that has one."""
    text = ""
    marks: tuple[CacheMark, ...] = ()
    for piece, control in pieces:
        text = f"{text}{BLOCK_SEPARATOR}{piece}" if text and piece else text + piece
        marks += _marks(control, len(text))
    return text, marks


def _system_turn(params: PromptParams) -> Turn | None:
    if params.system is None:
        return None
    if isinstance(params.system, str):
        return Turn("system", params.system) if params.system else None
    for i, block in enumerate(params.system):
        _require_visible(block.text, f"system.{i}.text")
    text, marks = _joined([(block.text, block.cache_control) for block in params.system])
    return Turn("system", text, cache_marks=marks) if text else None


def _message_turns(
    message: MessageParam,
    path: str,
    names: dict[str, str],
    thinking: Mapping[int, str],
    media: _Media,
    tools: Mapping[str, ToolDefinition],
    opener: Opener | None,
    code: _CodeCalls,
) -> list[Turn]:
    """One message as turns: tool results first (as `tool` turns), then its text (with the
    assistant's calls); [] when it holds nothing. In an assistant message each server-tool
    result ends a turn of its own: text and calls so far, then the result, then what follows.
    Calls code made and their results are no turns (the code's result is what the model read)."""
    if isinstance(message.content, str):
        if message.content:
            _require_visible(message.content, f"{path}.content")
        return [Turn(message.role, message.content)] if message.content else []
    texts: list[tuple[str, CacheControlEphemeralParam | None]] = []
    images: list[ImagePart] = []
    calls: list[ToolCall] = []
    results: list[Turn] = []
    server_calls: dict[str, ToolCall] = {}
    for i, block in enumerate(message.content):
        block_path = f"{path}.content.{i}"
        if isinstance(block, TextBlockParam):
            _require_visible(block.text, f"{block_path}.text")
            texts.append((block.text, block.cache_control))
        elif message.role == "system":
            raise InvalidRequestError(f"{block_path}: system messages may only contain text blocks")
        elif isinstance(block, ThinkingBlockParam | RedactedThinkingBlockParam):
            if i in thinking:
                texts.append((thinking[i], None))
        elif isinstance(block, DocumentBlockParam):
            texts.append((_document_text(block, block_path, media), block.cache_control))
        elif isinstance(block, SearchResultBlockParam):
            texts.append((_search_result_text(block, block_path, media), block.cache_control))
        elif isinstance(block, ImageBlockParam):
            # Checked as the API checks images, then refused unless the model has a vision tower.
            info = check_image(block, block_path, image_count=media.images)
            if not media.vision or message.role != "user":
                raise InvalidRequestError(f"{block_path}: {_unsupported_block(block)}")
            images.append(_image_part(block, info))
            if block.cache_control is not None:
                texts.append(("", block.cache_control))
        elif code.made_by_code(block):
            continue
        elif isinstance(block, ToolUseBlockParam):
            calls.append(tool_call(block))
            # The calls render after the text: the breakpoint caches up to the text's end.
            texts.append(("", block.cache_control))
        elif isinstance(block, ToolResultBlockParam):
            nested = partial(_nested_in_result, media=media, file_ids=block._file_ids)
            image = partial(_result_image, media=media)
            turn = tool_result_turn(block, block_path, names[block.tool_use_id], tools, nested, image)
            results.append(replace(turn, cache_marks=_marks(block.cache_control, len(turn.text))))
        elif isinstance(block, ServerContentBlockParam) and block.type in CALL_TYPES:
            call = server_call(block, block_path, message.role)
            server_calls[call.id] = call
            calls.append(call)
            if call.id in code.made.values():  # its code paused: the result comes later
                code.paused[call.id] = call
        elif isinstance(block, ServerContentBlockParam) and block.type in RESULT_TYPES:
            done = server_result_turn(block, block_path, {**code.paused, **server_calls}, tools, opener)
            text, marks = _joined(texts)
            if text or calls or marks:  # (a paused code call's result may open its message)
                results.append(Turn(message.role, text, tool_calls=tuple(calls), cache_marks=marks))
            results.append(done)
            texts, calls = [], []
        else:
            raise InvalidRequestError(f"{block_path}: {_unsupported_block(block)}")
    text, marks = _joined(texts)
    own = (
        [Turn(message.role, text, tool_calls=tuple(calls), cache_marks=marks, images=tuple(images))]
        if text or calls or images
        else []
    )
    return results + own


def _image_part(block: ImageBlockParam, info: ImageInfo) -> ImagePart:
    """A checked base64 image as the engine takes it; the digest tells different images apart."""
    data = base64.b64decode(block.source["data"])
    digest = hashlib.sha256(data).hexdigest()
    return ImagePart(data, info.media_type, info.width, info.height, digest)


def _document_text(block: DocumentBlockParam, path: str, media: _Media) -> str:
    """A document as the model reads it (content/documents.py), numbered when citations are
    enabled on it. The API takes citations on all of a request's documents or on none."""
    cited = block.citations is not None and block.citations.get("enabled") is True
    if media.documents and (media.documents[0].cite_index is not None) != cited:
        raise InvalidRequestError(
            f"{path}.citations: citations must be enabled on all or none of the documents in a request"
        )
    document = render_document(block, path, len(media.documents) if cited else None)
    media.documents.append(document)
    if document.kind == "pdf":
        media.pdf_pages += len(document.pages)
    return document.text


def _result_image(item: dict[str, Any], path: str, *, media: _Media) -> ImagePart | None:
    """An image inside a tool_result (a computer use screenshot), checked as the API checks
    images, for a vision model; None on a text-only one (refused as before, in words)."""
    if not media.vision:
        return None
    block = _nested(ImageBlockParam, item, path)
    return _image_part(block, check_image(block, path, image_count=media.images))


def _nested_in_result(
    item: dict[str, Any], path: str, position: int, *, media: _Media, file_ids: Mapping[int, str]
) -> str | None:
    """A search result or a document inside a tool_result, read (and numbered for citations)
    as the same block in user content; None for any other block. `file_ids`: the Files API ids
    of the result's documents read from files, by position (files/sources.py)."""
    kind = item.get("type")
    if kind == "search_result":
        return _search_result_text(_nested(SearchResultBlockParam, item, path), path, media)
    if kind == "document":
        document = _nested(DocumentBlockParam, item, path)
        document._file_id = file_ids.get(position)
        return _document_text(document, path, media)
    return None


def _nested(model: type[_Block], item: dict[str, Any], path: str) -> _Block:
    try:
        return model.model_validate(item)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(filter(None, (path, error_path(first["loc"]))))
        raise InvalidRequestError(f"{where}: {first['msg']}") from None


def _search_result_text(block: SearchResultBlockParam, path: str, media: _Media) -> str:
    """A search result as the model reads it, numbered when citations are enabled on it (on
    all of a request's search results, or on none, like documents)."""
    cited = block.citations is not None and block.citations.get("enabled") is True
    if media.search_results and (media.search_results[0].cite_index is not None) != cited:
        raise InvalidRequestError(
            f"{path}.citations: citations must be enabled on all or none of the search results in a request"
        )
    result = render_search_result(block, len(media.search_results) if cited else None)
    media.search_results.append(result)
    return result.text


def _only_thinking(message: MessageParam) -> bool:
    return not isinstance(message.content, str) and all(
        isinstance(block, ThinkingBlockParam | RedactedThinkingBlockParam) for block in message.content
    )


def _unsupported_block(block: Any) -> str:
    if isinstance(block, ImageBlockParam):
        return "image input is not supported by this server (the model is text-only)"
    kind = getattr(block, "type", "unknown")
    return f"{kind} blocks are not supported by this server"


def _require_visible(text: str, path: str) -> None:
    if not text.strip():
        raise InvalidRequestError(f"{path}: text content blocks must contain non-whitespace text")
