"""A document's new chunks are inserted a few statements at a time (store/documents.py
`_insert_chunks`: one round trip per chunk was the largest part of a PostgreSQL index run's own
statements), their ids matched back by ordinal. Whatever order RETURNING gives, each chunk's lexical
row must name its own chunk: a word searched finds the section it is in, on both backends, for a
document past one statement's rows and after an edit that keeps some chunks and adds others."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers.pg import missing_reason, schema_uri

from autodoc.store.documents import INSERT_ROWS

SECTIONS = INSERT_ROWS * 2 + 10  # three statements for one document
OPTIONS = {"embedding": {"provider": "none"}, "section_tokens": 32}  # a section a chunk


def word() -> str:
    return f"qz{uuid.uuid4().hex[:8]}"


def write(folder: Path, words: list[str]) -> None:
    body = "".join(f"## Part {w}\n\nThe {w} paragraph, about {' '.join(['filler'] * 12)}.\n\n" for w in words)
    (folder / "big.md").write_text(f"# Big\n\n{body}")


def found(svc: Any, words: list[str]) -> dict[str, int]:
    """Each word's section chunk id, once its lexical search is checked: the first section found is
    the word's own, and every chunk found holds the word (a lexical row naming another chunk would not)."""
    ids = {}
    for w in words:
        hits = svc.search("kb", w, {"stages": "lexical"})["hits"]
        sections = [h for h in hits if h["kind"] == "section"]
        assert [h["breadcrumb"] for h in sections[:1]] == [f"Big › Part {w}"], (w, hits[:3])
        with svc.store.read() as db:
            for h in hits:
                (text,) = db.execute("SELECT text FROM chunks WHERE id = ?", (h["chunk_id"],)).fetchone()
                assert w in text or w in h["breadcrumb"], (w, h["breadcrumb"], text[:80])
        ids[w] = sections[0]["chunk_id"]
    return ids


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    if request.param == "sqlite":
        return tmp_path / "store" / "autodoc.db"
    if missing_reason() is not None:
        pytest.skip(missing_reason() or "")
    return schema_uri(request.getfixturevalue("pg_uri"), f"ci_{uuid.uuid4().hex[:8]}")


def test_each_new_chunk_keeps_its_own_id_across_statements_and_edits(store, tmp_path):
    from autodoc.config import Settings
    from autodoc.service import Service

    folder = tmp_path / "kb"
    folder.mkdir()
    words = [word() for _ in range(SECTIONS)]
    write(folder, words)
    svc = Service(Settings.from_env(store=store))
    try:
        svc.workspace_add("kb", str(folder), OPTIONS)
        assert svc.index("kb")["chunks"] > SECTIONS
        before = found(svc, words)
        assert len(set(before.values())) == SECTIONS
        # an edit: a section first (every kept chunk moves down one), a run past one statement's rows
        # rewritten (new rows between kept ones), one section gone
        rewritten = {i: word() for i in range(20, 20 + INSERT_ROWS + 5)}
        edited = [word()] + [rewritten.get(i, w) for i, w in enumerate(words) if i != SECTIONS - 3]
        write(folder, edited)
        assert svc.index("kb")["modified"] == 1
        after = found(svc, edited)
        # kept: all but the one that was first (its chunk holds the title's line above it)
        kept = [w for w in edited[2:] if w in before]
        assert len(kept) == SECTIONS - len(rewritten) - 2
        assert [w for w in kept if after[w] != before[w]] == []  # their rows (and vectors) kept
        assert not {after[w] for w in edited if w not in before} & set(before.values())
    finally:
        svc.close()
