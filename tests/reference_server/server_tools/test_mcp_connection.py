"""The MCP connector's connection, at the connector: it goes to the address that was checked
(a DNS answer that changes after the check reaches nothing), under the server's own name; it
goes nowhere else, redirects included; and when it fails the error says what happened (refused,
the HTTP status, a timeout, the MCP error) without the authorization token."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import httpx2
import pytest

from reference_server.errors import InvalidRequestError
from reference_server.protocol import McpServerParam
from reference_server.server_tools import mcp
from reference_server.server_tools.definitions import McpToolConfig
from reference_server.server_tools.fetch import FetchPolicy, WebFetcher
from reference_server.server_tools.mcp import McpConnector

from .mcp_server import mcp_server

OLD_BETA = {"mcp-client-2025-04-04"}
TOKEN = "secret-token-1234"


class Rebinding:
    """A DNS that answers `first` once, then `later`: what an attacker's name server does."""

    def __init__(self, first: str, later: str) -> None:
        self.answers = [first, later]
        self.asked = 0

    def next(self) -> str:
        answer = self.answers[min(self.asked, 1)]
        self.asked += 1
        return answer

    async def resolve(self, host: str, port: int) -> list[str]:
        return [self.next()]


def server(url: str, token: str | None = TOKEN) -> McpServerParam:
    return McpServerParam(type="url", url=url, name="calc", authorization_token=token)


def listing_error(connector: McpConnector, url: str, token: str | None = TOKEN) -> str:
    with pytest.raises(InvalidRequestError) as refused:
        asyncio.run(connector.offered([server(url, token)], None, OLD_BETA))
    return refused.value.message


def mocked(handler: Any, first: str = "93.184.216.34", later: str = "127.0.0.1") -> McpConnector:
    """A connector under the default (public only) policy whose DNS rebinds, sending through
    `handler` in place of the network."""
    fetcher = WebFetcher(FetchPolicy(), Rebinding(first, later).resolve)
    return McpConnector(fetcher, httpx2.MockTransport(handler))


@pytest.fixture
def system_dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, Rebinding]:
    """The process's own resolver answers the names put in the dict from their Rebinding, so a
    connection made by name (not by the checked address) sees the second answer."""
    names: dict[str, Rebinding] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name in names:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (names[name].next(), int(port)))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return names


def test_the_connection_goes_to_the_checked_address_when_dns_rebinds(system_dns):
    with mcp_server(names=("rebind.example",)) as site:
        dns = Rebinding("127.0.0.1", "127.0.0.2")  # nothing listens on the second
        system_dns["rebind.example"] = dns
        connector = McpConnector(WebFetcher(FetchPolicy(allow_private=True), dns.resolve))
        url = f"http://rebind.example:{site.port}/mcp"
        offered = asyncio.run(connector.offered([server(url)], None, OLD_BETA))
        assert {tool.name for tool in offered} == {"tide", "wind"}
        assert dns.asked == 1  # checked once, never resolved again
        assert site.hosts
        assert set(site.hosts) == {f"rebind.example:{site.port}"}
        # a call checks the name again, and connects to what that check answered
        system_dns["rebind.example"] = dns = Rebinding("127.0.0.1", "127.0.0.2")
        connector = McpConnector(WebFetcher(FetchPolicy(allow_private=True), dns.resolve))
        config = McpToolConfig("calc", url, TOKEN, False)
        result = asyncio.run(connector.call(config, "mcptoolu_1", "tide", {"harbour": "brest"}))
        assert not result.is_error
        assert site.calls == [{"harbour": "brest"}]
        assert dns.asked == 1


