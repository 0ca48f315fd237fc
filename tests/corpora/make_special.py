"""Create the corpus files whose exact bytes matter or that git will not keep.

Binary, badly encoded, hidden, gitignored and symlinked files are made here so
their bytes are exact and so a fresh checkout (where git skipped the ignored
ones) gets them back. Idempotent: run it, or call ensure_special_files(), as
often as you like. Tests that scan tests/corpora/kb call it first.
"""

from __future__ import annotations

import os
from pathlib import Path

KB = Path(__file__).resolve().parent / "kb"

# relpath -> exact bytes
_FILES: dict[str, bytes] = {
    ".gitignore": b"# drafts are private until reviewed\ndrafts/\n",
    "runbooks/.gitignore": b"*.scratch.md\n",
    "drafts/sharding-proposal.md": (
        b"# Sharding the index\n\nDraft, not for indexing: split autodoc.db per workspace.\n"
    ),
    "runbooks/oncall-handover.scratch.md": (
        b"# Handover scratch\n\nIgnored by the nested runbooks/.gitignore.\n"
    ),
    ".obsidian/workspace-notes.md": b"# Obsidian settings note\n\nHidden folder, never indexed.\n",
    "notes/.scratch.md": b"# Hidden file\n\nDot-files are never indexed.\n",
    "node_modules/x.md": b"# some-package\n\nVendored README, never indexed.\n",
    # NUL bytes in the first 8 KiB make this binary despite its name.
    "notes/diagram-export.md": (
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00" + bytes(range(256)) * 4
    ),
    # Valid UTF-8 up to byte 55, then a Latin-1 e-acute (0xE9) that is not UTF-8.
    "notes/bad-encoding.md": (
        b"# Bad encoding\n\nThis line is fine. This one is not: caf"
        + b"\xe9 cr\xe8me br\xfbl\xe9e.\n"
    ),
}

# relpath -> symlink target (relative, so it works in any checkout location)
_LINKS: dict[str, str] = {
    "outside.md": "../outside-target.md",
}

BAD_ENCODING_OFFSET = len(b"# Bad encoding\n\nThis line is fine. This one is not: caf")


def ensure_special_files(root: Path = KB) -> Path:
    """Write the special files under root (default: the kb corpus); return root."""
    for rel, data in _FILES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if not p.exists() or p.read_bytes() != data:
            p.write_bytes(data)
    for rel, target in _LINKS.items():
        p = root / rel
        if p.is_symlink() and os.readlink(p) == target:
            continue
        if p.is_symlink() or p.exists():
            p.unlink()
        p.symlink_to(target)
    return root


if __name__ == "__main__":
    print(ensure_special_files())
