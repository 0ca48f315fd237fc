"""Ingest, a file's bytes → the text that is indexed, and what was done to it.

Input: a Markdown file's bytes (ingest/scan.py refused binary ones), its path, and whether secrets
are masked. Output: the text (stored, parsed, chunked, embedded and shown: every byte offset of a
chunk is into its UTF-8 encoding) and the problems to record on the document.

- A UTF-16/UTF-32 file with a byte-order mark is decoded by its mark (ripgrep does the same):
  the mark is unambiguous, so the file is indexed, with an `encoding` problem saying so.
- Invalid UTF-8 bytes (a Latin-1 "é" in a UTF-8 note, a truncated character) are replaced by
  U+FFFD, one per run of bad bytes, with one `encoding` problem naming how many and where the first is:
  a file is never dropped for a few bad bytes.
- ERB tags (`<% … %>`, `<%= … %>`) in a `.erb` file (a Middleman `*.html.md.erb` page) are
  blanked, their line breaks kept: template code is not prose, and `<%# … %>` must not read as a tag.
- Secrets are masked (ingest/secrets.py), a `secret` problem each, when `redact` is on.

Every step keeps the line count, so line numbers are the file's.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import codecs
import re

from .secrets import mask
from .types import Problem

_BOMS = (  # longest first: a UTF-32LE mark starts with the UTF-16LE one
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32LE"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32BE"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16LE"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16BE"),
)
_ERB = re.compile(r"<%.*?%>", re.S)
MAX_SECRET_PROBLEMS = 100  # past this many, one problem says how many more were masked


def bom_encoding(data: bytes) -> tuple[bytes, str, str] | None:
    """(the mark, codec, name) of a UTF-16/32 byte-order mark data starts with, or None."""
    for bom, codec, name in _BOMS:
        if data.startswith(bom):
            return bom, codec, name
    return None


_ESCAPED = re.compile("[\udc80-\udcff]+")  # invalid bytes, as the surrogateescape handler holds them


def invalid_utf8(data: bytes) -> int:
    """How many bytes of data are not valid UTF-8 (linear: one decode, however many there are)."""
    return sum(len(m.group(0)) for m in _ESCAPED.finditer(data.decode("utf-8", "surrogateescape")))


def decode(data: bytes) -> tuple[str, list[Problem]]:
    """The file's text and the `encoding` problems of reading it (module docstring)."""
    bom = bom_encoding(data)
    if bom is not None:
        mark, codec, name = bom
        text = data[len(mark) :].decode(codec, "replace")
        return text, [Problem(1, f"{name} text (byte-order mark): read as {name} and indexed as UTF-8", "encoding")]
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError:
        pass
    escaped = data.decode("utf-8", "surrogateescape")
    runs = list(_ESCAPED.finditer(escaped))
    line = escaped.count("\n", 0, runs[0].start()) + 1
    what = "run of invalid UTF-8 bytes is" if len(runs) == 1 else "runs of invalid UTF-8 bytes are"
    message = f"{len(runs)} {what} replaced by U+FFFD (the first at line {line})"
    return _ESCAPED.sub("\ufffd", escaped), [Problem(line, message, "encoding")]


def blank_erb(text: str) -> str:
    """ERB tags replaced by spaces, their line breaks kept."""
    return _ERB.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def prepared_text(relpath: str, data: bytes, *, redact: bool = True) -> tuple[str, list[Problem]]:
    """The text to index for the file at relpath, and the problems to record (module docstring)."""
    text, problems = decode(data)
    if relpath.lower().endswith(".erb") and "<%" in text:
        text = blank_erb(text)
    if redact:
        text, masked = mask(text)
        problems += secret_problems(masked)
    return text, problems


def secret_problems(masked: list) -> list[Problem]:
    """One `secret` problem per masked value (kind and line, never the value), at most MAX_SECRET_PROBLEMS."""
    out = [
        Problem(
            m.line, f"a {m.kind.replace('-', ' ')} was masked: it is not indexed (the file still holds it)", "secret"
        )
        for m in masked[:MAX_SECRET_PROBLEMS]
    ]
    if len(masked) > MAX_SECRET_PROBLEMS:
        rest = len(masked) - MAX_SECRET_PROBLEMS
        out.append(Problem(masked[MAX_SECRET_PROBLEMS].line, f"{rest} more secrets were masked", "secret"))
    return out
