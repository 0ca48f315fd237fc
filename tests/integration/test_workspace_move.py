"""A workspace's root moves (issue 34: a CI checkout at a new path each run, a store copied to
another laptop, a folder renamed): `workspace.configure` takes the new `root`, and the next index
finds every file unchanged, so nothing is re-chunked or re-embedded. Before, the only way was
remove and add again, which embedded every chunk anew.

Real parts: a SQLite store and a PostgreSQL one (tests/helpers/pg.py), the real ONNX model
(tests/corpora/kb, ~20 files)."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest
from helpers.pg import missing_reason, schema_uri

from autodoc.connect import invoke
from autodoc.errors import InvalidParams
from autodoc.rpc import schemas

KB = Path(__file__).resolve().parents[1] / "corpora" / "kb"
QUERIES = ("how is a stale lease recovered", "porter stemming", "embedding queue stuck")


def _rows(svc, name: str = "kb") -> dict[str, list]:
    """What an index that re-chunked or re-added anything would change: the chunk rows (ids and
    the text each holds) and the documents' rows (id, path, generation, content hash)."""
    with svc.store.read() as db:
        (ws_id,) = db.execute("SELECT id FROM workspaces WHERE name=?", (name,)).fetchone()
        chunks = db.execute(
            "SELECT id, document_id, generation, text_hash FROM chunks WHERE workspace_id=? ORDER BY id", (ws_id,)
        ).fetchall()
        documents = db.execute(
            "SELECT id, path, generation, content_hash FROM documents WHERE workspace_id=? ORDER BY id", (ws_id,)
        ).fetchall()
    return {"chunks": [tuple(r) for r in chunks], "documents": [tuple(r) for r in documents]}


def _answers(svc, name: str = "kb") -> list[list[tuple]]:
    """Each query's hybrid hits: ref-making fields, chunk and score."""
    out = []
    for q in QUERIES:
        got = svc.search(name, q, {"limit": 8})
        assert got["hits"], q
        out.append(
            [(h["path"], h["chunk_id"], h["line_start"], h["line_end"], round(h["score"], 9)) for h in got["hits"]]
        )
    return out


@pytest.fixture
def indexed(service_factory, short_tmp):
    """(service, root): tests/corpora/kb copied under short_tmp/a/kb, indexed and embedded (ONNX)."""
    root = short_tmp / "a" / "kb"
    shutil.copytree(KB, root, symlinks=True)
    svc = service_factory(root, config={}, index=False)
    report = svc.index("kb", embed=True)
    assert report["embedding"]["embedded"] > 0 and report["embedding"]["skipped"] == 0
    return svc, root


def _no_change(report: dict) -> None:
    assert (report["added"], report["modified"], report["deleted"], report["renamed"]) == (0, 0, 0, 0), report
    assert report["unchanged"] == report["scanned"] - len(report["skipped"]) > 0, report


def test_a_renamed_folder_is_configured_as_the_new_root_and_nothing_is_re_embedded(indexed, short_tmp):
    svc, root = indexed
    before, answers, files = _rows(svc), _answers(svc), svc.workspace_status("kb")["files"]
    moved = short_tmp / "b" / "kb-renamed"
    moved.parent.mkdir()
    os.rename(root, moved)

    out = invoke(svc, "workspace.configure", {"workspace": "kb", "root": str(moved)})
    assert schemas.result_errors("workspace.configure", out) == []
    assert out["root"] == str(moved) and out["documents"] == len(before["documents"])
    assert svc.workspace_list()["workspaces"][0]["root"] == str(moved)
    assert _rows(svc) == before  # configuring touched no document, chunk or vector

    report = svc.index("kb", embed=True)
    _no_change(report)
    assert report["embedding"]["embedded"] == 0 and report["embedding"]["skipped"] == 0
    assert _rows(svc) == before
    assert _answers(svc) == answers
    status = svc.workspace_status("kb")
    assert status["root"] == str(moved) and status["root_exists"]
    assert status["files"] == files  # on disk, indexed, skipped, left out: as before the move
    # a compact answer reads the file under the new root: it is the one indexed, not "changed"
    compact = svc.search("kb", QUERIES[0], {"answer": "compact"})
    assert compact["hits"] and not any(h["changed"] for h in compact["hits"])
    assert compact["hits"][0]["ref"].startswith("kb:")


