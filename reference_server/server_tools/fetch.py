"""Web fetch, safe by default: the server fetches a URL for the model, and never one that
reaches inside the operator's network unless told to.

Every hop (the URL, then each redirect) is checked before a byte is sent: http or https, the
request's domain filters, then the host resolved and every address it resolves to must be a
public one (server_tools/addresses.py: not loopback, private, link-local, cloud metadata, CGNAT,
multicast, reserved or documentation, nor an IPv6 form that carries such an IPv4 address)
unless the server runs with `--allow-private-fetch`. The connection then goes to the address
that was checked (the Host header and TLS name stay the host's), so a second DNS answer
cannot swap in a private address. The whole fetch, redirects and body included, ends after
the policy's `timeout`: httpx's own timeout is per read, which a site sending a byte every few
seconds never trips. What comes back becomes a document: HTML as its text, plain text as is,
PDFs whole; anything else is `unsupported_content_type`.

A page the server's web search index holds (`--web-search-index`) is fetched from the index,
offline, unless the tool says `use_cache: false` (server_tools/search_index.py): the same
filters apply, and no network is touched.
"""

from __future__ import annotations

import asyncio
import base64
import re
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx
from bs4 import BeautifulSoup

from reference_server.timestamps import rfc3339

from .addresses import is_public
from .definitions import WebFetchConfig

__all__ = [
    "FetchFailed",
    "FetchPolicy",
    "Fetched",
    "Resolver",
    "WebFetcher",
    "clipped",
    "domain_allowed",
    "domains_allow",
    "now_iso",
]

MAX_URL_LENGTH = 2048  # the API's longest URL in citations
CHARS_PER_TOKEN = 4  # max_content_tokens is applied to text as about this many characters a token

Resolver = Callable[[str, int], Awaitable[list[str]]]

_TEXT_TYPES = frozenset(
    {"text/plain", "text/markdown", "text/csv", "application/json", "application/xml", "text/xml"}
)
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


class FetchFailed(Exception):
    """A fetch that did not happen or did not succeed: `code` is the result block's error code."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    """The operator's settings (not the request's): may private addresses be fetched, and how
    long a whole fetch may take (seconds)."""

    allow_private: bool = False
    timeout: float = 10.0
    max_bytes: int = 10 * 1024 * 1024
    max_redirects: int = 5


@dataclass(frozen=True, slots=True)
class Fetched:
    url: str  # the URL asked for
    media_type: str  # "text/plain" or "application/pdf": the document's source
    data: str  # the text, or the PDF in base64
    title: str | None
    retrieved_at: str


async def _resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def domain_allowed(host: str, config: WebFetchConfig) -> bool:
    """The request's allowed_domains / blocked_domains (a domain covers its subdomains)."""
    return domains_allow(host, config.allowed_domains, config.blocked_domains)


def domains_allow(host: str, allowed: Sequence[str] | None, blocked: Sequence[str]) -> bool:
    """Whether `host` passes an allow list (None: anything) and a block list; a domain covers
    its subdomains, and a scheme or path written with it is ignored. Web search filters its
    results' URLs with the same rule."""

    def covers(domain: str) -> bool:
        domain = re.sub(r"^[a-z]+://", "", domain.lower()).split("/")[0]
        return host == domain or host.endswith("." + domain)

    if allowed is not None and not any(covers(d) for d in allowed):
        return False
    return not any(covers(d) for d in blocked)


def page_text(soup: BeautifulSoup) -> tuple[str | None, str]:
    """An HTML page's title and visible text (scripts, styles and the head left out), blank
    lines collapsed. `soup` is consumed. Web search indexes pages with the same reading."""
    title = soup.title.get_text(strip=True) if soup.title is not None else None
    for hidden in soup(["script", "style", "noscript", "template", "head"]):
        hidden.decompose()
    return title, re.sub(r"\n\s*\n+", "\n\n", soup.get_text("\n")).strip()


def clipped(text: str, config: WebFetchConfig) -> str:
    """A page's text within the tool's `max_content_tokens`."""
    if config.max_content_tokens is None:
        return text
    return text[: config.max_content_tokens * CHARS_PER_TOKEN]


def now_iso() -> str:
    """`retrieved_at`: now, in UTC, as the API writes it."""
    return rfc3339()


