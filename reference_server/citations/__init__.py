"""Citations for real: documents with `citations: {"enabled": true}` are quoted verbatim by
construction. The answer's grammar only lets the model write a quote as a run of whole chunks
of one document (sentences of text and PDF pages, blocks of custom content), so what it quotes
is always in the source; the parser turns each quote into a text block with its citation.
"""

from .documents import CitableDocument, CitationPlan, plan_citations
from .grammar import citation_grammar
from .parser import QuoteEnd, QuoteParser, QuoteStart, QuoteText, quoted_pieces
from .rules import citation_plan

__all__ = [
    "CitableDocument",
    "CitationPlan",
    "QuoteEnd",
    "QuoteParser",
    "QuoteStart",
    "QuoteText",
    "citation_grammar",
    "citation_plan",
    "plan_citations",
    "quoted_pieces",
]
