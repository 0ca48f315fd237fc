"""Content-Length resync keeps the frame inside a bad header block (issue 36, Low 8).
PROTOCOL.md: a malformed header is skipped "up to the next Content-Length: header — even
one inside the bad block". Before, a block whose first line was garbage
(``garbage\\r\\nContent-Length: 47\\r\\n\\r\\n{…}``) was dropped whole with its body, and so
was the frame after a body longer than announced when CRLF came before the next header."""

from __future__ import annotations

import json

import pytest

from autodoc.rpc.framing import CONTENT_LENGTH, PARSE_ERROR, Frame, FrameDecoder, FrameError, encode_message

INFO = {"jsonrpc": "2.0", "id": 2, "method": "server.info"}
BODY = json.dumps(INFO, separators=(",", ":")).encode()
FIRST = encode_message({"jsonrpc": "2.0", "id": 1, "method": "server.info"}, CONTENT_LENGTH)


def decode(data: bytes, *, bytewise: bool = False) -> list:
    d = FrameDecoder()
    items = []
    for piece in [data[i : i + 1] for i in range(len(data))] if bytewise else [data]:
        items += d.feed(piece)
    items += d.feed_eof()
    return [json.loads(i.payload) if isinstance(i, Frame) else i.code for i in items]


CASES = {
    "garbage line before the header": b"garbage\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY,
    "a bad value before a good header": b"Content-Length: abc\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY,
    "a body longer than announced, then CRLF": b"Content-Length: 5\r\n\r\n{}   xx}\r\nContent-Length: %d\r\n\r\n"
    % len(BODY)
    + BODY,
    "a body longer than announced, LF only": b"Content-Length: 2\r\n\r\n{}tail\nContent-Length: %d\r\n\r\n" % len(BODY)
    + BODY,
}


@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])
@pytest.mark.parametrize("name", list(CASES))
def test_the_frame_inside_a_bad_block_is_answered(name, bytewise):
    got = decode(FIRST + CASES[name], bytewise=bytewise)
    assert got[0]["id"] == 1
    assert got[-2] == PARSE_ERROR, got  # the bad line itself, reported once
    assert got[-1] == INFO, got


def test_two_different_lengths_still_drop_the_block():
    data = FIRST + b"Content-Length: 3\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY
    assert decode(data) == [{"jsonrpc": "2.0", "id": 1, "method": "server.info"}, PARSE_ERROR]


def test_a_bad_header_after_the_length_drops_the_block():
    data = FIRST + b"Content-Length: %d\r\nbad header\r\n\r\n" % len(BODY) + BODY
    assert decode(data) == [{"jsonrpc": "2.0", "id": 1, "method": "server.info"}, PARSE_ERROR]


def test_errors_are_framing_errors():
    d = FrameDecoder()
    items = d.feed(FIRST + CASES["garbage line before the header"])
    assert [type(i) for i in items] == [Frame, FrameError, Frame]