def test_a_public_answer_then_a_private_one_connects_to_the_public_one():
    seen: list[httpx2.Request] = []

    def refuse(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(503, text="down")

    message = listing_error(mocked(refuse), "https://calc.example/mcp")
    assert seen  # the SDK tries server/discover, then initialize
    for request in seen:
        assert (request.url.host, request.url.port, request.url.path) == ("93.184.216.34", None, "/mcp")
        assert request.headers["host"] == "calc.example"
        assert request.extensions["sni_hostname"] == "calc.example"
        assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert "calc.example:443 (93.184.216.34) answered HTTP 503" in message
    assert "ExceptionGroup" not in message


def test_a_redirect_elsewhere_is_not_followed():
    seen: list[httpx2.Request] = []

    def redirect(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(307, headers={"location": "http://169.254.169.254/latest/meta-data/"})

    message = listing_error(mocked(redirect), "http://calc.example/mcp")
    assert {(request.url.host, request.url.path) for request in seen} == {("93.184.216.34", "/mcp")}
    assert "not followed" in message


def test_a_redirect_within_the_server_goes_to_the_checked_address():
    seen: list[httpx2.Request] = []

    def moved(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        if request.url.path == "/mcp":
            return httpx2.Response(307, headers={"location": "/v2/mcp"})
        return httpx2.Response(404)

    message = listing_error(mocked(moved), "http://calc.example/mcp")
    assert {(r.url.host, r.url.path) for r in seen} == {
        ("93.184.216.34", "/mcp"),
        ("93.184.216.34", "/v2/mcp"),
    }
    assert {r.headers["host"] for r in seen} == {"calc.example"}
    assert "answered HTTP 404" in message


def test_the_pinned_transport_refuses_any_other_host():
    seen: list[httpx2.Request] = []
    transport = mcp.PinnedTransport(
        mcp.Target("calc.example", 80, "93.184.216.34"), httpx2.MockTransport(lambda r: seen.append(r))
    )
    request = httpx2.Request("GET", "http://169.254.169.254/latest/meta-data/")
    with pytest.raises(mcp.UncheckedHost):
        asyncio.run(transport.handle_async_request(request))
    assert seen == []


def test_an_unreachable_server_is_named_with_what_happened():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed once the block ends: nothing listens
    connector = McpConnector(WebFetcher(FetchPolicy(allow_private=True)))
    message = listing_error(connector, f"http://127.0.0.1:{port}/mcp")
    assert message == (
        f"mcp_servers.0: could not list the tools of MCP server 'calc': connection refused at 127.0.0.1:{port}"
    )
    config = McpToolConfig("calc", f"http://127.0.0.1:{port}/mcp", TOKEN, False)
    result = asyncio.run(connector.call(config, "mcptoolu_1", "tide", {}))
    assert result.is_error
    assert result.content == [
        {
            "type": "text",
            "text": f"the MCP server could not be called: connection refused at 127.0.0.1:{port}",
        }
    ]


def test_a_missing_endpoint_names_the_http_status():
    with mcp_server() as site:
        connector = McpConnector(WebFetcher(FetchPolicy(allow_private=True)))
        message = listing_error(connector, site.url.replace("/mcp", "/missing"))
    assert f"127.0.0.1:{site.port} answered HTTP 404" in message
    assert "ExceptionGroup" not in message


def test_a_server_that_does_not_answer_times_out_and_says_so(monkeypatch):
    monkeypatch.setattr(mcp, "TIMEOUT_SECONDS", 0.5)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # accepts connections, never answers
        port = silent.getsockname()[1]
        connector = McpConnector(WebFetcher(FetchPolicy(allow_private=True)))
        message = listing_error(connector, f"http://127.0.0.1:{port}/mcp")
    assert message.endswith(f"127.0.0.1:{port} did not answer within 0.5 s")


def test_the_token_never_appears_in_an_error_even_when_the_server_echoes_it():
    def echo(request: httpx2.Request) -> httpx2.Response:
        said = f"token {request.headers['authorization']} is not valid"
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": said}}
        return httpx2.Response(401, headers={"content-type": "application/json"}, content=json.dumps(error))

    message = listing_error(mocked(echo), "http://calc.example/mcp?key=query-secret")
    assert "answered HTTP 401 (token Bearer [redacted] is not valid)" in message
    assert TOKEN not in message
    assert "query-secret" not in message
    config = McpToolConfig("calc", "http://calc.example/mcp", TOKEN, False)
    result = asyncio.run(mocked(echo).call(config, "mcptoolu_1", "tide", {}))
    assert result.is_error
    assert "HTTP 401" in str(result.content)
    assert TOKEN not in str(result.content)


def test_failures_inside_exception_groups_are_unwrapped_and_redacted():
    transport = mcp.PinnedTransport(mcp.Target("calc.example", 443, "93.184.216.34"))
    request = httpx2.Request("POST", "https://calc.example/mcp")
    nested = ExceptionGroup(
        "unhandled errors in a TaskGroup",
        [
            ExceptionGroup("inner", [RuntimeError(f"refused Bearer {TOKEN}")]),
            httpx2.RemoteProtocolError("Server disconnected without sending a response.", request=request),
        ],
    )
    said = mcp.failure(nested, transport, server("https://calc.example/mcp"))
    assert said == (
        "RuntimeError: refused Bearer [redacted]; RemoteProtocolError from calc.example:443 (93.184.216.34): "
        "Server disconnected without sending a response."
    )
