"""Chunking and locating quotes (citations/documents.py): a quote is whole chunks of one
group, and its citation's indexes point at exactly that text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reference_server.citations import CitableDocument, plan_citations
from reference_server.citations.documents import sentences
from reference_server.content import RenderedDocument

TEXT = "The lighthouse is green. Its keeper is Ada!  The lamp turns (slowly.) Then\nnothing"


def test_sentences_keep_their_trailing_whitespace() -> None:
    assert sentences(TEXT) == (
        "The lighthouse is green. ",
        "Its keeper is Ada!  ",
        "The lamp turns (slowly.) ",
        "Then\n",
        "nothing",
    )


@given(st.text(alphabet=st.sampled_from("ab .!?\n)'"), max_size=40))
def test_sentences_join_back_to_the_text(text: str) -> None:
    assert "".join(sentences(text)) == text
    assert all(sentences(text))


def cited(kind: str, pages: tuple[str, ...], index: int = 0) -> CitableDocument:
    document = RenderedDocument("rendered", pages, kind, "Title", index)  # type: ignore[arg-type]
    return CitableDocument.of(document)


def test_a_text_quote_is_a_character_range() -> None:
    document = cited("text", (TEXT,), index=2)
    quote = "Its keeper is Ada!  The lamp turns (slowly.) "
    citation = document.citation(quote)
    assert citation == {
        "type": "char_location",
        "cited_text": quote,
        "document_index": 2,
        "document_title": "Title",
        "file_id": None,
        "start_char_index": 25,
        "end_char_index": 25 + len(quote),
    }
    assert TEXT[citation["start_char_index"] : citation["end_char_index"]] == quote


def test_a_content_quote_is_a_block_range() -> None:
    document = cited("content", ("One. Two.", "Three.", "Four."))
    citation = document.citation("Three.Four.")
    assert citation is not None
    assert (citation["type"], citation["start_block_index"], citation["end_block_index"]) == (
        "content_block_location",
        1,
        3,
    )
    assert document.citation("Two.") is None  # blocks are not cut further


def test_a_pdf_quote_names_its_page_one_based_with_an_exclusive_end() -> None:
    document = cited("pdf", ("Page one. ", "First of two. Second of two."))
    citation = document.citation("Second of two.")
    assert citation is not None
    assert (citation["type"], citation["start_page_number"], citation["end_page_number"]) == (
        "page_location",
        2,
        3,
    )


def test_text_that_is_not_whole_chunks_is_no_citation() -> None:
    document = cited("text", (TEXT,))
    assert document.citation("lighthouse is green. ") is None
    assert document.citation("The lighthouse is green") is None
    assert document.citation("Something else. ") is None


def test_blank_pages_have_nothing_to_quote() -> None:
    assert cited("pdf", ("", "Words.")).quotable() == (("Words.",),)


def test_a_plan_exists_only_with_citations_enabled() -> None:
    plain = RenderedDocument("x", ("x",), "text")
    assert plan_citations([plain]) is None
    plan = plan_citations([RenderedDocument("x", ("x",), "text", None, 0)])
    assert plan is not None
    assert plan.document("0") is not None
    assert plan.document("1") is None
    assert plan.document("r0") is None


def test_a_search_result_quote_is_a_block_range_with_its_source() -> None:
    result = RenderedDocument("r", ("One.", "Two."), "search_result", "Docs", 3, "https://x.test/a")
    document = CitableDocument.of(result)
    assert document.tag == "r3"
    assert document.citation("Two.") == {
        "type": "search_result_location",
        "cited_text": "Two.",
        "search_result_index": 3,
        "source": "https://x.test/a",
        "title": "Docs",
        "start_block_index": 1,
        "end_block_index": 2,
    }
