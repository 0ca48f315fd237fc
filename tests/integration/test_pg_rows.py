"""The same folders indexed into SQLite and into PostgreSQL hold the same rows (issue 34): the real
index job, link resolver, facets, sessions and change log writing through the portable row modules
(store/*.py) on both backends, then an edit, a rename, a delete and a session on both. Rows are
compared by content (a document by its path, a chunk by its document's path and ordinal), and the
read side (documents, links, backlinks, problems, status, tags, names, sessions, the change feed) by
the Service's answers. Lexical ranking equivalence is test_pg_lexical's; vectors' are P4's tests.

Corpora: ../shared/data/corpora/foam-docs (86 real Markdown files) and tests/corpora/kb-schema (a
frontmatter schema, typed facets, supersedes links)."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from helpers.pg import missing_reason

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora"
FOAM = SHARED / "foam-docs"
KB_SCHEMA = Path(__file__).parents[1] / "corpora" / "kb-schema"
NO_MODEL = {"embedding": {"provider": "none"}}

# each table's columns compared (not ids, clocks; not documents' ctime_ns and inode: a file changed
# < 2 s before its index leaves them unknown, index/job.py RACY_NS, so they depend on when each store
# indexed it) and which of them name a row by id: replaced by what that row is
TABLES = {
    "documents": ("workspace_id path generation content_hash size mtime_ns title status tags aliases frontmatter "
                  "supersedes superseded_by problems line_count content schema_problems", "workspace_id"),
    "chunks": ("document_id workspace_id generation ordinal kind breadcrumb text byte_start byte_end line_start "
               "line_end text_hash tokens", "document_id workspace_id"),
    "facets": ("document_id workspace_id field value num date", "document_id workspace_id"),
    "links": ("source_id workspace_id target kind line label anchor target_path", "source_id workspace_id"),
    "skipped": ("workspace_id path reason", "workspace_id"),
    "changes": ("cursor workspace path op generation old_path", ""),
    "session_events": ("document_id event_id ordinal kind time byte_start byte_end line_start line_end chunk_key",
                       "document_id"),
    "schemas": ("workspace_id hash schema problems", "workspace_id"),
}  # fmt: skip


def snapshot_rows(store) -> dict[str, list[tuple]]:
    """The store's rows by content, each table's sorted."""
    with store.read() as db:
        ws = dict(db.execute("SELECT id, name FROM workspaces").fetchall())
        docs = {i: (ws[w], p) for i, w, p in db.execute("SELECT id, workspace_id, path FROM documents")}
        names = {"workspace_id": ws, "document_id": docs, "source_id": docs}
        out: dict[str, list[tuple]] = {
            "workspaces": sorted(
                (n, r, json.loads(c)).__repr__() for n, r, c in db.execute("SELECT name, root, config FROM workspaces")
            ),
            "meta": sorted(
                (k, v)
                for k, v in db.execute("SELECT key, value FROM meta")
                if k == "generation" or k.startswith("chunking:")
            ),
        }
        for table, (columns, refs) in TABLES.items():
            cols = columns.split()
            rows = []
            for r in db.execute(f"SELECT {', '.join(cols)} FROM {table}"):
                rows.append(tuple(names[c][v] if c in refs.split() else v for c, v in zip(cols, r)))
            out[table] = sorted(rows, key=repr)
    return out


def answers(svc) -> dict[str, object]:
    """What the read side answers about the indexed folders (everything that reads rows by SQL of
    store/reads.py, links.py, sessions.py, changes.py, workspaces.py)."""
    out: dict[str, object] = {}
    for ws in ("foam", "kb"):
        status = svc.workspace_status(ws)
        for volatile in ("store", "seconds", "last_indexed", "indexed_at"):
            status.pop(volatile, None)
        out[f"{ws}.status"] = _strip(status)
        out[f"{ws}.problems"] = svc.document_problems(ws)
        out[f"{ws}.tags"] = svc.workspace_tags(ws)
        out[f"{ws}.changes"] = _strip(svc.changes_since(ws, 0))
        out[f"{ws}.sessions"] = _strip(svc.session_list(ws))
        for name in ("read", "link", "adr", "zzz-nothing"):
            out[f"{ws}.find.{name}"] = svc.document_find(ws, name, 20)
    # facet-only queries: the filters, the listing of documents with and without chunks, the counts
    for ws, query, opts in (
        ("kb", "type:adr", {"facet_counts": ["status", "type", "tags"]}),
        ("kb", "type:adr status:deprecated", {}),
        ("kb", "date:>=2024-06-01 -status:deprecated", {"facet_counts": ["type"]}),
        ("kb", "tag:storage", {"limit": 50}),
        ("foam", "", {"paths": ["user/features"], "limit": 200, "facet_counts": ["tags"]}),
        ("foam", "", {"limit": 5, "after": "user/features/graph-view.md"}),
    ):
        out[f"{ws}.search {query!r} {opts}"] = _strip(svc.search(ws, query, opts))
    for path in ("index.md", "user/getting-started/navigation.md", "user/features/link-reference-definitions.md"):
        if (FOAM / "docs" / path).exists():
            out[f"read {path}"] = svc.document_read("foam", path)
            out[f"links {path}"] = svc.document_links("foam", path)
            out[f"backlinks {path}"] = svc.document_backlinks("foam", path)
    return out


def _strip(value):
    """An answer without its clock readings."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in ("time", "seconds", "first_time", "last_time")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


