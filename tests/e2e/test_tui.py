"""`autodoc tui`, driven headless with Textual's Pilot against a real daemon
process (its answers checked against the result schemas: AUTODOC_CHECK_RESULTS)
over a copy of tests/corpora/kb, with the bundled ONNX embedding model and, for
the rerank box, a TEI-shaped ranker served over HTTP by a local test server.

Waits poll the app's own state until a deadline (no timed assertions)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers.daemon import NO_MODEL, Daemon, daemon_argv, wait_gone
from textual import events

from autodoc import fuzzy
from autodoc.config import Settings
from autodoc.connect import call_socket
from autodoc.tui import render, state
from autodoc.tui.app import AutodocApp
from autodoc.tui.facets import FacetPicker

CORPUS = Path(__file__).parents[1] / "corpora" / "kb"
DEADLINE = 30.0


def checked_daemon(base: Path) -> Daemon:
    """The test daemon (not watching folders) with every answer checked against its result schema."""
    store, sock = base / "store" / "autodoc.db", base / "run" / "autodoc.sock"
    env = {"AUTODOC_SHUTDOWN_DEADLINE": "2", "AUTODOC_CHECK_RESULTS": "1"}
    return Daemon(base, store=store, sock=sock, argv=daemon_argv(store, sock, "--no-watch"), clean_env=True, env=env)


class WordRanker:
    """A rerank server speaking TEI (`POST /rerank`): a passage scores the number
    of query words it holds, so the order it gives is known."""

    def __init__(self) -> None:
        self.calls = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep pytest's output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.calls += 1
                words = body["query"].lower().split()
                scores = [sum(t.lower().count(w) for w in words) / 10 for t in body["texts"]]
                out = sorted(({"index": i, "score": s} for i, s in enumerate(scores)), key=lambda r: -r["score"])
                data = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def kb():
    """One daemon for the module: kb (words only: no model to wait for) over a copy of the corpus."""
    base = Path(tempfile.mkdtemp(prefix="adtui-", dir="/tmp"))
    shutil.copytree(CORPUS, base / "kb", symlinks=True)
    d = checked_daemon(base)
    d.kb = base / "kb"
    d.start()
    try:
        d.call("workspace.add", ["kb", str(d.kb), NO_MODEL])
        d.call("workspace.index", ["kb"])
        yield d
    finally:
        d.stop()
        shutil.rmtree(base, ignore_errors=True)


async def rpc(kb, method: str, params):
    """A call of the test's own on the daemon (off the event loop the app runs on)."""
    return await asyncio.to_thread(kb.call, method, params)


def small_workspace(kb, name: str, config: dict) -> str:
    folder = kb.base / name
    folder.mkdir(exist_ok=True)
    (folder / "a.md").write_text("# Wombats\n\nWombats dig burrows in the bush.\n\nThey sleep by day.\n")
    (folder / "b.md").write_text("# Lease\n\nThe lease file sits beside the store; wombats ignore it.\n")
    kb.call("workspace.add", [name, str(folder), config])
    kb.call("workspace.index", [name])
    return name


def make_app(kb, tmp_path: Path, **kw) -> AutodocApp:
    return AutodocApp(
        Settings(store=kb.store, socket=kb.sock), start_daemon=False, state_file=tmp_path / "state" / "tui.json", **kw
    )


