"""Vectors on a PostgreSQL store (issue 34; docs/dev/postgres.md, section 3), on a real server (the
pg_uri fixture) with the real bundled model (all-MiniLM-L6-v2).

A real corpus (the 13 infrastructure ADRs of ../shared/data/corpora/simpler-grants-adr, read in
place) is indexed and embedded into a SQLite store once; its rows are copied into two Postgres
schemas (the same texts, the same vectors: the copy goes through store/vectors.py's write, which on
Postgres writes the `v` column and makes the HNSW index):

- `pgvector`: the extension exists; the store searches vectors itself (HNSW candidates, rescored
  exactly): every hit and every cosine equals the SQLite store's in-memory search;
- `absent`: a database made without the extension. pgserver always offers pgvector, so the test
  makes what store/pg/schema.py makes where it is missing: meta `vector_extension` = "absent" and no
  `v` column. The vectors are then searched in memory, loaded from the bytea rows, as on SQLite."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest
from helpers.pg import missing_reason

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora" / "simpler-grants-adr"
ROOT = CORPUS / "docs" / "decisions" / "infra"
QUERIES = [
    "how are database users created",
    "feature flags",
    "where does terraform keep its state",
    "sending notifications to users by email",
    "continuous deployment pipeline",
    "network subnets and security groups",
]
COPIED = ["workspaces", "documents", "chunks", "embed_state"]


def _copy(src, dst) -> None:
    """Every row of the tables a semantic search reads, SQLite → Postgres; vectors through the store's write."""
    from autodoc.store import vectors as stored

    with dst:
        for table in COPIED:
            cols = [r[1] for r in src.execute(f"PRAGMA table_info({table})")]
            rows = src.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
            dst.executemany(
                f"INSERT INTO {table}({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [tuple(r) for r in rows],
            )
        for ws_id, fp in src.execute("SELECT DISTINCT workspace_id, model_fp FROM vectors").fetchall():
            rows = src.execute(
                "SELECT text_hash, f32, bits FROM vectors WHERE workspace_id=? AND model_fp=? ORDER BY text_hash",
                (ws_id, fp),
            ).fetchall()
            stored.write_vectors(dst, ws_id, fp, [(h, bytes(f), bytes(b)) for h, f, b in rows])


def _schema(pg_uri: str, extension: bool):
    """A PgSnapshot on a fresh migrated schema of its own (autocommit connection, as the store's)."""
    import psycopg

    from autodoc.store.pg.schema import migrate
    from autodoc.store.pg.snapshot import PgSnapshot, prepare

    name = f"t_{uuid.uuid4().hex[:10]}"
    conn = psycopg.connect(pg_uri, autocommit=True)
    prepare(conn)
    migrate(conn, name)
    conn.execute(f'SET search_path TO "{name}"')
    if not extension:  # what _m001_initial leaves where pgvector cannot be created
        conn.execute("ALTER TABLE vectors DROP COLUMN v")
        conn.execute("UPDATE meta SET value = 'absent' WHERE key = 'vector_extension'")
    return name, conn, PgSnapshot(conn)


@pytest.fixture(scope="module")
def stores(pg_uri, tmp_path_factory):
    from autodoc.config import Settings
    from autodoc.service import Service
    from autodoc.store import vectors as stored

    svc = Service(Settings.from_env(store=tmp_path_factory.mktemp("pgv") / "s.db"))
    made = []
    try:
        svc.workspace_add("adr", str(ROOT), None)  # the bundled model
        rep = svc.index("adr", embed=True)
        assert rep["embedding"]["embedded"] > 50, rep
        with svc.store.read() as db:
            ws_id = db.execute("SELECT id FROM workspaces WHERE name='adr'").fetchone()[0]
            active = stored.active_model(db, ws_id)
            assert active is not None
            provider = svc.providers.get(active.config or {})
            for extension in (True, False):
                made.append(_schema(pg_uri, extension))
                _copy(db, made[-1][2])
        queries = {q: provider.embed_query(q) for q in QUERIES}
        yield {
            "svc": svc,
            "ws": ws_id,
            "fp": active.fingerprint,
            "dim": provider.dim,
            "queries": queries,
            "pgvector": made[0][2],
            "absent": made[1][2],
        }
    finally:
        svc.close()
        for name, conn, _ in made:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')
            conn.close()


