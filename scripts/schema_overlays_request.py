"""Request-side overlays: what SDK 2.14.0 can send that the May 2026 spec copy would reject.

Every request object in the spec is closed (`additionalProperties: false`), so a field the SDK
sends but the spec lacks would make our own schema call a valid request invalid. These patches
follow the conventions described in `schema_overlays.py`; importing this module registers them
after the response-side ones.
"""

from __future__ import annotations

import copy

from schema_overlays import (
    CACHE_CONTROL,
    PARAM_BODIES,
    Paths,
    Schema,
    Schemas,
    add_enum_values,
    add_property,
    add_union_member,
    const,
    nullable,
    obj,
    overlay,
    ref,
    string_enum,
    tool_unions,
)


@overlay(
    "request_speed",
    "Create and count_tokens bodies gain nullable `speed`: standard | fast.",
    "types/message_create_params.py",
    "types/message_count_tokens_params.py",
)
def _request_speed(schemas: Schemas, paths: Paths) -> None:
    for name in PARAM_BODIES:
        add_property(schemas[name], "speed", nullable(string_enum("standard", "fast")))


@overlay(
    "request_diagnostics",
    "Create body gains nullable `diagnostics: {previous_message_id}`.",
    "types/message_create_params.py",
    "types/diagnostics_param.py",
)
def _request_diagnostics(schemas: Schemas, paths: Paths) -> None:
    schemas["DiagnosticsParam"] = obj({"previous_message_id": nullable({"type": "string"})}, [], closed=True)
    add_property(schemas["CreateMessageParams"], "diagnostics", nullable(ref("DiagnosticsParam")))


@overlay(
    "system_role_messages",
    "`messages[]` may hold `{role: system, content: string | text blocks}` (SystemMessageParam).",
    "types/message_param.py",
    "types/system_message_param.py",
)
def _system_messages(schemas: Schemas, paths: Paths) -> None:
    text_blocks = {"type": "array", "items": ref("RequestTextBlock")}
    schemas["InputSystemMessage"] = obj(
        {"role": const("system"), "content": {"anyOf": [{"type": "string"}, text_blocks]}},
        ["content", "role"],
        closed=True,
    )
    for name in PARAM_BODIES:
        messages = schemas[name]["properties"]["messages"]
        messages["items"] = {"oneOf": [ref("InputMessage"), ref("InputSystemMessage")]}


@overlay(
    "thinking_between_tools",
    "ThinkingConfigParam gains `{type: between_tools}`.",
    "types/thinking_config_param.py",
    "types/thinking_config_between_tools_param.py",
)
def _thinking_between_tools(schemas: Schemas, paths: Paths) -> None:
    schemas["ThinkingConfigBetweenTools"] = obj({"type": const("between_tools")}, ["type"], closed=True)
    add_union_member(schemas["ThinkingConfigParam"], "ThinkingConfigBetweenTools", "between_tools")


@overlay(
    "container_param_object",
    "Create body `container` may be `{id, skills}` as well as a string id.",
    "types/message_create_params_container_param.py",
    "types/container_params.py",
    "types/skill_params.py",
)
def _container_params(schemas: Schemas, paths: Paths) -> None:
    schemas["SkillParams"] = obj(
        {
            "skill_id": {"type": "string"},
            "type": string_enum("anthropic", "custom"),
            "version": {"type": "string"},
        },
        ["skill_id", "type"],
        closed=True,
    )
    skills = nullable({"type": "array", "items": ref("SkillParams")})
    schemas["ContainerParams"] = obj({"id": nullable({"type": "string"}), "skills": skills}, [], closed=True)
    container = schemas["CreateMessageParams"]["properties"]["container"]
    container["anyOf"].insert(0, ref("ContainerParams"))


@overlay(
    "image_transformations",
    "Image blocks gain nullable `transformations: {oversized_image: downsize | error}`.",
    "types/image_block_param.py",
    "types/image_transformations_param.py",
)
def _image_transformations(schemas: Schemas, paths: Paths) -> None:
    schemas["ImageTransformations"] = obj(
        {"oversized_image": string_enum("downsize", "error")}, [], closed=True
    )
    add_property(schemas["RequestImageBlock"], "transformations", nullable(ref("ImageTransformations")))


