"""The built-in web search provider: a local full-text index over a directory of documents
(`--web-search-index DIR`), on SQLite FTS5, ranked by its `bm25()`.

No public search engine is reachable from here, so web search is served from what the operator
puts in the directory: `.html`/`.htm` pages (title from `<title>`, URL from `<link
rel="canonical">`), and `.txt`/`.md` files (title from the first line, URL from a first line
`URL: <url>`). A document without a URL gets `https://local-index.invalid/<path>` (the
`.invalid` top-level domain never resolves). The index is built in memory when the server
starts; the directory is read once.

`user_location` has no geographic data to select on here; it orders results: among the
matches, documents that name the user's city or region come first.

The index is also the server's offline copy of those pages: a web fetch of an indexed URL is
answered from it (`WebSearchIndex.fetched`), so a search's result can be fetched and cited.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from bs4 import BeautifulSoup

from .definitions import WebFetchConfig
from .fetch import Fetched, clipped, domain_allowed, domains_allow, now_iso, page_text

__all__ = ["INVALID_HOST", "SearchHit", "WebSearchIndex"]

INVALID_HOST = "local-index.invalid"
_SUFFIXES = {".html", ".htm", ".txt", ".md"}
_CANDIDATES = 50  # matches ranked before domain filters and the location order cut them to `limit`


@dataclass(frozen=True, slots=True)
class SearchHit:
    url: str
    title: str
    text: str
    page_age: str | None


class WebSearchIndex:
    """Documents of one directory, searchable by words."""

    def __init__(self, documents: list[SearchHit]) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE docs USING fts5(url UNINDEXED, title, body, page_age UNINDEXED,"
            " tokenize='porter unicode61')"
        )
        self._db.executemany(
            "INSERT INTO docs (url, title, body, page_age) VALUES (?, ?, ?, ?)",
            [(d.url, d.title, d.text, d.page_age) for d in documents],
        )
        self.size = len(documents)
        # The offline copies, by URL as a fetch may write it (the first document wins).
        self._pages: dict[str, SearchHit] = {}
        for document in documents:
            self._pages.setdefault(_normal(document.url), document)

    @classmethod
    def from_directory(cls, directory: Path) -> WebSearchIndex:
        if not directory.is_dir():
            raise ValueError(f"--web-search-index {directory}: not a directory")
        paths = sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix.lower() in _SUFFIXES)
        return cls([_document(path, path.relative_to(directory)) for path in paths])

    def search(
        self,
        query: str,
        *,
        limit: int = 5,
        allowed: tuple[str, ...] | None = None,
        blocked: tuple[str, ...] = (),
        near: tuple[str, ...] = (),
    ) -> list[SearchHit]:
        """The best `limit` documents for `query`'s words (any of them), within the domain
        filters; those naming a place of `near` first."""
        words = re.findall(r"[^\W_]+", query.lower())
        if not words:
            return []
        match = " OR ".join('"' + word.replace('"', '""') + '"' for word in words)
        rows = self._db.execute(
            "SELECT url, title, body, page_age FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?",
            (match, _CANDIDATES),
        ).fetchall()
        hits = [SearchHit(*row) for row in rows if _domain_ok(row[0], allowed, blocked)]
        places = [place.lower() for place in near if place]
        if places:
            hits.sort(key=lambda hit: not any(p in f"{hit.title}\n{hit.text}".lower() for p in places))
        return hits[:limit]

    def fetched(self, url: str, config: WebFetchConfig) -> Fetched | None:
        """The indexed page at `url` as a web fetch's document (its text, as a fetch of the
        page reads it), or None: not indexed, or not allowed by the tool's domain filters (the
        network fetch then refuses or fails it as it would any URL)."""
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if parts.scheme not in ("http", "https") or not domain_allowed(host, config):
            return None
        page = self._pages.get(_normal(url))
        if page is None:
            return None
        return Fetched(url, "text/plain", clipped(page.text, config), page.title or None, now_iso())


def _normal(url: str) -> str:
    """`url` as the index looks pages up: scheme and host in lower case, no fragment, no final
    slash (`https://Example.com/a/#top` is `https://example.com/a`)."""
    parts = urlsplit(url.strip())
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, parts.query, "")).rstrip("/")


def _domain_ok(url: str, allowed: tuple[str, ...] | None, blocked: tuple[str, ...]) -> bool:
    return domains_allow((urlsplit(url).hostname or "").lower(), allowed, blocked)


def _document(path: Path, relative: Path) -> SearchHit:
    raw = path.read_text(encoding="utf-8", errors="replace")
    url = f"https://{INVALID_HOST}/{relative.as_posix()}"
    if path.suffix.lower() in (".html", ".htm"):
        soup = BeautifulSoup(raw, "html.parser")
        canonical = soup.find("link", rel="canonical")  # read before page_text drops the head
        href = canonical.get("href") if canonical is not None else None
        if isinstance(href, str) and href.startswith(("http://", "https://")):
            url = href
        found, text = page_text(soup)
        title = found or relative.stem
    else:
        lines = raw.splitlines()
        if lines and lines[0].startswith("URL: "):
            url, lines = lines[0].removeprefix("URL: ").strip(), lines[1:]
        body = [line for line in lines if line.strip()]
        title = body[0].lstrip("# ").strip() if body else relative.stem
        text = "\n".join(lines).strip()
    modified = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    return SearchHit(url, title or relative.stem, text, modified.strftime("%B %-d, %Y"))
