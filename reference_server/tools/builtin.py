"""Anthropic-defined client tools: bash, the text editor, memory and computer use.

The client runs them; the server only needs what the API fixes for each type: its name (a
`name` that differs is a 400, as the API answers) and the input the model must write, given
here as the JSON Schema the model is constrained by (tools/grammar.py), so that every call
validates against the documented commands and fields. They are rendered and answered like
custom tools: `tool_use` blocks under the documented name, `tool_result`s taken back.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from reference_server.errors import InvalidRequestError
from reference_server.protocol import CacheControlEphemeralParam
from reference_server.server_tools.definitions import checked_param

__all__ = ["CLIENT_TOOL_TYPES", "COMPUTER_TYPES", "builtin_client_tool"]

_STRING = {"type": "string"}
_LINE = {"type": "integer", "minimum": 0}
_RANGE = {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}

_BASH: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The bash command to run."},
        "restart": {"type": "boolean", "description": "true restarts the shell session."},
    },
}


def _editor(commands: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "command": {"type": "string", "enum": commands},
            "path": {"type": "string", "description": "Absolute path of the file or directory."},
            "file_text": _STRING,
            "old_str": _STRING,
            "new_str": _STRING,
            "insert_line": _LINE,
            "view_range": _RANGE,
        },
        "required": ["command", "path"],
    }


_MEMORY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {
            "type": "string",
            "enum": ["view", "create", "str_replace", "insert", "delete", "rename"],
        },
        "path": {"type": "string", "description": "A path under /memories."},
        "file_text": _STRING,
        "old_str": _STRING,
        "new_str": _STRING,
        "insert_line": _LINE,
        "insert_text": _STRING,
        "view_range": _RANGE,
        "old_path": _STRING,
        "new_path": _STRING,
    },
    "required": ["command"],
}

_WITH_UNDO = ["view", "create", "str_replace", "insert", "undo_edit"]
_NO_UNDO = ["view", "create", "str_replace", "insert"]  # text_editor_20250429 and later

# type → (the fixed name, a description for the model, the input schema)
_TOOLS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "bash_20241022": ("bash", "Run commands in a bash shell.", _BASH),
    "bash_20250124": ("bash", "Run commands in a bash shell.", _BASH),
    "text_editor_20241022": ("str_replace_editor", "View and edit files.", _editor(_WITH_UNDO)),
    "text_editor_20250124": ("str_replace_editor", "View and edit files.", _editor(_WITH_UNDO)),
    "text_editor_20250429": ("str_replace_based_edit_tool", "View and edit files.", _editor(_NO_UNDO)),
    "text_editor_20250728": ("str_replace_based_edit_tool", "View and edit files.", _editor(_NO_UNDO)),
    "memory_20250818": (
        "memory",
        "Store and read back information across conversations, as files under /memories.",
        _MEMORY,
    ),
}

# Computer use (beta): its input schema depends on the display (coordinates inside it), so it
# is built per request (`_computer`). Actions as the computer use docs list them; 20250124
# added the mouse-button, scroll, hold and wait actions to the first version's, 20251124 zoom.
_ACTIONS_20250124 = [
    "screenshot",
    "left_click",
    "type",
    "key",
    "mouse_move",
    "cursor_position",
    "scroll",
    "left_click_drag",
    "right_click",
    "middle_click",
    "double_click",
    "triple_click",
    "left_mouse_down",
    "left_mouse_up",
    "hold_key",
    "wait",
]
COMPUTER_TYPES = {"computer_20250124": _ACTIONS_20250124, "computer_20251124": [*_ACTIONS_20250124, "zoom"]}
_COMPUTER = "Control the computer's screen, mouse and keyboard; a screenshot shows the screen."

CLIENT_TOOL_TYPES = frozenset(_TOOLS) | frozenset(COMPUTER_TYPES)

Caller = Literal["direct", "code_execution_20250825", "code_execution_20260120", "code_execution_20260521"]


class _BuiltinToolParam(BaseModel):
    """The fields every Anthropic-defined client tool takes (SDK 2.14 `ToolBash20250124Param`,
    `ToolTextEditor20250728Param`, `MemoryTool20250818Param`, ...)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    type: StrictStr
    name: StrictStr
    cache_control: CacheControlEphemeralParam | None = None
    allowed_callers: list[Caller] | None = None
    defer_loading: StrictBool | None = None
    strict: StrictBool | None = None
    input_examples: list[dict[str, Any]] | None = None
    max_characters: Annotated[int, Field(ge=1)] | None = None  # text_editor_20250728 only


class _ComputerParam(_BuiltinToolParam):
    """SDK 2.17's `BetaToolComputerUse20250124Param` / `...20251124Param`."""

    display_width_px: Annotated[int, Field(ge=1)]
    display_height_px: Annotated[int, Field(ge=1)]
    display_number: Annotated[int, Field(ge=0)] | None = None
    enable_zoom: StrictBool | None = None  # computer_20251124 only


def _point(width: int, height: int) -> dict[str, Any]:
    """[x, y] inside the display."""
    return {
        "type": "array",
        "prefixItems": [
            {"type": "integer", "minimum": 0, "maximum": width - 1},
            {"type": "integer", "minimum": 0, "maximum": height - 1},
        ],
        "minItems": 2,
        "maxItems": 2,
    }


def _computer(kind: str, tool: _ComputerParam) -> dict[str, Any]:
    """The action schema of a computer tool on its display: coordinates inside the screen, zoom
    only where enabled."""
    width, height = tool.display_width_px, tool.display_height_px
    actions = [a for a in COMPUTER_TYPES[kind] if a != "zoom" or tool.enable_zoom]
    point = _point(width, height)
    properties: dict[str, Any] = {
        "action": {"type": "string", "enum": actions},
        "coordinate": point,
        "start_coordinate": point,
        "text": _STRING,
        "key": _STRING,
        "scroll_direction": {"type": "string", "enum": ["up", "down", "left", "right"]},
        "scroll_amount": {"type": "integer", "minimum": 0},
        "duration": {"type": "number", "minimum": 0},
    }
    if "zoom" in actions:
        x, y = point["prefixItems"]
        properties["region"] = {"type": "array", "prefixItems": [x, y, x, y], "minItems": 4, "maxItems": 4}
    return {"type": "object", "properties": properties, "required": ["action"]}


def builtin_client_tool(raw: dict[str, Any], path: str) -> tuple[str, str, dict[str, Any], bool]:
    """A checked Anthropic-defined client tool: (name, description, input schema, deferred)."""
    kind = raw["type"]
    if kind in COMPUTER_TYPES:
        computer = checked_param(_ComputerParam, raw, path)
        if computer.name != "computer":
            raise InvalidRequestError(f"{path}.name: Input should be 'computer'")
        if computer.enable_zoom is not None and kind != "computer_20251124":
            raise InvalidRequestError(f"{path}.enable_zoom: Extra inputs are not permitted")
        return "computer", _COMPUTER, _computer(kind, computer), bool(computer.defer_loading)
    name, description, schema = _TOOLS[kind]
    tool = checked_param(_BuiltinToolParam, raw, path)
    if tool.name != name:
        raise InvalidRequestError(f"{path}.name: Input should be {name!r}")
    if tool.max_characters is not None and kind != "text_editor_20250728":
        raise InvalidRequestError(f"{path}.max_characters: Extra inputs are not permitted")
    return name, description, schema, bool(tool.defer_loading)