async def until(pilot, cond, what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await pilot.pause(0.02)


async def ready(pilot, app: AutodocApp) -> None:
    # the pickers follow the workspace once its status is read (a worker thread): wait for that, not
    # for the name alone, or the boxes are looked at before they know what the workspace can run
    await until(pilot, lambda: app.shown_workspace is not None and app.pickers["search"].is_mounted, "the workspace")


async def search(pilot, app: AutodocApp, query: str, *, keys: bool = False) -> dict:
    """Put a query in the field (with `keys`, typed key by key); its answer."""
    s = app.pickers["search"]
    if keys:
        s.query_one("#query").value = ""
        await pilot.pause()
        await pilot.press(*query)
    else:
        s.query_one("#query").value = query
    await until(
        pilot,
        lambda: s.answer is not None and s.pending is None and s.answer["query"] == query,
        f"the answer to {query!r}",
    )
    return s.answer


async def answered_again(pilot, s, before: int, what: str) -> dict:
    await until(pilot, lambda: s.stats["answered"] > before and s.pending is None, what)
    return s.answer


def title_and_status(s) -> str:
    return f"{s.listing.border_title} | {s.query_one('#status').render()}"


# -- search --------------------------------------------------------------------------------


async def test_typing_searches_and_the_preview_marks_the_hit(kb, tmp_path):
    app = make_app(kb, tmp_path, workspace="kb")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        assert app.link.mode == "daemon"
        s = app.pickers["search"]
        answer = await search(pilot, app, "lease", keys=True)
        assert s.last_request["opts"]["stages"] == ["lexical", "semantic", "rerank"]
        assert answer["hits"] and s.listing.option_count == len(answer["hits"])
        first = answer["hits"][0]
        span = (first["line_start"], first["line_end"])
        await until(pilot, lambda: (s.preview_shown or {}).get("span") == span, "the preview")
        assert s.preview_shown["path"] == first["path"]
        preview = s.query_one("#preview").render()
        plain = str(preview)
        # the pane starts just above the hit, numbered, and the matched words are marked
        assert f"{first['line_start']}▌" in plain.replace(" ", "")
        marked = {plain[sp.start : sp.end].lower() for sp in preview.spans if "underline" in str(sp.style)}
        assert "lease" in marked
        assert "not re-ranked: no ranker is configured" in title_and_status(s)

        # a second search before the first answers supersedes it: withdrawn, and its answer dropped
        before = s.stats["cancelled"]
        s.query_text = "wal"
        s.run()
        s.query_text = "writer"
        s.run()
        await until(pilot, lambda: s.pending is None and s.answer and s.answer["query"] == "writer", "the last answer")
        assert s.stats["cancelled"] >= before + 1
        assert s.answer["query"] == "writer"


async def test_each_box_searches_again_and_one_of_lexical_and_semantic_stays(kb, tmp_path):
    ws = await asyncio.to_thread(small_workspace, kb, "sem", {})  # the bundled embedding model

    def embedded() -> None:
        deadline = time.monotonic() + DEADLINE
        while kb.call("workspace.status", [ws])["embedding"]["state"] != "ready":
            assert time.monotonic() < deadline, "the vectors never came"
            time.sleep(0.05)

    await asyncio.to_thread(embedded)
    app = make_app(kb, tmp_path, workspace=ws)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        s = app.pickers["search"]
        assert s.box("lexical").display and s.box("semantic").display  # it has an embedding model
        assert not s.box("rerank").display  # and no ranker
        assert all(s.box(x).value for x in state.ORDER)
        await search(pilot, app, "wombats")

        n = s.stats["answered"]
        await pilot.click("#stage-lexical")
        answer = await answered_again(pilot, s, n, "the search without lexical")
        assert answer["stages"]["requested"] == ["semantic", "rerank"]
        assert "semantic" in answer["stages"]["performed"] and "lexical" not in answer["stages"]["performed"]

        # unchecking semantic now would leave nothing to search with: refused, no new search
        n, sent = s.stats["answered"], s.stats["sent"]
        await pilot.press("alt+s")
        await pilot.pause(0.2)
        assert s.box("semantic").value is True and s.stats["sent"] == sent
        assert app.choice.stages == {"lexical": False, "semantic": True, "rerank": True}

        await pilot.press("alt+l")  # lexical back on
        answer = await answered_again(pilot, s, n, "the search with lexical again")
        assert answer["stages"]["requested"] == ["lexical", "semantic", "rerank"]
        n = s.stats["answered"]
        await pilot.press("alt+s")  # now semantic may go
        answer = await answered_again(pilot, s, n, "the search without semantic")
        assert answer["stages"]["requested"] == ["lexical", "rerank"]
        assert "semantic unchecked" in title_and_status(s)
        n = s.stats["answered"]
        await pilot.press("alt+r")  # the rerank box is hidden (no ranker): the key says so, nothing changes
        await pilot.pause(0.2)
        assert s.stats["sent"] == s.stats["answered"] and app.choice.stages["rerank"] is True

    # the choice is kept across restarts
    assert json.loads((tmp_path / "state" / "tui.json").read_text())["stages"] == {
        "lexical": True,
        "semantic": False,
        "rerank": True,
    }
    again = make_app(kb, tmp_path)
    async with again.run_test(size=(120, 40)) as pilot:
        await ready(pilot, again)
        s = again.pickers["search"]
        assert again.workspace == ws  # the last workspace, too
        assert (s.box("lexical").value, s.box("semantic").value) == (True, False)
        answer = await search(pilot, again, "wombats")
        assert answer["stages"]["requested"] == ["lexical", "rerank"]


async def terminal_key(pilot, key: str) -> None:
    """A key as a terminal's driver posts it: Alt+L arrives as ESC l, parsed to `alt+l` *with* the
    character `l` (Pilot's press gives none, so a field would not type it and the bug would hide)."""
    pilot.app.post_message(events.Key(key, key.rpartition("+")[2]))
    await pilot.pause()


async def test_alt_keys_toggle_the_stages_while_the_query_field_has_focus(kb, tmp_path):
    """Issue 38: Alt+L typed an `l` into the query (the field took the key before the screen's
    binding); a person types the query and toggles a stage without leaving the field."""
    app = make_app(kb, tmp_path, workspace="kb")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        s = app.pickers["search"]
        field = s.query_one("#query")
        assert field.has_focus
        await search(pilot, app, "lease", keys=True)
        assert s.box("lexical").value is True
        n = s.stats["answered"]
        await terminal_key(pilot, "alt+r")  # no ranker here: said, and nothing typed
        await terminal_key(pilot, "alt+l")  # kb has no model: lexical stays (the one retrieval stage)
        await pilot.pause(0.2)
        assert field.value == "lease" and field.has_focus
        assert s.stats["answered"] == n

    sem = await asyncio.to_thread(small_workspace, kb, "altkeys", {})
    app = make_app(kb, tmp_path, workspace=sem)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        s = app.pickers["search"]
        await until(pilot, lambda: s.box("semantic").display, "the semantic box")
        await search(pilot, app, "wombats", keys=True)
        n = s.stats["answered"]
        await terminal_key(pilot, "alt+s")
        answer = await answered_again(pilot, s, n, "the search without semantic")
        assert s.query_one("#query").value == "wombats" and s.query_one("#query").has_focus
        assert answer["stages"]["requested"] == ["lexical", "rerank"]
        n = s.stats["answered"]
        await terminal_key(pilot, "alt+s")
        answer = await answered_again(pilot, s, n, "the search with semantic again")
        assert "semantic" in answer["stages"]["requested"]
        assert s.query_one("#query").value == "wombats"


async def test_a_ranker_or_a_model_arriving_brings_its_box_and_runs_the_query_again(kb, tmp_path):
    ws = await asyncio.to_thread(small_workspace, kb, "tiny", NO_MODEL)
    ranker = WordRanker()
    app = make_app(kb, tmp_path, workspace=ws)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot, app)
            s = app.pickers["search"]
            assert not s.box("rerank").display and not s.box("semantic").display
            answer = await search(pilot, app, "wombats")
            assert answer["semantic"] == "off"
            assert "not re-ranked: no ranker is configured" in title_and_status(s)
            assert "semantic skipped: no embedding model" in title_and_status(s)
            app.choice.stages["rerank"] = False  # left unchecked while it could not run
            n = s.stats["answered"]

            # a ranker configured (by another client): workspace.changed → the box, the query again
            await rpc(
                kb,
                "workspace.configure",
                [ws, {"ranker": {"provider": "http", "url": ranker.url, "api": "tei", "model": "word-count"}}],
            )
            await until(pilot, lambda: s.box("rerank").display, "the rerank box")
            assert str(s.box("rerank").label) == "Rerank (word-count)"
            assert s.box("rerank").value is False  # as it was left
            answer = await answered_again(pilot, s, n, "the search after the ranker came")
            assert s.last_refresh == "workspace configured"
            assert "rerank" not in answer["stages"]["requested"]

            n = s.stats["answered"]
            await pilot.click("#stage-rerank")
            answer = await answered_again(pilot, s, n, "the re-ranked search")
            assert answer["stages"]["requested"] == ["lexical", "semantic", "rerank"]
            assert "rerank" in answer["stages"]["performed"] and ranker.calls >= 1
            assert "re-ranked by word-count" in title_and_status(s)

            # an embedding model switched on: the semantic box, and the open query runs again
            refreshed = s.stats["refreshed"]
            await rpc(kb, "workspace.configure", [ws, {"embedding": {"provider": "onnx"}}])
            # the box and the search again come from two refreshes, in either order on a loaded machine
            await until(
                pilot,
                lambda: (
                    s.stats["refreshed"] > refreshed
                    and s.pending is None
                    and s.answer["semantic"] != "off"
                    and s.box("semantic").display
                ),
                "the semantic box and the search after the model switch",
            )
            assert any(m == "workspace.changed" and p["workspace"] == ws for m, p in app.notes_seen)
            assert "semantic" in s.answer["stages"]["performed"]
    finally:
        ranker.close()


