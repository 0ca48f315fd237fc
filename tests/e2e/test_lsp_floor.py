"""workspace/symbol with the relevance floor (issue 35), through a real `autodoc lsp` process:
a word with one real occurrence is one symbol, not 50; a word in the corpus gives its symbols
while the workspace's vectors are still pending (it gave none)."""

from __future__ import annotations

import shutil
from pathlib import Path

from test_lsp import CORPUS, LspClient

from autodoc.config import Settings
from autodoc.service import Service

SWIFT = Path(__file__).parents[3] / "shared" / "data" / "corpora" / "swift-evolution" / "proposals"
PROPOSALS = ("0300-continuation.md", "0528-noncopyable-continuation.md")


def _tree(root: Path) -> None:
    shutil.copytree(CORPUS, root, symlinks=True)
    for p in PROPOSALS:
        shutil.copy(SWIFT / p, root / p)
    (root / "tokyo.md").write_text("# 出張メモ\n\n東京オフィスの会議室は三階にあります。\n", encoding="utf-8")


def _symbols(store: Path, root: Path, tmp_path: Path, queries: list[str]) -> list[list[str]]:
    client = LspClient(store, tmp_path / "lsp.log")
    try:
        client.start(root)
        return [
            [
                Path(s["location"]["uri"].removeprefix("file://")).relative_to(root.resolve()).as_posix()
                for s in client.request("workspace/symbol", {"query": q})
            ]
            for q in queries
        ]
    finally:
        client.stop()


def test_symbols_stop_where_the_matches_stop(tmp_path):
    root = tmp_path / "kb"
    _tree(root)
    store = tmp_path / "store" / "autodoc.db"
    svc = Service(Settings.from_env(store=store))
    try:
        svc.workspace_add("kb", str(root))
        svc.index("kb", embed=True)  # search by meaning is ready: it has its nearest passages for any word
    finally:
        svc.close()
    tokyo, lease = _symbols(store, root, tmp_path, ["東京", "lease"])
    assert tokyo == ["tokyo.md"]
    assert lease and all("lease" in (root / p).read_text(encoding="utf-8").lower() for p in lease), lease


def test_symbols_of_a_word_while_vectors_are_pending(tmp_path):
    root = tmp_path / "kb"
    _tree(root)
    store = tmp_path / "store" / "autodoc.db"
    svc = Service(Settings.from_env(store=store))
    try:
        svc.workspace_add("kb", str(root))  # the bundled model configured, nothing embedded yet
        svc.index("kb")
        assert svc.workspace_status("kb")["embedding"]["state"] != "ready"
    finally:
        svc.close()
    (rare,) = _symbols(store, root, tmp_path, ["withCheckedThrowingContinuation"])
    assert sorted(set(rare)) == sorted(PROPOSALS)
