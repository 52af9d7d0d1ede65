"""Claude Code's whole turn on a real model (issue 43): Qwen2.5-Coder-0.5B-Instruct, served by
name, `claude-*` aliased to it, lean sessions (`--bare`, `--tools`, `--system-prompt`).

1. `claude -p "Read note.txt and tell me what it says" --tools Read`: the model calls Read (a
   real call Claude Code executes), and its answer quotes the file (the code, `4417` at least:
   how much of the line the 0.5B repeats moved with the working directory's path, so the test
   uses one fixed path); `is_error: false`.
2. `--continue -p "In note.txt, replace PLUMB with ROOT" --tools Read,Edit`: the model calls
   Edit and the file on disk changes (the 0.5B may try the same edit again before it stops).

The 0.5B coder was never trained on the `<tool_call>` tags: it writes a call as its bare JSON
(tools/grammar.py), and, after a tool result, repeats the call unless an example shows it
the round trip, so each turn's system prompt carries one (the prompts a user of this model
writes; measured: without the example, Claude Code stopped after 13 repeated Read calls).
Every request went over the wire as a well-formed stream (test_claude_code.py's checks).
Claude Code asks for temperature 1 (fixtures/claude-code/lean-read.1.json); the server's
seeded draw makes each run the same. About 15 s for both turns on two cores (2026-12-07). `nox -s deep`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .test_claude_code import Run, Target, install_claude_code, proxied_server, run_claude, served

pytestmark = [pytest.mark.mlx, pytest.mark.slow, pytest.mark.deep]

MODEL = "qwen2.5-coder-0.5b-instruct"
NOTE = "The launch code is PLUMB-4417. Keep it safe.\n"
READ_EXAMPLE = """You are a coding assistant in {cwd}. Example:
user: Read a.txt and tell me what it says
assistant: {{"name": "Read", "arguments": {{"file_path": "{cwd}/a.txt"}}}}
user: <tool_response>
1\tHello from a.
</tool_response>
assistant: a.txt says: "Hello from a."
"""
EDIT_EXAMPLE = """You are a coding assistant in {cwd}. Answer in plain text once a tool has given you what you need.
Example 1:
user: In a.txt, replace red with blue
assistant: {{"name": "Edit", "arguments": {{"file_path": "{cwd}/a.txt", "old_string": "red", "new_string": "blue"}}}}
user: <tool_response>
The file {cwd}/a.txt has been updated.
</tool_response>
assistant: Done.
Example 2:
user: Read b.txt and tell me what it says
assistant: {{"name": "Read", "arguments": {{"file_path": "{cwd}/b.txt"}}}}
user: <tool_response>
1\ta red car
</tool_response>
assistant: b.txt says: "a red car"
"""


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    from reference_server.engine.sources import ModelNotFoundError, resolve_model

    try:
        resolve_model(MODEL)  # assembled once, before the server's start-up clock runs
    except ModelNotFoundError as exc:
        pytest.skip(str(exc))
    log = tmp_path_factory.mktemp("claude-code-qwen") / "server.log"
    yield from proxied_server(MODEL, log, ["--alias", f"claude-*={MODEL}"])


def test_claude_code_reads_then_edits_a_file_through_real_tool_calls(qwen: Target) -> None:
    claude = install_claude_code()
    # One fixed path: the prompts hold it, and a 0.5B model's answer moves with every token.
    root = Path(tempfile.gettempdir()) / "plumbline-qwen"
    shutil.rmtree(root, ignore_errors=True)
    work, home = root / "work", root / "home"
    work.mkdir(parents=True)
    home.mkdir()
    note = work / "note.txt"
    note.write_text(NOTE)

    def turn(prompt: list[str], example: str, tools: str) -> tuple[Run, list[dict[str, Any]]]:
        """One lean `claude -p` run: its result (a success) and the tool calls it was served."""
        start = len(qwen.proxy.exchanges)
        args = [*prompt, "--bare", "--system-prompt", example.format(cwd=work), "--tools", tools]
        run = run_claude(
            claude, qwen, cwd=work, home=home, max_output_tokens=None, args=[*args, "--allowedTools", tools]
        )
        answered = served(qwen.since(start))
        assert run.returncode == 0, (run.result, run.stderr)
        assert run.result["is_error"] is False
        calls = [b for _, m in answered for b in m["content"] if b["type"] == "tool_use"]
        assert answered[-1][0].body["messages"][-1]["content"][0]["type"] == "tool_result"
        return run, calls

    read, calls = turn(["-p", "Read note.txt and tell me what it says"], READ_EXAMPLE, "Read")
    assert "4417" in read.result["result"]  # the code, which only the file holds
    assert [(c["name"], c["input"]["file_path"]) for c in calls] == [("Read", str(note))]

    _, calls = turn(["--continue", "-p", "In note.txt, replace PLUMB with ROOT"], EDIT_EXAMPLE, "Read,Edit")
    # The first call edits; the 0.5B may call Edit again on the changed file (Claude Code answers
    # those with its "String to replace not found" error) before it ends the turn.
    assert calls, "the model called no tool"
    assert calls[0]["name"] == "Edit"
    assert calls[0]["input"]["old_string"] in NOTE
    assert {c["name"] for c in calls} <= {"Read", "Edit"}
    assert note.read_text() == NOTE.replace("PLUMB", "ROOT")
