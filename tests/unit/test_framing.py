"""rpc/framing.py: the pure decoder, both framings, fed in every possible way."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autodoc.rpc.framing import (
    CONTENT_LENGTH,
    INVALID_REQUEST,
    NEWLINE,
    PARSE_ERROR,
    Frame,
    FrameDecoder,
    FrameError,
    encode_frame,
    encode_message,
)

MESSAGES = [
    {"jsonrpc": "2.0", "id": 1, "method": "server.info"},
    [
        {"jsonrpc": "2.0", "id": 2, "method": "search.query", "params": ["kb", "lease ✓ «x»", {"limit": 5}]},
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}},
    ],
    {"jsonrpc": "2.0", "id": "a\nb", "method": "document.read", "params": {"path": "日本語.md"}},
]


def wire(framing: str, messages=MESSAGES) -> bytes:
    return b"".join(encode_message(m, framing) for m in messages)


def payloads(items) -> list:
    out = []
    for item in items:
        out.append(json.loads(item.payload) if isinstance(item, Frame) else item)
    return out


def feed_split(data: bytes, cuts: list[int], **kw) -> list:
    dec = FrameDecoder(**kw)
    out, last = [], 0
    for cut in sorted(set(cuts)) + [len(data)]:
        out += dec.feed(data[last:cut])
        last = cut
    return out + dec.feed_eof()


@pytest.mark.parametrize("framing", [NEWLINE, CONTENT_LENGTH])
def test_detects_and_decodes_each_framing(framing):
    dec = FrameDecoder()
    items = dec.feed(wire(framing))
    assert dec.framing == framing
    assert payloads(items) == MESSAGES


@pytest.mark.parametrize("framing", [NEWLINE, CONTENT_LENGTH])
def test_split_at_every_byte_boundary(framing):
    data = wire(framing)
    for cut in range(len(data) + 1):
        assert payloads(feed_split(data, [cut])) == MESSAGES, cut


@pytest.mark.parametrize("framing", [NEWLINE, CONTENT_LENGTH])
def test_one_byte_at_a_time(framing):
    data = wire(framing)
    assert payloads(feed_split(data, list(range(len(data))))) == MESSAGES


@settings(max_examples=150, deadline=None)
@given(framing=st.sampled_from([NEWLINE, CONTENT_LENGTH]), cuts=st.lists(st.integers(0, 400), max_size=12))
def test_any_split_gives_the_same_frames(framing, cuts):
    data = wire(framing)
    assert payloads(feed_split(data, [c % (len(data) + 1) for c in cuts])) == MESSAGES


def test_detection_waits_for_enough_bytes():
    dec = FrameDecoder()
    assert dec.feed(b"\r\n  Cont") == [] and dec.framing is None
    assert dec.feed(b"ent-Length: 2\r\n\r\n{}") == [Frame(b"{}")]
    assert dec.framing == CONTENT_LENGTH


def test_header_names_are_case_insensitive_and_extra_headers_ignored():
    data = b"content-type: application/vscode-jsonrpc; charset=utf-8\r\nCONTENT-LENGTH:  2 \r\n\r\n{}"
    assert FrameDecoder().feed(data) == [Frame(b"{}")]


def test_newline_mode_tolerates_crlf_blank_lines_and_a_missing_last_newline():
    dec = FrameDecoder()
    items = dec.feed(b'\n\n{"a":1}\r\n   \n{"b":2}')
    assert items == [Frame(b'{"a":1}')]
    assert dec.feed_eof() == [Frame(b'{"b":2}')]


def test_garbage_line_is_a_frame_for_the_json_parser_to_reject():
    # Framing only cuts: deciding it is not JSON is the dispatcher's job.
    assert FrameDecoder().feed(b"hello\n{}\n") == [Frame(b"hello"), Frame(b"{}")]


def test_oversized_newline_frame_in_one_piece():
    dec = FrameDecoder(max_frame_bytes=10)
    items = dec.feed(b'{"x":"' + b"a" * 20 + b'"}\n{"ok":1}\n')
    assert isinstance(items[0], FrameError) and items[0].code == INVALID_REQUEST
    assert "exceeds the limit of 10 bytes" in items[0].message
    assert items[1:] == [Frame(b'{"ok":1}')]


def test_oversized_newline_frame_streamed_is_discarded_without_buffering():
    dec = FrameDecoder(max_frame_bytes=100)
    errors = dec.feed(b"[" + b"1," * 60)
    assert len(errors) == 1 and isinstance(errors[0], FrameError)
    for _ in range(1000):  # 1 MB more of the same line: no growth, no more errors
        assert dec.feed(b"1," * 500) == []
        assert dec.buffered <= 100
    assert dec.feed(b'1]\n{"ok":1}\n') == [Frame(b'{"ok":1}')]


def test_oversized_content_length_frame_is_skipped_exactly():
    dec = FrameDecoder(max_frame_bytes=10)
    big = b"x" * 50
    data = b"Content-Length: 50\r\n\r\n" + big + encode_frame(b'{"ok":1}', CONTENT_LENGTH)
    items = feed_split(data, list(range(0, len(data), 7)), max_frame_bytes=10)
    assert [type(i) for i in items] == [FrameError, Frame]
    assert items[0].code == INVALID_REQUEST and "50 bytes" in items[0].message
    assert items[1] == Frame(b'{"ok":1}')
    assert dec.feed(data) == items


def test_frame_exactly_at_the_limit_is_accepted():
    assert FrameDecoder(max_frame_bytes=8).feed(b'{"a":12}\n') == [Frame(b'{"a":12}')]
    assert FrameDecoder(max_frame_bytes=8).feed(encode_frame(b'{"a":12}', CONTENT_LENGTH)) == [Frame(b'{"a":12}')]


@pytest.mark.parametrize(
    "bad",
    [
        b"Content-Length: abc\r\n\r\n",
        b"Content-Length: -4\r\n\r\n",
        b"Content-Type: x\r\n\r\n",
        b"Content-Length 4\r\n\r\n",
    ],
)
def test_malformed_headers_are_reported_and_the_next_frame_still_decodes(bad):
    good = encode_frame(b'{"ok":1}', CONTENT_LENGTH)
    data = good + bad + b"junk" + good
    for cut in range(len(data) + 1):
        items = feed_split(data, [cut])
        assert items[0] == Frame(b'{"ok":1}'), cut
        assert isinstance(items[1], FrameError) and items[1].code == PARSE_ERROR, cut
        assert items[-1] == Frame(b'{"ok":1}'), cut


def test_endless_headers_are_an_error():
    dec = FrameDecoder()
    items = dec.feed(b"Content-Length: 2\r\n" + b"X-Pad: " + b"y" * 10_000)
    assert items and isinstance(items[0], FrameError)
    assert dec.feed(b"\r\n\r\n" + encode_frame(b"{}", CONTENT_LENGTH))[-1] == Frame(b"{}")


def test_content_length_frame_cut_off_by_eof_is_an_error():
    dec = FrameDecoder()
    assert dec.feed(b"Content-Length: 10\r\n\r\n{}") == []
    eof = dec.feed_eof()
    assert len(eof) == 1 and isinstance(eof[0], FrameError)


def test_content_length_counts_bytes_not_characters():
    body = json.dumps({"q": "é日本"}, ensure_ascii=False).encode()
    data = encode_frame(body, CONTENT_LENGTH)
    assert str(len(body)).encode() in data
    assert payloads(FrameDecoder().feed(data + data)) == [{"q": "é日本"}] * 2


def test_encoding_never_puts_a_raw_newline_in_a_newline_frame():
    data = encode_message({"text": "a\nb\r\nc\u2028"}, NEWLINE)
    assert data.count(b"\n") == 1 and data.endswith(b"\n")
    with pytest.raises(ValueError):
        encode_frame(b"{\n}", NEWLINE)


def test_a_fixed_framing_skips_detection():
    dec = FrameDecoder(framing=CONTENT_LENGTH)
    assert dec.feed(encode_frame(b"[]", CONTENT_LENGTH)) == [Frame(b"[]")]
    with pytest.raises(ValueError):
        FrameDecoder(framing="xml")


def test_an_answer_that_is_not_json_answers_32603_to_its_id():
    """A method's bug (NaN, a cycle, a Path) becomes -32603 to the request's id, never a frame
    that is not JSON or a daemon that stops: dispatch.encode_answer, which every answer takes."""
    from pathlib import Path as _Path

    from autodoc.rpc.dispatch import encode_answer

    cyclic: dict = {}
    cyclic["self"] = cyclic
    for bad in (float("nan"), cyclic, _Path("/x")):
        frame = encode_answer({"jsonrpc": "2.0", "result": {"x": bad}, "id": 7}, NEWLINE)
        answer = json.loads(frame)
        assert answer["id"] == 7 and answer["error"]["code"] == -32603, bad