def _search(cache, db, s, q, top, allowed=None, in_transaction=True):
    """(how many vectors this process holds to answer it: 0 when the store searches them, the hits)."""
    vectors = cache.searchable(db, s["ws"], s["fp"], s["dim"])
    if in_transaction:
        with db:  # the store's read is one transaction: ef_search is set for it alone
            return len(vectors), vectors.search(q, top, allowed)
    return len(vectors), vectors.search(q, top, allowed)


def _sqlite(s, q, top, allowed=None):
    from autodoc.search.semantic.vector_cache import VectorCache

    with s["svc"].store.read() as db:
        held, hits = _search(VectorCache(), db, s, q, top, allowed, in_transaction=False)
    assert held > 0  # loaded and searched in memory
    return hits


@pytest.mark.parametrize("top", [10, 51, 600, 1001])  # 600: the index asked for its most; 1001: a scan
def test_pgvector_hits_and_cosines_equal_the_sqlite_stores(stores, top):
    from autodoc.search.semantic.vector_cache import VectorCache

    (chunks,) = stores["pgvector"].execute("SELECT count(*) FROM chunks").fetchone()
    for q in stores["queries"].values():
        held, hits = _search(VectorCache(), stores["pgvector"], stores, q, top)
        assert held == 0  # the store's index answered: nothing loaded here
        assert hits == _sqlite(stores, q, top)  # ids, order and every float cosine
        assert len(hits) == min(top, chunks)


def test_a_filter_narrows_in_the_store_exactly_or_through_the_index(stores, monkeypatch):
    from autodoc.search.semantic import store_side
    from autodoc.search.semantic.vector_cache import VectorCache

    db = stores["pgvector"]
    ids = np.array([i for (i,) in db.execute("SELECT id FROM chunks ORDER BY id")], dtype=np.int64)
    some = ids[::3]
    for q in list(stores["queries"].values())[:3]:
        want = _sqlite(stores, q, 10, some)
        assert all(cid in set(some.tolist()) for cid, _ in want) and len(want) == 10
        assert _search(VectorCache(), db, stores, q, 10, some)[1] == want  # narrow: scanned exactly
        monkeypatch.setattr(store_side, "FILTER_EXACT_BELOW", 5)  # wide: the index's candidates, filtered
        assert _search(VectorCache(), db, stores, q, 10, some)[1] == want
        monkeypatch.undo()


def test_the_active_model_has_its_hnsw_index(stores):
    from autodoc.store.pg import vectors as pgv

    db = stores["pgvector"]
    name = pgv.index_name(stores["ws"], stores["fp"])
    (indexdef,) = db.execute("SELECT indexdef FROM pg_indexes WHERE indexname = ?", (name,)).fetchone()
    assert (
        "USING hnsw" in indexdef
        and "vector_cosine_ops" in indexdef
        and "m='24'" in indexdef
        and f"vector({stores['dim']})" in indexdef
    )
    assert f"model_fp = '{stores['fp']}'" in indexdef and f"workspace_id = {stores['ws']}" in indexdef


def test_the_search_uses_the_index_once_a_sort_would_cost_more(pg_uri, stores):
    """With the corpus's ~100 rows Postgres rightly sorts them all (exact); 3,000 rows of the
    corpus's vectors, perturbed (bench.common.synthetic's way), and it walks the HNSW graph."""
    from autodoc.store import vectors as stored
    from autodoc.store.pg import vectors as pgv

    src = stores["pgvector"]
    base = np.stack([np.frombuffer(f, dtype="<f4") for (f,) in src.execute("SELECT f32 FROM vectors")])
    rng = np.random.default_rng(7)
    vecs = base[rng.integers(0, len(base), 3000)] + rng.normal(0, 0.02, (3000, base.shape[1])).astype("<f4")
    vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype("<f4")
    name, conn, db = _schema(pg_uri, True)
    try:
        with db:
            db.execute("INSERT INTO workspaces(id, name, root, config, created) VALUES (3, 'w', '/', '{}', 0)")
            stored.write_vectors(
                db, 3, "m", [(f"h{i:05}", v.tobytes(), np.packbits(v > 0).tobytes()) for i, v in enumerate(vecs)]
            )
        db.execute("ANALYZE vectors")
        q = next(iter(stores["queries"].values()))
        plan = "\n".join(pgv.plan(db, pgv.extension(db) or "", 3, "m", q, 100))
        assert f"Index Scan using {pgv.index_name(3, 'm')}" in plan, plan
    finally:
        conn.execute(f'DROP SCHEMA "{name}" CASCADE')
        conn.close()


