"""The keys file read again on SIGHUP, end to end: `python -m reference_server --keys FILE` on
tiny-random over a real socket. A stream admitted with a key runs to its end while the file is
rewritten and the signal handled; then the rotated key is refused and its successor served."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from conformance.wire.launcher import free_port, stop, wait_until_ready

from .test_workspaces import A_KEY, B_KEY, KEYS

pytestmark = [pytest.mark.mlx, pytest.mark.skipif(sys.platform == "win32", reason="SIGHUP")]
ROTATED = "sk-team-b-rotated-0001"


def test_sighup_rotates_a_key_without_dropping_a_stream(tmp_path: Path) -> None:
    keys, log = tmp_path / "keys.toml", tmp_path / "server.log"
    keys.write_text(KEYS)
    port = free_port()
    command = [sys.executable, "-m", "reference_server", "--model", "tiny-random", "--port", str(port)]
    command += ["--data-dir", str(tmp_path), "--keys", str(keys), "--ping-interval", "0.5"]
    with log.open("ab") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(url, process, log, timeout=300, api_key=A_KEY)
        body = {
            "model": "tiny-random",
            "max_tokens": 200,
            "stream": True,
            "messages": [{"role": "user", "content": "Hi"}],
        }
        headers = {"anthropic-version": "2023-06-01"}
        with httpx.Client(base_url=url, timeout=60) as client:
            with client.stream(
                "POST", "/v1/messages", json=body, headers={**headers, "x-api-key": A_KEY}
            ) as stream:
                lines = stream.iter_lines()
                assert next(lines).startswith("event: message_start")
                keys.write_text(KEYS.replace(B_KEY, ROTATED))
                process.send_signal(signal.SIGHUP)
                rest = "\n".join(lines)
            assert "event: message_stop" in rest
            short = {**body, "stream": False, "max_tokens": 2}
            deadline = time.monotonic() + 10
            while (
                client.post("/v1/messages", json=short, headers={**headers, "x-api-key": ROTATED}).status_code
                != 200
            ):
                assert time.monotonic() < deadline, log.read_text()[-2000:]
                time.sleep(0.1)
            refused = client.post("/v1/messages", json=short, headers={**headers, "x-api-key": B_KEY})
            assert refused.status_code == 401
            assert (
                client.post("/v1/messages", json=short, headers={**headers, "x-api-key": A_KEY}).status_code
                == 200
            )
        assert "keys reloaded" in log.read_text()
        assert A_KEY not in log.read_text()
        assert ROTATED not in log.read_text()
    finally:
        stop(process)
