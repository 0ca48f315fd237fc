"""`autodoc lsp`: the real language server process, spoken to over its stdio
with LSP's Content-Length framing, on a real store; once on its own (the
service runs in the server process) and once beside a daemon (the calls go to
the daemon's socket)."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.nvim import Nvim

from autodoc.config import Settings
from autodoc.service import Service

CORPUS = Path(__file__).parents[1] / "corpora" / "kb"
DEADLINE = 60.0


class LspClient:
    def __init__(self, store: Path, log: Path):
        self._log = open(log, "wb")
        self.log_path = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autodoc.cli", "--store", str(store), "lsp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._id = 0
        self._replies: dict[int, dict] = {}
        self._cond = threading.Condition()
        self.notes: queue.Queue[dict] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                k, v = line.decode().split(":", 1)
                headers[k.lower()] = v.strip()
            msg = json.loads(out.read(int(headers["content-length"])))
            if "id" in msg and "method" not in msg:
                with self._cond:
                    self._replies[msg["id"]] = msg
                    self._cond.notify_all()
            elif "id" in msg:  # a request from the server (e.g. client/registerCapability): accept it
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            else:
                self.notes.put(msg)

    def _send(self, msg: dict) -> None:
        body = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def request(self, method: str, params: Any) -> Any:
        self._id += 1
        rid = self._id
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        deadline = time.monotonic() + DEADLINE
        with self._cond:
            while rid not in self._replies:
                assert self.proc.poll() is None, f"the server died:\n{self.log_path.read_text()}"
                assert self._cond.wait(timeout=max(0.0, deadline - time.monotonic())), f"no answer to {method}"
        reply = self._replies.pop(rid)
        assert "error" not in reply, reply
        return reply["result"]

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait_note(self, method: str, pred=lambda p: True) -> dict:
        deadline = time.monotonic() + DEADLINE
        while True:
            note = self.notes.get(timeout=max(0.01, deadline - time.monotonic()))
            if note["method"] == method and pred(note["params"]):
                return note["params"]

    def start(self, root: Path) -> dict:
        caps = self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "capabilities": {},
                "workspaceFolders": [{"uri": root.as_uri(), "name": "kb"}],
            },
        )
        self.notify("initialized", {})
        return caps

    def open(self, path: Path) -> str:
        uri = path.as_uri()
        self.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": uri,
                    "languageId": "markdown",
                    "version": 1,
                    "text": path.read_text(encoding="utf-8"),
                }
            },
        )
        return uri

    def stop(self) -> int:
        self.request("shutdown", None)
        self.notify("exit", None)
        try:
            return self.proc.wait(timeout=DEADLINE)
        finally:
            self._log.close()


@pytest.fixture
def kb(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "kb"
    shutil.copytree(CORPUS, root, symlinks=True)
    store = tmp_path / "store" / "autodoc.db"
    svc = Service(Settings.from_env(store=store))
    try:
        svc.workspace_add("kb", str(root), {"embedding": {"provider": "none"}})
        svc.index("kb")
    finally:
        svc.close()
    return root, store


def _line_of(path: Path, needle: str) -> tuple[int, int]:
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if needle in line:
            return n, line.index(needle)
    raise AssertionError(f"{needle!r} not in {path}")


def test_lsp_on_its_own(kb, tmp_path):
    root, store = kb
    client = LspClient(store, tmp_path / "lsp.log")
    caps = client.start(root)["capabilities"]
    assert caps["workspaceSymbolProvider"] and caps["definitionProvider"] and caps["referencesProvider"]
    assert {"[", "#"} <= set(caps["completionProvider"]["triggerCharacters"])

    # workspace/symbol is a search: the same hits, at the lines they matched
    reader = Service(Settings.from_env(store=store), writer=False)
    try:
        want = reader.search("kb", "lease recovery", {"limit": 50})["hits"]
    finally:
        reader.close()
    symbols = client.request("workspace/symbol", {"query": "lease recovery"})
    assert len(symbols) == len(want) > 0
    for s, h in zip(symbols, want):
        assert s["location"]["uri"] == (root / h["path"]).resolve().as_uri()
        # whole lines: from the first one's start to the last one's end, not to the next line's
        # start (Neovim's quickfix showed 17-20 for a hit on 17-19)
        last = (root / h["path"]).read_text(encoding="utf-8").split("\n")[h["line_end"] - 1]
        assert s["location"]["range"] == {
            "start": {"line": h["line_start"] - 1, "character": 0},
            "end": {"line": h["line_end"] - 1, "character": len(last.encode("utf-16-le")) // 2},
        }
        assert s["name"] == h["breadcrumb"]
    assert client.request("workspace/symbol", {"query": ""}) == []

    # definition on a wikilink: the document it resolves to
    runbook = root / "runbooks" / "lease-recovery.md"
    uri = client.open(runbook)
    line, col = _line_of(runbook, "[[ADR 0012]]")
    loc = client.request(
        "textDocument/definition", {"textDocument": {"uri": uri}, "position": {"line": line, "character": col + 4}}
    )
    assert loc["uri"] == (root / "adrs" / "0012-lease-recovery.md").resolve().as_uri()
    # positions count UTF-16 units (this client sends no positionEncoding): 🔍 is two of them
    note = root / "notes" / "links.md"
    note.write_text("# Links\n\n🔍 see [[ADR 0012]] and [[ADR 0012 draft]]\n", encoding="utf-8")
    nuri = client.open(note)
    client.wait_note("textDocument/publishDiagnostics", lambda p: p["uri"] == nuri)
    # not indexed until saved: no definition yet, and no error either
    assert (
        client.request(
            "textDocument/definition", {"textDocument": {"uri": nuri}, "position": {"line": 2, "character": 10}}
        )
        is None
    )
    client.notify("textDocument/didSave", {"textDocument": {"uri": nuri}})  # the server indexes it
    client.wait_note("textDocument/publishDiagnostics", lambda p: p["uri"] == nuri)
    text = note.read_text(encoding="utf-8").splitlines()[2]
    last = len(text[: text.index("]]") + 1].encode("utf-16-le")) // 2  # the first link's last "]", in UTF-16
    loc = client.request(
        "textDocument/definition", {"textDocument": {"uri": nuri}, "position": {"line": 2, "character": last}}
    )
    assert loc["uri"] == (root / "adrs" / "0012-lease-recovery.md").resolve().as_uri()
    # the second link is broken: no definition, though its target begins with the first's
    second = len(text[: text.rindex("[[") + 3].encode("utf-16-le")) // 2
    assert (
        client.request(
            "textDocument/definition", {"textDocument": {"uri": nuri}, "position": {"line": 2, "character": second}}
        )
        is None
    )
    # hover on the same link: the linked document's title and first lines
    shown = client.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": line, "character": col + 4}}
    )
    assert shown["contents"]["kind"] == "markdown"
    assert "ADR 0012: Lease recovery after a crashed writer" in shown["contents"]["value"]
    assert "adrs/0012-lease-recovery.md" in shown["contents"]["value"]
    # …and nothing on plain text
    assert (
        client.request(
            "textDocument/definition", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}
        )
        is None
    )

    # references: the links pointing at a document, at their lines
    adr = root / "adrs" / "0012-lease-recovery.md"
    refs = client.request(
        "textDocument/references",
        {
            "textDocument": {"uri": adr.as_uri()},
            "position": {"line": 0, "character": 0},
            "context": {"includeDeclaration": False},
        },
    )
    assert {"uri": runbook.resolve().as_uri(), "line": line} in [
        {"uri": r["uri"], "line": r["range"]["start"]["line"]} for r in refs
    ]

    # completion after [[: documents found by the typed prefix
    draft = root / "notes" / "new-note.md"
    draft.write_text("# New note\n\nSee [[lea\n", encoding="utf-8")
    duri = client.open(draft)
    items = client.request(
        "textDocument/completion", {"textDocument": {"uri": duri}, "position": {"line": 2, "character": 9}}
    )["items"]
    labels = [i["label"] for i in items]
    assert "0012-lease-recovery" in labels and "lease-recovery" in labels
    # `[[` with nothing typed yet: the notes to pick from (it offered none), the editor filters them
    draft.write_text("# New note\n\nSee [[\n", encoding="utf-8")
    client.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": duri, "version": 2}, "contentChanges": [{"text": draft.read_text(encoding="utf-8")}]},
    )
    got = client.request(
        "textDocument/completion", {"textDocument": {"uri": duri}, "position": {"line": 2, "character": 6}}
    )
    listed = [i["label"] for i in got["items"]]
    on_disk = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.suffix in (".md", ".markdown"))
    assert got["isIncomplete"] and len(listed) >= 15 and "0012-lease-recovery" in listed
    assert [i["detail"] for i in got["items"]] == [p for p in on_disk if p in {i["detail"] for i in got["items"]}]
    assert {tuple(i["textEdit"]["range"]["start"].values()) for i in got["items"]} == {(2, 6)}
    assert (
        client.request(
            "textDocument/completion", {"textDocument": {"uri": duri}, "position": {"line": 0, "character": 3}}
        )
        is None
    )
    # …and after #: the workspace's tags, by prefix, most used first
    tagged = root / "notes" / "tagged.md"
    tagged.write_text("# Tagged\n\nfiled under #sto\n#\n", encoding="utf-8")
    turi = client.open(tagged)
    items = client.request(
        "textDocument/completion", {"textDocument": {"uri": turi}, "position": {"line": 2, "character": 16}}
    )["items"]
    reader = Service(Settings.from_env(store=store), writer=False)
    try:
        want = [t["tag"] for t in reader.workspace_tags("kb", "sto", 20)["tags"]]
    finally:
        reader.close()
    assert [i["label"] for i in items] == want and "storage" in want
    # the typed part is what an item replaces (a tag may hold / and -)
    assert {tuple(i["textEdit"]["range"]["start"].values()) for i in items} == {(2, 12 + 1)}
    # a lone # opening a line starts a heading, not a tag
    assert (
        client.request(
            "textDocument/completion", {"textDocument": {"uri": turi}, "position": {"line": 3, "character": 1}}
        )
        is None
    )

    # diagnostics: the parser's problems with a document, on open…
    broken = root / "notes" / "broken-frontmatter.md"
    buri = client.open(broken)
    diags = client.wait_note("textDocument/publishDiagnostics", lambda p: p["uri"] == buri)["diagnostics"]
    assert diags and all(d["source"] == "autodoc" for d in diags)
    assert any("frontmatter" in d["message"].lower() or "yaml" in d["message"].lower() for d in diags)
    # …and on save: the server indexes the saved file first
    guri = client.open(runbook)
    assert client.wait_note("textDocument/publishDiagnostics", lambda p: p["uri"] == guri)["diagnostics"] == []
    runbook.write_text("---\ntags: [unclosed\n---\n" + runbook.read_text(encoding="utf-8"), encoding="utf-8")
    client.notify("textDocument/didSave", {"textDocument": {"uri": guri}})
    diags = client.wait_note("textDocument/publishDiagnostics", lambda p: p["uri"] == guri and p["diagnostics"])[
        "diagnostics"
    ]
    assert diags[0]["range"]["start"]["line"] >= 0

    # a file in no workspace: no answer, and one message saying why
    stray = tmp_path / "stray.md"
    stray.write_text("[[ADR 0012]]\n", encoding="utf-8")
    suri = client.open(stray)
    assert (
        client.request(
            "textDocument/definition", {"textDocument": {"uri": suri}, "position": {"line": 0, "character": 3}}
        )
        is None
    )
    msg = client.wait_note("window/showMessage")
    assert "no workspace" in msg["message"] and "stray.md" in msg["message"]
    # …naming the store it looked in, and how that was chosen (an editor may not pass AUTODOC_STORE on)
    assert f"of the store {store.resolve()} (given by --store)" in msg["message"]

    assert client.stop() == 0
    log = (tmp_path / "lsp.log").read_text()
    assert "calls run in this process" in log
    # pygls logged each message at INFO ("Sending data: …"): quiet unless asked (-v, AUTODOC_LOG=debug)
    assert " pygls." not in log and "Sending data" not in log


def test_lsp_beside_a_daemon_uses_its_socket(kb, tmp_path, daemon_factory):
    root, store = kb
    # its answers checked against schemas/, small frames: as test_daemon_e2e.py's daemon
    d = daemon_factory(tmp_path, store=store, env={"AUTODOC_CHECK_RESULTS": "1", "AUTODOC_MAX_FRAME_BYTES": "65536"})
    try:
        client = LspClient(store, tmp_path / "lsp.log")
        client.start(root)
        symbols = client.request("workspace/symbol", {"query": "porter stemming"})
        assert any(s["location"]["uri"].endswith("/adrs/0009-porter-stemming.md") for s in symbols)
        assert f"calls go to the daemon at {d.sock}" in (tmp_path / "lsp.log").read_text()
        # a save: the daemon's watcher indexes it, and the diagnostics are the saved file's
        runbook = root / "runbooks" / "lease-recovery.md"
        uri = client.open(runbook)
        assert client.wait_note("textDocument/publishDiagnostics", lambda p: p["uri"] == uri)["diagnostics"] == []
        runbook.write_text("---\ntags: [unclosed\n---\n" + runbook.read_text(encoding="utf-8"), encoding="utf-8")
        client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        assert client.wait_note("textDocument/publishDiagnostics", lambda p: p["uri"] == uri)["diagnostics"]
        # the daemon goes away: the server carries on in its own process
        d.call("server.shutdown")
        d.proc.wait(timeout=DEADLINE)
        symbols = client.request("workspace/symbol", {"query": "porter stemming"})
        assert any(s["location"]["uri"].endswith("/adrs/0009-porter-stemming.md") for s in symbols)
        assert client.stop() == 0
        log = (tmp_path / "lsp.log").read_text()
        assert "did not answer" in log and "calls run in this process" in log
    finally:
        if d.proc.poll() is None:
            d.call("server.shutdown")
            d.proc.wait(timeout=DEADLINE)


def test_neovim_as_the_client(kb):
    """Neovim 0.11's own LSP client against `autodoc lsp`: symbols, definition, diagnostics."""
    root, store = kb
    base = Path(tempfile.mkdtemp(prefix="adlsp-", dir="/tmp"))
    nv = Nvim(base, load_plugin=False, cwd=root)
    try:
        runbook = root / "runbooks" / "lease-recovery.md"
        line, col = _line_of(runbook, "[[ADR 0012]]")
        cid = nv.lua(
            """
            local python, store, root, file = ...
            vim.cmd.edit(file)
            return vim.lsp.start({ name = "autodoc", root_dir = root,
                                   cmd = { python, "-m", "autodoc.cli", "--store", store, "lsp" } })
        """,
            sys.executable,
            str(store),
            str(root),
            str(runbook),
        )
        nv.wait_lua(
            "local c = vim.lsp.get_client_by_id(...); return c ~= nil and c.initialized",
            cid,
            what="the client to initialise",
        )
        got = nv.json("""
            local r = vim.lsp.buf_request_sync(0, "workspace/symbol", { query = "lease recovery" }, 30000)
            local out = {}
            for _, res in pairs(r or {}) do
              for _, s in ipairs(res.result or {}) do table.insert(out, vim.uri_to_fname(s.location.uri)) end
            end
            return out
        """)
        assert str((root / "adrs" / "0012-lease-recovery.md").resolve()) in got
        # the quickfix list Neovim makes of them shows each hit's own lines (it showed one more)
        shown = nv.json("""
            local r = vim.lsp.buf_request_sync(0, "workspace/symbol", { query = "lease recovery" }, 30000)
            local out = {}
            for cid, res in pairs(r or {}) do
              local enc = vim.lsp.get_client_by_id(cid).offset_encoding
              for i, it in ipairs(vim.lsp.util.symbols_to_items(res.result or {}, 0, enc)) do
                table.insert(out, { it.lnum, it.end_lnum, res.result[i].containerName })
              end
            end
            return out
        """)
        reader = Service(Settings.from_env(store=store), writer=False)
        try:
            want = reader.search("kb", "lease recovery", {"limit": 50})["hits"]
        finally:
            reader.close()
        assert shown and [tuple(x[:2]) for x in shown] == [(h["line_start"], h["line_end"]) for h in want]
        target = nv.json(
            """
            local line, col = ...
            local params = { textDocument = vim.lsp.util.make_text_document_params(0),
                             position = { line = line, character = col } }
            local r = vim.lsp.buf_request_sync(0, "textDocument/definition", params, 30000)
            for _, res in pairs(r or {}) do
              if res.result then return vim.uri_to_fname(res.result.uri or res.result[1].uri) end
            end
        """,
            line,
            col + 4,
        )
        assert target == str((root / "adrs" / "0012-lease-recovery.md").resolve())
        nv.lua(
            "local file, cid = ...; vim.cmd.edit(file); vim.lsp.buf_attach_client(0, cid)",
            str(root / "notes" / "broken-frontmatter.md"),
            cid,
        )
        diags = nv.wait_lua("return vim.diagnostic.get(0)", what="diagnostics on the broken note")
        assert diags[0]["source"] == "autodoc"
        nv.lua("vim.lsp.stop_client(...)", cid)
        nv.wait_lua("return vim.lsp.get_client_by_id(...) == nil", cid, what="the client to stop")
        assert nv.lua_errors() == []
    finally:
        nv.close()
        shutil.rmtree(base, ignore_errors=True)


