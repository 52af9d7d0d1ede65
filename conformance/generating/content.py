"""Small files with known content, written by hand, for the document and image properties.

The harness depends on neither pypdf nor Pillow (a target's users do not need them), so each
format is written here from its specification, as small as the format allows:

- PDF: one text line per page in Helvetica, a catalogue, a page tree and an exact xref table
  (ISO 32000-1 §7.5), so any PDF reader extracts the text we put in;
- PNG (greyscale, zlib + CRC; padded with a private ancillary chunk when a large file is
  needed), GIF (LZW with a clear code before every pixel, so the code width never grows), JPEG
  (baseline greyscale, one quantisation table of ones and one-code Huffman tables: every block
  is flat grey), WebP (lossless VP8L with single-symbol prefix codes: zero bits per pixel) and
  BMP (24-bit, for a type the API does not take).

tests/conformance/test_content_proofs.py opens each one with Pillow and pypdf, which is how we
know they are what they claim to be.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from conformance.judging.checks import (
    ConformanceFailure,
    expect,
    expect_error,
    json_object,
    read,
    status_key,
    status_subject,
)
from conformance.wire.drivers import message_body
from conformance.wire.target import Target

__all__ = [
    "ask",
    "b64",
    "bmp",
    "count_input_tokens",
    "expect_accepted",
    "expect_refused",
    "gif",
    "image_block",
    "jpeg",
    "pdf",
    "pdf_block",
    "png",
    "squeeze",
    "text_block",
    "webp",
]


def b64(data: bytes) -> str:
    """Standard base64 with padding, as the API's `format: byte` wants it."""
    return base64.b64encode(data).decode("ascii")


def squeeze(text: str) -> str:
    """`text` without any whitespace: text extracted from a PDF, or joined from blocks, may break
    lines and spaces differently from what was written; the characters themselves may not."""
    return "".join(text.split())


# ------------------------------------------------------------------ requests and answers


def ask(target: Target, *blocks: Any, question: str, **changes: Any) -> dict[str, Any]:
    """A small create request whose one user turn is `blocks` then the `question`."""
    return message_body(
        target, messages=[{"role": "user", "content": [*blocks, text_block(question)]}], **changes
    )


def expect_accepted(
    target: Target, body: Any, what: str, *, headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """HTTP 200 and a Message for `body` (its schema is MSG-001's to judge)."""
    response = target.request("POST", "/v1/messages", json_body=body, headers=headers)
    expect(
        response.status_code == 200,
        f"HTTP 200: {what}",
        f"HTTP {response.status_code}: {response.text[:300]}",
        reason="refused",
    )
    message = json_object(response, "the Message")
    read(message, "content", list, where="the Message")
    return message


def expect_refused(
    target: Target,
    body: Any,
    what: str,
    *,
    path: str = "/v1/messages",
    headers: Mapping[str, str] | None = None,
) -> None:
    """A 400 invalid_request_error for `body`: a 200 is the request silently taken."""
    response = target.request("POST", path, json_body=body, headers=headers)
    if response.status_code == 200:
        raise ConformanceFailure(
            f"HTTP 400 invalid_request_error: {what}", f"HTTP 200: {response.text[:300]}", reason="accepted"
        )
    expect_error(response, 400, "invalid_request_error")


def count_input_tokens(
    target: Target, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    """(input_tokens, the whole answer) of count_tokens for the prompt of the create `body`."""
    fields = ("model", "messages", "system", "tools", "tool_choice", "thinking", "context_management")
    request = {key: body[key] for key in fields if key in body}
    response = target.request("POST", "/v1/messages/count_tokens", json_body=request, headers=headers)
    expect(
        response.status_code == 200,
        "HTTP 200 from count_tokens",
        f"HTTP {response.status_code}: {response.text[:300]}",
        reason="wrong-status",
        subject=status_subject(response),
        key=status_key(response),
    )
    answer = json_object(response, "the count_tokens answer")
    return read(answer, "input_tokens", int, where="the count_tokens answer"), answer


# ------------------------------------------------------------------ request blocks


def text_block(text: str) -> dict[str, object]:
    return {"type": "text", "text": text}


def image_block(data: bytes | str, media_type: str) -> dict[str, object]:
    """A base64 image block (`data` as bytes, or already base64)."""
    encoded = data if isinstance(data, str) else b64(data)
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": encoded}}


def pdf_block(pages: Sequence[str], **fields: object) -> dict[str, object]:
    """A base64 PDF document block whose pages hold `pages`; `fields` adds title, citations, ..."""
    source = {"type": "base64", "media_type": "application/pdf", "data": b64(pdf(pages))}
    return {"type": "document", "source": source, **fields}


# ------------------------------------------------------------------ PDF


def _pdf_string(text: str) -> bytes:
    """A PDF literal string of ASCII text: backslash and parentheses escaped."""
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return b"(" + escaped.encode("ascii") + b")"


def pdf(pages: Sequence[str]) -> bytes:
    """A PDF with one US-letter page per item of `pages`, each showing that text (ASCII) on one
    line. Objects: 1 catalogue, 2 page tree, 3 font, then a page and its content stream each."""
    if not pages:
        raise ValueError("a PDF needs at least one page")
    kids = " ".join(f"{4 + 2 * n} 0 R" for n in range(len(pages)))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    for n, text in enumerate(pages):
        stream = b"BT /F1 12 Tf 72 720 Td " + _pdf_string(text) + b" Tj ET"
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            + f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * n} 0 R >>".encode()
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n".encode() + b"0000000000 65535 f \n"
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


# ------------------------------------------------------------------ PNG


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(width: int, height: int, *, grey: int = 128, padding: int = 0) -> bytes:
    """A flat grey 8-bit greyscale PNG; `padding` bytes of a private ancillary chunk (which
    readers skip) make the file as large as needed without more pixels."""
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = (b"\x00" + bytes([grey]) * width) * height  # filter byte 0, then the row
    out = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(rows, 9))
    if padding:
        out += _chunk(b"plPd", bytes(padding))
    return out + _chunk(b"IEND", b"")


