"""The one citable reference to a span of a document, as every interface writes it and
`autodoc read` takes it back: `WORKSPACE:PATH#LSTART-END` (`#LN` for one line, no `#`
for the whole document). Search answers carry it (compact hits' `ref`, MCP's
passages); the CLI prints it and the TUI copies it shell-quoted when the path holds
a space or a shell character (`'notes:adr/explorers copy.md#L194-196'`), so a paste
into a shell stays one word. protocol/PROTOCOL.md (References) defines it.

Runs on: the caller's thread (pure).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

_SAFE = re.compile(r"^[\w@%+=:,./#-]+$")  # what a POSIX shell leaves as it is
_REF = re.compile(
    r"^(?:(?P<ws>[A-Za-z0-9][A-Za-z0-9._-]{0,63}):(?!\d))?(?P<path>[^#]*?)"
    r"(?:#L?(?P<a>\d+)(?:-L?(?P<b>\d+))?|:(?P<c>\d+)(?:-(?P<d>\d+))?)?$"
)


def ref(workspace: str, path: str, line_start: int | None = None, line_end: int | None = None) -> str:
    base = f"{workspace}:{path}"
    if line_start is None:
        return base
    return f"{base}#L{line_start}" if line_end in (None, line_start) else f"{base}#L{line_start}-{line_end}"


def shown(text: str) -> str:
    """The ref as one shell word: as it is when it needs no quoting, else single-quoted."""
    return text if _SAFE.match(text) else shlex.quote(text)


@dataclass(frozen=True)
class Ref:
    workspace: str | None
    path: str
    lines: tuple[int, int] | None


def parse(text: str) -> Ref:
    """`ws:path#L10-15`, `ws:path#L10`, `ws:path`, `path#L10-15` (the `L` optional), `path:10-15`
    (after a Markdown file name) or a bare path; quotes around it (a ref pasted quoted) are dropped."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    m = _REF.match(text)
    if not m or not m.group("path"):
        return Ref(None, text, None)
    path = m.group("path")
    if m.group("c") and not path.lower().endswith((".md", ".markdown")):
        # `:N` is a line only after a file name: `.session/2026-12-01T10:30` is a session's path
        return Ref(m.group("ws"), text[text.index(":") + 1 :] if m.group("ws") else text, None)
    a, b = m.group("a") or m.group("c"), m.group("b") or m.group("d")
    return Ref(m.group("ws"), path, (int(a), int(b or a)) if a else None)