def test_a_copied_folder_with_new_mtimes_and_inodes_is_found_unchanged_by_its_bytes(indexed, short_tmp):
    """A store copied to another laptop, or a CI checkout: same bytes, other inodes and mtimes.
    The index reads each file once to compare its hash, and writes no chunk."""
    svc, root = indexed
    before, answers = _rows(svc), _answers(svc)
    copy = short_tmp / "checkout" / "kb"
    shutil.copytree(root, copy, symlinks=True, copy_function=shutil.copyfile)  # new mtimes
    shutil.rmtree(root)

    invoke(svc, "workspace.configure", ["kb", {}, str(copy)])
    report = svc.index("kb", embed=True)
    _no_change(report)
    assert report["embedding"]["embedded"] == 0
    assert _rows(svc) == before
    assert _answers(svc) == answers
    # the stat it stored is the copy's: the next index trusts it without reading a file
    _no_change(svc.index("kb"))


def test_remove_and_add_again_is_what_the_move_saves(indexed, short_tmp):
    """The control: the old way re-embeds every chunk (the figure the move saves)."""
    svc, root = indexed
    chunks = len(_rows(svc)["chunks"])
    svc.workspace_remove("kb")
    svc.workspace_add("kb", str(root), {})
    report = svc.index("kb", embed=True)
    assert report["added"] > 0 and report["embedding"]["embedded"] == chunks


def test_options_and_root_change_in_one_step(indexed, short_tmp):
    svc, root = indexed
    moved = short_tmp / "moved"
    os.rename(root, moved)
    out = invoke(svc, "workspace.configure", ["kb", {"description": "the team's decisions"}, str(moved)])
    assert out["root"] == str(moved) and out["config"]["description"] == "the team's decisions"
    # the same root again (as typed: a trailing slash, a relative part) is no change
    again = invoke(svc, "workspace.configure", {"workspace": "kb", "root": f"{moved}/../moved/"})
    assert again["root"] == str(moved)


@pytest.mark.parametrize(
    "root, why",
    [
        ("missing", "is not a folder"),
        ("a-file.md", "is not a folder"),
        ("/", "would index every Markdown file"),
    ],
)
def test_a_root_that_cannot_be_one_is_refused_naming_root(indexed, short_tmp, root, why):
    svc, old = indexed
    (short_tmp / "a-file.md").write_text("# not a folder\n")
    path = root if root.startswith("/") else str(short_tmp / root)
    before = _rows(svc)
    with pytest.raises(InvalidParams) as err:
        invoke(svc, "workspace.configure", {"workspace": "kb", "root": path})
    assert err.value.field == "root" and why in err.value.message
    assert err.value.to_rpc()["code"] == -32602
    assert svc.workspace_list()["workspaces"][0]["root"] == str(old) and _rows(svc) == before


def test_force_takes_the_home_folder_as_add_does(service_factory, short_tmp, monkeypatch):
    home = short_tmp / "home"
    (home / "notes").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    svc = service_factory(home / "notes")
    with pytest.raises(InvalidParams) as err:
        invoke(svc, "workspace.configure", {"workspace": "kb", "root": str(home)})
    assert err.value.field == "root"
    out = invoke(svc, "workspace.configure", {"workspace": "kb", "root": str(home), "force": True})
    assert out["root"] == str(home)


@pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")
def test_on_postgres_the_move_keeps_every_chunk_and_vector(pg_uri, short_tmp):
    """The same on a PostgreSQL store: the root is a column there too, the vectors pgvector's."""
    from autodoc.config import Settings
    from autodoc.service import Service

    root = short_tmp / "run-1" / "kb"
    shutil.copytree(KB, root, symlinks=True)
    svc = Service(Settings.from_env(store=schema_uri(pg_uri, f"mv_{uuid.uuid4().hex[:8]}")))
    try:
        svc.workspace_add("kb", str(root), {})
        assert svc.index("kb", embed=True)["embedding"]["embedded"] > 0
        before, answers = _rows(svc), _answers(svc)
        moved = short_tmp / "run-2" / "kb"
        shutil.copytree(root, moved, symlinks=True, copy_function=shutil.copyfile)
        shutil.rmtree(root)
        out = invoke(svc, "workspace.configure", {"workspace": "kb", "root": str(moved)})
        assert schemas.result_errors("workspace.configure", out) == [] and out["root"] == str(moved)
        report = svc.index("kb", embed=True)
        _no_change(report)
        assert report["embedding"]["embedded"] == 0
        assert _rows(svc) == before
        assert _answers(svc) == answers
    finally:
        svc.close()