@overlay(
    "file_sources",
    "Image and document blocks accept `{type: file, file_id}` sources.",
    "types/image_block_param.py",
    "types/document_block_param.py",
    "types/file_image_source_param.py",
    "types/file_document_source_param.py",
)
def _file_sources(schemas: Schemas, paths: Paths) -> None:
    for block, component in (
        ("RequestImageBlock", "FileImageSource"),
        ("RequestDocumentBlock", "FileDocumentSource"),
    ):
        schemas[component] = obj(
            {"type": const("file"), "file_id": {"type": "string"}}, ["file_id", "type"], closed=True
        )
        add_union_member(schemas[block]["properties"]["source"], component, "file")


@overlay(
    "tool_search_error_message",
    "Request tool_search_tool_result_error gains nullable `error_message` (as the response has).",
    "types/tool_search_tool_result_error_param.py",
)
def _tool_search_error_message(schemas: Schemas, paths: Paths) -> None:
    add_property(schemas["RequestToolSearchToolResultError"], "error_message", nullable({"type": "string"}))


@overlay(
    "allowed_caller_code_execution_20260521",
    "AllowedCaller gains code_execution_20260521.",
    "types/code_execution_tool_20260521_param.py",
    "types/web_search_tool_20260318_param.py",
)
def _allowed_caller(schemas: Schemas, paths: Paths) -> None:
    add_enum_values(schemas["AllowedCaller"], "code_execution_20260521")


@overlay(
    "web_fetch_url_sources",
    "Web fetch tools (20250910, 20260209, 20260309) gain nullable `url_sources`.",
    "types/web_fetch_tool_20250910_param.py",
    "types/web_fetch_url_sources_param.py",
    "types/web_fetch_url_source_*_param.py",
)
def _url_sources(schemas: Schemas, paths: Paths) -> None:
    tool_ref = obj(
        {"type": const("tool_reference"), "name": {"type": "string"}}, ["name", "type"], closed=True
    )
    tools = {"type": "array", "items": tool_ref}
    variants = {
        "all": obj({"type": const("all")}, ["type"], closed=True),
        "none": obj({"type": const("none")}, ["type"], closed=True),
        "only": obj({"type": const("only"), "tools": tools}, ["tools", "type"], closed=True),
        "except": obj(
            {"type": const("except"), "tools": copy.deepcopy(tools)}, ["tools", "type"], closed=True
        ),
    }
    names = {kind: f"WebFetchURLSource{kind.capitalize()}" for kind in variants}
    for kind, schema in variants.items():
        schemas[names[kind]] = schema

    def union(*kinds: str) -> Schema:
        return {
            "oneOf": [ref(names[k]) for k in kinds],
            "discriminator": {
                "propertyName": "type",
                "mapping": {k: ref(names[k])["$ref"] for k in kinds},
            },
        }

    schemas["WebFetchURLSources"] = obj(
        {
            "client_tool_results": union("all", "none", "only", "except"),
            "server_tool_results": union("all", "none", "only", "except"),
            "user_input": union("all", "none"),
        },
        [],
        closed=True,
    )
    for tool in ("WebFetchTool_20250910", "WebFetchTool_20260209", "WebFetchTool_20260309"):
        add_property(schemas[tool], "url_sources", nullable(ref("WebFetchURLSources")))


def _clone_tool(schemas: Schemas, source: str, target: str, type_value: str) -> None:
    """Copy a tool version's schema under a new name with a new `type` constant."""
    tool = copy.deepcopy(schemas[source])
    tool["properties"]["type"] = const(type_value)
    schemas[target] = tool


