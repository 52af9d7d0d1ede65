"""The sandbox's network by allow-list (sandbox/egress.py): a run reaches an allowed host through
the egress proxy (HTTP_PROXY on its own loopback), and nothing else: a host off the list, a
port not allowed, a name that resolves to a private address, and any direct connection are
refused; the run's output ends with it (the forwarder inside dies with the run)."""

from __future__ import annotations

import asyncio
import http.server
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reference_server.sandbox import Limits, Policy, find_sandbox
from reference_server.sandbox.egress import EgressProxy, host_allowed

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux's sandbox")

FETCH = """
import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())
except Exception as exc:
    print(type(exc).__name__, getattr(exc, "code", ""), str(getattr(exc, "reason", exc))[:80])
"""
DIRECT = """
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
    print("connected")
except OSError as exc:
    print("refused", type(exc).__name__)
"""


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello from the host"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def page() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def run(proxy: EgressProxy | None, workdir: Path, script: str, *args: str) -> tuple[str, float]:
    sandbox = find_sandbox()
    sandbox.claim(workdir)  # the run's own user's, as a container's directory is
    policy = Policy(workdir, egress=proxy.socket_path if proxy else None)

    async def go() -> tuple[str, float]:
        if proxy is not None:
            await proxy.start()
        began = time.monotonic()
        try:
            done = await sandbox.run([sys.executable, "-c", script, *args], policy, Limits(wall_s=30))
        finally:
            if proxy is not None:
                await proxy.close()
        return done.stdout.decode().strip(), time.monotonic() - began

    return asyncio.run(go())


def test_the_allow_list_matches_names_and_subdomains():
    allowed = ("pypi.org", "*.pythonhosted.org")
    assert host_allowed("pypi.org", allowed)
    assert host_allowed("PyPI.org.", allowed)
    assert host_allowed("files.pythonhosted.org", allowed)
    assert not host_allowed("pythonhosted.org", allowed)
    assert not host_allowed("evil-pypi.org", allowed)
    assert not host_allowed("pypi.org.evil.com", allowed)


def test_an_allowed_host_is_reached_through_the_proxy_and_others_are_refused(page, tmp_path):
    def loopback_allowed() -> EgressProxy:  # the test's host is loopback: allowed here only
        return EgressProxy(("localhost",), lambda address: True, ports=(page,))

    reached, took = run(loopback_allowed(), tmp_path, FETCH, f"http://localhost:{page}/")
    assert reached == "hello from the host"
    assert took < 10  # the forwarder inside did not keep the run alive
    off_list, _ = run(loopback_allowed(), tmp_path, FETCH, f"http://127.0.0.1:{page}/")
    assert off_list.startswith("HTTPError 403")
    other_port, _ = run(loopback_allowed(), tmp_path, FETCH, f"http://localhost:{page + 1}/")
    assert other_port.startswith("HTTPError 403")
    # Direct, around the proxy: the run's network namespace has no way out.
    direct, _ = run(loopback_allowed(), tmp_path, DIRECT, str(page))
    assert direct.startswith("refused")


def test_a_name_that_resolves_to_a_private_address_is_refused(page, tmp_path):
    from reference_server.server_tools.addresses import is_public

    proxy = EgressProxy(("localhost",), is_public, ports=(page,))
    refused, _ = run(proxy, tmp_path, FETCH, f"http://localhost:{page}/")
    assert refused.startswith("HTTPError 403")


def test_without_a_proxy_nothing_is_reached(page, tmp_path):
    closed, _ = run(None, tmp_path, FETCH, f"http://localhost:{page}/")
    assert closed.startswith("URLError")
