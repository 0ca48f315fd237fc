"""RPC stage, bytes ↔ frames. Pure: no sockets, no anyio, no JSON-RPC semantics.

Input: bytes as they arrive on one connection, fed in pieces of any size.
Output: complete frames (the JSON payload bytes) and framing errors, in order.

A connection speaks one of two framings, detected from its first bytes:

- ``newline``: one JSON text per line (``\\n``; a ``\\r`` before it is dropped).
  Blank lines are ignored.
- ``content-length``: LSP-style ``Content-Length: N\\r\\n\\r\\n`` headers, then
  exactly N bytes of body. Other headers (``Content-Type``) are accepted and
  ignored; header names are case-insensitive.

A connection whose first non-blank bytes start with ``Content-`` (any case) is
``content-length``; anything else is ``newline``. Replies use the same framing.

A frame larger than ``max_frame_bytes`` is never buffered whole: the decoder
reports one error and discards it (newline: up to the next newline;
content-length: exactly the announced number of bytes), then goes on with the
next frame. Malformed headers are reported and skipped up to the next
``Content-Length`` header — which may start on the bad block's first line
(a body shorter than its announced length leaves its tail glued in front of
the next frame's headers) or on any line after the bad one (garbage, or the
tail of a body longer than announced, then a line break), so the frame behind
a lying header is not lost.

Runs on: any thread (pure: one decoder per connection, no I/O).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..config import MAX_FRAME_BYTES

NEWLINE = "newline"
CONTENT_LENGTH = "content-length"
FRAMINGS = (NEWLINE, CONTENT_LENGTH)

# JSON-RPC codes a framing problem is answered with (see errors.py).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600

MAX_HEADER_BYTES = 8 * 1024
# More digits than any length a frame could have: such a Content-Length is a
# malformed header (resynchronised), not a frame to discard byte by byte.
MAX_LENGTH_DIGITS = 18
_CL_PREFIX = b"content-"
_CL_HEADER = b"content-length:"
_BLANK = b" \t\r\n"
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # an HTTP header name (RFC 9110 token)


@dataclass(frozen=True)
class Frame:
    """One complete message body (undecoded JSON bytes)."""

    payload: bytes


@dataclass(frozen=True)
class FrameError:
    """A framing problem. The connection answers it with a JSON-RPC error
    (id null) and keeps reading."""

    code: int
    message: str


Item = Frame | FrameError


class FrameDecoder:
    """Incremental decoder for one connection: ``feed(bytes) -> [Frame | FrameError]``.

    ``framing`` is None until the first non-blank bytes arrive, then fixed.
    Pass ``framing=`` to skip detection (a client knows what it sent).
    """

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES, framing: str | None = None):
        if framing is not None and framing not in FRAMINGS:
            raise ValueError(f"framing must be one of {FRAMINGS}, not {framing!r}")
        if max_frame_bytes < 1:
            raise ValueError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        self.framing = framing
        self._buf = bytearray()
        self._scan = 0  # newline mode: bytes of _buf already known to hold no newline
        self._discard_line = False  # newline mode: inside an oversized line
        self._skip = 0  # content-length mode: body bytes still to discard
        self._body = -1  # content-length mode: length of the body being awaited
        self._resync = False  # content-length mode: looking for the next header

    @property
    def buffered(self) -> int:
        """Bytes held waiting for the rest of a frame (never more than about
        ``max_frame_bytes``)."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Item]:
        if data:
            self._buf += data
        out: list[Item] = []
        if self.framing is None and not self._detect():
            return out
        if self.framing == NEWLINE:
            self._decode_lines(out)
        else:
            self._decode_content_length(out)
        return out

    def feed_eof(self) -> list[Item]:
        """The peer stopped sending. A last newline-mode line without its
        newline still counts (``printf '{…}' | nc -U``); a cut-off
        content-length frame is an error."""
        out: list[Item] = []
        if self.framing == NEWLINE and not self._discard_line:
            line = bytes(self._buf).rstrip(b"\r")
            if line.strip(_BLANK):
                out.append(self._line_item(line))
        elif self.framing == CONTENT_LENGTH and not self._resync and (self._body >= 0 or self._buf.strip(_BLANK)):
            out.append(FrameError(PARSE_ERROR, "connection closed in the middle of a frame"))
        self._buf.clear()
        self._scan = 0
        self._body = -1
        return out

    # -- detection ------------------------------------------------------------

    def _detect(self) -> bool:
        start = 0
        while start < len(self._buf) and self._buf[start] in _BLANK:
            start += 1
        if start:
            del self._buf[:start]
        if not self._buf:
            return False
        head = bytes(self._buf[: len(_CL_PREFIX)]).lower()
        if head == _CL_PREFIX:
            self.framing = CONTENT_LENGTH
        elif _CL_PREFIX.startswith(head):
            return False  # "Cont" so far: wait for more before deciding
        else:
            self.framing = NEWLINE
        return True

    # -- newline-delimited JSON -------------------------------------------------

    def _line_item(self, line: bytes) -> Item:
        if len(line) > self.max_frame_bytes:
            return _too_large(len(line), self.max_frame_bytes)
        return Frame(line)

    def _decode_lines(self, out: list[Item]) -> None:
        buf = self._buf
        while True:
            nl = buf.find(b"\n", self._scan)
            if nl < 0:
                if self._discard_line:
                    buf.clear()
                    self._scan = 0
                elif len(buf) > self.max_frame_bytes:
                    out.append(_too_large(len(buf), self.max_frame_bytes, partial=True))
                    buf.clear()
                    self._scan = 0
                    self._discard_line = True
                else:
                    self._scan = len(buf)
                return
            line = bytes(buf[:nl])
            del buf[: nl + 1]
            self._scan = 0
            if self._discard_line:
                self._discard_line = False
                continue
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line.strip(_BLANK):
                continue
            out.append(self._line_item(line))

    # -- Content-Length (LSP base protocol) -----------------------------------------

    def _decode_content_length(self, out: list[Item]) -> None:
        buf = self._buf
        if self._body >= 0 and not self._take_body(out):
            return
        while True:
            if self._skip:
                n = min(self._skip, len(buf))
                del buf[:n]
                self._skip -= n
                if self._skip:
                    return
            if self._resync and not self._find_header():
                return
            # Blank bytes between frames are tolerated.
            start = 0
            while start < len(buf) and buf[start] in _BLANK:
                start += 1
            if start:
                del buf[:start]
            if not buf:
                return
            end, sep = _header_end(buf)
            if end < 0:
                if len(buf) > MAX_HEADER_BYTES:
                    out.append(FrameError(PARSE_ERROR, f"frame headers longer than {MAX_HEADER_BYTES} bytes"))
                    del buf[:1]
                    self._resync = True
                    continue
                return
            header = bytes(buf[:end])
            # A body shorter than announced leaves its tail glued in front of the
            # next frame's header, on the block's first line: report it and
            # restart at that header, so the frame behind a lying one is not lost.
            first_line = header.split(b"\n", 1)[0]
            glued = first_line.lower().find(_CL_HEADER, 1)
            if glued > 0:
                out.append(FrameError(PARSE_ERROR, f"malformed frame header {_show(first_line)}"))
                del buf[:glued]
                continue
            length, problem, bad = _parse_headers(header)
            if problem:
                out.append(FrameError(PARSE_ERROR, problem))
                # A Content-Length header after the bad line (garbage, or the tail of a body
                # longer than announced, then a line break, then the next frame) starts the
                # next frame; else the block is dropped with its body, up to the next header.
                later = header.lower().find(_CL_HEADER, bad + 1)
                if later > 0:
                    del buf[:later]
                    continue
                del buf[: end + sep]
                self._resync = True
                continue
            assert length is not None
            del buf[: end + sep]
            if length > self.max_frame_bytes:
                out.append(_too_large(length, self.max_frame_bytes))
                self._skip = length
                continue
            self._body = length
            if not self._take_body(out):
                return

    def _take_body(self, out: list[Item]) -> bool:
        """Emit the announced body once it is all here; False while waiting."""
        if len(self._buf) < self._body:
            return False
        out.append(Frame(bytes(self._buf[: self._body])))
        del self._buf[: self._body]
        self._body = -1
        return True

    def _find_header(self) -> bool:
        """Drop bytes up to the next Content-Length header; False if none yet."""
        buf = self._buf
        at = bytes(buf).lower().find(_CL_HEADER)
        if at < 0:
            keep = len(_CL_HEADER) - 1
            if len(buf) > keep:
                del buf[: len(buf) - keep]
            return False
        del buf[:at]
        self._resync = False
        return True


