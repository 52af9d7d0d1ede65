from __future__ import annotations

import pytest

from reference_server.stops import StopMatcher


def feed_all(matcher: StopMatcher, pieces: list[str]) -> tuple[str, str | None]:
    out = []
    for piece in pieces:
        scan = matcher.feed(piece)
        out.append(scan.text)
        if scan.matched is not None:
            return "".join(out), scan.matched
    out.append(matcher.flush())
    return "".join(out), None


def test_match_inside_one_piece_cuts_text_before_it():
    assert feed_all(StopMatcher(["STOP"]), ["Hello STOP world"]) == ("Hello ", "STOP")


@pytest.mark.parametrize("split", range(1, 9))
def test_match_spanning_pieces_at_every_split(split):
    text = "ab\nEND\ncd"
    pieces = [text[:split], text[split:]]
    assert feed_all(StopMatcher(["\nEND"]), pieces) == ("ab", "\nEND")


def test_character_by_character_never_leaks_a_partial_stop():
    matcher = StopMatcher(["</answer>"])
    emitted = ""
    for char in "42</answ":
        emitted += matcher.feed(char).text
    assert emitted == "42"
    assert matcher.flush() == "</answ"  # no match after all: the held text is released


def test_earliest_match_wins_and_longer_wins_ties():
    assert feed_all(StopMatcher(["b", "ab"]), ["xab"]) == ("x", "ab")
    assert feed_all(StopMatcher(["cd", "b"]), ["abcd"]) == ("a", "b")


def test_no_stops_passes_everything_through():
    matcher = StopMatcher([])
    assert matcher.feed("abc").text == "abc"
    assert matcher.flush() == ""


def test_after_a_match_nothing_more_is_emitted():
    matcher = StopMatcher(["x"])
    assert matcher.feed("ax").matched == "x"
    assert matcher.feed("more").text == ""
    assert matcher.flush() == ""
