"""The generated text with citations on, as pieces: text, and each quote as a start, its text
and its end (with the citation). Tags may arrive split over any number of deltas; the grammar
(citations/grammar.py) guarantees their form, and a quote cut by max_tokens simply has no end.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reference_server.tools.calls import Piece as CallPiece
from reference_server.tools.calls import TextPiece

from .documents import CitationPlan
from .grammar import CLOSE

__all__ = ["QuoteEnd", "QuoteParser", "QuoteStart", "QuoteText", "quoted_pieces"]

_OPEN = re.compile(r"<cite (r?\d+)>")
_OPEN_PREFIX = re.compile(r"<(?:c(?:i(?:t(?:e(?: r?\d*)?)?)?)?)?")


@dataclass(frozen=True, slots=True)
class QuoteStart:
    """A quote begins: it is a text block of its own."""


@dataclass(frozen=True, slots=True)
class QuoteText:
    """Text of the open quote (verbatim from the document)."""

    text: str


@dataclass(frozen=True, slots=True)
class QuoteEnd:
    """The quote is complete: its citation (None only if it is not whole chunks of the
    document it names, which the grammar rules out)."""

    citation: dict[str, Any] | None


Piece = str | QuoteStart | QuoteText | QuoteEnd
# A generation's text parsed for calls (tools/calls.py), then its text for quotes.
Quoted = CallPiece | QuoteStart | QuoteText | QuoteEnd


class QuoteParser:
    """Feed generated text, get pieces; `flush` at the end."""

    def __init__(self, plan: CitationPlan) -> None:
        self._plan = plan
        self._held = ""  # the start of a tag, not yet complete
        self._quote: list[str] | None = None  # the open quote's text so far
        self._document = ""

    def feed(self, text: str) -> list[Piece]:
        out: list[Piece] = []
        pending = list(text)
        plain: list[str] = []
        while pending:
            char = pending.pop(0)
            if not self._held and char != "<":
                plain.append(char)
                continue
            self._held += char
            if self._quote is None:
                opened = _OPEN.fullmatch(self._held)
                if opened is not None:
                    self._emit(out, plain)
                    out.append(QuoteStart())
                    self._quote, self._document, self._held = [], opened.group(1), ""
                    continue
                if _OPEN_PREFIX.fullmatch(self._held):
                    continue
            else:
                if self._held == CLOSE:
                    self._emit(out, plain)
                    out.append(QuoteEnd(self._citation()))
                    self._quote, self._held = None, ""
                    continue
                if CLOSE.startswith(self._held):
                    continue
            # Not a tag after all: its first character is text, the rest is read again.
            plain.append(self._held[0])
            pending[:0] = list(self._held[1:])
            self._held = ""
        self._emit(out, plain)
        return out

    def flush(self) -> list[Piece]:
        """What is held at the end (a tag cut short is text)."""
        held, self._held = self._held, ""
        out: list[Piece] = []
        self._emit(out, list(held))
        return out

    def _emit(self, out: list[Piece], plain: list[str]) -> None:
        if not plain:
            return
        text = "".join(plain)
        plain.clear()
        if self._quote is None:
            out.append(text)
        else:
            self._quote.append(text)
            out.append(QuoteText(text))

    def _citation(self) -> dict[str, Any] | None:
        document = self._plan.document(self._document)
        quote = "".join(self._quote or ())
        return document.citation(quote) if document is not None else None


def quoted_pieces(pieces: Sequence[CallPiece], quotes: QuoteParser, *, last: bool) -> list[Quoted]:
    """`pieces` (a generation's text parsed for calls) with their text parsed for quotes: an
    answer quoting fetched pages may end with calls (server_tools/citing.py). `last`: the
    generation's last text, after which nothing is held."""
    out: list[Quoted] = []
    for piece in pieces:
        if isinstance(piece, TextPiece):
            out += _as_text(quotes.feed(piece.text))
        else:  # a call: what the quote parser held was text
            out += [*_as_text(quotes.flush()), piece]
    if last:
        out += _as_text(quotes.flush())
    return out


def _as_text(parsed: list[Piece]) -> list[TextPiece | QuoteStart | QuoteText | QuoteEnd]:
    """The quote parser's pieces, its text as text pieces."""
    return [TextPiece(p) if isinstance(p, str) else p for p in parsed]
