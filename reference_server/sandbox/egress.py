"""Network for sandboxed runs by allow-list: an HTTP proxy outside the sandbox, the only way out.

A run keeps its own network namespace (loopback only). When the operator names hosts
(`--code-execution-allow-host`), the proxy listens on a Unix socket that the sandbox binds in,
and a forwarder inside (forward_main.py) serves it on the run's own loopback as
`HTTP(S)_PROXY`: what `pip`, `curl`, `requests` and `urllib` read. The proxy takes `CONNECT
host:port` (HTTPS) and absolute-form plain HTTP requests, and opens a connection only when
- the host is on the allow-list (`example.com` exactly, `*.example.com` its subdomains),
- the port is an allowed one (443 and 80),
- the address the host resolves to is public (`is_allowed_address`: no loopback, private,
  link-local or metadata address, whatever the name resolves to),
else it answers 403 with the reason. Everything else a run does on the network fails, as before.
As Anthropic's sandbox-runtime, which filters egress through a proxy the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["EgressProxy", "host_allowed"]

log = logging.getLogger("reference_server.sandbox")
_HEAD_LIMIT = 16 * 1024
_CONNECT_TIMEOUT_S = 10.0


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    """`host` on the allow-list: a name exactly, or a subdomain of a `*.name` entry."""
    name = host.lower().rstrip(".")
    for entry in allowed:
        pattern = entry.lower().rstrip(".")
        if pattern.startswith("*."):
            if name.endswith(pattern[1:]) and name != pattern[2:]:
                return True
        elif name == pattern:
            return True
    return False


class EgressProxy:
    """The proxy: `start` (on a running loop), then hand `socket_path` to the sandbox's policy."""

    def __init__(
        self,
        allowed: Iterable[str],
        is_allowed_address: Callable[[str], bool],
        ports: Iterable[int] = (443, 80),
    ) -> None:
        self.allowed = tuple(allowed)
        self.ports = frozenset(ports)
        self._is_allowed_address = is_allowed_address
        # A short path (a Unix socket's is at most 107 bytes), in a directory only the server's
        # user may enter: the sandbox gets the socket itself by a bind mount.
        self._directory = Path(tempfile.mkdtemp(prefix="plumbline-egress-"))
        self.socket_path = self._directory / "egress.sock"
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.socket_path))
        os.chmod(self.socket_path, 0o666)  # a run's own user connects to it inside the sandbox
        log.info("code execution may reach %s through the egress proxy", ", ".join(self.allowed))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        shutil.rmtree(self._directory, ignore_errors=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        try:
            upstream, first = await self._open(head)
        except PermissionError as exc:
            await _answer(writer, 403, str(exc))
            return
        except OSError as exc:
            await _answer(writer, 502, f"cannot reach the host: {type(exc).__name__}")
            return
        up_reader, up_writer = upstream
        if first is None:
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            up_writer.write(first)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    async def _open(
        self, head: bytes
    ) -> tuple[tuple[asyncio.StreamReader, asyncio.StreamWriter], bytes | None]:
        """The upstream connection a request head asks for (PermissionError: refused), and what to
        send it first (None: a CONNECT tunnel, nothing)."""
        if len(head) > _HEAD_LIMIT:
            raise PermissionError("the request head is too long")
        line, _, rest = head.partition(b"\r\n")
        try:
            method, target, version = line.decode("latin-1").split(" ")
        except ValueError:
            raise PermissionError("not an HTTP proxy request") from None
        first: bytes | None = None
        if method == "CONNECT":
            host, _, port_text = target.rpartition(":")
            host = host.strip("[]")
        else:
            parts = urlsplit(target)
            if parts.scheme != "http" or not parts.hostname:
                raise PermissionError("only CONNECT and absolute http:// requests are proxied")
            host, port_text = parts.hostname, str(parts.port or 80)
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            kept = [h for h in rest.split(b"\r\n") if h and not h.lower().startswith(b"proxy-")]
            first = (
                f"{method} {path} {version}\r\n".encode("latin-1")
                + b"".join(h + b"\r\n" for h in kept)
                + b"\r\n"
            )
        if not port_text.isdigit() or int(port_text) not in self.ports:
            raise PermissionError(f"port {port_text} is not allowed")
        if not host_allowed(host, self.allowed):
            raise PermissionError(f"{host} is not on the code execution allow-list")
        port = int(port_text)
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = [str(info[4][0]) for info in infos]
        public = [address for address in addresses if self._is_allowed_address(address)]
        if not public:
            raise PermissionError(f"{host} resolves to no public address")
        connection = await asyncio.wait_for(asyncio.open_connection(public[0], port), _CONNECT_TIMEOUT_S)
        return connection, first


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str) -> None:
    body = f"plumbline sandbox egress: {reason}\n".encode()
    phrase = {403: "Forbidden", 502: "Bad Gateway"}[status]
    writer.write(
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: text/plain\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(ConnectionError):
        await writer.drain()
    writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()
