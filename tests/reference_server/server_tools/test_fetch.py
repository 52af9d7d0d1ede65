"""The web fetcher's guard, hop by hop: names that resolve to private, loopback, link-local or
metadata addresses are refused before any request, and so is a redirect that leads to one; the
connection goes to the address that was checked."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from reference_server.server_tools.definitions import WebFetchConfig
from reference_server.server_tools.fetch import FetchFailed, FetchPolicy, WebFetcher

OPEN = WebFetchConfig(allowed_domains=None, blocked_domains=(), max_uses=None, max_content_tokens=None)
ADDRESSES = {
    "public.example": ["93.184.216.34"],
    "metadata.example": ["169.254.169.254"],
    "intranet.example": ["10.0.0.7"],
    "mixed.example": ["93.184.216.34", "127.0.0.1"],
    "mapped.example": ["::ffff:127.0.0.1"],
    "cgnat.example": ["100.64.0.1"],
}


async def resolve(host: str, port: int) -> list[str]:
    return ADDRESSES[host]


def fetcher(handler, allow_private: bool = False) -> tuple[WebFetcher, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    return WebFetcher(FetchPolicy(allow_private=allow_private), resolve, httpx.MockTransport(record)), seen


def page(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/plain"}, text="hello")


@pytest.mark.parametrize(
    "host", ["metadata.example", "intranet.example", "mixed.example", "mapped.example", "cgnat.example"]
)
def test_names_that_resolve_inside_are_refused_before_any_request(host):
    web, seen = fetcher(page)
    with pytest.raises(FetchFailed) as failed:
        asyncio.run(web.fetch(f"http://{host}/", OPEN))
    assert failed.value.code == "url_not_allowed"
    assert seen == []


def test_a_public_name_is_fetched_from_the_checked_address_under_its_own_host():
    web, seen = fetcher(page)
    fetched = asyncio.run(web.fetch("https://public.example/a?b=1", OPEN))
    assert fetched.data == "hello"
    (request,) = seen
    assert (request.url.host, request.url.path, request.url.query) == ("93.184.216.34", "/a", b"b=1")
    assert request.headers["host"] == "public.example"
    assert request.extensions["sni_hostname"] == "public.example"


def test_a_redirect_into_the_network_is_refused():
    def hop(request: httpx.Request) -> httpx.Response:
        return httpx.Response(302, headers={"location": "http://metadata.example/latest/meta-data/"})

    web, seen = fetcher(hop)
    with pytest.raises(FetchFailed) as failed:
        asyncio.run(web.fetch("http://public.example/", OPEN))
    assert failed.value.code == "url_not_allowed"
    assert len(seen) == 1  # the first hop only


def test_the_operator_may_allow_private_addresses():
    web, _ = fetcher(page, allow_private=True)
    assert asyncio.run(web.fetch("http://intranet.example/", OPEN)).data == "hello"


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("ftp://public.example/", "invalid_tool_input"),
        ("http:///nohost", "invalid_tool_input"),
        ("http://public.example/" + "a" * 2100, "url_too_long"),
    ],
)
def test_unusable_urls(url, code):
    web, seen = fetcher(page)
    with pytest.raises(FetchFailed) as failed:
        asyncio.run(web.fetch(url, OPEN))
    assert failed.value.code == code
    assert seen == []