# -- the three pickers ----------------------------------------------------------------------


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_three_pickers_share_one_layout(kb, tmp_path, size, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(kb, tmp_path, workspace="kb")
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app)
        assert app.no_color
        for key, name in (("ctrl+o", "documents"), ("ctrl+n", "add"), ("ctrl+g", "search")):
            await pilot.press(key)
            await until(pilot, lambda: app.screen is app.pickers[name], f"the {name} picker")
            await pilot.pause()
            scr = app.screen
            fields, lst, right, buttons = (
                scr.query_one(f"#{i}").region for i in ("fields", "list", "right", "buttons")
            )
            assert fields.bottom <= lst.y, name  # the fields over the list
            assert buttons.y >= max(lst.bottom, right.bottom), name  # the buttons beneath
            assert lst.height >= 3 and right.height >= 3 and buttons.height >= 1, name
            if size[0] >= 100:
                assert right.x >= lst.right and right.y <= lst.y, name  # the file beside the list
            else:
                assert right.y >= lst.bottom, name  # 80 columns: under it
            assert all(r.right <= size[0] and r.bottom <= size[1] for r in (fields, lst, right, buttons)), name


async def test_stage_boxes_read_on_and_off_without_colour_and_the_preview_gets_a_fair_share(kb, tmp_path, monkeypatch):
    """Issue 38: under NO_COLOR a checked and an unchecked box looked the same (only the X's colour
    differed); at 80x45 the preview under the list was 5 lines."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(kb, tmp_path, workspace="kb")
    async with app.run_test(size=(80, 45)) as pilot:
        await ready(pilot, app)
        s = app.pickers["search"]
        box = s.box("rerank")
        box.value = True
        await pilot.pause()
        on = box.render().plain
        box.value = False
        await pilot.pause()
        off = box.render().plain
        assert on != off and on.replace("X", " ") == off
        answer = await search(pilot, app, "lease recovery")
        assert answer["hits"]
        preview = s.query_one("#preview-scroll").region
        listing = s.listing.region
        assert preview.height >= 12, preview
        assert listing.height >= 12, listing


async def test_open_a_hit_in_the_editor_copy_its_ref_and_send_the_hits(kb, tmp_path, monkeypatch):
    record = tmp_path / "argv.json"
    editor = tmp_path / "editor.py"
    editor.write_text(
        f"#!{sys.executable}\nimport json, sys\nopen({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
    )
    editor.chmod(editor.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("EDITOR", f"{editor} --wait")
    app = make_app(kb, tmp_path, workspace="kb")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        s = app.pickers["search"]
        answer = await search(pilot, app, "lease recovery")
        await pilot.press("down")
        hit = answer["hits"][1]
        await pilot.press("enter")
        await until(pilot, record.exists, "the editor")
        assert json.loads(record.read_text()) == ["--wait", f"+{hit['line_start']}", str(kb.kb / hit["path"])]
        assert app.screen is s  # back to the picker

        await pilot.press("ctrl+y")
        # the ref as the CLI prints it and `autodoc read` takes it (issue 38: it had no workspace, `:` not `#L`)
        assert app.copied == f"kb:{hit['path']}#L{hit['line_start']}-{hit['line_end']}"
        await pilot.press("ctrl+s")
        lines = (tmp_path / "state" / "quickfix.txt").read_text().splitlines()
        assert len(lines) == len(answer["hits"])
        assert lines[1].startswith(f"{kb.kb / hit['path']}:{hit['line_start']}:1: ")

        # the normal-mode keymap: Esc to the list, SPC / back to the search field
        await pilot.press("escape")
        assert s.listing.has_focus
        await pilot.press("space", "slash")
        assert s.query_one("#query").has_focus


async def test_open_a_document_by_fuzzy_title_and_facet(kb, tmp_path, monkeypatch):
    record = tmp_path / "argv.json"
    monkeypatch.setenv(
        "EDITOR", f"{sys.executable} -c \"import json,sys; open({str(record)!r},'w').write(json.dumps(sys.argv[1:]))\""
    )
    app = make_app(kb, tmp_path, workspace="kb")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        await pilot.press("ctrl+o")
        d = app.pickers["documents"]
        await until(pilot, lambda: len(d.docs) == 16, "the workspace's documents")  # bad-encoding.md too (issue 35)
        d.query_one("#filter").value = "leasrec"
        await until(pilot, lambda: d.shown and len(d.shown) < 15, "the fuzzy filter")
        assert {x["path"] for x in d.shown[:2]} == {"runbooks/lease-recovery.md", "adrs/0012-lease-recovery.md"}
        d.query_one("#filter").value = "type:runbook"
        await until(
            pilot, lambda: d.docs and all(x["path"].startswith("runbooks/") for x in d.docs), "the facet filter"
        )
        assert len(d.docs) == 2
        await pilot.press("enter")
        await until(pilot, record.exists, "the editor")
        assert json.loads(record.read_text())[-2:] == ["+1", str(kb.kb / d.shown[0]["path"])]

        # Ctrl+F picks a facet value (counts shown, typing narrows them); Ctrl+T the workspaces
        d.query_one("#filter").value = ""
        await pilot.press("ctrl+f")
        await until(pilot, lambda: isinstance(app.screen, FacetPicker), "the facet picker")
        picker = app.screen
        labels = [str(picker.query_one("#facet-list").get_option_at_index(i).prompt) for i in range(3)]
        assert labels[0] == "tag:search  (4)", labels  # the most used tag first, with its documents
        await pilot.press(*"runbook")
        await pilot.pause()
        assert picker.shown == ["tag:runbook", "type:runbook"], picker.shown  # only what matches
        await pilot.press("backspace", "backspace", "backspace", "backspace", "backspace", "backspace", "backspace")
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is d, "back to the documents")
        assert d.query_one("FacetSelect").value == "tag:search"
        await until(pilot, lambda: len(d.docs) == 4, "the documents tagged search")
        names = [w["name"] for w in app.workspaces]
        await pilot.press("ctrl+t")
        await until(pilot, lambda: app.workspace == names[(names.index("kb") + 1) % len(names)], "the next workspace")


def many_documents(kb) -> str:
    """451 documents: past the 200 a listing page held, a dated file and one found by its title;
    the 449 notes share one facet value (type:note)."""
    folder = kb.base / "many"
    (folder / "notes").mkdir(parents=True, exist_ok=True)
    for i in range(449):
        (folder / "notes" / f"n{i:03}.md").write_text(f"---\ntype: note\n---\n# Note {i}\n\nFiller about topic {i}.\n")
    (folder / "zz").mkdir(exist_ok=True)
    (folder / "zz" / "2023-05-19-borrow-checker.md").write_text("# Fighting the borrow checker\n\nLifetimes.\n")
    (folder / "zz" / "zh.md").write_text("# Zhang-Hu collision index\n\nHashing.\n")
    if "many" not in {w["name"] for w in kb.call("workspace.list", {})["workspaces"]}:
        kb.call("workspace.add", ["many", str(folder), NO_MODEL])
        kb.call("workspace.index", ["many"])
    return "many"


async def documents_picker(pilot, app: AutodocApp, total: int):
    """The picker Ctrl+O opens, once it lists the workspace's `total` documents."""
    await ready(pilot, app)
    await pilot.press("ctrl+o")
    d = app.pickers["documents"]
    await until(pilot, lambda: d.got["total"] == total, "the workspace's documents")
    return d