class WebFetcher:
    """Fetches under one FetchPolicy; `resolver` and `transport` are seams for tests."""

    def __init__(
        self,
        policy: FetchPolicy,
        resolver: Resolver | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.policy = policy
        self._resolve = resolver or _resolve
        self._transport = transport

    async def fetch(self, url: str, config: WebFetchConfig) -> Fetched:
        if len(url) > MAX_URL_LENGTH:
            raise FetchFailed("url_too_long", f"the URL is longer than {MAX_URL_LENGTH} characters")
        try:
            async with asyncio.timeout(self.policy.timeout):
                return await self._fetch(url, config)
        except TimeoutError:
            raise FetchFailed(
                "url_not_accessible", f"the fetch took longer than {self.policy.timeout:g} s"
            ) from None

    async def _fetch(self, url: str, config: WebFetchConfig) -> Fetched:
        current = url
        async with httpx.AsyncClient(
            transport=self._transport, timeout=self.policy.timeout, follow_redirects=False
        ) as client:
            for _ in range(self.policy.max_redirects + 1):
                response = await self._hop(client, current, config)
                try:
                    if response.is_redirect and "location" in response.headers:
                        current = urljoin(current, response.headers["location"])
                        continue
                    return await self._document(url, response, config)
                finally:
                    await response.aclose()
        raise FetchFailed("url_not_accessible", "too many redirects")

    async def _hop(self, client: httpx.AsyncClient, url: str, config: WebFetchConfig) -> httpx.Response:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if parts.scheme not in ("http", "https") or not host:
            raise FetchFailed("invalid_tool_input", "only absolute http and https URLs can be fetched")
        if not domain_allowed(host, config):
            raise FetchFailed("url_not_allowed", f"{host} is not allowed by the tool's domain filters")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        pinned = (await self.checked_addresses(host, port))[0]
        netloc = f"[{pinned}]" if ":" in pinned else pinned
        target = urlunsplit((parts.scheme, f"{netloc}:{port}", parts.path or "/", parts.query, ""))
        request = client.build_request(
            "GET",
            target,
            headers={"host": parts.netloc.rsplit("@", 1)[-1], "user-agent": "plumbline-reference-server"},
            extensions={"sni_hostname": host},
        )
        try:
            return await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise FetchFailed("url_not_accessible", f"{host}: {type(exc).__name__}") from None

    async def checked_addresses(self, host: str, port: int) -> list[str]:
        """`host`'s addresses, every one public (unless the policy allows private ones)."""
        try:
            addresses = await self._resolve(host, port)
        except OSError as exc:
            raise FetchFailed("url_not_accessible", f"{host} does not resolve: {exc}") from None
        if not addresses:
            raise FetchFailed("url_not_accessible", f"{host} does not resolve")
        if not self.policy.allow_private and not all(is_public(a) for a in addresses):
            raise FetchFailed(
                "url_not_allowed",
                f"{host} resolves to a private or local address; this server reaches only public ones",
            )
        return addresses

    async def _document(self, url: str, response: httpx.Response, config: WebFetchConfig) -> Fetched:
        if response.status_code == 429:
            raise FetchFailed("too_many_requests", "the site answered 429")
        if response.status_code >= 400:
            raise FetchFailed("url_not_accessible", f"the site answered {response.status_code}")
        media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type not in _TEXT_TYPES | _HTML_TYPES | {"application/pdf"}:
            raise FetchFailed("unsupported_content_type", f"{media_type or 'no content type'} cannot be read")
        body = await self._body(response)
        retrieved_at = now_iso()
        if media_type == "application/pdf":
            return Fetched(url, media_type, base64.b64encode(bytes(body)).decode(), None, retrieved_at)
        text = bytes(body).decode(response.encoding or "utf-8", errors="replace")
        title = None
        if media_type in _HTML_TYPES:
            title, text = page_text(BeautifulSoup(text, "html.parser"))
        return Fetched(url, "text/plain", clipped(text, config), title or None, retrieved_at)

    async def _body(self, response: httpx.Response) -> bytearray:
        body = bytearray()
        try:
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > self.policy.max_bytes:
                    raise FetchFailed(
                        "url_not_accessible", f"the page is larger than {self.policy.max_bytes} bytes"
                    )
        except httpx.HTTPError as exc:  # a read timeout or a broken body is the site's failure
            raise FetchFailed(
                "url_not_accessible", f"the page could not be read: {type(exc).__name__}"
            ) from None
        return body