def test_lsp_alone_embeds_what_a_save_changed(tmp_path):
    """With the bundled model and no daemon, the server itself fills the vectors a save needs."""
    root = tmp_path / "kb"
    root.mkdir()
    note = root / "note.md"
    note.write_text("# Note\n\n## Leases\n\nThe writer holds a lease file beside the store.\n", encoding="utf-8")
    store = tmp_path / "store" / "autodoc.db"
    svc = Service(Settings.from_env(store=store))
    try:
        svc.workspace_add("kb", str(root), {"embedding": {"provider": "onnx"}})
        svc.index("kb")
        svc.embed_pending("kb")
        before = svc.workspace_status("kb")
        assert before["embedding"]["state"] == "ready"
    finally:
        svc.close()
    client = LspClient(store, tmp_path / "lsp.log")
    client.start(root)
    uri = client.open(note)
    client.wait_note("textDocument/publishDiagnostics", lambda p: p["uri"] == uri)
    note.write_text(
        note.read_text(encoding="utf-8") + "\n## Backups\n\nNightly copies go to cold storage.\n", encoding="utf-8"
    )
    client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    client.wait_note("textDocument/publishDiagnostics", lambda p: p["uri"] == uri)
    reader = Service(Settings.from_env(store=store), writer=False)
    try:
        deadline = time.monotonic() + DEADLINE
        while True:
            now = reader.workspace_status("kb")
            emb = now["embedding"]
            if now["chunks"] > before["chunks"] and emb["state"] == "ready":  # the new section, with its vector
                assert emb["embedded"] > before["embedding"]["embedded"] and emb["pending"] == 0
                break
            assert time.monotonic() < deadline, f"the saved section was never embedded: {now}"
            time.sleep(0.1)
    finally:
        reader.close()
    assert client.stop() == 0