async def test_the_document_picker_matches_every_document_not_the_first_200(kb, tmp_path):
    """Issue 38: Ctrl+O matched only the first 200 paths (plus a word search): `0519borrow` and
    `zhcollidx` found nothing and the header said "200 of 200 documents" in a larger workspace."""
    ws = await asyncio.to_thread(many_documents, kb)
    # the daemon's answer itself (its result schema checked: AUTODOC_CHECK_RESULTS)
    found = await rpc(kb, "document.find", [ws, "0519borrow", 5])
    assert found["total"] == 451 and found["matched"] == 1
    assert found["documents"][0]["path"] == "zz/2023-05-19-borrow-checker.md"
    assert found["documents"][0]["path_marks"][:4] == [8, 9, 11, 12]  # 0 5 1 9 of 05-19
    every = await rpc(kb, "document.find", {"workspace": ws, "limit": 1000})
    assert every["matched"] == 451 and [d["path"] for d in every["documents"]][-1] == "zz/zh.md"
    assert (await rpc(kb, "document.find", [ws, "note 12", 3]))["documents"][0]["title"] == "Note 12"

    app = make_app(kb, tmp_path, workspace=ws)
    async with app.run_test(size=(120, 40)) as pilot:
        d = await documents_picker(pilot, app, 451)
        assert "451 of 451 documents" in d.listing.border_title
        assert d.query_one("#filter").has_focus
        for typed, want in (("0519borrow", "zz/2023-05-19-borrow-checker.md"), ("zhcollidx", "zz/zh.md")):
            d.query_one("#filter").value = ""
            await pilot.pause()
            await pilot.press(*typed)
            # the answer for what was typed (the one before it matched one document too)
            await until(pilot, lambda: d.got.get("pattern") == typed and d.got["matched"] == 1, f"{typed!r} matched")
            assert d.shown[0]["path"] == want
            assert "1 of 451 documents" in d.listing.border_title


