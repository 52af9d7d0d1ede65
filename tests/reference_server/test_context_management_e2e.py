"""clear_tool_uses_20250919 end to end: the official SDK against the reference server on
tiny-random over a real socket. What the edit clears is measured in the model's own tokens, so
the answers with and without it must differ by exactly what `applied_edits` reports."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from conformance.wire.launcher import reference_server

pytestmark = pytest.mark.mlx
# The SDK sends anthropic-version 2026-10-21, which removed temperature: these tests decode
# greedily (temperature 0), so they speak 2023-06-01.
LEGACY = {"anthropic-version": "2023-06-01"}

MODEL = "tiny-random"
BETA = {"anthropic-beta": "context-management-2025-06-27"}
TOOL = {"name": "lookup", "description": "Looks a word up.", "input_schema": {"type": "object"}}
LONG_RESULT = "The word means a small round fruit. " * 20


def conversation(uses: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Look up three words."}]
    for i in range(uses):
        call = {"type": "tool_use", "id": f"toolu_{i:02d}", "name": "lookup", "input": {"word": f"w{i}"}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i:02d}", "content": LONG_RESULT}
        messages += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    return messages


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[anthropic.Anthropic]:
    log: Path = tmp_path_factory.mktemp("context-management") / "server.log"
    with (
        reference_server(MODEL, log=log) as url,
        anthropic.Anthropic(base_url=url, api_key="unused", default_headers=LEGACY, max_retries=0) as sdk,
    ):
        yield sdk


def create(client: anthropic.Anthropic, edit: dict[str, Any] | None, uses: int = 3) -> dict[str, Any]:
    body: dict[str, Any] = {"temperature": 0}  # SDK 2.14 sends sampling fields as extra_body
    extra: dict[str, Any] = {}
    if edit is not None:
        body["context_management"] = {"edits": [edit]}
        extra = {"extra_headers": BETA}
    message = client.messages.create(
        model=MODEL, max_tokens=4, tools=[TOOL], messages=conversation(uses), extra_body=body, **extra
    )
    return message.model_dump()


def test_old_tool_results_are_cleared_and_reported(client):
    whole = create(client, None)
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 3},
        "keep": {"type": "tool_uses", "value": 1},
    }
    edited = create(client, edit)
    (applied,) = edited["context_management"]["applied_edits"]
    assert applied["type"] == "clear_tool_uses_20250919"
    assert applied["cleared_tool_uses"] == 2
    assert applied["cleared_input_tokens"] > 0
    assert edited["usage"]["input_tokens"] + applied["cleared_input_tokens"] == whole["usage"]["input_tokens"]
    assert "context_management" not in whole


def test_clearing_inputs_clears_more(client):
    base = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 1},
        "keep": {"type": "tool_uses", "value": 0},
    }
    results_only = create(client, base)["context_management"]["applied_edits"][0]
    with_inputs = create(client, base | {"clear_tool_inputs": True})["context_management"]["applied_edits"][0]
    assert results_only["cleared_tool_uses"] == with_inputs["cleared_tool_uses"] == 3
    assert with_inputs["cleared_input_tokens"] > results_only["cleared_input_tokens"]


def test_an_edit_below_its_trigger_or_minimum_applies_nothing(client):
    whole = create(client, None)
    for edit in (
        {"type": "clear_tool_uses_20250919"},  # trigger: 100,000 input tokens
        {"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 4}},
        {
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "tool_uses", "value": 1},
            "clear_at_least": {"type": "input_tokens", "value": 100_000},
        },
    ):
        answer = create(client, edit)
        assert answer["context_management"] == {"applied_edits": []}, edit
        assert answer["usage"]["input_tokens"] == whole["usage"]["input_tokens"], edit


def test_count_tokens_counts_the_edited_prompt_and_reports_the_original(client):
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 1},
        "keep": {"type": "tool_uses", "value": 1},
    }
    body = {"model": MODEL, "tools": [TOOL], "messages": conversation(3)}
    whole = client.messages.count_tokens(**body).input_tokens
    counted = client.messages.count_tokens(
        **body, extra_headers=BETA, extra_body={"context_management": {"edits": [edit]}}
    ).model_dump()
    created = create(client, edit)
    assert counted["input_tokens"] == created["usage"]["input_tokens"] < whole
    assert counted["context_management"] == {"original_input_tokens": whole}


def test_an_edit_without_the_beta_is_refused(client):
    with pytest.raises(anthropic.BadRequestError, match="context-management-2025-06-27"):
        client.messages.create(
            model=MODEL,
            max_tokens=4,
            messages=conversation(1),
            tools=[TOOL],
            extra_body={"context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}},
        )
