"""The quote parser (citations/parser.py): tags split anywhere give the same pieces."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reference_server.citations import QuoteEnd, QuoteParser, QuoteStart, QuoteText, plan_citations
from reference_server.content import RenderedDocument

DOCUMENTS = [
    RenderedDocument("r", ("The lamp is green. It is < 9 m tall.",), "text", "Cape", 0),
    RenderedDocument("r", ("Moorings.", "Ferries."), "content", None, 1),
    RenderedDocument("r", ("Found it.",), "search_result", "Hits", 0, "src"),
]
PLAN = plan_citations(DOCUMENTS)
assert PLAN is not None
TEXT = "<cite 0>It is < 9 m tall.</cite> So <cite 1>Ferries.</cite>!"


def parse(text: str, cuts: list[int]) -> list:
    parser = QuoteParser(PLAN)
    pieces, start = [], 0
    for cut in [*sorted(cuts), len(text)]:
        pieces += parser.feed(text[start:cut])
        start = cut
    return pieces + parser.flush()


def summary(pieces: list) -> list:
    out: list = []
    for piece in pieces:
        if out and isinstance(piece, str) and isinstance(out[-1], str):
            out[-1] += piece
        elif out and isinstance(piece, QuoteText) and isinstance(out[-1], QuoteText):
            out[-1] = QuoteText(out[-1].text + piece.text)
        else:
            out.append(piece)
    return out


@given(cuts=st.lists(st.integers(0, len(TEXT)), max_size=12))
def test_any_chunking_gives_the_same_pieces(cuts: list[int]) -> None:
    first, second = summary(parse(TEXT, cuts))[2], summary(parse(TEXT, cuts))[6]
    assert summary(parse(TEXT, cuts)) == [
        QuoteStart(),
        QuoteText("It is < 9 m tall."),
        first,
        " So ",
        QuoteStart(),
        QuoteText("Ferries."),
        second,
        "!",
    ]
    assert first == QuoteEnd(
        {
            "type": "char_location",
            "cited_text": "It is < 9 m tall.",
            "document_index": 0,
            "document_title": "Cape",
            "file_id": None,
            "start_char_index": 19,
            "end_char_index": 36,
        }
    )
    assert second == QuoteEnd(
        {
            "type": "content_block_location",
            "cited_text": "Ferries.",
            "document_index": 1,
            "document_title": None,
            "file_id": None,
            "start_block_index": 1,
            "end_block_index": 2,
        }
    )


def test_a_search_result_is_quoted_by_its_r_tag() -> None:
    pieces = summary(parse("<cite r0>Found it.</cite>", [6, 8]))
    assert pieces[:2] == [QuoteStart(), QuoteText("Found it.")]
    assert pieces[2] == QuoteEnd(
        {
            "type": "search_result_location",
            "cited_text": "Found it.",
            "search_result_index": 0,
            "source": "src",
            "title": "Hits",
            "start_block_index": 0,
            "end_block_index": 1,
        }
    )


def test_a_quote_cut_short_has_no_end() -> None:
    assert summary(parse("<cite 0>The lamp is gr", [3])) == [QuoteStart(), QuoteText("The lamp is gr")]


def test_a_tag_cut_short_is_text() -> None:
    assert summary(parse("<cit", [])) == ["<cit"]
    assert summary(parse("<cite 0>It is </ci", [])) == [QuoteStart(), QuoteText("It is </ci")]