@overlay(
    "new_tool_versions",
    "Tools gain code_execution_20260521, web_search_20260318 and web_fetch_20260318 "
    "(the previous versions plus `response_inclusion`).",
    "types/code_execution_tool_20260521_param.py",
    "types/web_search_tool_20260318_param.py",
    "types/web_fetch_tool_20260318_param.py",
    "types/tool_union_param.py",
)
def _new_tool_versions(schemas: Schemas, paths: Paths) -> None:
    _clone_tool(
        schemas,
        "CodeExecutionTool_20260120",
        "CodeExecutionTool_20260521",
        "code_execution_20260521",
    )
    _clone_tool(schemas, "WebSearchTool_20260209", "WebSearchTool_20260318", "web_search_20260318")
    # Cloned after `web_fetch_url_sources`, so it carries `url_sources` as the SDK's does.
    _clone_tool(schemas, "WebFetchTool_20260309", "WebFetchTool_20260318", "web_fetch_20260318")
    for name in ("WebSearchTool_20260318", "WebFetchTool_20260318"):
        add_property(schemas[name], "response_inclusion", string_enum("full", "excluded"))
    for union in tool_unions(schemas):
        for name in (
            "CodeExecutionTool_20260521",
            "WebSearchTool_20260318",
            "WebFetchTool_20260318",
        ):
            add_union_member(union, name)


# The member tools of each toolset, in the SDK's order. Each member's own config object is
# accepted as any object: the shapes are many (one per member) and a conformance suite for the
# Messages API does not exercise them; the member *names* are checked, because the SDK says
# "Unknown keys are rejected".
BROWSER_MEMBERS = (
    "close_tab", "double_click", "file_upload", "find", "form_input", "get_page_text",
    "hold_key", "hover", "javascript_exec", "key", "left_click", "left_click_drag",
    "left_mouse_down", "left_mouse_up", "list_tabs", "middle_click", "mouse_move", "navigate",
    "new_tab", "read_console", "read_network", "read_page", "right_click", "screenshot",
    "scroll", "scroll_to", "switch_tab", "triple_click", "type", "wait", "zoom",
)  # fmt: skip
COMPUTER_MEMBERS = (
    "cursor_position", "double_click", "hold_key", "key", "left_click", "left_click_drag",
    "left_mouse_down", "left_mouse_up", "middle_click", "mouse_move", "right_click",
    "screenshot", "scroll", "triple_click", "type", "wait", "zoom",
)  # fmt: skip


@overlay(
    "toolsets_20260801",
    "Tools gain browser_toolset_20260801 and computer_toolset_20260801 ({type, configs, "
    "cache_control}; member configs checked by name only).",
    "types/browser_toolset_20260801_param.py",
    "types/browser_toolset_configs_param.py",
    "types/computer_toolset_20260801_param.py",
    "types/computer_toolset_configs_param.py",
)
def _toolsets(schemas: Schemas, paths: Paths) -> None:
    member_config = nullable({"type": "object"})
    for family, members in (("browser", BROWSER_MEMBERS), ("computer", COMPUTER_MEMBERS)):
        cap = family.capitalize()
        configs = obj({m: copy.deepcopy(member_config) for m in members}, [], closed=True)
        schemas[f"{cap}ToolsetConfigs"] = configs
        schemas[f"{cap}Toolset_20260801"] = obj(
            {
                "type": const(f"{family}_toolset_20260801"),
                "cache_control": copy.deepcopy(CACHE_CONTROL),
                "configs": nullable(ref(f"{cap}ToolsetConfigs")),
            },
            ["type"],
            closed=True,
        )
        for union in tool_unions(schemas):
            add_union_member(union, f"{cap}Toolset_20260801")


@overlay(
    "browser_state_block",
    "tool_result content may hold a `browser_state` block (tabs and state changes checked as objects only).",
    "types/tool_result_block_param.py",
    "types/browser_state_block_param.py",
)
def _browser_state(schemas: Schemas, paths: Paths) -> None:
    schemas["RequestBrowserStateBlock"] = obj(
        {
            "type": const("browser_state"),
            "tabs": {"type": "array", "items": {"type": "object"}},
            "state_changes": nullable({"type": "array", "items": {"type": "object"}}),
            "cache_control": copy.deepcopy(CACHE_CONTROL),
        },
        ["tabs", "type"],
        closed=True,
    )
    content = schemas["RequestToolResultBlock"]["properties"]["content"]
    blocks = next(b for b in content["anyOf"] if b.get("type") == "array")
    add_union_member(blocks["items"], "RequestBrowserStateBlock", "browser_state")