def test_where_a_tag_can_be_completed():
    from autodoc.lsp.server import _tag_context

    cases = {
        "filed under #sto": "sto",
        "x #proj/al": "proj/al",
        "#how": "how",
        "done `x` #ta": "ta",
        "[a](b.md) #ta": "ta",
        "see [[a]] #ta": "ta",
        "#": None,
        "  #": None,  # a heading being written
        "see [x](#": None,
        "see [[#": None,
        "see [[Note#": None,  # link anchors
        "code `#inc": None,
        "issue &#": None,
        "a#b": None,
    }
    for before, want in cases.items():
        assert _tag_context(before) == want, before


def test_link_completion_puts_names_first_and_inserts_what_resolves():
    """`[[rec`: a document named by the prefix comes before pages that only mention it, and a
    file name two documents share is inserted as its path, which resolves to that one (a trial:
    recommended-extensions came 10th, and two items both inserted `index`)."""
    from autodoc.lsp.server import link_targets

    def hit(path: str, title: str = "") -> dict:
        return {"path": path, "title": title or "Untitled", "snippet": "", "breadcrumb": ""}

    hits = [
        hit("recipes/how-to-write-recipes.md"),
        hit("docs/index.md", "Docs"),
        hit("notes/me.md"),
        hit("user/index.md", "User guide"),
        hit("recipes/recipes.md"),
        hit("docs/recommended-extensions.md"),
        hit("docs/index.md"),
        hit("notes/about.md", "Records kept"),
    ]
    got = [(h["path"], t) for h, t in link_targets(hits, "rec", rel="notes/me.md")]
    assert got == [
        ("recipes/recipes.md", "recipes"),
        ("docs/recommended-extensions.md", "recommended-extensions"),
        ("notes/about.md", "about"),  # its title starts with the prefix
        ("recipes/how-to-write-recipes.md", "how-to-write-recipes"),  # contains it
        ("docs/index.md", "docs/index"),
        ("user/index.md", "user/index"),
    ]  # the rest, in search order


