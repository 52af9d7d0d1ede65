"""Named patches that bring the May 2026 OpenAPI copy up to the GA types of anthropic SDK 2.14.0.

The official spec copy we derive from (tryAGI/Anthropic @ ebea3ea4, 2026-05-06) is older than the
SDK that clients use today. Each overlay below is one small, explicit edit of the spec's
`components.schemas` (or of the selected `paths`), registered with the file it was read from so a
reviewer can check it line by line. Paths in `provenance` are relative to the installed SDK
package (`anthropic/`), unless they are URLs.

Conventions the overlays follow, so that they read like the spec around them:
- a field the SDK declares without a default is required; `Optional[X] = None` becomes a
  nullable, non-required property (the spec would list it as required-with-null, but we cannot
  know that, and requiring it would fail servers that are right);
- request objects get `additionalProperties: false`, as every request object in the spec has,
  because the real API rejects unknown fields;
- enum-like values that the SDK documents as open ("more may be added") stay plain strings.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Schema = dict[str, Any]
Schemas = dict[str, Schema]
Paths = dict[str, Any]


@dataclass(frozen=True)
class Overlay:
    """One named patch of the spec, with where the newer truth was read."""

    name: str
    summary: str
    provenance: tuple[str, ...]
    apply: Callable[[Schemas, Paths], None]


_REGISTERED: list[Overlay] = []


def overlay(
    name: str, summary: str, *provenance: str
) -> Callable[[Callable[[Schemas, Paths], None]], Callable[[Schemas, Paths], None]]:
    """Register a patch function under `name`; overlays run in registration order."""

    def register(fn: Callable[[Schemas, Paths], None]) -> Callable[[Schemas, Paths], None]:
        _REGISTERED.append(Overlay(name, summary, provenance, fn))
        return fn

    return register


def overlays() -> list[Overlay]:
    """Every registered overlay, in the order they run."""
    return list(_REGISTERED)


# --- small builders ---------------------------------------------------------------------------


def ref(name: str) -> Schema:
    """A `$ref` to a component schema."""
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: Schema) -> Schema:
    """`schema` or null, spelled as the spec spells it (anyOf with a null branch)."""
    return {"anyOf": [schema, {"type": "null"}]}


def obj(properties: dict[str, Schema], required: list[str], *, closed: bool = False) -> Schema:
    """An object schema; `closed` adds additionalProperties: false (request objects)."""
    out: Schema = {"type": "object", "properties": properties, "required": required}
    if closed:
        out["additionalProperties"] = False
    return out


def const(value: str) -> Schema:
    """A string constant, as the spec writes `type` discriminators."""
    return {"type": "string", "const": value}


def string_enum(*values: str) -> Schema:
    """A closed string enum."""
    return {"type": "string", "enum": list(values)}


def add_enum_values(node: Schema, *values: str) -> None:
    """Append values to the enum in `node` or in its single non-null anyOf branch."""
    target = node
    if "enum" not in target:
        branches = [b for b in target.get("anyOf", []) if "enum" in b]
        if len(branches) != 1:
            raise ValueError(f"no single enum to extend in {node!r}")
        target = branches[0]
    for value in values:
        if value not in target["enum"]:
            target["enum"].append(value)


def add_property(component: Schema, name: str, schema: Schema, *, required: bool = False) -> None:
    """Add a property (refusing to overwrite one the spec already has)."""
    props = component.setdefault("properties", {})
    if name in props:
        raise ValueError(f"property {name!r} already present")
    props[name] = schema
    if required:
        component.setdefault("required", []).append(name)


def add_union_member(node: Schema, component: str, discriminator_value: str | None = None) -> None:
    """Add a `$ref` branch to the oneOf in `node`, keeping its discriminator mapping in step."""
    node["oneOf"].append(ref(component))
    mapping = node.get("discriminator", {}).get("mapping")
    if mapping is not None and discriminator_value is not None:
        mapping[discriminator_value] = ref(component)["$ref"]


def tool_unions(schemas: Schemas) -> list[Schema]:
    """The `tools[].items` unions of the create and count_tokens bodies."""
    return [schemas[n]["properties"]["tools"]["items"] for n in PARAM_BODIES]


PARAM_BODIES = ("CreateMessageParams", "CountMessageTokensParams")
CACHE_CONTROL = nullable(ref("CacheControlEphemeral"))


# --- response side ----------------------------------------------------------------------------


@overlay(
    "stop_reason_model_context_window_exceeded",
    "StopReason gains `model_context_window_exceeded` (GA since SDK 0.119.0).",
    "types/stop_reason.py",
)
def _stop_reason(schemas: Schemas, paths: Paths) -> None:
    add_enum_values(schemas["StopReason"], "model_context_window_exceeded")


@overlay(
    "usage_output_tokens_details",
    "Usage and MessageDeltaUsage gain nullable `output_tokens_details: {thinking_tokens}`.",
    "types/usage.py",
    "types/message_delta_usage.py",
    "types/output_tokens_details.py",
)
def _output_tokens_details(schemas: Schemas, paths: Paths) -> None:
    schemas["OutputTokensDetails"] = obj(
        {"thinking_tokens": {"type": "integer", "minimum": 0}}, ["thinking_tokens"]
    )
    for name in ("Usage", "MessageDeltaUsage"):
        add_property(schemas[name], "output_tokens_details", nullable(ref("OutputTokensDetails")))


@overlay(
    "usage_speed",
    "Usage gains nullable `speed`: standard | fast.",
    "types/usage.py",
)
def _usage_speed(schemas: Schemas, paths: Paths) -> None:
    add_property(schemas["Usage"], "speed", nullable(string_enum("standard", "fast")))


@overlay(
    "message_diagnostics",
    "Message gains nullable `diagnostics: {cache_miss_reason}` (six cache-miss reasons).",
    "types/message.py",
    "types/diagnostics.py",
    "types/cache_miss_reason.py",
    "types/cache_miss_*.py",
)
def _message_diagnostics(schemas: Schemas, paths: Paths) -> None:
    with_tokens = {
        "model_changed": "CacheMissModelChanged",
        "system_changed": "CacheMissSystemChanged",
        "tools_changed": "CacheMissToolsChanged",
        "messages_changed": "CacheMissMessagesChanged",
    }
    bare = {
        "previous_message_not_found": "CacheMissPreviousMessageNotFound",
        "unavailable": "CacheMissUnavailable",
    }
    for kind, name in with_tokens.items():
        schemas[name] = obj(
            {"type": const(kind), "cache_missed_input_tokens": {"type": "integer"}},
            ["cache_missed_input_tokens", "type"],
        )
    for kind, name in bare.items():
        schemas[name] = obj({"type": const(kind)}, ["type"])
    members = {**with_tokens, **bare}
    schemas["CacheMissReason"] = {
        "oneOf": [ref(n) for n in members.values()],
        "discriminator": {
            "propertyName": "type",
            "mapping": {k: ref(n)["$ref"] for k, n in members.items()},
        },
    }
    schemas["Diagnostics"] = obj({"cache_miss_reason": nullable(ref("CacheMissReason"))}, [])
    add_property(schemas["Message"], "diagnostics", nullable(ref("Diagnostics")))


@overlay(
    "refusal_categories",
    "RefusalStopDetails.category gains frontier_llm, reasoning_extraction, general_harms.",
    "types/refusal_stop_details.py",
)
def _refusal_categories(schemas: Schemas, paths: Paths) -> None:
    category = schemas["RefusalStopDetails"]["properties"]["category"]
    add_enum_values(category, "frontier_llm", "reasoning_extraction", "general_harms")


@overlay(
    "container_skills",
    "Container (response) gains nullable `skills: [{skill_id, type, version}]`.",
    "types/container.py",
    "types/container_skill.py",
)
def _container_skills(schemas: Schemas, paths: Paths) -> None:
    schemas["ContainerSkill"] = obj(
        {
            "skill_id": {"type": "string"},
            "type": string_enum("anthropic", "custom"),
            "version": {"type": "string"},
        },
        ["skill_id", "type", "version"],
    )
    skills = nullable({"type": "array", "items": ref("ContainerSkill")})
    add_property(schemas["Container"], "skills", skills)


@overlay(
    "tool_use_toolset_name",
    "tool_use blocks (response and request) and tool_result blocks gain nullable `toolset_name`.",
    "types/tool_use_block.py",
    "types/tool_use_block_param.py",
    "types/tool_result_block_param.py",
)
def _toolset_name(schemas: Schemas, paths: Paths) -> None:
    for name in ("ResponseToolUseBlock", "RequestToolUseBlock", "RequestToolResultBlock"):
        add_property(schemas[name], "toolset_name", nullable({"type": "string"}))


@overlay(
    "web_fetch_error_codes",
    "WebFetchToolResultErrorCode gains url_not_in_prior_context and content_too_large.",
    "types/web_fetch_tool_result_error_code.py",
)
def _web_fetch_error_codes(schemas: Schemas, paths: Paths) -> None:
    add_enum_values(schemas["WebFetchToolResultErrorCode"], "url_not_in_prior_context", "content_too_large")


@overlay(
    "model_info_lifecycle",
    "ModelInfo gains required `lifecycle` and nullable deprecated_at, retires_at, line.",
    "types/model_info.py",
    "types/model_line.py",
)
def _model_lifecycle(schemas: Schemas, paths: Paths) -> None:
    info = schemas["ModelInfo"]
    add_property(info, "lifecycle", string_enum("active", "deprecated", "retired"), required=True)
    date_time = nullable({"type": "string", "format": "date-time"})
    add_property(info, "deprecated_at", date_time)
    add_property(info, "retires_at", copy.deepcopy(date_time))
    # ModelLine is a Literal in the SDK but documented as open ("More lines may be added").
    add_property(info, "line", nullable({"type": "string"}))


@overlay(
    "model_capabilities_server_tools",
    "ModelCapabilities gains required `server_tools: {supported, code_execution, web_search}`.",
    "types/model_capabilities.py",
    "types/server_tools_capability.py",
)
def _server_tools_capability(schemas: Schemas, paths: Paths) -> None:
    support = ref("CapabilitySupport")
    schemas["ServerToolsCapability"] = obj(
        {"supported": {"type": "boolean"}, "code_execution": support, "web_search": support},
        ["code_execution", "supported", "web_search"],
    )
    add_property(schemas["ModelCapabilities"], "server_tools", ref("ServerToolsCapability"), required=True)


@overlay(
    "thinking_types_disabled_between_tools",
    "ThinkingTypes (model capabilities) gains required `disabled` and `between_tools`.",
    "types/thinking_types.py",
)
def _thinking_types(schemas: Schemas, paths: Paths) -> None:
    for name in ("between_tools", "disabled"):
        add_property(schemas["ThinkingTypes"], name, ref("CapabilitySupport"), required=True)