@pytest.fixture(scope="module")
def both(pg_uri, tmp_path_factory):
    """A SQLite Service and a PostgreSQL Service over the same two folders (copies), indexed, then
    edited (a modified file, a renamed one, a deleted one, a session) and indexed again."""
    import psycopg

    from autodoc.config import Settings
    from autodoc.service import Service

    base = tmp_path_factory.mktemp("pgrows")
    foam = base / "foam"
    shutil.copytree(FOAM / "docs", foam)
    (foam / "export.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00 a picture saved as .md")  # skipped: binary
    kb = base / "kb"
    shutil.copytree(KB_SCHEMA, kb)
    schema = f"t_{uuid.uuid4().hex[:10]}"
    target = f"{pg_uri}{'&' if '?' in pg_uri else '?'}options={quote(f'-csearch_path={schema}')}"
    services = [Service(Settings.from_env(store=base / "s.db")), Service(Settings.from_env(store=target))]
    try:
        for svc in services:
            svc.workspace_add("foam", str(foam), NO_MODEL)
            svc.workspace_add("kb", str(kb), NO_MODEL)
        first = [{n: svc.index(n) for n in ("foam", "kb")} for svc in services]
        rows_first = [snapshot_rows(svc.store) for svc in services]
        # the same edits, seen by both
        nav = foam / "user" / "getting-started" / "navigation.md"
        nav.write_text(nav.read_text() + "\n\n## Added\n\nA new section that links to [[index]].\n")
        moved = sorted(foam.rglob("*.md"))[5]
        moved.rename(moved.with_name("moved-" + moved.name))
        sorted(foam.rglob("*.md"))[-1].unlink()
        events = [
            {"id": "1", "kind": "message", "text": "how are wikilinks resolved in foam?"},
            {"id": "2", "kind": "response", "text": "By title, alias or file stem: see the docs."},
        ]
        second = []
        for svc in services:
            second.append({n: svc.index(n) for n in ("foam", "kb")})
            svc.session_append("foam", "s1", events, title="wikilinks")
        yield {
            "services": services,
            "first": first,
            "rows_first": rows_first,
            "second": second,
            "rows": [snapshot_rows(svc.store) for svc in services],
            "answers": [answers(svc) for svc in services],
        }
    finally:
        for svc in services:
            svc.close()
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _report(rep: dict) -> dict:
    return {k: v for k, v in rep.items() if k not in ("seconds",)}


def test_the_index_job_reports_the_same_on_both(both):
    sqlite, pg = both["first"]
    assert sqlite["foam"]["added"] >= 80  # the real corpus was indexed, not an empty folder
    assert {n: _report(r) for n, r in sqlite.items()} == {n: _report(r) for n, r in pg.items()}
    sqlite, pg = both["second"]
    assert sqlite["foam"]["modified"] == 1 and sqlite["foam"]["renamed"] == 1 and sqlite["foam"]["deleted"] == 1
    assert {n: _report(r) for n, r in sqlite.items()} == {n: _report(r) for n, r in pg.items()}


@pytest.mark.parametrize(
    "table",
    ["workspaces", "documents", "chunks", "facets", "links", "skipped", "changes", "session_events", "schemas", "meta"],
)
def test_every_table_holds_the_same_rows(both, table):
    assert both["rows"][0][table], f"{table}: no rows to compare"  # every table is exercised
    for sqlite, pg in (both["rows_first"], both["rows"]):
        assert sqlite[table] == pg[table], _diff(sqlite[table], pg[table])


def _diff(a: list[tuple], b: list[tuple]) -> str:
    """The rows only one side has, each cut short: what a failure shows."""
    only_a = [r for r in a if r not in b][:3]
    only_b = [r for r in b if r not in a][:3]
    cut = lambda rows: [tuple(str(v)[:60] for v in r) for r in rows]  # noqa: E731
    return f"only in SQLite: {cut(only_a)}\nonly in Postgres: {cut(only_b)}"


def test_the_read_side_answers_the_same(both):
    sqlite, pg = both["answers"]
    assert sqlite.keys() == pg.keys()
    searches = [k for k in sqlite if ".search " in k]
    assert len(searches) == 6 and all(sqlite[k]["hits"] for k in searches)  # type: ignore[index]
    assert sqlite["kb.search 'type:adr' {'facet_counts': ['status', 'type', 'tags']}"]["facet_counts"]["status"]  # type: ignore[index]
    for key in sqlite:
        assert sqlite[key] == pg[key], key


def test_removing_a_workspace_leaves_the_same_rows(both):
    """Last in this module (it removes `kb` from both stores): every row of the workspace goes, on both."""
    sqlite, pg = both["services"]
    assert sqlite.workspace_remove("kb") == pg.workspace_remove("kb")
    rows = [snapshot_rows(svc.store) for svc in (sqlite, pg)]
    for table in TABLES:
        assert rows[0][table] == rows[1][table], _diff(rows[0][table], rows[1][table])
        of_kb = [r for r in rows[1][table] if "kb" in (r[0], r[0][0] if isinstance(r[0], tuple) else None)]
        assert table == "changes" or not of_kb, table  # the change log keeps its history
    with pg.store.read() as db:
        assert db.execute(
            "SELECT COUNT(*) FROM chunks WHERE workspace_id NOT IN (SELECT id FROM workspaces)"
        ).fetchone() == (0,)