def test_a_symbol_search_that_finds_nothing_relevant_lists_nothing(tmp_path):
    """Words in no document: the search's nearest passages by meaning are none of them relevant
    (answerable false); the floor holds them back: they are no symbols of the query (a trial got 50)."""
    root = tmp_path / "kb"
    shutil.copytree(CORPUS, root, symlinks=True)
    store = tmp_path / "store" / "autodoc.db"
    svc = Service(Settings.from_env(store=store))
    try:
        svc.workspace_add("kb", str(root))
        svc.index("kb", embed=True)  # the bundled model: search by meaning is ready
        nonsense = svc.search("kb", "zzqxv blorptang", {"limit": 50})
        lease = svc.search("kb", "lease recovery", {"limit": 50})
    finally:
        svc.close()
    assert nonsense["answerable"] is False and lease["answerable"] is True
    client = LspClient(store, tmp_path / "lsp.log")
    try:
        client.start(root)
        assert client.request("workspace/symbol", {"query": "zzqxv blorptang"}) == []
        # what the floor held back is said where an editor shows a server's log (every client reports it)
        note = client.wait_note("window/logMessage", lambda p: "zzqxv blorptang" in p["message"])
        assert f"{nonsense['held_back']} weak hits held back" in note["message"] and nonsense["held_back"] > 0
        assert len(client.request("workspace/symbol", {"query": "lease recovery"})) == len(lease["hits"])
    finally:
        client.stop()
