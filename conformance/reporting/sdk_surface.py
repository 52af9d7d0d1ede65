"""What the installed official SDK's types carry that the catalogue's spec does not.

The spec copy (`spec/`, from May 2026) ages; the SDKs are generated from the official spec at
each release. So the request, response and event keys are read from the installed `anthropic`
package's own types (its TypedDicts and pydantic models) in the notation of coverage.py, and
compared with the coverage universe: what a new SDK release adds shows at once, in the
coverage page and in `plumbline --version`. (The TypeScript SDK is generated from the same
spec; it is installed only when SDK-* run, so the Python one speaks for both.)
"""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
from anthropic import types

__all__ = ["SurfaceDiff", "sdk_keys", "sdk_only", "surface_diff", "tool_types"]


def _literals(annotation: Any) -> Iterator[str]:
    """The string Literal values inside an annotation (through unions, Optional, Annotated,
    Required/NotRequired)."""
    if typing.get_origin(annotation) is typing.Literal:
        yield from (value for value in typing.get_args(annotation) if isinstance(value, str))
        return
    for argument in typing.get_args(annotation):
        yield from _literals(argument)


def _members(union: Any) -> Iterator[Any]:
    """The classes of a (possibly Annotated) union of types."""
    for argument in typing.get_args(union) or (union,):
        if isinstance(argument, type):
            yield argument
        elif typing.get_args(argument):
            yield from _members(argument)


def _type_of(member: type) -> list[str]:
    """The `type` discriminator of a pydantic model or a TypedDict."""
    fields = getattr(member, "model_fields", None)
    if fields is not None:
        return list(_literals(fields["type"].annotation)) if "type" in fields else []
    try:  # a TypedDict's annotations are strings (the SDK's modules use postponed annotations)
        hints = typing.get_type_hints(member, include_extras=True)
    except (NameError, TypeError):
        return []
    return list(_literals(hints["type"])) if "type" in hints else []


def _typed_dict_keys(typed: Any) -> list[str]:
    return sorted(typed.__required_keys__ | typed.__optional_keys__)


def sdk_keys() -> dict[str, str]:
    """Coverage keys (coverage.py notation) the installed SDK's types define → where."""
    keys: dict[str, str] = {}
    create = types.message_create_params.MessageCreateParamsBase
    count = types.message_count_tokens_params.MessageCountTokensParams
    keys.update((f"request:{name}", "MessageCreateParams") for name in _typed_dict_keys(create))
    keys.update((f"count_request:{name}", "MessageCountTokensParams") for name in _typed_dict_keys(count))
    keys.update((f"response:{name}", "Message") for name in types.Message.model_fields)
    keys.update((f"response:usage.{name}", "Usage") for name in types.Usage.model_fields)
    for member in _members(types.ContentBlock):
        keys.update((f"block:{name}", "ContentBlock") for name in _type_of(member))
    for member in _members(types.ContentBlockParam):
        for name in _type_of(member):
            keys.setdefault(f"block:{name}", "ContentBlockParam")
    for member in _members(types.RawMessageStreamEvent):
        keys.update((f"event:{name}", "RawMessageStreamEvent") for name in _type_of(member))
    for member in _members(types.RawContentBlockDelta):
        keys.update((f"delta:{name}", "RawContentBlockDelta") for name in _type_of(member))
    keys.update((f"stop_reason:{name}", "StopReason") for name in _literals(types.StopReason))
    return keys


def tool_types() -> list[str]:
    """Every tool `type` the SDK's ToolUnionParam names (the versions of Anthropic's tools)."""
    return sorted({name for member in _members(types.ToolUnionParam) for name in _type_of(member)})


def sdk_only(universe: typing.Collection[str]) -> dict[str, str]:
    """The SDK's keys that the coverage universe lacks → the SDK type that has them."""
    return {key: where for key, where in sorted(sdk_keys().items()) if key not in universe}


def spec_tool_types() -> set[str]:
    """The tool `type` values the spec copy and its overlays name (a request's tools[] items,
    nullable ones included: a custom tool's `type` may be left out)."""
    from conformance.judging.schemas import openapi_path
    from conformance.reporting.coverage import SPEC_PATH, walker

    found: set[str] = set()
    for path in (SPEC_PATH, openapi_path()):
        document = walker(json.loads(path.read_text(encoding="utf-8")))
        tools = document.resolve(document.body("/v1/messages"))["properties"]["tools"]
        for items in document.items(tools):
            for member in document.members(items):
                for kind in document.members(member.get("properties", {}).get("type", {})):
                    found.update(v for v in [kind.get("const"), *kind.get("enum", [])] if isinstance(v, str))
    return found


@dataclass(frozen=True, slots=True)
class SurfaceDiff:
    """What the installed SDK types and the catalogue's spec (copy and overlays) lacks."""

    sdk: str
    keys: dict[str, str]  # coverage key → the SDK type that has it
    tools: list[str]  # tool types

    @property
    def count(self) -> int:
        return len(self.keys) + len(self.tools)

    def line(self, limit: int = 6) -> str:
        """One line for `plumbline --version`."""
        if not self.count:
            return f"anthropic SDK {self.sdk}: every request, response and event key it types is in the spec"
        names = [*self.keys, *(f"tool:{t}" for t in self.tools)]
        shown = ", ".join(names[:limit]) + (f", … ({len(names) - limit} more)" if len(names) > limit else "")
        return f"anthropic SDK {self.sdk} types {self.count} keys the catalogue's spec lacks: {shown}"


def surface_diff() -> SurfaceDiff | None:
    """The difference, or None where the spec copy is not there (an installed wheel: the spec
    lives in a checkout)."""
    from conformance.reporting.coverage import SPEC_PATH, universe

    if not SPEC_PATH.is_file():
        return None
    return SurfaceDiff(
        str(anthropic.__version__),
        sdk_only(set(universe())),
        sorted(set(tool_types()) - spec_tool_types()),
    )
