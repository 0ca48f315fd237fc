"""The kb corpus with the kb-schema overlay (a `_schema/frontmatter.yaml` and
documents that exercise it), copied into a temp folder, indexed without models."""

from __future__ import annotations

import shutil
from pathlib import Path

CORPORA = Path(__file__).resolve().parents[1] / "corpora"
NO_MODEL = {"embedding": {"provider": "none"}}


def make_kb_schema(dest: Path, *, schema: bool = True) -> Path:
    from corpora.make_special import ensure_special_files

    ensure_special_files()
    shutil.copytree(CORPORA / "kb", dest, symlinks=True)
    shutil.copytree(CORPORA / "kb-schema", dest, dirs_exist_ok=True)
    if not schema:
        (dest / "_schema" / "frontmatter.yaml").unlink()
    return dest
