"""Tool search: the deferred tools a query finds, by regular expression or by BM25.

A tool is searched as one document: its name, its description, and its arguments' names and
descriptions. The regex variant runs Python's `re.search` (case-insensitive) over that text;
the BM25 variant ranks with SQLite FTS5's built-in `bm25()` over an in-memory index built per
search (a request holds at most a few hundred tools). At most `LIMIT` tools are returned.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .definitions import SearchKind

__all__ = ["LIMIT", "MAX_PATTERN", "SearchError", "Searchable", "search_tools"]

LIMIT = 5
MAX_PATTERN = 200  # characters of a regex query


class SearchError(Exception):
    """An unusable query: the result block's `invalid_tool_input`."""


@dataclass(frozen=True, slots=True)
class Searchable:
    name: str
    description: str
    input_schema: dict[str, Any]

    def text(self) -> str:
        properties = self.input_schema.get("properties")
        parts = [self.name, self.description]
        if isinstance(properties, dict):
            for key, value in properties.items():
                parts.append(str(key))
                if isinstance(value, dict) and isinstance(value.get("description"), str):
                    parts.append(value["description"])
        return "\n".join(parts)


def search_tools(kind: SearchKind, query: str, tools: Sequence[Searchable]) -> list[str]:
    """Names of the tools `query` finds, best first."""
    if not query.strip():
        raise SearchError("the query is empty")
    return _regex(query, tools) if kind == "regex" else _bm25(query, tools)


def _regex(query: str, tools: Sequence[Searchable]) -> list[str]:
    if len(query) > MAX_PATTERN:
        raise SearchError(f"the pattern is longer than {MAX_PATTERN} characters")
    try:
        pattern = re.compile(query, re.IGNORECASE)
    except re.error as exc:
        raise SearchError(f"not a valid regular expression: {exc}") from None
    return [tool.name for tool in tools if pattern.search(tool.text())][:LIMIT]


def _bm25(query: str, tools: Sequence[Searchable]) -> list[str]:
    words = re.findall(r"[^\W_]+", query.lower())  # snake_case names are searched word by word
    if not words or not tools:
        return []
    # Each word quoted: FTS5 operators and punctuation in the query are plain words here.
    match = " OR ".join('"' + word.replace('"', '""') + '"' for word in words)
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE VIRTUAL TABLE tools USING fts5(name UNINDEXED, body, tokenize='porter unicode61')")
        db.executemany(
            "INSERT INTO tools (name, body) VALUES (?, ?)",
            [(tool.name, tool.text().replace("_", " ")) for tool in tools],
        )
        rows = db.execute(
            "SELECT name FROM tools WHERE tools MATCH ? ORDER BY bm25(tools) LIMIT ?", (match, LIMIT)
        ).fetchall()
    finally:
        db.close()
    return [name for (name,) in rows]
