"""Issue 35: with one passage per document (MCP's default), a table of contents beat the section
that answers ("Contents", confidence 0.9999, over the real section). Real files: three Swift
Evolution proposals from ../shared/data/corpora (copied out of it into a temp folder, so that the
workspace holds only them), indexed and embedded with the bundled model, searched with the
default stages."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autodoc.search import choice, engine

PROPOSALS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora" / "swift-evolution" / "proposals"
# six proposals about actors: among them the words of 0316's headings are rare enough that its
# table of contents, which holds them all, ranks first in both legs
FILES = [
    "0316-global-actors.md",
    "0306-actors.md",
    "0296-async-await.md",
    "0313-actor-isolation-control.md",
    "0311-task-locals.md",
    "0392-custom-actor-executors.md",
]

pytestmark = [
    pytest.mark.skipif(not PROPOSALS.is_dir(), reason=f"no corpus at {PROPOSALS}"),
    pytest.mark.slow,  # embedding six proposals with the bundled model: ~40 s here
]


@pytest.fixture(scope="module")
def swift(tmp_path_factory):
    from autodoc.config import Settings
    from autodoc.service import Service

    root = tmp_path_factory.mktemp("swift") / "proposals"
    root.mkdir()
    for name in FILES:
        shutil.copy(PROPOSALS / name, root / name)
    s = Service(Settings.from_env(store=root.parent / "s.db"))
    s.workspace_add("se", str(root), {"embedding": {"provider": "onnx"}})
    s.index("se", embed=True)
    yield s
    s.close()


def _is_contents(hit: dict) -> bool:
    return hit["breadcrumb"].endswith("Table of Contents") or "Table of Contents" in hit.get("section", "")


@pytest.mark.parametrize(
    "query,section",
    [("global actor function types", "Global actor function types")],
)
def test_the_section_stands_for_its_document_not_its_table_of_contents(swift, query, section):
    full = swift.search("se", query, {"limit": 10})
    assert full["mode_used"] == "hybrid" and full["semantic"] == "ready"
    first = next(h for h in full["hits"] if h["path"] == "0316-global-actors.md")
    assert first["breadcrumb"].endswith(section), first["breadcrumb"]
    compact = swift.search("se", query, {"answer": "compact", "limit": 3, "budget_tokens": 32000})
    top = next(h for h in compact["hits"] if h["path"] == "0316-global-actors.md")
    assert top["section"].endswith(section) and top["text"].lstrip("#").lstrip().startswith(section)


def test_which_documents_are_found_does_not_change(swift, monkeypatch):
    """Passages change places within their document only: the order of documents, and the scores
    shown in order, are fusion's."""
    query = "global actor function types"
    after = swift.search("se", query, {"limit": 20})
    monkeypatch.setattr(choice, "NAV_KEEP", 1.0)  # no discount: fusion's own order,
    monkeypatch.setattr(engine, "_lead_document", lambda ctx, plan, legs, fused, doc_of: (fused, []))  # nor whole
    before = swift.search("se", query, {"limit": 20})
    assert [h["path"] for h in after["hits"]] == [h["path"] for h in before["hits"]]
    assert [h["score"] for h in after["hits"]] == [h["score"] for h in before["hits"]]
    assert _is_contents(before["hits"][0]) and not _is_contents(after["hits"][0])
