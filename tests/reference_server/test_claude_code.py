"""Claude Code against the reference server, end to end (issue 7).

The real `claude` CLI (npm `@anthropic-ai/claude-code`, pinned below, installed into
`.cache/claude-code/<version>/`) runs `claude -p` offline against the reference server on
tiny-random, through a recording proxy, so every assertion is about what went over the wire.

Claude Code's prompt is large (about 21k SmolLM2 tokens: 11 tool definitions, a 28 kB system
prompt, system reminders; see fixtures/claude-code/), so the server runs tiny-random with a 64k
window. The model id is a Claude id Claude Code knows (`claude-sonnet-4-5-20250929`, aliased to
tiny-random): with `MAX_THINKING_TOKENS=0` Claude Code then sends `thinking: {"type":
"disabled"}` and no `output_config.effort` or `context_management`.

A random model never chooses to call a tool (Claude Code sends no `tool_choice`: the choice is
the model's), and forcing one server-side would change the API. So the tool round trip is
driven from Claude Code's side, honestly: the test writes a session transcript in which an
earlier assistant turn called Claude Code's Read tool and a PreToolUse hook deferred the call
(Claude Code's documented `defer` decision for `-p`); `claude -p --resume` then executes the
call for real and sends the `tool_result` in the next request, which the server must answer.

tiny-random never ends a turn by itself: it stops at `max_tokens`, after which Claude Code asks
it to continue (up to three more requests) and then exits 1 with its own "exceeded the N output
token maximum" error. The tests predict Claude Code's outcome from what the server answered.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from conformance.judging.grammar import check_stream
from conformance.wire.accumulate import accumulate_transcript
from conformance.wire.launcher import free_port, reference_server
from conformance.wire.sse import parse_sse

pytestmark = [pytest.mark.mlx, pytest.mark.slow]

CLAUDE_CODE_VERSION = "2.1.332"
PACKAGE = f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}"
REPO = Path(__file__).resolve().parents[2]
INSTALL_DIR = REPO / ".cache" / "claude-code" / CLAUDE_CODE_VERSION
MODEL = "claude-sonnet-4-5-20250929"
API_KEY = "plumbline-claude-code-test"
CONTEXT_WINDOW = 65536
MAX_OUTPUT_TOKENS = 16  # tiny-random runs to max_tokens; keep each answer short
CLAUDE_TIMEOUT = 1200.0  # up to four ~21k-token prefills on a CPU


# ---------------------------------------------------------------- installing Claude Code


def _reports_version(binary: Path) -> bool:
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.startswith(CLAUDE_CODE_VERSION)


def install_claude_code() -> Path:
    """The pinned `claude` executable, installed with npm on first use.

    Scripts are not run by npm (its policy on install scripts varies by version); the
    package's own postinstall, which puts the platform's native binary in place, is run
    explicitly instead. The install is staged, then moved into place.
    """
    binary = INSTALL_DIR / "node_modules" / ".bin" / "claude"
    if _reports_version(binary):
        return binary
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("Claude Code is installed with npm: node and npm must be on PATH")
    INSTALL_DIR.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=INSTALL_DIR.parent))
    try:
        command = [npm, "install", "--prefix", str(staging), "--no-save", "--ignore-scripts"]
        command += ["--no-audit", "--no-fund", "--loglevel=error", PACKAGE]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"npm install {PACKAGE} failed:\n{done.stdout}\n{done.stderr}"
        package = staging / "node_modules" / "@anthropic-ai" / "claude-code"
        done = subprocess.run([node, "install.cjs"], cwd=package, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"Claude Code's postinstall failed:\n{done.stdout}\n{done.stderr}"
        if INSTALL_DIR.exists():
            shutil.rmtree(INSTALL_DIR)
        staging.rename(INSTALL_DIR)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    assert _reports_version(binary), f"{binary} does not report version {CLAUDE_CODE_VERSION}"
    return binary


# ---------------------------------------------------------------- a recording proxy

HOP_HEADERS = {b"host", b"content-length", b"transfer-encoding", b"connection", b"accept-encoding"}


@dataclass
class Exchange:
    method: str
    path: str  # with the query string
    headers: dict[str, str]
    request: bytes
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    response: bytes = b""

    @property
    def body(self) -> Any:
        return json.loads(self.request) if self.request else None

    @property
    def is_messages(self) -> bool:
        return self.method == "POST" and self.path.split("?", 1)[0] == "/v1/messages"

    def describe(self) -> str:
        return f"{self.method} {self.path} -> {self.status}: {self.response[:500]!r}"


class RecordingProxy:
    """ASGI app: forwards every request to `upstream` and streams the answer back as it
    comes (so pings reach Claude Code during a long prefill), recording both sides."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.exchanges: list[Exchange] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        query = scope["query_string"].decode()
        path = scope["path"] + (f"?{query}" if query else "")
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in HOP_HEADERS]
        exchange = Exchange(scope["method"], path, {k.decode(): v.decode() for k, v in headers}, body)
        self.exchanges.append(exchange)
        async with (
            httpx.AsyncClient(timeout=httpx.Timeout(CLAUDE_TIMEOUT)) as client,
            client.stream(scope["method"], self.upstream + path, headers=headers, content=body) as answer,
        ):
            exchange.status = answer.status_code
            exchange.response_headers = dict(answer.headers)
            back = [(k, v) for k, v in answer.headers.raw if k.lower() not in HOP_HEADERS]
            await send({"type": "http.response.start", "status": answer.status_code, "headers": back})
            async for chunk in answer.aiter_raw():
                exchange.response += chunk
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


