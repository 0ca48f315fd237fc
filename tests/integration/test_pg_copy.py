"""`autodoc store copy --to DATABASE` (store/pg/copy.py): a SQLite store copied into a PostgreSQL store
answers as the store it came from (issue 34: a team moving a laptop's store to the shared database).

A real SQLite store, built once for the module: the 13 infrastructure ADRs of simpler-grants-adr
indexed and embedded with the bundled model (all-MiniLM-L6-v2), and foam-docs indexed lexically (links,
tags, facets), one file then edited and one deleted (postings delta and dead records, change log rows).
It is copied by the CLI into a fresh schema of the pg_uri server; then:

- every copied table holds the same rows (the same ids), FTS5's sizes became lexical_sizes/stats;
- searches through a Service on each store answer alike: lexical answers byte-identical (timings
  aside), hybrid hits the same chunks with the same scores, the vectors searched by pgvector's HNSW
  index (made by the copy) in the database;
- the copy refuses a schema that holds workspaces already, changing nothing;
- the copied store goes on: a new document indexed into it takes new ids and the next change cursor."""

from __future__ import annotations

import contextlib
import io
import shutil
import uuid
from pathlib import Path

import pytest
from helpers.pg import missing_reason

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora"
ADR = DATA / "simpler-grants-adr" / "docs" / "decisions" / "infra"
FOAM = DATA / "foam-docs"
QUERIES = {
    "adr": [
        "how are database users created",
        "feature flags",
        "where does terraform keep its state",
        "continuous deployment pipeline",
        '"security groups"',
    ],
    "foam": ["graph", "tags wikilinks", "how do I link my notes to each other", "temp* note", "wikilnks"],
}
TABLES = ["workspaces", "documents", "chunks", "facets", "changes", "vectors", "postings", "postings_delta"]


def _uri(pg_uri: str, schema: str) -> str:
    return f"{pg_uri}&options=-csearch_path%3D{schema}"


def _answer(a: dict) -> dict:
    return {k: v for k, v in a.items() if k not in ("took_ms", "timing", "timings")}


@pytest.fixture(scope="module")
def copied(pg_uri, tmp_path_factory):
    from autodoc import cli
    from autodoc.config import Settings
    from autodoc.service import Service

    base = tmp_path_factory.mktemp("pgcopy")
    foam = base / "foam"
    shutil.copytree(FOAM, foam)
    store = base / "s.db"
    svc = Service(Settings.from_env(store=store))
    try:
        svc.workspace_add("adr", str(ADR), None)  # the bundled model
        assert svc.index("adr", embed=True)["embedding"]["embedded"] > 50
        svc.workspace_add("foam", str(foam), {"embedding": {"provider": "none"}})
        svc.index("foam")
        first = sorted(foam.rglob("*.md"))
        first[0].write_text(first[0].read_text() + "\n\nA zyxwordly addition after the first index.\n")
        first[1].unlink()
        svc.index("foam")
    finally:
        svc.close()
    schema = f"c_{uuid.uuid4().hex[:10]}"
    uri = _uri(pg_uri, schema)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["--store", str(store), "store", "copy", "--to", uri, "--build-memory", "64MB"]) == 0
    said = out.getvalue()  # the vector index is named by its workspace's name, not its row id
    assert "vector index of workspace adr (" in said and "built in" in said, said
    lite = Service(Settings.from_env(store=store), writer=False)
    pg = Service(Settings.from_env(store=uri), writer=False)
    try:
        yield {"store": store, "uri": uri, "schema": schema, "lite": lite, "pg": pg, "pg_uri": pg_uri}
    finally:
        lite.close()
        pg.close()
        import psycopg

        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _rows(db, table: str) -> list[tuple]:
    cols = {
        "workspaces": "id, name, root, config",
        "documents": "id, workspace_id, path, generation, content_hash, title, tags, content",
        "chunks": "id, document_id, ordinal, text, text_hash, tokens",
        "facets": "document_id, field, value, num, date",
        "changes": "cursor, workspace, path, op, generation",
        "vectors": "workspace_id, model_fp, text_hash, f32, bits",
        "postings": "term, seg, wide, data",
        "postings_delta": "term, chunk, d, t0, t1, t2, t3",
    }[table]
    return sorted(
        tuple(bytes(v) if isinstance(v, memoryview) else v for v in r)
        for r in db.execute(f"SELECT {cols} FROM {table}")
    )