async def test_the_document_picker_with_a_facet_matches_past_the_first_200(kb, tmp_path):
    """A facet chosen: the picker listed the first 200 documents with it (a facet-only search's
    page, in path order) and matched only those, so `n448` found nothing among 449 notes."""
    ws = await asyncio.to_thread(many_documents, kb)
    found = await rpc(kb, "document.find", {"workspace": ws, "pattern": "n448", "limit": 5, "facets": "type:note"})
    assert (found["total"], found["matched"]) == (449, 1)
    assert [d["path"] for d in found["documents"]] == ["notes/n448.md"]
    none = await rpc(kb, "document.find", {"workspace": ws, "pattern": "borrow", "facets": "type:note"})
    assert none["matched"] == 0  # zz/2023-05-19-borrow-checker.md has no type
    out = await rpc(kb, "document.find", {"workspace": ws, "pattern": "borrow", "facets": "-type:note"})
    assert [d["path"] for d in out["documents"]] == ["zz/2023-05-19-borrow-checker.md"]
    with pytest.raises(Exception) as bad:  # a word that is no facet: said, not searched as a word
        await rpc(kb, "document.find", {"workspace": ws, "facets": "type:note nosuch:x"})
    assert getattr(bad.value, "code", None) == -32602 and "nosuch:x" in str(bad.value)

    app = make_app(kb, tmp_path, workspace=ws)
    async with app.run_test(size=(120, 40)) as pilot:
        d = await documents_picker(pilot, app, 451)
        await pilot.press(*"type:note n448")
        await until(pilot, lambda: d.got.get("total") == 449, "the notes")
        await until(pilot, lambda: [x["path"] for x in d.shown] == ["notes/n448.md"], "n448 among the notes")
        assert "1 of 449 documents with the facet" in d.listing.border_title


