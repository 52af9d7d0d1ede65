"""The web fetcher's guard, hop by hop: names that resolve to private, loopback, link-local or
metadata addresses (or to an IPv6 form carrying one, such as NAT64) are refused before any
request, and so is a redirect that leads to one; the connection goes to the address that was
checked; and the whole fetch ends at the policy's timeout, however slowly a site trickles."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

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
    "nat64.example": ["64:ff9b::a9fe:a9fe"],  # the metadata address behind NAT64/DNS64
    "nat64-loopback.example": ["64:ff9b::7f00:1"],
    "sixtofour.example": ["2002:a9fe:a9fe::1"],
    "compatible.example": ["::127.0.0.1"],
    "sitelocal.example": ["fec0::1"],
    "public6.example": ["64:ff9b::5db8:d822"],  # NAT64 of a public address
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
    "host",
    [
        "metadata.example",
        "intranet.example",
        "mixed.example",
        "mapped.example",
        "cgnat.example",
        "nat64.example",
        "nat64-loopback.example",
        "sixtofour.example",
        "compatible.example",
        "sitelocal.example",
    ],
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


def test_a_nat64_address_of_a_public_one_is_fetched_from_it():
    web, seen = fetcher(page)
    assert asyncio.run(web.fetch("http://public6.example/", OPEN)).data == "hello"
    assert seen[0].url.host == "64:ff9b::5db8:d822"


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


def trickling(request: httpx.Request) -> httpx.Response:
    """A site that sends a byte every 0.1 s for 3 s: each read is quick, the whole is not."""

    async def body() -> AsyncIterator[bytes]:
        for _ in range(30):
            await asyncio.sleep(0.1)
            yield b"x"

    return httpx.Response(200, headers={"content-type": "text/plain"}, content=body())


def test_the_whole_fetch_ends_at_the_timeout_however_slowly_a_site_trickles():
    transport = httpx.MockTransport(trickling)
    web = WebFetcher(FetchPolicy(timeout=0.5), resolve, transport)
    started = time.monotonic()
    with pytest.raises(FetchFailed) as failed:
        asyncio.run(web.fetch("http://public.example/slow", OPEN))
    assert time.monotonic() - started < 1.5
    assert failed.value.code == "url_not_accessible"
    assert "longer than 0.5 s" in str(failed.value)


def test_the_deadline_covers_every_redirect():
    async def slow_hop(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.2)  # each hop quick on its own; five of them are not
        return httpx.Response(302, headers={"location": f"/hop{len(request.url.path)}"})

    web = WebFetcher(FetchPolicy(timeout=0.5), resolve, httpx.MockTransport(slow_hop))
    with pytest.raises(FetchFailed) as failed:
        asyncio.run(web.fetch("http://public.example/", OPEN))
    assert "longer than 0.5 s" in str(failed.value)


def test_a_body_that_breaks_off_is_a_failed_fetch_not_a_crash():
    def broken(request: httpx.Request) -> httpx.Response:
        async def body() -> AsyncIterator[bytes]:
            yield b"half a page"
            raise httpx.ReadError("connection reset", request=request)

        return httpx.Response(200, headers={"content-type": "text/plain"}, content=body())

    web = WebFetcher(FetchPolicy(), resolve, httpx.MockTransport(broken))
    with pytest.raises(FetchFailed) as failed:
        asyncio.run(web.fetch("http://public.example/", OPEN))
    assert failed.value.code == "url_not_accessible"
    assert "could not be read: ReadError" in str(failed.value)
