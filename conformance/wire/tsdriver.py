"""The official TypeScript SDK as a second client: one call of `conformance/wire/ts/driver.cjs` in Node.

The two official SDKs parse the same wire differently in places (the TypeScript stream helper
freezes its final message at `message_stop`; the Python one folds every event until the stream
closes), so a server can be whole for one and broken for the other. The SDK-* properties drive
this one; everything else drives the Python SDK.

- The SDK is pinned by `conformance/wire/ts/package.json` and `package-lock.json` and installed with
  `npm ci` into a cache directory on first use (`<checkout>/.cache/ts-sdk/`, else
  `~/.cache/plumbline/ts-sdk/`, or `$PLUMBLINE_CACHE_DIR/ts-sdk/`). Without `node` and `npm`, or
  when the install fails, `TSDriverUnavailable` says why (the properties SKIP).
- Node talks to a loopback proxy that forwards each request through `Target.stream`, so its
  exchanges are recorded and tagged with the property like every other one; a FAIL has the raw
  bytes Node read, and the driver's input and output.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

import httpx

from conformance.wire.target import REDACTED, Exchange, Target

__all__ = ["TS_DIR", "TSDriverUnavailable", "TSResult", "install_ts_sdk", "pinned_version", "run_ts"]

TS_DIR = Path(__file__).resolve().parent / "ts"
DRIVER = TS_DIR / "driver.cjs"
PACKAGE = "@anthropic-ai/sdk"
Operation = Literal["create", "stream"]
# Not forwarded: hop-by-hop, or set again by the forwarding client (Node may ask for gzip; the
# proxy hands Node decoded bytes).
_HOP = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding", "content-encoding"}


class TSDriverUnavailable(Exception):
    """The TypeScript SDK cannot run here (no node or npm, or the install failed)."""


def pinned_version() -> str:
    """The `@anthropic-ai/sdk` version conformance/wire/ts/package.json pins."""
    package = json.loads((TS_DIR / "package.json").read_text())
    return str(package["dependencies"][PACKAGE])


def _cache_root() -> Path:
    configured = os.environ.get("PLUMBLINE_CACHE_DIR")
    if configured:
        return Path(configured)
    checkout = TS_DIR.parents[1]
    if (checkout / "pyproject.toml").exists():
        return checkout / ".cache"
    return Path.home() / ".cache" / "plumbline"


def _install_dir() -> Path:
    lock = hashlib.sha256((TS_DIR / "package-lock.json").read_bytes()).hexdigest()[:12]
    return _cache_root() / "ts-sdk" / f"{pinned_version()}-{lock}"


def _installed(sdk: Path) -> bool:
    try:
        return bool(json.loads((sdk / "package.json").read_text())["version"] == pinned_version())
    except (OSError, ValueError, KeyError):
        return False


_UNAVAILABLE: list[str] = []  # why the SDK cannot run, once known: an install is tried once a run


def install_ts_sdk() -> Path:
    """The directory of the pinned, installed SDK package; installed with `npm ci` on first use
    (staged, then moved into place). Raises TSDriverUnavailable with why."""
    if _UNAVAILABLE:
        raise TSDriverUnavailable(_UNAVAILABLE[0])
    try:
        return _install()
    except TSDriverUnavailable as exc:
        _UNAVAILABLE.append(str(exc))
        raise


@functools.cache
def _install() -> Path:
    where = _install_dir()
    sdk = where / "node_modules" / "@anthropic-ai" / "sdk"
    if _installed(sdk):
        if shutil.which("node") is None:
            raise TSDriverUnavailable("node is not on PATH (the TypeScript SDK runs in Node)")
        return sdk
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        raise TSDriverUnavailable("node and npm must be on PATH to install and run the TypeScript SDK")
    where.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=where.parent))
    try:
        for name in ("package.json", "package-lock.json"):
            shutil.copy(TS_DIR / name, staging / name)
        # No install scripts: the SDK needs none, and an install should not run code.
        command = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
        try:
            done = subprocess.run(command, cwd=staging, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TSDriverUnavailable(f"npm ci of {PACKAGE}@{pinned_version()} failed: {exc}") from exc
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip()[-500:]
            raise TSDriverUnavailable(f"npm ci of {PACKAGE}@{pinned_version()} failed: {tail}")
        if where.exists() and not _installed(sdk):
            shutil.rmtree(where)  # a broken or partial install
        with contextlib.suppress(OSError):  # another run may have put it in place first
            staging.rename(where)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not _installed(sdk):
        raise TSDriverUnavailable(f"{PACKAGE}@{pinned_version()} is not in {where} after npm ci")
    return sdk


@dataclass(frozen=True, slots=True)
class TSResult:
    """What the driver was asked, what it answered, and the exchange it made (recorded)."""

    request: dict[str, Any]  # credentials redacted
    output: dict[str, Any]
    exchange: Exchange | None

    @property
    def ok(self) -> bool:
        return self.output.get("ok") is True

    @property
    def message(self) -> Any:
        return self.output.get("message")

    @property
    def error(self) -> dict[str, Any]:
        error = self.output.get("error")
        return error if isinstance(error, dict) else {}

    def evidence(self, limit: int = 1500) -> str:
        """The driver's input and output, for a failure's Actual."""
        text = json.dumps({"driver_input": self.request, "driver_output": self.output}, ensure_ascii=False)
        return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"


class _Forwarder(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, target: Target) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.target = target
        self.failure: BaseException | None = None  # a transport error, re-raised for the plugin


class _Handler(BaseHTTPRequestHandler):
    server: _Forwarder
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in _HOP}
        self.close_connection = True
        try:
            payload = json.loads(body)
        except ValueError:
            self.send_error(400, "the TypeScript SDK sent a body that is not JSON")
            return
        try:
            with self.server.target.stream(self.path, payload, headers=headers) as response:
                self.send_response(response.status_code)
                for name, value in response.headers.items():
                    if name.lower() not in _HOP:
                        self.send_header(name, value)
                self.send_header("connection", "close")  # the body ends when the connection does
                self.end_headers()
                for chunk in response.iter_bytes():
                    self.wfile.write(chunk)
                    self.wfile.flush()
        except httpx.TransportError as exc:
            self.server.failure = exc  # Node sees a broken answer; the plugin judges the cause

    def log_message(self, format: str, *args: Any) -> None:  # quiet: failures are judged, not logged
        pass


@contextlib.contextmanager
def _forwarding(target: Target) -> Iterator[_Forwarder]:
    server = _Forwarder(target)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def run_ts(
    target: Target,
    operation: Operation,
    params: dict[str, Any],
    *,
    api_key: str | None = None,
) -> TSResult:
    """One `messages.create` or `messages.stream(...).finalMessage()` through the TypeScript SDK,
    with the target's credentials (or `api_key` instead). Raises TSDriverUnavailable where the
    SDK cannot run, and the transport error when the target dropped the connection."""
    sdk = install_ts_sdk()
    key = api_key if api_key is not None else target.config.api_key
    credential = key or "unused"  # the SDK refuses to start without one; an open target ignores it
    # The SDK sends its key as `Authorization: Bearer`; the run's --auth-header decides here, so
    # that how a key is sent is judged by AUTH-* alone.
    headers: dict[str, str | None] = {"anthropic-version": target.config.api_version}  # the run's
    if target.config.auth_header == "x-api-key":
        headers |= {"x-api-key": credential, "authorization": None}
    with _forwarding(target) as server:
        request: dict[str, Any] = {
            "base_url": f"http://127.0.0.1:{server.server_address[1]}",
            "api_key": credential,
            "headers": headers,
            "operation": operation,
            "params": params,
            # Later than the forwarding client's, so that a silent target is judged by the
            # plugin from the transport error, as for every other property.
            "timeout_ms": int((target.config.timeout + 30) * 1000),
        }
        before = len(target.recorder.exchanges)
        done = subprocess.run(
            [shutil.which("node") or "node", str(DRIVER), str(sdk)],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=target.config.timeout + 90,
            check=False,
        )
    if server.failure is not None:
        raise server.failure
    try:
        output = json.loads(done.stdout)
    except ValueError:
        raise RuntimeError(
            f"the TypeScript driver exited {done.returncode} without a result: {done.stderr[-2000:]}"
        ) from None
    shown = {**request, "api_key": REDACTED, "headers": {k: v and REDACTED for k, v in headers.items()}}
    made = target.recorder.exchanges[before:]
    return TSResult(shown, output if isinstance(output, dict) else {}, made[-1] if made else None)
