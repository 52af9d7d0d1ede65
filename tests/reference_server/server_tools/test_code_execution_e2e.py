"""Code execution end to end: `python -m reference_server --code-execution` on SmolLM2 (the
embedded default model) over a real socket, in the real sandbox, driven by the official SDK: a
call the client sends back unanswered (run first, its result shown first), the container in
the response and found again with its files by a later request, and a call the model itself
writes when the tool is forced, run and counted in usage."""

from __future__ import annotations

import sys
from typing import Any

import anthropic
import pytest

pytestmark = [
    pytest.mark.mlx,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux's sandbox"),
]
LEGACY = {"anthropic-version": "2023-06-01"}
CODE = {"type": "code_execution_20250825", "name": "code_execution"}
MODEL = "smollm2-135m-instruct"


@pytest.fixture
def url(smollm2_url: str) -> str:
    """The session's SmolLM2 server (tests/conftest.py), started with --code-execution: no
    server of this module's own."""
    return smollm2_url


def create(url: str, **fields: Any) -> Any:
    with anthropic.Anthropic(base_url=url, api_key="test", default_headers=LEGACY, max_retries=0) as client:
        return client.messages.create(model=MODEL, max_tokens=60, tools=[CODE], **fields)


def paused(command: str, tool_id: str) -> list[dict[str, Any]]:
    """A turn paused before the server ran a bash call: the server runs it first."""
    call = {
        "type": "server_tool_use",
        "id": tool_id,
        "name": "bash_code_execution",
        "input": {"command": command},
    }
    return [
        {"role": "user", "content": "Keep a note."},
        {"role": "assistant", "content": [call]},
    ]


def test_a_container_keeps_its_files_for_a_later_request(url: str) -> None:
    first = create(url, messages=paused("echo e2e > note.txt && cat note.txt", "srvtoolu_ce1"))
    result = first.content[0]
    assert result.type == "bash_code_execution_tool_result"
    assert result.tool_use_id == "srvtoolu_ce1"
    assert (result.content.type, result.content.stdout, result.content.return_code) == (
        "bash_code_execution_result",
        "e2e\n",
        0,
    )
    assert first.container is not None
    assert first.container.id.startswith("container_")
    again = create(url, messages=paused("cat note.txt", "srvtoolu_ce2"), container=first.container.id)
    assert again.container.id == first.container.id
    assert again.content[0].content.stdout == "e2e\n"
    elsewhere = create(url, messages=paused("cat note.txt", "srvtoolu_ce3"))
    assert elsewhere.container.id != first.container.id
    assert elsewhere.content[0].content.return_code != 0


def test_the_models_own_call_runs_and_is_counted(url: str) -> None:
    message = create(
        url,
        messages=[{"role": "user", "content": "List the files in the current directory."}],
        tool_choice={"type": "tool", "name": "bash_code_execution"},
    )
    calls = [b for b in message.content if b.type == "server_tool_use"]
    results = [b for b in message.content if b.type == "bash_code_execution_tool_result"]
    assert calls
    assert calls[0].name == "bash_code_execution"
    assert [r.tool_use_id for r in results] == [c.id for c in calls]
    assert results[0].content.type in ("bash_code_execution_result", "bash_code_execution_tool_result_error")
    assert message.usage.server_tool_use.model_extra["code_execution_requests"] == len(calls)
    assert message.container is not None


def test_a_skill_made_through_the_sdk_is_loaded_for_the_turns_code(url: str) -> None:
    """The Skills API through SDK 2.17's own client (its types parse every answer), then the
    skill in container.skills: the paused call reads its SKILL.md where it is mounted."""
    skill_md = b"---\nname: tide-reader\ndescription: Reads tides.\n---\nHigh tide at 14:05.\n"
    with anthropic.Anthropic(base_url=url, api_key="test", max_retries=0) as client:
        skill = client.skills.create(files=[("tide-reader/SKILL.md", skill_md)], display_name="Tides")
        try:
            assert client.skills.retrieve(skill.id).latest_version_id == skill.latest_version_id
            assert skill.id in [s.id for s in client.skills.list()]
            version = client.skills.versions.retrieve("latest", skill_id=skill.id)
            assert (version.name, version.description) == ("tide-reader", "Reads tides.")
            entry = {"type": "custom", "skill_id": skill.id}
            message = create(
                url,
                messages=paused("cat /skills/tide-reader/SKILL.md", "srvtoolu_e2e_skill"),
                container={"skills": [entry]},
            )
        finally:
            client.skills.versions.delete(skill.latest_version_id, skill_id=skill.id)
            client.skills.delete(skill.id)
    result = message.content[0]
    assert result.type == "bash_code_execution_tool_result"
    assert result.content.stdout == skill_md.decode()
    assert message.container is not None
    assert message.container.skills[0].skill_id == skill.id


def test_code_calls_a_client_tool_and_goes_on_with_its_result(url: str) -> None:
    """Programmatic tool calling through the SDK: the code's call pauses the turn as a tool_use
    whose caller is the code execution call; the result sent back reaches the code, and the
    model (SmolLM2) answers after its output."""
    lookup = {
        "name": "lookup",
        "description": "Look a key up",
        "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}},
        "allowed_callers": ["code_execution_20260120"],
    }
    tools = [{"type": "code_execution_20260120", "name": "code_execution"}, lookup]
    code = 'print("found", await lookup({"key": "e2e"}))'
    call = {
        "type": "server_tool_use",
        "id": "srvtoolu_ptc1",
        "name": "code_execution",
        "input": {"code": code},
    }
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Look e2e up."},
        {"role": "assistant", "content": [call]},
    ]
    with anthropic.Anthropic(base_url=url, api_key="test", max_retries=0) as client:
        paused = client.messages.create(model=MODEL, max_tokens=40, tools=tools, messages=messages)
        assert paused.stop_reason == "tool_use"
        (use,) = paused.content
        assert use.type == "tool_use"
        assert (use.name, use.input) == ("lookup", {"key": "e2e"})
        assert use.caller is not None
        assert (use.caller.type, use.caller.tool_id) == ("code_execution_20260120", "srvtoolu_ptc1")
        assert paused.container is not None
        messages[-1]["content"].append(use.model_dump(exclude_none=True))
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "42"}]}
        )
        done = client.messages.create(
            model=MODEL, max_tokens=40, tools=tools, messages=messages, container=paused.container.id
        )
    result = done.content[0]
    assert result.type == "code_execution_tool_result"
    assert result.tool_use_id == "srvtoolu_ptc1"
    assert result.content.stdout == "found 42\n"
    assert done.container is not None
    assert done.container.id == paused.container.id
    assert done.usage.output_tokens > 0  # the model went on after the result