def _header_end(buf: bytearray) -> tuple[int, int]:
    """Index where the header block ends and the separator's length, or (-1, 0)."""
    crlf = buf.find(b"\r\n\r\n")
    lf = buf.find(b"\n\n")
    if crlf >= 0 and (lf < 0 or crlf <= lf):
        return crlf, 4
    if lf >= 0:
        return lf, 2
    return -1, 0


def _parse_headers(header: bytes) -> tuple[int | None, str, int]:
    """(length, "", -1), or (None, the problem, where the offending line starts in ``header``)."""
    length: int | None = None
    at = 0
    for raw in header.split(b"\n"):
        start, at = at, at + len(raw) + 1
        line = raw.rstrip(b"\r")
        if not line:
            continue
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name.strip()):
            # Strict names: a short body's tail glued to the next header must
            # read as a bad header, not as an unknown one that is ignored.
            return None, f"malformed frame header {_show(line)}", start
        if name.strip().lower() == b"content-length":
            text = value.strip()
            # bytes.isdigit() is ASCII-only; the digit cap keeps int() cheap and in range.
            if not text.isdigit() or len(text) > MAX_LENGTH_DIGITS:
                return None, f"Content-Length must be a non-negative integer, not {_show(text)}", start
            if length is not None and length != int(text):
                return None, "frame headers give two different Content-Lengths", start
            length = int(text)
    if length is None:
        return None, "frame headers have no Content-Length", 0
    return length, "", -1


