"""Issue 35, "findable by name and through typos", on a real store of real files copied from
../shared/data/corpora (decision records, the OpenTelemetry Collector docs, Swift proposals):

- a file's name and its folders are searchable words (`ADR-45-entities-v4.md` is found by
  "entities v4"; a record whose title says "Front-end" but whose file is `…-backend-testing.md`
  by "backend testing"), and a store written before (schema 7) upgrades to them;
- words that match nothing are corrected against the index's vocabulary ("opentelemtry
  colector", "deboucing"), the answer saying so (`lexical_match: "fuzzy"`, `corrections`),
  checked against search.query's result schema.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autodoc.config import Settings
from autodoc.rpc import schemas
from autodoc.service import Service
from autodoc.store.lexical import ftstext

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora"
ADR = CORPORA / "simpler-grants-adr" / "documentation" / "wiki" / "product" / "decisions" / "adr"
OTEL = CORPORA / "opentelemetry-docs" / "content" / "en" / "docs"
SWIFT = CORPORA / "swift-evolution" / "proposals"
pytestmark = pytest.mark.skipif(not CORPORA.is_dir(), reason=f"no corpora at {CORPORA}")
NO_MODEL = {"embedding": {"provider": "none"}}
ENTITIES = "adr/ADR-45-entities-v4.md"
BACKEND = "adr/2023-07-19-backend-testing.md"  # its title is "Front-end Testing & Coverage" (sic)
DEBOUNCE = "swift/0329-clock-instant-duration.md"  # the one proposal with "debouncing"


def _tree(root: Path) -> Path:
    shutil.copytree(ADR, root / "adr")
    # a record named as the issue's: a real record's text under a name its text does not hold
    shutil.copy(ADR / "2024-10-02-search-engine.md", root / ENTITIES)
    (root / "otel" / "collector").mkdir(parents=True)
    for p in OTEL.joinpath("collector").glob("*.md"):
        shutil.copy(p, root / "otel" / "collector" / p.name)
    shutil.copytree(OTEL / "concepts", root / "otel" / "concepts")
    (root / "swift").mkdir()
    for p in sorted(SWIFT.glob("03[0-4]*.md")):
        shutil.copy(p, root / "swift" / p.name)
    return root


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    base = tmp_path_factory.mktemp("names")
    s = Service(Settings.from_env(store=base / "s.db"))
    s.workspace_add("kb", str(_tree(base / "kb")), NO_MODEL)
    s.index("kb")
    yield s
    s.close()


def _search(svc, query: str, **opts) -> dict:
    a = svc.search("kb", query, {"mode": "lexical", **opts})
    assert schemas.result_errors("search.query", a) == []
    return a


def test_path_words_split_on_separators_and_case_without_extensions_or_numbers():
    assert ftstext.path_words("adr/ADR-45-entities-v4.md").split() == ["adr", "entities", "v4"]
    assert ftstext.path_words("docs/2023-07-19-backend_testing.html.md.erb").split() == ["docs", "backend", "testing"]
    assert ftstext.path_words("src/getUserName.md").split() == ["src", "getUserName", "get", "User", "Name"]
    assert ftstext.path_words("12345.md") == ""  # SciFact's files: nothing
    assert ftstext.path_words(".session/abc-123") == ""  # a session has no file name


def test_a_file_is_found_by_the_words_of_its_name(svc):
    a = _search(svc, "entities v4")
    assert a["hits"] and a["hits"][0]["path"] == ENTITIES
    assert a["lexical_match"] == "all"


def test_a_file_name_word_its_text_lacks_ranks_it_first(svc):
    a = _search(svc, "backend testing")
    assert a["hits"][0]["path"] == BACKEND, [h["path"] for h in a["hits"][:5]]


def test_the_title_outweighs_the_file_name_in_the_hybrid_weights(svc):
    from autodoc.store.lexical.matches import BM25_WEIGHTS

    assert BM25_WEIGHTS[2] < BM25_WEIGHTS[0]  # meta (aliases, tags, path words) below the title


@pytest.mark.parametrize("answer", ["full", "compact"])
def test_misspelt_words_are_corrected_and_the_answer_says_so(svc, answer):
    a = _search(svc, "opentelemtry colector", answer=answer)
    assert a["lexical_match"] == "fuzzy"
    assert a["corrections"] == {"opentelemtry": "opentelemetry", "colector": "collector"}
    right = _search(svc, "opentelemetry collector", answer=answer)
    assert right["lexical_match"] == "all" and "corrections" not in right

    def where(hits):
        return [(h["path"], h["confidence"]) for h in hits]  # (a compact passage is cut to the budget left)

    assert a["hits"] and where(a["hits"]) == where(right["hits"])  # the same answer as the words spelt right
    assert "otel/collector/" in (a["hits"][0].get("path") or a["hits"][0]["ref"])
    assert a["query"] == "opentelemtry colector"


def test_one_misspelt_word_finds_the_one_document_that_holds_it(svc):
    a = _search(svc, "deboucing")
    assert a["lexical_match"] == "fuzzy" and a["corrections"] == {"deboucing": "debounce"}  # the word its text holds
    assert a["hits"][0]["path"] == DEBOUNCE


def test_a_misspelt_word_whose_stem_is_far_is_corrected_by_its_root(svc):
    # "deplyment": its stem keeps "-ment" (Porter strips it only after two syllables), three edits
    # from "deploy", the stem of "deployment": it was searched as is, and matched nothing
    a = _search(svc, "deplyment strategy")
    assert a["lexical_match"] == "fuzzy" and a["corrections"] == {"deplyment": "deployment"}, a.get("corrections")
    assert a["hits"][0]["path"] == "adr/2023-07-20-deployment-strategy.md"


def test_a_known_word_beside_a_misspelt_one_is_kept(svc):
    a = _search(svc, "deboucing clock")
    assert a["corrections"] == {"deboucing": "debounce"}  # the word its text holds
    assert a["hits"][0]["path"] == DEBOUNCE


def test_words_that_match_are_never_corrected(svc):
    a = _search(svc, "collector configuration")
    assert a["lexical_match"] == "all" and "corrections" not in a


def test_a_word_with_nothing_near_it_stays_unmatched(svc):
    a = _search(svc, "qzxvjkw")
    assert a["hits"] == [] and "corrections" not in a


def test_a_store_written_before_path_words_upgrades(tmp_path, monkeypatch):
    """A schema-7 store (its FTS rows and postings without path words) finds files by name once
    opened by this version: the migration rebuilds the postings, which rewrites the FTS rows."""
    root = _tree(tmp_path / "kb")
    db_path = tmp_path / "old.db"
    with monkeypatch.context() as m:
        m.setattr(ftstext, "path_words", lambda path: "")
        s = Service(Settings.from_env(store=db_path))
        s.workspace_add("kb", str(root), NO_MODEL)
        s.index("kb")
        old = s.search("kb", "entities v4", {"mode": "lexical"})
        assert old["lexical_match"] == "any"  # no chunk held both words
        with s.store.write() as db:
            db.execute("PRAGMA user_version = 7")
        s.close()
    s = Service(Settings.from_env(store=db_path))
    try:
        # migrated, the postings not yet rebuilt: the fallback reads FTS5's own vocabulary
        assert s.store.reader().execute("SELECT value FROM meta WHERE key='postings_built'").fetchone()[0] == "0"
        a = s.search("kb", "deboucing", {"mode": "lexical"})
        assert a["corrections"] == {"deboucing": "debounce"} and a["hits"][0]["path"] == DEBOUNCE
        s.index("kb")  # an index job builds the postings in slices (a small store: all of it)
        a = s.search("kb", "entities v4", {"mode": "lexical"})
        assert a["lexical_match"] == "all" and a["hits"][0]["path"] == ENTITIES
    finally:
        s.close()


def test_the_cli_says_which_words_it_searched(svc):
    from autodoc.cliout import status_line

    a = _search(svc, "deboucing")
    assert "searched deboucing → debounce" in status_line(a, len(a["hits"]))


def test_a_moved_file_is_found_by_its_new_name_only(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    for p in sorted(ADR.glob("2023-07-*.md")):
        shutil.copy(p, root / p.name)
    shutil.copy(ADR / "2024-10-02-search-engine.md", root / "ADR-45-entities-v4.md")
    s = Service(Settings.from_env(store=tmp_path / "s.db"))
    try:
        s.workspace_add("kb", str(root), NO_MODEL)
        s.index("kb")
        assert s.search("kb", "entities v4", {"mode": "lexical"})["lexical_match"] == "all"
        (root / "ADR-45-entities-v4.md").rename(root / "ADR-46-relations-v5.md")
        s.index("kb")
        a = s.search("kb", "relations v5", {"mode": "lexical"})
        assert a["lexical_match"] == "all" and a["hits"][0]["path"] == "ADR-46-relations-v5.md"
        assert s.search("kb", "entities v4", {"mode": "lexical"})["lexical_match"] != "all"
    finally:
        s.close()