def test_without_the_extension_vectors_are_searched_in_memory_from_the_bytea_rows(stores):
    from autodoc.search.semantic.vector_cache import VectorCache

    db = stores["absent"]
    assert db.execute("SELECT to_regclass(?)", (f"vectors_hnsw_{stores['ws']}_x",)).fetchone() == (None,)
    cache = VectorCache()
    for q in stores["queries"].values():
        held, hits = _search(cache, db, stores, q, 10)
        assert held > 0  # loaded and searched in memory
        assert hits == _sqlite(stores, q, 10)


def test_the_embed_queues_store_calls_answer_as_on_sqlite(stores):
    from autodoc.store import vectors as stored

    ws, fp = stores["ws"], stores["fp"]
    with stores["svc"].store.read() as lite:
        for db in (stores["pgvector"], stores["absent"]):
            assert stored.coverage(db, ws, fp) == stored.coverage(lite, ws, fp)
            assert stored.pending_texts(db, ws, "another", 40) == stored.pending_texts(lite, ws, "another", 40)
            hashes = [h for h, _ in stored.pending_texts(lite, ws, "another", 5)]
            assert stored.still_pending(db, ws, "another", hashes) == set(hashes)
            assert stored.still_pending(db, ws, fp, hashes) == set()
            assert sorted(stored.documents_with_texts(db, ws, hashes)) == sorted(
                stored.documents_with_texts(lite, ws, hashes)
            )
            assert list(stored.complete_vectors(db, ws, fp, None)) == [
                tuple(r) for r in stored.complete_vectors(lite, ws, fp, None)
            ]


def test_every_vector_read_by_pages_leaves_out_documents_still_waiting(stores, monkeypatch):
    from autodoc.store import vectors as stored

    ws, fp = stores["ws"], stores["fp"]
    monkeypatch.setattr(stored, "PAGE_ROWS", 7)
    with stores["svc"].store.read() as lite:
        want = [tuple(r) for r in stored.complete_vectors(lite, ws, fp, None)]
    db = stores["pgvector"]
    assert list(stored.complete_vectors(db, ws, fp, None)) == want
    with pytest.raises(LookupError), db:  # rolled back by the raise
        doc, text_hash = db.execute(
            "SELECT document_id, text_hash FROM chunks ORDER BY id LIMIT 1 OFFSET 40"
        ).fetchone()
        db.execute("DELETE FROM vectors WHERE text_hash = ?", (text_hash,))
        assert list(stored.complete_vectors(db, ws, fp, None)) == [r for r in want if r[1] != doc]
        raise LookupError


