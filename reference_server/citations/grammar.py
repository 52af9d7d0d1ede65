"""The answer's grammar with citations on, in llguidance's Lark syntax.

The answer opens with a quote and may go on with text and more quotes:
`<cite N>` + a run of whole chunks of document N + `</cite>`. Each group of chunks is one
`substring_chunks` lexeme (llguidance matches any run of consecutive chunks), intersected with
`.+` so that no quote is empty; the text between quotes cannot spell a tag. Opening with a
quote is this server's policy: a small model asked about documents with citations on always
grounds its answer in one (the model chooses which document and which sentences). Where the
model may also call tools (after a fetched page, server_tools/citing.py), the answer may end
with calls: the tag, then the `calls` rule the caller gives (tools/grammar.py's).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from reference_server.engine.base import Grammar
from reference_server.engine.toolformat import CALL_OPEN
from reference_server.tools.grammar import spelled

from .documents import CitationPlan

__all__ = ["CLOSE", "citation_grammar", "open_tag"]

CLOSE = "</cite>"
_NO_CALL_TAG = "~/(?s:.*" + CALL_OPEN.strip() + ".*)/"


def open_tag(tag: str) -> str:
    return f"<cite {tag}>"


def citation_grammar(
    plan: CitationPlan, calls: Sequence[str] = (), special: frozenset[str] = frozenset()
) -> Grammar | None:
    """The grammar for `plan`'s documents; None when none has text to quote. `calls`: rules
    defining `calls` (the text after the first call tag), when the answer may end with calls;
    `special`: the tags the vocabulary holds as one token (tools/grammar.py)."""
    rules: list[str] = []
    quotes: list[str] = []
    for document in plan.documents:
        lexemes: list[str] = []
        for number, group in enumerate(document.quotable()):
            name = f"Q{document.tag.upper()}_{number}"
            rules.append(f"{name}: %regex {json.dumps({'substring_chunks': list(group)})}")
            # With calls after the answer, a quote never holds the call tag (the call parser
            # reads the text first: serving.py).
            rules.append(f"N{name}: {name} & /(?s:.+)/" + (f" & {_NO_CALL_TAG}" if calls else ""))
            lexemes.append(f"N{name}")
        if lexemes:
            tag = json.dumps(open_tag(document.tag))
            quotes.append(f"{tag} ({' | '.join(lexemes)}) {json.dumps(CLOSE)}")
    if not quotes:
        return None
    head = ["answer: cite (TEXT | cite)*", "cite: " + " | ".join(quotes), "TEXT: /[^<]+/"]
    if calls:
        head = ["start: answer | answer " + spelled(CALL_OPEN, special) + " calls", *head, *calls]
    else:
        head = ["start: answer", *head]
    return Grammar("\n".join([*head, *rules]) + "\n")