def _show(raw: bytes, limit: int = 40) -> str:
    text = raw[:limit].decode("utf-8", "replace")
    return repr(text + ("…" if len(raw) > limit else ""))


def _too_large(size: int, limit: int, partial: bool = False) -> FrameError:
    what = f"more than {size}" if partial else str(size)
    return FrameError(INVALID_REQUEST, f"frame of {what} bytes exceeds the limit of {limit} bytes")


def encode_frame(payload: bytes, framing: str) -> bytes:
    """Wrap one JSON payload for the wire in the given framing."""
    if framing == CONTENT_LENGTH:
        return b"Content-Length: %d\r\n\r\n" % len(payload) + payload
    if framing == NEWLINE:
        if b"\n" in payload:
            raise ValueError("a newline-framed payload must not contain a newline")
        return payload + b"\n"
    raise ValueError(f"unknown framing {framing!r}")


def dump_json(obj: Any) -> bytes:
    """Compact UTF-8 JSON with no raw newline (safe for either framing).

    A string holding a lone surrogate (a request id ``"\\ud800"`` echoed back)
    has no UTF-8 form; the message is then written with ``\\u`` escapes, which
    is still JSON and gives the peer back exactly what it sent."""
    # check_circular off: 8 % of a 12 kB answer's encode; a cycle still fails (RecursionError)
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False, check_circular=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")


def encode_message(obj: Any, framing: str) -> bytes:
    return encode_frame(dump_json(obj), framing)