def test_a_models_index_goes_with_its_vectors(pg_uri, stores):
    from autodoc.store import vectors as stored
    from autodoc.store.pg import vectors as pgv

    name, conn, db = _schema(pg_uri, True)
    try:
        with db:
            db.execute("INSERT INTO workspaces(id, name, root, config, created) VALUES (7, 'w', '/', '{}', 0)")
            vec = np.ones(stores["dim"], dtype="<f4") / np.sqrt(stores["dim"])
            for fp in ("model-a", "model-b", "tier-c"):
                stored.write_vectors(db, 7, fp, [("h1", vec.tobytes(), b"\xff" * (stores["dim"] // 8))])
        assert all(pgv.has_index(db, 7, fp) for fp in ("model-a", "model-b", "tier-c"))
        with db:
            stored.drop_model(db, 7, "tier-c")
        assert not pgv.has_index(db, 7, "tier-c") and pgv.has_index(db, 7, "model-a")
        with db:
            stored.activate(db, 7, "model-b", {}, "b")
            stored.drop_other_models(db, 7, "model-b")
        assert [pgv.has_index(db, 7, fp) for fp in ("model-a", "model-b")] == [False, True]
        assert db.execute("SELECT DISTINCT model_fp FROM vectors").fetchall() == [("model-b",)]
        with db:  # a removed workspace's index goes when the next one is made
            db.execute("DELETE FROM workspaces WHERE id = 7")
            db.execute("INSERT INTO workspaces(id, name, root, config, created) VALUES (8, 'v', '/', '{}', 0)")
            stored.write_vectors(db, 8, "model-b", [("h1", vec.tobytes(), b"\xff" * (stores["dim"] // 8))])
        assert [pgv.has_index(db, ws, "model-b") for ws in (7, 8)] == [False, True]
    finally:
        conn.execute(f'DROP SCHEMA "{name}" CASCADE')
        conn.close()


def test_a_connection_reads_where_pgvector_lives_once_and_the_index_at_every_search(stores):
    """meta `vector_extension` is written once, by the first migration: every search asked it again
    (a round trip each); the HNSW index can come and go (a model's first vectors, a model dropped),
    so its existence is still asked each time."""
    from autodoc.store import vectors as stored

    class Counted:
        dialect = "postgres"

        def __init__(self, db):
            self.db, self.sql = db, []

        def execute(self, sql, args=None):
            self.sql.append(sql)
            return self.db.execute(sql, args)

    for name, want in (("pgvector", "public"), ("absent", None)):
        db = Counted(stores[name])
        for _ in range(3):
            assert stored.store_search(db, stores["ws"], stores["fp"]) == want
        assert sum("vector_extension" in s for s in db.sql) == 1, (name, db.sql)
        assert sum("to_regclass" in s for s in db.sql) == (3 if want else 0), (name, db.sql)


def test_workspace_status_says_who_searches_the_vectors(stores):
    from autodoc.embed.status import vector_search
    from autodoc.rpc import schemas

    st = stores["svc"].workspace_status("adr")
    assert st["embedding"]["search"] == "memory"  # SQLite: the daemon loads them
    assert schemas.result_errors("workspace.status", st) == []
    assert vector_search(stores["pgvector"], stores["ws"]) == "pgvector"
    assert vector_search(stores["absent"], stores["ws"]) == "memory"
    with pytest.raises(LookupError), stores["pgvector"] as db:  # rolled back by the raise
        db.execute("DELETE FROM embed_state")
        assert vector_search(db, stores["ws"]) is None  # no model has vectors yet
        raise LookupError
    assert vector_search(stores["pgvector"], stores["ws"]) == "pgvector"


def test_a_service_on_postgres_embeds_and_answers_by_meaning_as_on_sqlite(pg_uri, stores):
    """End to end through the Service on a PostgreSQL store: index and embed the same corpus (the
    model run again, on the same texts in the same order), then semantic and hybrid answers; the
    answers' documents and cosines match the SQLite store's (cosines to 1e-5: two runs of the
    model may differ in a vector's last bits), and similar documents work from the store's search."""
    from urllib.parse import quote

    import psycopg

    from autodoc.config import Settings
    from autodoc.service import Service

    name = f"t_{uuid.uuid4().hex[:10]}"
    sep = "&" if "?" in pg_uri else "?"
    svc = Service(Settings.from_env(store=f"{pg_uri}{sep}options={quote(f'-csearch_path={name}')}"))
    try:
        svc.workspace_add("adr", str(ROOT), None)
        rep = svc.index("adr", embed=True)
        assert rep["embedding"]["embedded"] > 50
        st = svc.workspace_status("adr")
        assert st["embedding"]["state"] == "ready" and st["embedding"]["search"] == "pgvector"
        for q in QUERIES[:3]:
            for opts in ({"stages": ["semantic"], "limit": 8}, {"limit": 8}):
                got, want = svc.search("adr", q, opts), stores["svc"].search("adr", q, opts)
                assert got["semantic"] == "ready" and got["mode_used"] == want["mode_used"]
                assert [h["path"] for h in got["hits"]] == [h["path"] for h in want["hits"]]
                for g, w in zip(got["hits"], want["hits"]):
                    assert g["scores"]["semantic"] == pytest.approx(w["scores"]["semantic"], abs=1e-5)
        path = svc.search("adr", QUERIES[0], {"limit": 1})["hits"][0]["path"]
        got_similar, want_similar = svc.search_similar("adr", path), stores["svc"].search_similar("adr", path)
        assert got_similar["similar"] and [s["path"] for s in got_similar["similar"]] == [
            s["path"] for s in want_similar["similar"]
        ]
    finally:
        svc.close()
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def test_an_indexer_role_that_may_not_make_the_index_writes_vectors_searched_in_memory(pg_uri, stores, caplog):
    """The indexer role of store/pg/roles.py may write rows but not create an index (it does not own
    the table): its vectors are written with `v` all the same, and searched in memory."""
    import psycopg

    from autodoc.search.semantic.vector_cache import VectorCache, WorkspaceVectors
    from autodoc.store import vectors as stored
    from autodoc.store.pg import vectors as pgv
    from autodoc.store.pg.roles import grant
    from autodoc.store.pg.snapshot import PgSnapshot, prepare

    name, conn, owner = _schema(pg_uri, True)
    role = f"r_{uuid.uuid4().hex[:8]}"
    try:
        owner.execute("INSERT INTO workspaces(id, name, root, config, created) VALUES (5, 'w', '/', '{}', 0)")
        conn.execute(f"CREATE ROLE {role} LOGIN")
        grant(conn, indexers=[role], schema=name)
        vecs = np.stack(
            [np.frombuffer(f, dtype="<f4") for (f,) in stores["pgvector"].execute("SELECT f32 FROM vectors")]
        )
        with psycopg.connect(pg_uri, user=role, autocommit=True) as as_indexer:
            prepare(as_indexer)
            as_indexer.execute(f'SET search_path TO "{name}"')
            db = PgSnapshot(as_indexer)
            with db:
                owner_rows = [(f"h{i}", v.tobytes(), np.packbits(v > 0).tobytes()) for i, v in enumerate(vecs[:20])]
                stored.write_vectors(db, 5, "m", owner_rows)
                stored.write_vectors(db, 5, "m", owner_rows[:3])  # asked once per process, not per batch
            assert not pgv.has_index(db, 5, "m")
            assert db.execute("SELECT count(v) FROM vectors").fetchone() == (20,)
            assert stored.store_search(db, 5, "m") is None
            with db:
                assert isinstance(VectorCache().searchable(db, 5, "m", stores["dim"]), WorkspaceVectors)
        assert sum("no HNSW index for workspace 5" in r.getMessage() for r in caplog.records) == 1
    finally:
        conn.execute(f'DROP SCHEMA "{name}" CASCADE')
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")
        conn.close()


def test_a_document_still_waiting_for_a_vector_is_left_out_of_the_index_search(stores):
    """The nearest chunks belong to a document one chunk of which has no vector: the pgvector
    search skips that document, as the in-memory index (which holds complete documents only)."""
    from autodoc.search.semantic import store_side
    from autodoc.search.semantic.vector_cache import VectorCache
    from autodoc.store import vectors as stored

    ws, fp, dim, db = stores["ws"], stores["fp"], stores["dim"], stores["pgvector"]
    doc, first = db.execute(
        "SELECT document_id, min(id) FROM chunks GROUP BY document_id HAVING count(*) > 3 ORDER BY 1 LIMIT 1"
    ).fetchone()
    (f32,) = db.execute(
        "SELECT v.f32 FROM chunks c JOIN vectors v ON v.text_hash = c.text_hash AND v.model_fp = ? WHERE c.id = ?",
        (fp, first),
    ).fetchone()
    q = np.frombuffer(bytes(f32), dtype="<f4").copy()
    vectors = VectorCache().searchable(db, ws, fp, dim)
    with db:
        before = vectors.search(q, 10, None)
    assert before[0][0] == first
    with pytest.raises(LookupError), db:  # rolled back by the raise
        db.execute(
            "DELETE FROM vectors WHERE model_fp = ? AND text_hash = "
            "(SELECT text_hash FROM chunks WHERE document_id = ? ORDER BY id DESC LIMIT 1)",
            (fp, doc),
        )
        rows = [(cid, f, b) for cid, _, f, b in stored.complete_vectors(db, ws, fp, None)]
        want = store_side.rescore(rows, q, 10, dim)
        hits = vectors.search(q, 10, None)
        assert hits == want and len(vectors) == 0  # the store's index, on this transaction: nothing held here
        assert not {cid for cid, _ in hits} & {
            cid for (cid,) in db.execute("SELECT id FROM chunks WHERE document_id = ?", (doc,))
        }
        raise LookupError
