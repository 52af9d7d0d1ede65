"""Start a reference server in a subprocess on a free port and wait until it answers.

Used by `plumbline` without `--target` (judge our own server) and by the project's tests.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

__all__ = ["ServerFailedToStart", "free_port", "reference_server", "stop", "wait_until_ready"]


class ServerFailedToStart(RuntimeError):
    pass


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def wait_until_ready(
    url: str, process: subprocess.Popen[bytes], log: Path, *, timeout: float, api_key: str | None
) -> None:
    """Poll `GET /v1/models` until it answers 200; fail fast if the process dies."""
    headers = {"anthropic-version": "2023-06-01"}
    if api_key:
        headers["x-api-key"] = api_key
    deadline = time.monotonic() + timeout
    # One client for every poll: each new one builds a TLS context (~30 ms of CPU), four a second.
    with httpx.Client(headers=headers, timeout=2) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise ServerFailedToStart(
                    f"the reference server exited with {process.returncode}:\n{_tail(log)}"
                )
            with contextlib.suppress(httpx.TransportError):
                if client.get(f"{url}/v1/models").status_code == 200:
                    return
            time.sleep(0.25)
    raise ServerFailedToStart(f"the reference server was not ready after {timeout:.0f} s:\n{_tail(log)}")


def _tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "<no log>"


# The workspace of a judged server's second key (its first key, --api-key, is the default one's).
SECOND_WORKSPACE = "wrkspc_plumbline_second"


@contextlib.contextmanager
def reference_server(
    model: str,
    *,
    log: Path,
    args: Sequence[str] = (),
    api_key: str | None = None,
    second_api_key: str | None = None,
    timeout: float = 600.0,
) -> Iterator[str]:
    """Run `python -m reference_server --model MODEL` on a free loopback port; yields its URL.
    `api_key` is the default workspace's; `second_api_key` that of another workspace (a keys
    file in the data directory).

    Unless `args` name one, the server's data directory (signing key, message batches) is a
    temporary one, removed when it stops: a judged server starts from nothing a run left."""
    if "--data-dir" not in args:
        with tempfile.TemporaryDirectory(prefix="plumbline-server-") as data:
            own = [*args, "--data-dir", data]
            with reference_server(
                model, log=log, args=own, api_key=api_key, second_api_key=second_api_key, timeout=timeout
            ) as url:
                yield url
        return
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable,
        "-m",
        "reference_server",
        "--model",
        model,
        "--port",
        str(port),
        *args,
    ]
    if api_key:
        command += ["--api-key", api_key]
    if second_api_key:
        keys = Path(args[list(args).index("--data-dir") + 1]) / "plumbline-keys.toml"
        keys.write_text(f'[[key]]\nkey = "{second_api_key}"\nworkspace = "{SECOND_WORKSPACE}"\n')
        command += ["--keys", str(keys)]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            wait_until_ready(url, process, log, timeout=timeout, api_key=api_key)
            yield url
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes], grace: float = 15.0) -> None:
    """Terminate `process`, and kill it if it has not exited after `grace` seconds."""
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