async def test_it_reconnects_when_the_daemon_restarts(tmp_path):
    """Issue 38: after the daemon restarted, the app's searches failed ("the daemon closed the
    connection") until it was restarted too; it must reconnect, and keep hearing the pushes."""
    base = Path(tempfile.mkdtemp(prefix="adtui-re-", dir="/tmp"))
    folder = base / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Wombats\n\nWombats dig burrows.\n")
    d = checked_daemon(base)
    await asyncio.to_thread(d.start)
    try:
        await asyncio.to_thread(d.call, "workspace.add", ["notes", str(folder), NO_MODEL])
        await asyncio.to_thread(d.call, "workspace.index", ["notes"])
        app = AutodocApp(
            Settings(store=d.store, socket=d.sock), start_daemon=True, state_file=tmp_path / "s" / "tui.json"
        )
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot, app)
            assert (await search(pilot, app, "wombats"))["hits"]
            first_pid = d.proc.pid
            await asyncio.to_thread(d.stop)
            await asyncio.to_thread(d.start)
            s = app.pickers["search"]
            answer = await search(pilot, app, "burrows")
            assert answer["hits"] and s.error is None, s.error
            seen = len(app.notes_seen)
            (folder / "b.md").write_text("# Echidnas\n\nEchidnas lay eggs.\n")
            await asyncio.to_thread(d.call, "workspace.index", ["notes"])
            await until(pilot, lambda: len(app.notes_seen) > seen, "a push from the new daemon")
            assert ("$/reconnected", {"socket": str(d.sock)}) in app.notes_seen

            # the daemon stops and nothing restarts it: the app starts one, as it does at its start
            await asyncio.to_thread(d.stop)
            try:
                answer = await search(pilot, app, "echidnas")
            except AssertionError:
                raise AssertionError(f"{s.error} {s.answer and s.answer['query']}") from None
            assert answer["hits"] and s.error is None, s.error
            started = await asyncio.to_thread(call_socket, d.sock, "server.info", {})
            assert started["pid"] not in (first_pid, d.proc.pid)
    finally:
        await asyncio.to_thread(d.stop)
        # the daemon the app started, stopped only now that the app is closed: stopped while the
        # app ran, the app would start another (as it should), and that one would outlive the test
        try:
            info = await asyncio.to_thread(call_socket, d.sock, "server.info", {})
        except Exception:
            info = None
        if info is not None:
            await asyncio.to_thread(call_socket, d.sock, "server.shutdown", {})
            await asyncio.to_thread(wait_gone, info["pid"])
        shutil.rmtree(base, ignore_errors=True)


