"""Issue 35: one passage a document (the MCP default) missed the answer when the legs disagreed on
which passage of the right document answers. Two real swift-evolution proposals
(../shared/data/corpora, copied to a temporary folder), indexed and embedded with the bundled model;
the questions are bench/answer_spans swift-05 and swift-08 (tune)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from autodoc.config import Settings
from autodoc.rpc import schemas
from autodoc.service import Service

SWIFT = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora" / "swift-evolution" / "proposals"
pytestmark = pytest.mark.skipif(not SWIFT.is_dir(), reason=f"no corpora at {SWIFT}")
TYPED_THROWS = "0413-typed-throws.md"
BODY_MACROS = "0415-function-body-macros.md"
TWO_ERRORS = (
    "Can a function declare that it throws one of two specific error types, say a file-system error or a network error?"
)
BODY_CHECKED = (
    "Why isn't the original body of a function that a body macro replaces type-checked before the macro expands?"
)


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    root = tmp_path_factory.mktemp("lead") / "swift"
    root.mkdir()
    for name in (TYPED_THROWS, BODY_MACROS):
        shutil.copy(SWIFT / name, root / name)
    s = Service(Settings.from_env(store=root.parent / "s.db"))
    s.workspace_add("swift", str(root))
    s.index("swift", embed=True)
    yield s
    s.close()


def _compact(svc: Service, query: str) -> dict:
    a = svc.search("swift", query, {"answer": "compact", "limit": 3, "budget_tokens": 32000})
    assert schemas.result_errors("search.query", a) == []
    confidences = [h["confidence"] for h in a["hits"]]
    assert confidences == sorted(confidences, reverse=True)  # still never rising down the list
    return a


def test_the_answer_the_embedding_ranks_first_is_shown_with_its_document(svc):
    a = _compact(svc, TWO_ERRORS)
    lead = [h for h in a["hits"] if h["path"] == TYPED_THROWS]
    assert a["hits"][0]["path"] == TYPED_THROWS and a["hits"][: len(lead)] == lead  # its passages together, first
    # the answer: "Alternatives considered › Multiple thrown error types", lines 1247-1263
    assert any(h["line_start"] <= 1263 and h["line_end"] >= 1249 for h in lead)
    assert len({h["path"] for h in a["hits"]}) == len(a["hits"]) - len(lead) + 1  # the others: one passage each


def test_every_passage_a_leg_ranks_at_the_top_follows_the_leading_one(svc):
    full = svc.search("swift", BODY_CHECKED, {"limit": 30, "per_document": False})
    top = full["hits"][0]["path"]
    assert top == BODY_MACROS
    wanted = {
        (h["line_start"], h["line_end"])
        for h in full["hits"]
        if h["path"] == top and any(r is not None and r < 3 for r in h["ranks"].values())
    }
    assert len(wanted) >= 2
    # the legs disagree: fused, a passage of another document sits between the leading one's
    first_other = next(i for i, h in enumerate(full["hits"]) if h["path"] != top)
    assert any((h["line_start"], h["line_end"]) in wanted for h in full["hits"][first_other:])
    lead = []
    for h in _compact(svc, BODY_CHECKED)["hits"]:
        if h["path"] != top:
            break
        lead.append((h["line_start"], h["line_end"]))
    assert wanted <= set(lead)  # and those the cap of three a document hid in this list (next test)


def test_the_leading_run_holds_no_table_of_contents(svc):
    """0415's "Table of contents" lists every heading the query names: BM25's second of all, fused
    second, right behind the leading passage; one passage a document shows what follows its first."""
    query = "preamble macros wrapper macros type checking composing"
    full = svc.search("swift", query, {"limit": 30, "per_document": False})
    words = svc.search("swift", query, {"limit": 3, "per_document": False, "stages": ["lexical"]})
    assert any(h["breadcrumb"].endswith("Table of contents") for h in words["hits"])  # BM25's top three
    # the leading document's shown passages (search/passages.py) come first, and it is not one of them
    lead = next(i for i, h in enumerate(full["hits"]) if h["path"] != full["hits"][0]["path"])
    assert lead >= 2 and not any(h["breadcrumb"].endswith("Table of contents") for h in full["hits"][:lead])
    a = _compact(svc, query)
    lead = [h for h in a["hits"] if h["path"] == a["hits"][0]["path"]]
    assert a["hits"][: len(lead)] == lead and not any(h["section"] == "Table of contents" for h in lead)


@pytest.fixture(scope="module")
def mcp(svc):
    """The MCP server's Backend on the fixture's store, in this process and read-only (as the
    bench drives it: bench/answers.py open_backend)."""
    from autodoc.connect import Backend as Link
    from autodoc.mcp.backend import Backend

    b = Backend(svc.settings)
    b.link = Link(b.settings, writer=False, name="test")
    yield b
    b.close()


def _tool_search(b, query: str, **extra) -> tuple[dict, str]:
    import anyio

    from autodoc.mcp.tools import call_tool

    async def go() -> tuple[dict, str]:
        return await call_tool(b, "search", {"query": query, "workspace": "swift", **extra})

    return anyio.run(go)


def test_the_search_tool_says_each_path_once(mcp):
    """The leading document's several passages each wrote its path again in the text the model
    reads (mcp/answers.py search_text); the structured hits keep each full ref to cite."""
    out, text = _tool_search(mcp, TWO_ERRORS)
    refs = [h["ref"] for h in out["hits"]]
    lead = [r for r in refs if r.startswith(f"swift:{TYPED_THROWS}#L")]
    assert len(lead) >= 2 and refs[: len(lead)] == lead
    assert text.count(f"swift:{TYPED_THROWS}") == 1  # said once, at its first passage
    for i, r in enumerate(lead[1:], 2):  # the others by their lines, pointing back to the first
        assert f"[{i}] same document as [1], #L{r.rsplit('#L', 1)[1]} · " in text
    assert out["tokens"] <= 800


def test_a_change_every_passage_shares_is_said_once(mcp, svc):
    """Every file of the answer changed on disk since indexed: said once, not after each passage."""
    out, _ = _tool_search(mcp, TWO_ERRORS)
    paths = {h["ref"].split(":", 1)[1].rsplit("#L", 1)[0] for h in out["hits"]}
    folder = Path(svc.settings.store).parent / "swift"  # the fixture's folder, beside its store
    saved = {p: (folder / p).stat() for p in paths}
    try:
        for p, st in saved.items():
            os.utime(folder / p, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        out, text = _tool_search(mcp, TWO_ERRORS)
        assert all(h.get("changed") for h in out["hits"]) and len(out["hits"]) >= 2
        assert text.count("changed on disk since indexed") == 1
        assert text.split("\n", 1)[0].endswith("every passage's file changed on disk since indexed")
    finally:
        for p, st in saved.items():
            os.utime(folder / p, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("query", [TWO_ERRORS, BODY_CHECKED])
def test_the_leading_run_is_the_same_in_either_shape(svc, query):
    """The leading document's passages to show (search/passages.py) are chosen before the cap of three
    passages a document (fusion.py cap_per_document), which then keeps them: the full list (passages
    in their document's places) and the compact answer (they follow its first) show the same ones,
    at most three, none of them navigation."""
    a = _compact(svc, query)
    top = a["hits"][0]["path"]
    lead = []
    for h in a["hits"]:
        if h["path"] != top:
            break
        lead.append((h["line_start"], h["line_end"]))
    assert 1 <= len(lead) <= 3 and not any(h["section"].endswith("Table of contents") for h in a["hits"][: len(lead)])
    full = svc.search("swift", query, {"limit": 10, "per_document": False})["hits"]
    assert [(h["line_start"], h["line_end"]) for h in full if h["path"] == top][: len(lead)] == lead