def test_the_copy_holds_the_same_rows(copied):
    with copied["lite"].store.read() as a, copied["pg"].store.read() as b:
        for table in TABLES:
            rows = _rows(a, table)
            assert rows, table  # the fixture's store has rows in every table compared
            assert _rows(b, table) == rows, table
        # FTS5's docsize and averages, as the Postgres store keeps them itself
        sizes = b.execute("SELECT COUNT(*), SUM(t0 + t1 + t2 + t3) FROM lexical_sizes").fetchone()
        stats = b.execute("SELECT chunks, t0 + t1 + t2 + t3 FROM lexical_stats").fetchone()
        assert sizes[0] == a.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        assert tuple(stats) == tuple(sizes)
        links = a.execute("SELECT rowid, source_id, target, line FROM links ORDER BY rowid").fetchall()
        assert links and b.execute("SELECT id, source_id, target, line FROM links ORDER BY id").fetchall() == links


def test_the_copy_answers_the_same_searches(copied):
    lite, pg = copied["lite"], copied["pg"]
    status = pg.workspace_status("adr")["embedding"]
    assert status["search"] == "pgvector" and status["pending"] == 0
    for ws, queries in QUERIES.items():
        for q in queries:
            a = lite.search(ws, q, {"stages": ["lexical"], "limit": 10})
            assert a["hits"], (ws, q)
            assert _answer(pg.search(ws, q, {"stages": ["lexical"], "limit": 10})) == _answer(a), (ws, q)
            a = lite.search(ws, q, {"limit": 10})
            b = pg.search(ws, q, {"limit": 10})
            assert [(h["chunk_id"], h["score"]) for h in b["hits"]] == [(h["chunk_id"], h["score"]) for h in a["hits"]]
    q = "where does terraform keep its state"
    a = lite.search("adr", q, {"stages": ["semantic"], "limit": 10})["hits"]
    assert a and [
        (h["chunk_id"], h["score"]) for h in pg.search("adr", q, {"stages": ["semantic"], "limit": 10})["hits"]
    ] == [(h["chunk_id"], h["score"]) for h in a]


def test_a_second_copy_into_the_same_schema_is_refused(copied, capsys):
    from autodoc import cli

    with copied["pg"].store.read() as db:
        before = db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    assert cli.main(["--store", str(copied["store"]), "store", "copy", "--to", copied["uri"]]) == 2
    assert "already holds workspaces" in capsys.readouterr().err
    with copied["pg"].store.read() as db:
        assert db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == before


def test_the_copied_store_goes_on_indexing(copied, tmp_path):
    from autodoc.config import Settings
    from autodoc.service import Service

    with copied["lite"].store.read() as db:
        top_chunk = db.execute("SELECT MAX(id) FROM chunks").fetchone()[0]
        top_cursor = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").fetchone()[0]
    (tmp_path / "new.md").write_text("# A new note\n\nWritten after the copy, about quokkas.\n")
    svc = Service(Settings.from_env(store=copied["uri"]))
    try:
        svc.workspace_add("later", str(tmp_path), {"embedding": {"provider": "none"}})
        svc.index("later")
        with svc.store.read() as db:
            ids = [
                r[0]
                for r in db.execute(
                    "SELECT c.id FROM chunks c JOIN workspaces w ON w.id = c.workspace_id WHERE w.name = 'later'"
                )
            ]
            cursors = [r[0] for r in db.execute("SELECT cursor FROM changes WHERE workspace = 'later'")]
        assert ids and min(ids) > top_chunk
        assert cursors and min(cursors) == top_cursor + 1
        assert svc.search("later", "quokkas", {"stages": ["lexical"]})["hits"]
    finally:
        svc.close()
