"""Ordered schema migrations, applied under PRAGMA user_version in one transaction.

Each migration is a named function; the list index + 1 is the version it
produces. A store written by a newer AutoDoc (user_version beyond the list) is
refused rather than guessed at.

Runs on: the writer, when the store is opened.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import apsw

from ..errors import StoreTooNew
from .sql import scalar


def _m001_initial(db: apsw.Connection) -> None:
    db.execute(
        """
        CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE workspaces(
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            root TEXT NOT NULL,
            config TEXT NOT NULL,
            created REAL NOT NULL
        );
        CREATE TABLE documents(
            id INTEGER PRIMARY KEY,
            workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            generation INTEGER NOT NULL,
            content_hash TEXT NOT NULL,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            title TEXT NOT NULL,
            status TEXT,
            tags TEXT NOT NULL,
            aliases TEXT NOT NULL,
            frontmatter TEXT NOT NULL,
            supersedes TEXT NOT NULL,
            superseded_by TEXT NOT NULL,
            problems TEXT NOT NULL,
            line_count INTEGER NOT NULL,
            content BLOB NOT NULL,
            indexed_at REAL NOT NULL,
            UNIQUE(workspace_id, path)
        );
        CREATE TABLE chunks(
            id INTEGER PRIMARY KEY,
            document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            workspace_id INTEGER NOT NULL,
            generation INTEGER NOT NULL,
            ordinal INTEGER NOT NULL,
            kind TEXT NOT NULL,
            breadcrumb TEXT NOT NULL,
            text TEXT NOT NULL,
            byte_start INTEGER NOT NULL,
            byte_end INTEGER NOT NULL,
            line_start INTEGER NOT NULL,
            line_end INTEGER NOT NULL,
            text_hash TEXT NOT NULL,
            tokens INTEGER NOT NULL
        );
        CREATE INDEX chunks_by_document ON chunks(document_id, ordinal);
        CREATE INDEX chunks_by_hash ON chunks(workspace_id, text_hash);
        CREATE VIRTUAL TABLE chunks_fts USING fts5(
            title, breadcrumb, meta, body,
            content='', contentless_delete=1,
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TABLE facets(
            document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            workspace_id INTEGER NOT NULL,
            field TEXT NOT NULL,
            value TEXT NOT NULL
        );
        CREATE INDEX facets_by_value ON facets(workspace_id, field, value);
        CREATE INDEX facets_by_document ON facets(document_id);
        CREATE TABLE links(
            source_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            workspace_id INTEGER NOT NULL,
            target TEXT NOT NULL,
            kind TEXT NOT NULL,
            line INTEGER NOT NULL,
            label TEXT NOT NULL,
            anchor TEXT NOT NULL,
            target_path TEXT
        );
        CREATE INDEX links_by_source ON links(source_id);
        CREATE INDEX links_by_target ON links(workspace_id, target_path);
        CREATE TABLE skipped(
            workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            reason TEXT NOT NULL,
            PRIMARY KEY(workspace_id, path)
        ) WITHOUT ROWID;
        CREATE TABLE changes(
            cursor INTEGER PRIMARY KEY AUTOINCREMENT,
            workspace TEXT NOT NULL,
            path TEXT NOT NULL,
            op TEXT NOT NULL,
            generation INTEGER NOT NULL,
            old_path TEXT,
            time REAL NOT NULL
        );
        CREATE INDEX changes_by_time ON changes(time);
        CREATE TABLE vectors(
            workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
            model_fp TEXT NOT NULL,
            text_hash TEXT NOT NULL,
            f32 BLOB NOT NULL,
            bits BLOB NOT NULL,
            PRIMARY KEY(workspace_id, model_fp, text_hash)
        ) WITHOUT ROWID;
        CREATE TABLE embed_state(
            workspace_id INTEGER PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
            active_fp TEXT,
            active_config TEXT,
            active_name TEXT
        );
        INSERT INTO meta(key, value) VALUES ('generation', '0'), ('changes_trimmed_through', '0');
        """
    )


def _m002_typed_facets(db: apsw.Connection) -> None:
    """Typed facets (num, ISO date beside the text value), schema violations
    per document, and each workspace's frontmatter schema as last applied.
    Rows written before this have no num/date: the next index run re-derives
    every document's facets because no schema state is recorded yet."""
    db.execute(
        """
        ALTER TABLE facets ADD COLUMN num REAL;
        ALTER TABLE facets ADD COLUMN date TEXT;
        CREATE INDEX facets_by_num ON facets(workspace_id, field, num) WHERE num IS NOT NULL;
        CREATE INDEX facets_by_date ON facets(workspace_id, field, date) WHERE date IS NOT NULL;
        ALTER TABLE documents ADD COLUMN schema_problems TEXT NOT NULL DEFAULT '[]';
        CREATE TABLE schemas(
            workspace_id INTEGER PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
            hash TEXT NOT NULL,
            schema TEXT,
            problems TEXT NOT NULL,
            loaded REAL NOT NULL
        );
        """
    )


def _m003_vector_keys(db: apsw.Connection) -> None:
    """A narrow index of which (workspace, model, text) have a vector. "Does
    this chunk have a vector?" walked the vectors table itself, whose leaves
    hold 1.5 KB of floats a row: counting coverage at 1M chunks took 11 s
    (every index job's report, the embed queue's scan); through this index,
    16x less at 100k. Queries name it (INDEXED BY): the planner prefers the
    primary key, which has the same columns."""
    db.execute("CREATE INDEX vectors_keys ON vectors(workspace_id, model_fp, text_hash)")


def _m004_session_events(db: apsw.Connection) -> None:
    """Sessions (session.append): a session is a document at the reserved path
    `.session/<id>` (a hidden path, which the scanner never yields), its text
    the conversation rendered as Markdown; this table says which byte span of
    it each event's text is, so a hit's chunk names its event, and what its
    chunks were cut from (chunk_key), so an append re-cuts only the events it changed."""
    db.execute(
        """
        CREATE TABLE session_events(
            document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            event_id TEXT NOT NULL,
            ordinal INTEGER NOT NULL,
            kind TEXT NOT NULL,
            time TEXT,
            byte_start INTEGER NOT NULL,
            byte_end INTEGER NOT NULL,
            line_start INTEGER NOT NULL,
            line_end INTEGER NOT NULL,
            chunk_key TEXT NOT NULL,
            PRIMARY KEY(document_id, event_id)
        ) WITHOUT ROWID;
        CREATE INDEX session_events_by_span ON session_events(document_id, byte_start);
        """
    )


# The postings tables as migration 5 created them (the SQL text SQLite keeps in sqlite_master).
_POSTINGS_V5 = """
CREATE TABLE postings(id INTEGER PRIMARY KEY, term TEXT NOT NULL, seg INTEGER NOT NULL, wide INTEGER NOT NULL,
                      data BLOB NOT NULL);
CREATE UNIQUE INDEX postings_by_term ON postings(term, seg);
CREATE INDEX postings_by_seg ON postings(seg);
CREATE TABLE postings_delta(term TEXT NOT NULL, chunk INTEGER NOT NULL, d INTEGER NOT NULL, t0 INTEGER NOT NULL,
                            t1 INTEGER NOT NULL, t2 INTEGER NOT NULL, t3 INTEGER NOT NULL,
                            PRIMARY KEY(term, chunk)) WITHOUT ROWID;
CREATE INDEX postings_delta_by_chunk ON postings_delta(chunk);
CREATE TABLE postings_dead(chunk INTEGER PRIMARY KEY);
"""


def _m005_postings(db: apsw.Connection) -> None:
    """A postings index beside chunks_fts (store/lexical/postings.py), which ranks an OR of words by
    FTS5's bm25 in numpy (search/lexical/impact.py). A store that already holds chunks builds it a slice
    per index job, FTS5 serving until it is complete; creating the tables is instant at any size.
    Frozen as it ran at version 5 (postings.create of 2284c00): editing postings.py changes no old migration."""
    db.execute(_POSTINGS_V5)
    # an empty store is complete at once ('complete'); a filled one builds from chunk id 0
    empty = scalar(db, "SELECT NOT EXISTS (SELECT 1 FROM chunks)")
    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('postings_built', ?)", ("complete" if empty else "0",))


# Every value a workspace saved without its user choosing it, up to schema 6: each option's default
# then, and the fusion defaults of each version (RRF k 60, then k 20 / 0.8, then k 10 / 0.6).
_SAVED_DEFAULTS: dict[str, list] = {
    "section_tokens": [350],
    "abstract_chunk": [True],
    "demote_superseded": [True],
    "max_file_bytes": [2 * 1024 * 1024],
    "embedding": [{"provider": "onnx"}],
    "ranker": [{"provider": "none"}],
    "fusion": [
        {"method": "rrf", "k": 60},
        {"method": "rrf", "k": 20, "weights": {"lexical": 1.0, "semantic": 0.8}},
        {"method": "rrf", "k": 10, "weights": {"lexical": 1.0, "semantic": 0.6}},
    ],
}


def _m006_chosen_options(db: apsw.Connection) -> None:
    """A workspace stores only the options its user set (config/workspace.py), so defaults that
    improve reach it. Before, it saved every option: the values that were then the defaults are
    dropped (one the user set to the default of the day is dropped too, and follows the default)."""
    for wid, text in db.execute("SELECT id, config FROM workspaces").fetchall():
        config = json.loads(str(text))
        kept = {k: v for k, v in config.items() if v not in _SAVED_DEFAULTS.get(k, [])}
        if kept != config:
            db.execute("UPDATE workspaces SET config=? WHERE id=?", (json.dumps(kept), wid))


def _m007_file_signal(db: apsw.Connection) -> None:
    """A file's change signal is size + mtime + ctime + inode (index/job.py): a same-size rewrite that
    puts the old mtime back (cp -p, touch -r) changes its ctime, a rename-over (rsync -t) its inode.
    NULL is "not known" (every row until its next read, a session, a stat taken too close to a
    write to trust): that file is compared by content next time."""
    have = {row[1] for row in db.execute("PRAGMA table_info(documents)")}  # a store rewound to an older version
    for column in ("ctime_ns", "inode"):
        if column not in have:
            db.execute(f"ALTER TABLE documents ADD COLUMN {column} INTEGER")


def _m008_path_words(db: apsw.Connection) -> None:
    """A document's path words are in its FTS rows' meta column (store/lexical/ftstext.path_words):
    the postings are built again from chunk id 0, and the build rewrites each FTS row whose column
    sizes differ from the store's text (postings.build_slice), so the rows gain their path words a
    slice per index job, FTS5 serving until then. Instant at any size (three deletes)."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE name='postings_delta'").fetchone() is None:
        return  # no postings tables (a store rewound past 5): nothing to rebuild from
    db.execute("DELETE FROM postings")
    db.execute("DELETE FROM postings_delta")
    db.execute("DELETE FROM postings_dead")
    empty = scalar(db, "SELECT NOT EXISTS (SELECT 1 FROM chunks)")
    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('postings_built', ?)", ("complete" if empty else "0",))
    db.execute(  # readers' caches of the postings are keyed by it (postread.cache_key)
        "INSERT INTO meta(key, value) VALUES ('postings_gen', '1') "
        "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
    )


MIGRATIONS: list[Callable[[apsw.Connection], None]] = [
    _m001_initial,
    _m002_typed_facets,
    _m003_vector_keys,
    _m004_session_events,
    _m005_postings,
    _m006_chosen_options,
    _m007_file_signal,
    _m008_path_words,
]


def schema_version(db: apsw.Connection) -> int:
    return scalar(db, "PRAGMA user_version")


def migrate(db: apsw.Connection) -> int:
    """Bring the schema up to date; return the version. Refuse a newer store."""
    target = len(MIGRATIONS)
    with db:
        current = schema_version(db)
        if current > target:
            raise StoreTooNew(
                f"the store's schema is version {current}, newer than this AutoDoc understands ({target}); "
                "upgrade AutoDoc or point --store at another file"
            )
        for version in range(current, target):
            MIGRATIONS[version](db)
            db.execute(f"PRAGMA user_version = {version + 1}")
    return target
