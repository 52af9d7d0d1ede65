"""Computer use (beta), a client tool: `computer_20250124` and `computer_20251124` checked field
by field, their calls held to the documented actions with coordinates inside the display (the
schema llguidance enforces), screenshots sent back as images on a vision model, and a 400 that
says why on a text-only one."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from reference_server.engine.base import ToolCall
from reference_server.engine.scripted import ScriptedEngine
from reference_server.engine.toolformat import render_call
from reference_server.tools.builtin import builtin_client_tool

from ..conftest import HEADERS, make_client
from ..test_app import assert_error
from ..test_images import encoded

COMPUTER = {
    "type": "computer_20251124",
    "name": "computer",
    "display_width_px": 1024,
    "display_height_px": 768,
}
BETA = {"anthropic-beta": "computer-use-2025-11-24"}


def client(vision: bool, reply: str = "Done."):
    engine = ScriptedEngine(reply, model_id="scripted", context_window=8192, vision=vision)
    made = make_client(engine)
    made.headers.update(HEADERS | BETA)
    return made, engine


def body(tools: list[dict[str, Any]], messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "model": "scripted",
        "max_tokens": 400,
        "messages": messages or [{"role": "user", "content": "Click the OK button."}],
        "tools": tools,
    }


def test_a_call_is_a_tool_use_and_a_screenshot_goes_back_as_an_image():
    call = ToolCall("x", "computer", {"action": "left_click", "coordinate": [10, 20]})
    made, engine = client(True, render_call(call))
    with made:
        message = made.post("/v1/messages", json=body([COMPUTER])).json()
        (use,) = message["content"]
        assert (use["type"], use["name"], use["input"]) == ("tool_use", "computer", call.arguments)
        screenshot = {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": encoded((64, 48), "PNG")},
        }
        history = [
            {"role": "user", "content": "Click the OK button."},
            {"role": "assistant", "content": [use]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": [screenshot]}],
            },
        ]
        answered = made.post("/v1/messages", json=body([COMPUTER], history))
        assert answered.status_code == 200, answered.text
    assert any(turn.images for turn in engine.requests[-1].turns)


def test_a_text_only_model_refuses_computer_use_with_the_reason():
    made, _ = client(False)
    with made:
        refused = made.post("/v1/messages", json=body([COMPUTER]))
    message = assert_error(refused, 400, "invalid_request_error")["error"]["message"]
    assert "computer use needs a model that reads images" in message


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"name": "mouse"}, "tools.0.name: Input should be 'computer'"),
        ({"display_width_px": None}, "display_width_px"),
        ({"display_height_px": 0}, "display_height_px"),
        ({"type": "computer_20250124", "enable_zoom": True}, "enable_zoom: Extra inputs are not permitted"),
        ({"type": "computer_20241022"}, "is not served"),
    ],
)
def test_bad_computer_tools_are_400s_naming_the_field(change, words):
    tool = {k: v for k, v in {**COMPUTER, **change}.items() if v is not None}
    made, _ = client(True)
    with made:
        refused = made.post("/v1/messages", json=body([tool]))
    assert words in assert_error(refused, 400, "invalid_request_error")["error"]["message"]


def test_the_schema_holds_calls_to_the_actions_and_the_display():
    _, _, schema, _ = builtin_client_tool(COMPUTER, "tools.0")
    valid = jsonschema.Draft202012Validator(schema)
    assert valid.is_valid({"action": "left_click", "coordinate": [1023, 767]})
    assert valid.is_valid(
        {"action": "scroll", "coordinate": [5, 5], "scroll_direction": "down", "scroll_amount": 3}
    )
    assert not valid.is_valid({"action": "left_click", "coordinate": [1024, 0]})  # off the screen
    assert not valid.is_valid({"action": "fly"})
    assert not valid.is_valid({"action": "zoom", "region": [0, 0, 10, 10]})  # zoom not enabled
    _, _, zooming, _ = builtin_client_tool({**COMPUTER, "enable_zoom": True}, "tools.0")
    assert jsonschema.Draft202012Validator(zooming).is_valid({"action": "zoom", "region": [0, 0, 512, 384]})
    _, _, older, _ = builtin_client_tool({**COMPUTER, "type": "computer_20250124"}, "tools.0")
    assert "zoom" not in older["properties"]["action"]["enum"]
    assert "triple_click" in older["properties"]["action"]["enum"]