@dataclass
class Target:
    url: str
    proxy: RecordingProxy
    log: Path

    def since(self, start: int) -> list[Exchange]:
        return self.proxy.exchanges[start:]


@pytest.fixture(scope="module")
def claude() -> Path:
    return install_claude_code()


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    log = tmp_path_factory.mktemp("claude-code-server") / "server.log"
    args = ["--alias", "claude-*=tiny-random", "--context-window", str(CONTEXT_WINDOW)]
    yield from proxied_server("tiny-random", log, args)


def proxied_server(model: str, log: Path, args: list[str]) -> Iterator[Target]:
    """The reference server on `model` (with `args`, pings every 2 s, `API_KEY`) behind a
    `RecordingProxy`."""
    with reference_server(model, log=log, args=[*args, "--ping-interval", "2"], api_key=API_KEY) as upstream:
        proxy = RecordingProxy(upstream)
        port = free_port()
        config = uvicorn.Config(proxy, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            yield Target(f"http://127.0.0.1:{port}", proxy, log)
        finally:
            server.should_exit = True
            thread.join(timeout=10)


# ---------------------------------------------------------------- running Claude Code


@dataclass
class Run:
    returncode: int
    result: dict[str, Any]
    stderr: str


def run_claude(
    claude: Path,
    target: Target,
    *,
    cwd: Path,
    home: Path,
    args: list[str],
    thinking: bool = False,
    max_output_tokens: int | None = MAX_OUTPUT_TOKENS,
) -> Run:
    """`claude ARGS --output-format json` in `cwd`, offline, with nothing of the caller's
    environment but PATH: HOME (and so Claude Code's config and sessions) is `home`. With
    `thinking`, Claude Code's default thinking is left on; `max_output_tokens` None: Claude
    Code's own limit."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": target.url,
        "ANTHROPIC_API_KEY": API_KEY,
        "ANTHROPIC_MODEL": MODEL,
        "ANTHROPIC_SMALL_FAST_MODEL": MODEL,
        "MAX_THINKING_TOKENS": "0",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(MAX_OUTPUT_TOKENS),
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    if thinking:
        del env["MAX_THINKING_TOKENS"]
    if max_output_tokens is None:
        del env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"]
    command = [str(claude), *args, "--output-format", "json", "--permission-mode", "dontAsk"]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=CLAUDE_TIMEOUT)
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        pytest.fail(f"claude printed no JSON result (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    return Run(done.returncode, result, done.stderr)


def served(exchanges: list[Exchange]) -> list[tuple[Exchange, dict[str, Any]]]:
    """Every Messages exchange answered 200 with a well-formed stream; their final messages."""
    messages = [e for e in exchanges if e.is_messages]
    assert messages, f"Claude Code sent no Messages request: {[e.describe() for e in exchanges]}"
    answered = []
    for exchange in messages:
        assert exchange.status == 200, exchange.describe()
        assert exchange.body.get("stream") is True, "Claude Code streams its requests"
        assert exchange.response_headers.get("content-type", "").startswith("text/event-stream")
        transcript = parse_sse(exchange.response)
        report = check_stream(transcript, validate_schemas=True)
        assert report.ok, [v.message for v in report.violations]
        assert report.completed, exchange.describe()
        assert not report.ended_with_error, exchange.describe()
        answered.append((exchange, accumulate_transcript(transcript)))
    return answered


def tool_results(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    last = request["messages"][-1]
    content = last["content"] if last["role"] == "user" and isinstance(last["content"], list) else []
    return {block["tool_use_id"]: block for block in content if block.get("type") == "tool_result"}


def expect_consistent(run: Run, answered: list[tuple[Exchange, dict[str, Any]]]) -> None:
    """Claude Code did what the server's answers call for: tool calls answered with their
    results in the next request, and an exit that matches the last answer's stop_reason."""
    for i, (_, message) in enumerate(answered):
        calls = {b["id"] for b in message["content"] if b["type"] == "tool_use"}
        if message["stop_reason"] == "tool_use":
            # The next request of the same conversation (a subagent's requests may come between).
            sent = set().union(*(tool_results(later.body) for later, _ in answered[i + 1 :]))
            assert calls <= sent, f"tool_use ids {calls - sent} never came back as tool_result"
    final = answered[-1][1]
    text = "".join(b["text"] for b in final["content"] if b["type"] == "text")
    assert run.result["type"] == "result"
    assert run.result.get("api_error_status") is None, run.result
    if final["stop_reason"] == "max_tokens":
        # Claude Code's own limit handling: it asked to continue, then gave up.
        assert run.returncode == 1, run.result
        assert run.result["is_error"] is True
        assert f"exceeded the {MAX_OUTPUT_TOKENS} output token maximum" in run.result["result"]
        assert len(answered) >= 2, "Claude Code asks the model to continue after max_tokens"
    else:
        assert final["stop_reason"] in ("end_turn", "stop_sequence"), final["stop_reason"]
        assert run.returncode == 0, (run.result, run.stderr)
        assert run.result["is_error"] is False
        assert run.result["result"].strip() == text.strip()


# ---------------------------------------------------------------- the tests


@pytest.mark.deep  # the tool round trip below starts Claude Code the same way, in CI
def test_first_turn_with_claude_codes_own_prompt(claude: Path, target: Target, tmp_path: Path) -> None:
    """`claude -p` as a user runs it: Claude Code's full first request (tools, `defer_loading`,
    system blocks with cache_control, its betas) is served, with no 400 that would make
    Claude Code fall back to fewer betas."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    (work / "notes.txt").write_text("plumbline\n")
    start = len(target.proxy.exchanges)
    run = run_claude(claude, target, cwd=work, home=home, args=["-p", "Which files are in this directory?"])
    answered = served(target.since(start))
    first, _ = answered[0]
    assert first.path == "/v1/messages?beta=true"
    assert "advanced-tool-use-2025-11-20" in first.headers.get("anthropic-beta", "").split(",")
    assert first.headers.get("x-api-key") == API_KEY
    request = first.body
    assert request["model"] == MODEL
    assert request["thinking"] == {"type": "disabled"}
    assert request["max_tokens"] == MAX_OUTPUT_TOKENS
    names = {tool["name"] for tool in request["tools"]}
    assert {"Bash", "Read"} <= names, names
    assert any(tool.get("defer_loading") for tool in request["tools"])
    expect_consistent(run, answered)


def write_deferred_session(
    home: Path, cwd: Path, session_id: str, call: dict[str, Any], thinking: dict[str, Any] | None = None
) -> None:
    """A Claude Code session transcript (the format of the pinned version) in which the user
    asked, the assistant answered with the tool call `call` (after `thinking`, a block the
    server signed), and a PreToolUse hook deferred it (Claude Code's `hook_deferred_tool`
    marker). `claude -p --resume` runs such a call."""
    project = home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(cwd))
    project.mkdir(parents=True)
    ids = [str(uuid.uuid4()) for _ in range(3)]
    common = {"isSidechain": False, "sessionId": session_id, "cwd": str(cwd), "userType": "external"}
    assistant = {
        "id": "msg_plumbline01",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [thinking, call] if thinking else [call],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    deferred = {
        "type": "hook_deferred_tool",
        "toolUseID": call["id"],
        "toolName": call["name"],
        "toolInput": call["input"],
        "hookName": "settings",
        "hookEvent": "PreToolUse",
        "permissionMode": "default",
    }
    lines = [
        {**common, "parentUuid": None, "type": "user", "uuid": ids[0], "timestamp": "2026-01-01T00:00:00.000Z",
         "message": {"role": "user", "content": "What does marker.txt say?"}},
        {**common, "parentUuid": ids[0], "type": "assistant", "uuid": ids[1], "timestamp": "2026-01-01T00:00:01.000Z",
         "message": assistant},
        {**common, "parentUuid": ids[1], "type": "attachment", "uuid": ids[2], "timestamp": "2026-01-01T00:00:02.000Z",
         "attachment": deferred},
    ]  # fmt: skip
    (project / f"{session_id}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def signed_thinking(target: Target) -> dict[str, Any]:
    """A thinking block the server made, as the earlier turn of a thinking session has one."""
    body = {"model": MODEL, "max_tokens": 8, "thinking": {"type": "adaptive"}}
    body["messages"] = [{"role": "user", "content": "What does marker.txt say?"}]
    headers = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}
    answer = httpx.post(f"{target.url}/v1/messages", json=body, headers=headers, timeout=120)
    assert answer.status_code == 200, answer.text
    block: dict[str, Any] = answer.json()["content"][0]
    assert block["type"] == "thinking"
    return block


def test_tool_result_round_trip_with_thinking(claude: Path, target: Target, tmp_path: Path) -> None:
    """With Claude Code's default thinking on: Claude Code runs a (deferred) Read call itself,
    sends the thinking, `tool_use` and `tool_result` back in its next request (with its
    context-management edit), and the server answers that follow-up with its own thinking."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    work = work.resolve()
    marker = f"plumbline-{uuid.uuid4().hex[:12]}"
    (work / "marker.txt").write_text(marker + "\n")
    call = {"type": "tool_use", "id": "toolu_plumbline01", "name": "Read",
            "input": {"file_path": str(work / "marker.txt")}}  # fmt: skip
    session_id = str(uuid.uuid4())
    thought = signed_thinking(target)
    write_deferred_session(home, work, session_id, call, thought)
    start = len(target.proxy.exchanges)
    args = ["-p", "--resume", session_id]
    run = run_claude(claude, target, cwd=work, home=home, args=args, thinking=True)
    answered = served(target.since(start))
    request = answered[0][0].body
    assert request["thinking"]["type"] in ("enabled", "adaptive"), request["thinking"]
    # What the pinned version sends with thinking on: a budget above max_tokens (allowed by the
    # interleaved-thinking beta), display omitted, and clear_thinking keeping all turns.
    assert "interleaved-thinking-2025-05-14" in answered[0][0].headers.get("anthropic-beta", "")
    edits = request.get("context_management", {}).get("edits", [])
    assert [edit["type"] for edit in edits] == ["clear_thinking_20251015"], edits
    *_, asked, called, results = request["messages"]
    assert asked["role"] == "user"
    assert called["role"] == "assistant"
    assert called["content"][0] == thought, "the signed thinking went back unchanged"
    assert [b for b in called["content"] if b["type"] == "tool_use"] == [call]
    assert answered[0][1]["content"][0]["type"] == "thinking"
    result = tool_results(request).get(call["id"])
    assert result is not None, results
    assert result.get("is_error") in (None, False), result
    content = result["content"]
    text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    assert marker in text, "Claude Code read the file itself and sent what it read"
    assert run.result["session_id"] == session_id
    expect_consistent(run, answered)
