"""A workspace stores only the options its user set: a default it left alone follows the
defaults of the AutoDoc that runs it, so a better default reaches workspaces added before it.
(The benchmark stores had frozen the fusion of the day they were added, k 20 / 0.8, and kept
running it after the default moved to k 10 / 0.6.)"""

from __future__ import annotations

import json
from pathlib import Path

import apsw

from autodoc.config import Settings
from autodoc.config.defaults import RRF_K, RRF_WEIGHTS, SECTION_TOKENS
from autodoc.service import Service

NO_MODEL = {"embedding": {"provider": "none"}}


def _stored(store) -> dict[str, dict]:
    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {n: json.loads(c) for n, c in db.execute("SELECT name, config FROM workspaces")}
    finally:
        db.close()


def test_only_the_options_set_are_stored_and_the_rest_run_as_defaults(tmp_path):
    (tmp_path / "kb").mkdir()
    store = tmp_path / "s" / "autodoc.db"
    svc = Service(Settings.from_env(store=store))
    try:
        added = svc.workspace_add("kb", str(tmp_path / "kb"), NO_MODEL)
        assert added["config"]["fusion"] == {"method": "rrf", "k": RRF_K, "weights": RRF_WEIGHTS}
        assert added["config"]["section_tokens"] == SECTION_TOKENS
        assert _stored(store)["kb"] == NO_MODEL

        svc.workspace_configure("kb", {"fusion": {"method": "rrf", "k": 30}})
        assert _stored(store)["kb"] == {**NO_MODEL, "fusion": {"method": "rrf", "k": 30}}
        shown = svc.workspace_list()["workspaces"][0]["config"]
        assert shown["fusion"] == {"method": "rrf", "k": 30} and shown["section_tokens"] == SECTION_TOKENS
    finally:
        svc.close()


def test_a_store_that_saved_every_option_keeps_only_the_chosen_ones(tmp_path):
    """Schema 5 and earlier saved every option; the migration drops the values that were defaults
    then (k 20 / 0.8 among them), so those workspaces run today's defaults, and keeps the rest."""
    for name in ("old", "mine"):
        (tmp_path / name).mkdir()
    store = tmp_path / "s" / "autodoc.db"
    svc = Service(Settings.from_env(store=store))
    svc.workspace_add("old", str(tmp_path / "old"), NO_MODEL)
    svc.workspace_add("mine", str(tmp_path / "mine"), NO_MODEL)
    svc.close()
    saved = {
        "section_tokens": 350,
        "abstract_chunk": True,
        "demote_superseded": True,
        "max_file_bytes": 2 * 1024 * 1024,
        "embedding": {"provider": "none"},
        "ranker": {"provider": "none"},
        "fusion": {"method": "rrf", "k": 20, "weights": {"lexical": 1.0, "semantic": 0.8}},
    }
    mine = {**saved, "section_tokens": 200, "fusion": {"method": "rrf", "k": 30}}
    db = apsw.Connection(str(store))
    db.execute("UPDATE workspaces SET config=? WHERE name='old'", (json.dumps(saved),))
    db.execute("UPDATE workspaces SET config=? WHERE name='mine'", (json.dumps(mine),))
    db.execute("PRAGMA user_version = 5")
    db.close()
    svc = Service(Settings.from_env(store=store))
    try:
        assert _stored(store) == {
            "old": NO_MODEL,
            "mine": {**NO_MODEL, "section_tokens": 200, "fusion": {"method": "rrf", "k": 30}},
        }
        shown = {w["name"]: w["config"] for w in svc.workspace_list()["workspaces"]}
        assert shown["old"]["fusion"] == {"method": "rrf", "k": RRF_K, "weights": RRF_WEIGHTS}
        assert shown["mine"]["section_tokens"] == 200 and shown["mine"]["fusion"]["k"] == 30
    finally:
        svc.close()


def test_the_migrations_run_the_sql_of_their_day():
    """An old migration runs the SQL it ran at its version: it calls no live store module
    (migration 5 once called postings.create), so editing one never changes an old store's upgrade."""
    import ast

    from autodoc.store import migrations

    tree = ast.parse(Path(migrations.__file__).read_text(encoding="utf-8"))
    relative = {(n.level, n.module) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level}
    assert relative == {(2, "errors"), (1, "sql")}  # the error it raises, and the typed fetch helpers