# ------------------------------------------------------------------ GIF


def _lsb_bits(codes: Sequence[tuple[int, int]]) -> bytes:
    """Pack (value, width) codes least significant bit first (GIF LZW, VP8L)."""
    out = bytearray()
    accumulator = filled = 0
    for value, width in codes:
        accumulator |= value << filled
        filled += width
        while filled >= 8:
            out.append(accumulator & 0xFF)
            accumulator >>= 8
            filled -= 8
    if filled:
        out.append(accumulator & 0xFF)
    return bytes(out)


def gif(width: int, height: int) -> bytes:
    """A GIF89a of `width` x `height` pixels of one colour (a two-entry palette)."""
    clear, end = 4, 5  # LZW minimum code size 2: codes are 3 bits wide until the table grows
    codes = [(clear, 3), (0, 3)] * (width * height) + [(end, 3)]
    data = _lsb_bits(codes)
    blocks = b"".join(
        bytes([len(part)]) + part for part in (data[i : i + 255] for i in range(0, len(data), 255))
    )
    screen = struct.pack("<HHBBB", width, height, 0x80, 0, 0) + b"\x80\x80\x80\x00\x00\x00"
    image = b"\x2c" + struct.pack("<HHHHB", 0, 0, width, height, 0) + b"\x02" + blocks + b"\x00"
    return b"GIF89a" + screen + image + b"\x3b"


# ------------------------------------------------------------------ JPEG


def _segment(marker: int, data: bytes) -> bytes:
    return struct.pack(">BBH", 0xFF, marker, len(data) + 2) + data


def jpeg(width: int, height: int) -> bytes:
    """A baseline greyscale JPEG of flat mid-grey 8x8 blocks: each block is a DC difference of
    0 and an end-of-block, each a one-bit Huffman code `0`."""
    blocks = -(-width // 8) * -(-height // 8)
    bits = 2 * blocks
    scan = bytes((bits + 7) // 8)
    if bits % 8:  # the last byte is padded with 1-bits, as the standard asks
        scan = scan[:-1] + bytes([(1 << (8 - bits % 8)) - 1])
    scan = scan.replace(b"\xff", b"\xff\x00")
    one_code = bytes([1] + [0] * 15)  # one code of length 1
    return b"".join(
        [
            b"\xff\xd8",
            _segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"),
            _segment(0xDB, b"\x00" + bytes([1] * 64)),
            _segment(0xC0, struct.pack(">BHHB", 8, height, width, 1) + b"\x01\x11\x00"),
            _segment(0xC4, b"\x00" + one_code + b"\x00"),  # DC table 0: category 0
            _segment(0xC4, b"\x10" + one_code + b"\x00"),  # AC table 0: end of block
            _segment(0xDA, b"\x01\x01\x00\x00\x3f\x00"),
            scan,
            b"\xff\xd9",
        ]
    )


# ------------------------------------------------------------------ WebP


def webp(width: int, height: int) -> bytes:
    """A lossless WebP (VP8L) of one opaque grey colour: no transform, no colour cache, and five
    single-symbol prefix codes (green, red, blue 128; alpha 255; distance 0), which code each
    pixel in zero bits."""
    if not (1 <= width <= 16384 and 1 <= height <= 16384):
        raise ValueError("VP8L sides are 1..16384")
    fields = [(0x2F, 8), (width - 1, 14), (height - 1, 14), (0, 1), (0, 3)]
    fields += [(0, 1), (0, 1), (0, 1)]  # no transform, no colour cache, no meta prefix codes
    for symbol in (128, 128, 128, 255, 0):  # green, red, blue, alpha, distance
        fields += [(1, 1), (0, 1), (1, 1), (symbol, 8)]  # simple code, 1 symbol, 8-bit symbol
    data = _lsb_bits(fields)
    if len(data) % 2:
        data += b"\x00"
    chunk = b"VP8L" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


# ------------------------------------------------------------------ BMP


def bmp(width: int, height: int) -> bytes:
    """A 24-bit BMP (a format the API does not take), rows padded to four bytes."""
    row = bytes([128, 128, 128]) * width
    row += bytes(-len(row) % 4)
    pixels = row * height
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    header = b"BM" + struct.pack("<IHHI", 14 + len(info) + len(pixels), 0, 0, 14 + len(info))
    return header + info + pixels