async def test_add_a_workspace_indexes_it_with_progress(kb, tmp_path):
    folder = kb.base / "new-notes"
    (folder / "sub").mkdir(parents=True, exist_ok=True)
    for i in range(5):
        (folder / "sub" / f"n{i}.md").write_text(f"# Note {i}\n\nPlatypus number {i} lays eggs.\n")
    app = make_app(kb, tmp_path, workspace="kb")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        await pilot.press("ctrl+n")
        a = app.pickers["add"]
        a.query_one("#folder").value = str(folder)
        await until(pilot, lambda: a.folder == folder and "sub" in a.entries, "the folder's subfolders")
        assert str(a.query_one("#name").value) == "new-notes"  # named after the folder
        await pilot.press("ctrl+s")
        await until(pilot, lambda: a.last_report is not None, "the index run")
        assert a.last_report["added"] == 5
        bar = a.query_one("#progress")
        assert bar.total >= 5 and bar.progress == bar.total
        await until(pilot, lambda: app.workspace == "new-notes", "the new workspace in use")
        answer = await search(pilot, app, "platypus")
        assert answer["workspace"] == "new-notes" and len(answer["hits"]) == 5


# -- no daemon --------------------------------------------------------------------------------


async def test_without_a_daemon_it_starts_one_or_works_in_process(tmp_path, kb_copy):
    base = kb_copy.parent
    settings = Settings(store=base / "store" / "autodoc.db", socket=base / "run" / "autodoc.sock")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTODOC_")}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "autodoc.cli",
            "--store",
            str(settings.store),
            "workspace",
            "add",
            "kb",
            str(kb_copy),
            "--config",
            json.dumps(NO_MODEL),
        ],
        check=True,
        env=env,
        capture_output=True,
    )

    local = AutodocApp(settings, start_daemon=False, state_file=tmp_path / "a" / "tui.json")
    async with local.run_test(size=(120, 40)) as pilot:
        await ready(pilot, local)
        assert local.link.mode == "in-process"
        await pilot.press("ctrl+n")
        a = local.pickers["add"]
        assert a.query_one("#progress")
        local.workspace = "kb"
        answer = await search(pilot, local, "lease")
        assert answer["hits"] == []  # added, never indexed

    started = AutodocApp(settings, start_daemon=True, state_file=tmp_path / "b" / "tui.json")
    try:
        async with started.run_test(size=(120, 40)) as pilot:
            await ready(pilot, started)
            assert started.link.mode == "daemon"
            assert Path(started.link.socket) == settings.socket
    finally:
        from autodoc_client import call_socket

        def stop() -> None:
            pid = call_socket(settings.socket, "server.info", [])["pid"]
            call_socket(settings.socket, "server.shutdown", [])
            wait_gone(pid)

        await asyncio.to_thread(stop)


