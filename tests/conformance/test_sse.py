"""The SSE parser follows the WHATWG rules and records what it saw, however the bytes arrive."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.wire.sse import SSEComment, SSEParser, SSETranscript, parse_sse

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "streams"
ALL = sorted(FIXTURES.glob("*.sse"))


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_every_fixture_parses_with_raw_bytes_at_their_offsets(path: Path) -> None:
    data = path.read_bytes()
    transcript = parse_sse(data)
    assert transcript.events
    assert transcript.total_bytes == len(data)
    for index, event in enumerate(transcript.events):
        assert event.index == index
        assert data[event.offset : event.offset + len(event.raw)] == event.raw


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_byte_by_byte_feeding_gives_the_same_transcript(path: Path) -> None:
    data = path.read_bytes()
    assert parse_sse([data[i : i + 1] for i in range(len(data))]) == parse_sse(data)


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_a_split_at_every_offset_gives_the_same_transcript(path: Path) -> None:
    data = path.read_bytes()
    whole = parse_sse(data)
    for cut in range(len(data) + 1):
        assert parse_sse([data[:cut], data[cut:]]) == whole, cut


@settings(max_examples=60, deadline=None)
@given(
    path=st.sampled_from(ALL),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=30),
)
def test_any_chunking_gives_the_same_transcript(path: Path, cuts: list[int]) -> None:
    data = path.read_bytes()
    cuts = [c for c in cuts if c <= len(data)]
    assert parse_sse(_chunks(data, cuts)) == parse_sse(data)


def test_feed_returns_events_as_they_complete() -> None:
    parser = SSEParser()
    assert parser.feed(b"event: ping\ndata: {}") == []
    assert parser.feed(b"\n") == []
    (event,) = parser.feed(b"\nevent: a\n")
    assert event.event == "ping"
    assert parser.events == (event,)
    transcript = parser.close()
    assert transcript.trailing == b"event: a\n"
    with pytest.raises(RuntimeError):
        parser.feed(b"data: x\n\n")


def test_line_endings_lf_crlf_cr_give_the_same_events() -> None:
    parsed = {
        style: parse_sse((FIXTURES / f"basic__{style}.sse").read_bytes())
        for style in ("good", "crlf_good", "cr_good")
    }
    assert parsed["good"].line_endings == {"LF"}
    assert parsed["crlf_good"].line_endings == {"CRLF"}
    assert parsed["cr_good"].line_endings == {"CR"}

    def semantic(t: SSETranscript) -> list[tuple[str | None, str]]:
        return [(e.event, e.data) for e in t.events]

    assert semantic(parsed["good"]) == semantic(parsed["crlf_good"]) == semantic(parsed["cr_good"])


def test_cr_then_lf_in_the_next_chunk_is_one_crlf() -> None:
    split = parse_sse([b"data: 1\r", b"\n\r", b"\n"])
    assert [e.data for e in split.events] == ["1"]
    assert split.line_endings == {"CRLF"}
    mixed = parse_sse(b"data: 1\r\rdata: 2\n\ndata: 3\r\n\r\n")
    assert [e.data for e in mixed.events] == ["1", "2", "3"]
    assert mixed.line_endings == {"CR", "LF", "CRLF"}


def test_comments_are_recorded_and_never_events() -> None:
    data = b": opened\n\nevent: ping\n:inside\ndata: {}\n\n:  two spaces\n\n"
    transcript = parse_sse(data)
    assert transcript.comments == (
        SSEComment("opened", 0),
        SSEComment("inside", data.index(b":inside")),
        SSEComment(" two spaces", data.index(b":  two")),
    )
    (event,) = transcript.events
    assert event.comments == ("inside",)
    assert event.raw == b"event: ping\n:inside\ndata: {}\n\n"


def test_multi_line_data_joins_with_lf_and_one_space_is_stripped() -> None:
    (event,) = parse_sse(b'data: {"a":\ndata:  1}\ndata\ndata:x\n\n').events
    assert event.data == '{"a":\n 1}\n\nx'
    assert event.data_lines == 4
    (event,) = parse_sse(b'data: {"a":\ndata: 1}\n\n').events
    assert event.json == {"a": 1}


def test_id_retry_and_unknown_fields_are_recorded() -> None:
    data = (
        b"id: 1\nretry: 500\nevent: x\ndata: 1\nfoo: bar\nbaz\n\n"
        b"retry: soon\nid: a\x00b\ndata: 2\n\n"
        b"id: 3\n\n"
    )
    transcript = parse_sse(data)
    first, second = transcript.events
    assert (first.id, first.retry) == ("1", 500)
    assert first.unknown_fields == (("foo", "bar"), ("baz", ""))
    assert (second.id, second.retry) == (None, None)  # NUL in id and non-digit retry: ignored
    assert transcript.last_event_id == "3"
    assert transcript.retry == 500
    assert transcript.ignored_blocks == (data.index(b"id: 3"),)


def test_observations_unnamed_done_and_non_json() -> None:
    transcript = parse_sse(
        b'data: {"type":"ping"}\n\nevent: x\ndata: [DONE]\n\nevent: y\ndata: NaN\n\nevent:\ndata: 1\n\n'
    )
    assert transcript.unnamed_events == (0, 3)
    assert transcript.done_sentinels == (1,)
    assert transcript.non_json_events == (1, 2)  # NaN is not JSON, even if Python reads it
    assert transcript.events[0].name == "message"
    assert transcript.events[3].json == 1


def test_event_without_data_is_kept_but_not_dispatchable() -> None:
    (event,) = parse_sse(b"event: message_stop\n\n").events
    assert event.data_lines == 0
    assert not event.is_json


def test_multibyte_character_split_across_chunks() -> None:
    data = 'data: "é漢🙂"\n\n'.encode()
    start = data.index(b'"')
    for cut in range(start, len(data)):
        (event,) = parse_sse([data[:cut], data[cut:]]).events
        assert event.json == "é漢🙂", cut


def test_bom_is_stripped_and_recorded_even_when_split() -> None:
    body = b"event: ping\ndata: {}\n\n"
    for chunks in ([b"\xef\xbb\xbf" + body], [b"\xef", b"\xbb", b"\xbf" + body]):
        transcript = parse_sse(chunks)
        assert transcript.bom
        assert transcript.events[0].event == "ping"
        assert transcript.events[0].offset == 3
    assert not parse_sse(body).bom
    assert parse_sse([b"\xef\xbb", b""]).bom is False  # two bytes of a BOM are no BOM


def test_invalid_utf8_is_flagged_and_replaced() -> None:
    transcript = parse_sse(b'event: x\ndata: "a\xffb"\n\n')
    assert transcript.invalid_utf8
    assert transcript.events[0].json == "a\ufffdb"


def test_trailing_bytes_after_the_last_blank_line_are_kept() -> None:
    transcript = parse_sse(b"event: a\ndata: 1\n\nevent: b\ndata: 2")
    assert [e.event for e in transcript.events] == ["a"]
    assert transcript.trailing == b"event: b\ndata: 2"
    assert parse_sse(b"data: 1\n\n").trailing == b""
    assert parse_sse(b"data: 1\n\r").events[0].data == "1"  # a final CR ends the line
