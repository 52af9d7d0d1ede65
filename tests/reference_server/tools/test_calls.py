from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from reference_server.engine.base import ToolCall
from reference_server.engine.toolformat import CALL_SEPARATOR, render_call
from reference_server.tools.calls import ArgsPiece, CallEnd, CallParser, CallStart, TextPiece

CALLS = [
    ToolCall("1", "get_weather", {"city": 'Pa"ris}', "days": [1, {"x": "]"}]}),
    ToolCall("2", "get_time", {}),
]


def parse(text: str, cuts: list[int]) -> list:
    parser = CallParser()
    pieces, start = [], 0
    for cut in [*sorted(cuts), len(text)]:
        pieces += parser.feed(text[start:cut])
        start = cut
    return pieces + parser.flush()


def summary(pieces) -> list:
    """Adjacent text and argument fragments joined: what a client accumulates."""
    out: list = []
    for piece in pieces:
        if out and isinstance(piece, TextPiece) and isinstance(out[-1], TextPiece):
            out[-1] = TextPiece(out[-1].text + piece.text)
        elif out and isinstance(piece, ArgsPiece) and isinstance(out[-1], ArgsPiece):
            out[-1] = ArgsPiece(out[-1].json + piece.json)
        else:
            out.append(piece)
    return out


TEXT = "Let me look < that up." + "\n" + CALL_SEPARATOR.join(render_call(c) for c in CALLS)


@given(cuts=st.lists(st.integers(0, len(TEXT)), max_size=12))
def test_any_chunking_gives_the_same_pieces(cuts):
    assert summary(parse(TEXT, cuts)) == [
        TextPiece("Let me look < that up.\n"),
        CallStart("get_weather"),
        ArgsPiece(json.dumps(CALLS[0].arguments)),
        CallEnd(True),
        CallStart("get_time"),
        ArgsPiece("{}"),
        CallEnd(True),
    ]


def test_plain_text_with_a_lookalike_tag_is_text():
    assert summary(parse("a <tool_ca b", [3, 7])) == [TextPiece("a <tool_ca b")]


def test_a_call_cut_by_max_tokens_ends_incomplete():
    text = render_call(CALLS[0])[:-25]
    pieces = summary(parse(text, [5, 40]))
    assert pieces[0] == CallStart("get_weather")
    assert pieces[-1] == CallEnd(False)
    assert json.dumps(CALLS[0].arguments).startswith(pieces[1].json)
