"""Capture what Claude Code sends to `ANTHROPIC_BASE_URL`: the requests behind
fixtures/claude-code/.

A small capture server answers every `POST /v1/messages` with a minimal valid Message (an SSE
stream when asked): plain text, or, in the tool scenario, first a `tool_use` of Claude Code's
own Bash tool (`echo plumbline-capture`) and then text once the `tool_result` comes back.
Each scenario runs `claude -p` once, offline, with a throwaway HOME, and every request is saved
as JSON with credentials redacted.

    python scripts/capture_claude_code.py --claude .cache/claude-code/node_modules/.bin/claude \
        --out fixtures/claude-code [--scenario first-turn ...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SONNET = "claude-sonnet-4-5-20250929"
QUIET = {
    "DISABLE_TELEMETRY": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "512",
}
SECRET_HEADERS = {"x-api-key", "authorization"}


@dataclass(frozen=True)
class Scenario:
    name: str
    why: str
    env: dict[str, str]
    args: list[str]
    answer: str = "text"  # text | tool | error400
    keep: tuple[int, ...] | None = None  # 1-based request numbers to save; None = all


SCENARIOS = [
    Scenario(
        "first-turn",
        "the README's configuration: a Claude model id, thinking off",
        {"ANTHROPIC_MODEL": SONNET, "MAX_THINKING_TOKENS": "0"},
        ["-p", "Say hello."],
    ),
    Scenario(
        "tool-round-trip",
        "the capture server answers with a Bash tool_use; Claude Code runs it and sends the tool_result",
        {"ANTHROPIC_MODEL": SONNET, "MAX_THINKING_TOKENS": "0"},
        ["-p", "Print the marker with Bash.", "--allowedTools", "Bash"],
        answer="tool",
        keep=(2,),  # request 1 is first-turn's shape; request 2 carries tool_use + tool_result
    ),
    Scenario(
        "thinking-default",
        "the same model id without MAX_THINKING_TOKENS: thinking enabled and context_management",
        {"ANTHROPIC_MODEL": SONNET},
        ["-p", "Say hello."],
    ),
    Scenario(
        "default-model",
        "no ANTHROPIC_MODEL at all (Claude Code's default model), thinking off",
        {"MAX_THINKING_TOKENS": "0"},
        ["-p", "Say hello."],
    ),
    Scenario(
        "lean-read",
        "a lean session as tests/reference_server/test_claude_code_qwen.py runs one: --bare, one tool,"
        " a system prompt of our own (a 600-token prompt where the default is about 20,000)",
        {"ANTHROPIC_MODEL": SONNET, "MAX_THINKING_TOKENS": "0"},
        [
            "-p",
            "Read note.txt and tell me what it says",
            "--bare",
            "--tools",
            "Read",
            "--allowedTools",
            "Read",
            "--system-prompt",
            "You are a coding assistant. Call Read with an absolute path.",
        ],
    ),
    Scenario(
        "after-400",
        "every request refused with a 400: Claude Code retries, dropping betas one by one",
        {"ANTHROPIC_MODEL": SONNET, "MAX_THINKING_TOKENS": "0"},
        ["-p", "Say hello."],
        answer="error400",
        keep=(4,),
    ),
]


@dataclass
class Recorder:
    answer: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _redact(headers: dict[str, str], body: Any) -> tuple[dict[str, str], Any]:
    clean = {k: ("<redacted>" if k.lower() in SECRET_HEADERS else v) for k, v in headers.items()}
    if isinstance(body, dict) and isinstance(body.get("metadata"), dict):
        user_id = body["metadata"].get("user_id")
        try:
            ids = json.loads(user_id) if isinstance(user_id, str) else None
        except ValueError:
            ids = None
        if isinstance(ids, dict) and "device_id" in ids:
            ids["device_id"] = "0" * len(str(ids["device_id"]))
            body["metadata"]["user_id"] = json.dumps(ids, separators=(",", ":"))
    return clean, body


def _blocks_for(recorder: Recorder, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content")
    answered = isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)
    if recorder.answer == "tool" and body.get("tools") and not answered:
        call = {"command": "echo plumbline-capture", "description": "Print a marker"}
        return [
            {"type": "text", "text": "I will run it."},
            {"type": "tool_use", "id": "toolu_capture01", "name": "Bash", "input": call},
        ], "tool_use"
    return [{"type": "text", "text": "Done." if answered else "Hello from the capture server."}], "end_turn"


def _sse(model: str, blocks: list[dict[str, Any]], stop: str) -> bytes:
    usage = {"input_tokens": 10, "output_tokens": 1}
    start = {"id": "msg_capture", "type": "message", "role": "assistant", "content": [], "model": model}
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {**start, "stop_reason": None, "stop_sequence": None, "usage": usage},
        }
    ]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            events.append(
                {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}
            )
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            empty = {**block, "input": {}}
            events.append({"type": "content_block_start", "index": i, "content_block": empty})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append({"type": "content_block_delta", "index": i, "delta": delta})
        events.append({"type": "content_block_stop", "index": i})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 5},
        }
    )
    events.append({"type": "message_stop"})
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def make_handler(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    counter = itertools.count(1)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _handle(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            headers, body = _redact(dict(self.headers.items()), body)
            with recorder.lock:
                number = next(counter)
                recorder.requests.append(
                    {"method": self.command, "path": self.path, "headers": headers, "body": body}
                )
            status, media, data = self._answer(body, number)
            self.send_response(status)
            self.send_header("content-type", media)
            self.send_header("content-length", str(len(data)))
            self.send_header("request-id", f"req_capture{number:03d}")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _answer(self, body: Any, number: int) -> tuple[int, str, bytes]:
            path = self.path.split("?", 1)[0]
            if self.command != "POST" or path != "/v1/messages" or not isinstance(body, dict):
                error = {"type": "not_found_error", "message": f"capture server: no {self.command} {path}"}
                return 404, "application/json", json.dumps({"type": "error", "error": error}).encode()
            if recorder.answer == "error400":
                error = {"type": "invalid_request_error", "message": "tools: tool use is not supported here"}
                payload = {"type": "error", "error": error, "request_id": f"req_capture{number:03d}"}
                return 400, "application/json", json.dumps(payload).encode()
            blocks, stop = _blocks_for(recorder, body)
            model = str(body.get("model", ""))
            if body.get("stream"):
                return 200, "text/event-stream", _sse(model, blocks, stop)
            message = {
                "id": "msg_capture",
                "type": "message",
                "role": "assistant",
                "content": blocks,
                "model": model,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }
            return 200, "application/json", json.dumps(message).encode()

        do_GET = do_POST = do_HEAD = _handle

    return Handler


def run_scenario(claude: str, scenario: Scenario, out: Path, version: str) -> list[Path]:
    recorder = Recorder(scenario.answer)
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(recorder))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}"
    with tempfile.TemporaryDirectory(prefix="claude-home-") as home, tempfile.TemporaryDirectory() as work:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": "sk-ant-capture-not-a-key",
            **QUIET,
            **scenario.env,
        }
        command = [claude, *scenario.args, "--output-format", "json"]
        done = subprocess.run(command, env=env, cwd=work, capture_output=True, text=True, timeout=300)
    server.shutdown()
    print(f"{scenario.name}: exit {done.returncode}, {len(recorder.requests)} request(s)", file=sys.stderr)
    written = []
    for number, request in enumerate(recorder.requests, start=1):
        if scenario.keep is not None and number not in scenario.keep:
            continue
        shown_env = {k: v for k, v in env.items() if k not in {"PATH", "HOME", "ANTHROPIC_API_KEY"}}
        shown_env["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:<port>"
        record = {
            "capture": {
                "scenario": scenario.name,
                "why": scenario.why,
                "request": f"{number} of {len(recorder.requests)}",
                "claude_code": version,
                "date": dt.date.today().isoformat(),
                "env": shown_env,
                "args": [*scenario.args, "--output-format", "json"],
                "capture_server_answer": scenario.answer,
            },
            **request,
        }
        path = out / f"{scenario.name}.{number}.json"
        path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--claude", required=True, help="path of the claude executable")
    parser.add_argument("--out", type=Path, default=Path("fixtures/claude-code"))
    parser.add_argument("--scenario", action="append", choices=[s.name for s in SCENARIOS])
    args = parser.parse_args(argv)
    args.claude = str(Path(args.claude).resolve())
    version = subprocess.run(
        [args.claude, "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    args.out.mkdir(parents=True, exist_ok=True)
    for scenario in SCENARIOS:
        if args.scenario and scenario.name not in args.scenario:
            continue
        for path in run_scenario(args.claude, scenario, args.out, version):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