# -- the rules, without a terminal ---------------------------------------------------------------


def test_stage_rules_titles_and_what_leaves_the_app(tmp_path):
    both, lexical_only = state.Available(semantic=True), state.Available()
    c = state.Choice()
    assert state.flip(c, both, "lexical", False) is None
    assert state.flip(c, both, "semantic", False) == "one of Lexical and Semantic stays checked"
    assert state.requested(c, both) == ["semantic", "rerank"]
    # the semantic box hidden: lexical carries the search (shown checked), the stored choice kept;
    # semantic is still asked for beside it, so the answer says why it did not run
    assert state.requested(c, lexical_only) == ["lexical", "semantic", "rerank"] and c.stages["lexical"] is False
    assert state.locked(c, lexical_only, "lexical")
    state.save(tmp_path / "s.json", c)
    assert state.load(tmp_path / "s.json").stages == c.stages
    (tmp_path / "bad.json").write_text('{"stages": {"lexical": false, "semantic": false}}')
    assert state.load(tmp_path / "bad.json").stages["lexical"] is True  # a hand-edited file keeps the rule

    answer = {
        "hits": [{}],
        "mode_used": "hybrid",
        "semantic": "partial",
        "lexical_match": "all",
        "rank": {"state": "failed", "model": "m", "error": "timed out"},
        "stages": {
            "requested": ["lexical", "semantic", "rerank"],
            "performed": ["lexical", "semantic"],
            "skipped": {"rerank": "ranker m timed out"},
        },
    }
    title, status = state.describe(answer, state.Choice(), both, state.Embedding("partial", 18, "18 chunks wait"))
    assert title == "1 hit"
    assert status == "not re-ranked: ranker m timed out · semantic partial: 18 chunks wait"

    assert fuzzy.score("lrc", "lease recovery")[1] == [0, 6, 8]
    assert fuzzy.score("xyz", "lease recovery") is None
    assert render.find_words("The lease, leases and release.", ["lease"]) == [(4, 9)]
    assert render.find_words("The lease, leases and release.", ["lease*"]) == [(4, 9), (11, 17)]
    assert render.editor_argv("/k/a.md", 12, {"EDITOR": "code --wait"}) == ["code", "--wait", "+12", "/k/a.md"]
    hit = {
        "workspace": "k",
        "path": "a.md",
        "line_start": 3,
        "line_end": 5,
        "breadcrumb": "A › B",
        "snippet": "the «lease» file",
    }
    assert render.ref(hit) == "k:a.md#L3-5"
    assert render.ref({**hit, "path": "adr/explorers copy.md"}) == "'k:adr/explorers copy.md#L3-5'"
    assert render.quickfix_lines([hit], "/k") == ["/k/a.md:3:1: A › B  the lease file"]
