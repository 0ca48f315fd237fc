"""`autodoc lsp` on a store whose workspace roots are not on this machine (a team's database read
away from the indexer; here a SQLite store whose indexed folder was moved away after the index,
which is all the language server can see of that: a root that is no folder here). Before, every
location named the indexer's path, which opens nothing. Now each is a read-only copy of the stored
text under the user's cache, at the lines the answer names; links and references work from inside
a copy, and saving one indexes nothing. A real `autodoc lsp` process, over its stdio."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from urllib.parse import unquote, urlparse

from test_lsp import CORPUS, LspClient, _line_of

from autodoc.config import Settings
from autodoc.service import Service


def _path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def test_locations_in_a_workspace_not_on_this_machine_open_copies_of_the_stored_text(tmp_path, monkeypatch):
    root = tmp_path / "indexer" / "kb"
    shutil.copytree(CORPUS, root, symlinks=True)
    store = tmp_path / "store" / "autodoc.db"
    svc = Service(Settings.from_env(store=store))
    try:
        svc.workspace_add("kb", str(root), {"embedding": {"provider": "none"}})
        svc.index("kb")
        want = svc.search("kb", "lease recovery", {"limit": 50})["hits"]
    finally:
        svc.close()
    original = tmp_path / "original"
    root.rename(original)  # the files are on the indexer's machine, not here
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    here = tmp_path / "editor"
    here.mkdir()
    client = LspClient(store, tmp_path / "lsp.log")
    try:
        client.start(here)
        symbols = client.request("workspace/symbol", {"query": "lease recovery"})
        assert len(symbols) == len(want) > 0
        for s, h in zip(symbols, want):
            copy = _path(s["location"]["uri"])
            assert copy.is_relative_to(cache.resolve()) and copy.as_posix().endswith(f"/kb/{h['path']}"), copy
            # the stored text, at the hit's lines, and read-only: an edit there reaches no index
            text = (original / h["path"]).read_text(encoding="utf-8")
            assert copy.read_text(encoding="utf-8") == text
            assert not os.stat(copy).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
            last = text.split("\n")[h["line_end"] - 1]
            assert s["location"]["range"] == {
                "start": {"line": h["line_start"] - 1, "character": 0},
                "end": {"line": h["line_end"] - 1, "character": len(last.encode("utf-16-le")) // 2},
            }

        # from inside a copy: a link's definition is a copy of its target, its references copies too
        runbook = next(
            _path(s["location"]["uri"])
            for s in symbols
            if s["location"]["uri"].endswith("lease-recovery.md") and "/runbooks/" in s["location"]["uri"]
        )
        uri = client.open(runbook)
        line, col = _line_of(runbook, "[[ADR 0012]]")
        loc = client.request(
            "textDocument/definition", {"textDocument": {"uri": uri}, "position": {"line": line, "character": col + 4}}
        )
        target = _path(loc["uri"])
        assert target.parent.parent == runbook.parent.parent and target.name == "0012-lease-recovery.md", target
        assert target.read_text(encoding="utf-8") == (original / "adrs" / "0012-lease-recovery.md").read_text()
        refs = client.request(
            "textDocument/references",
            {
                "textDocument": {"uri": target.as_uri()},
                "position": {"line": 0, "character": 0},
                "context": {"includeDeclaration": False},
            },
        )
        assert refs and all(_path(r["uri"]).is_file() and _path(r["uri"]).is_relative_to(cache.resolve()) for r in refs)
        assert runbook.as_uri() in {r["uri"] for r in refs}

        # saving a copy indexes nothing: the document is still there (its root is no folder here)
        client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        client.wait_note("textDocument/publishDiagnostics", lambda p: p["uri"] == uri)
        again = client.request("workspace/symbol", {"query": "lease recovery"})
        assert [s["location"] for s in again] == [s["location"] for s in symbols]
        assert client.stop() == 0
    finally:
        if client.proc.poll() is None:
            client.proc.kill()


def test_on_a_database_read_by_a_second_daemon_symbols_open_copies(pg_uri, monkeypatch):
    """As a team runs it: daemon A indexed the folder on its machine; this machine's daemon B
    reads the database, and the editor's server goes through B."""
    import tempfile
    import uuid

    from helpers.daemon import machine
    from helpers.pg import schema_uri

    base = Path(tempfile.mkdtemp(prefix="ad-lspr-", dir="/tmp"))  # sockets want a short path
    uri = schema_uri(pg_uri, f"l_{uuid.uuid4().hex[:8]}")
    kb = base / "kb"
    shutil.copytree(CORPUS, kb, symlinks=True)
    b = None
    client = None
    try:
        a = machine(base / "a", uri, "--no-watch").start()
        try:
            a.call("workspace.add", ["kb", str(kb), {"embedding": {"provider": "none"}}])
            a.call("workspace.index", ["kb"])
        finally:
            a.close()
        kb.rename(base / "on-the-indexer")  # not on this machine
        b = machine(base / "b", uri, "--no-watch").start()
        for k, v in b.env.items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("XDG_CACHE_HOME", str(base / "cache"))
        client = LspClient(uri, base / "lsp.log")  # type: ignore[arg-type]
        client.start(base)
        symbols = client.request("workspace/symbol", {"query": "lease recovery"})
        assert symbols
        for s in symbols:
            copy = _path(s["location"]["uri"])
            rel = copy.relative_to((base / "cache").resolve()).as_posix().split("/kb/", 1)[1]
            assert copy.read_text(encoding="utf-8") == (base / "on-the-indexer" / rel).read_text(encoding="utf-8")
        assert f"calls go to the daemon at {b.sock}" in (base / "lsp.log").read_text()
        assert client.stop() == 0
    finally:
        if client is not None and client.proc.poll() is None:
            client.proc.kill()
        if b is not None:
            b.close()
        shutil.rmtree(base, ignore_errors=True)
