"""What a new user met trying the installed `autodoc` (trial 5): each finding as the CLI process
shows it, on an isolated home (XDG dirs and the store under a short temp folder)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

AUTODOC = str(Path(sys.executable).with_name("autodoc"))
KB = Path(__file__).parents[1] / "corpora" / "kb"
WORDS_ONLY = '{"embedding": {"provider": "none"}}'
HIT = re.compile(r"^\s*\d+\. (\S+)  (\d\.\d\d)  \[")  # ` 1. kb:path#L1-3  0.93  [lexical]`


def ok(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    p = subprocess.run([AUTODOC, *args], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
    return p


@pytest.fixture(scope="module")
def two_env():
    """kb (tests/corpora/kb) and `small`, two notes on leases, indexed by words, no daemon."""
    home = Path(__import__("tempfile").mkdtemp(prefix="ad5-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if k not in ("AUTODOC_STORE", "AUTODOC_SOCKET")}
    env.update(XDG_DATA_HOME=str(home / "data"), XDG_RUNTIME_DIR=str(home / "run"))
    (home / "run").mkdir(mode=0o700)
    env["AUTODOC_STORE"] = str(home / "store" / "a.db")
    shutil.copytree(KB, home / "kb", symlinks=True)
    small = home / "small"
    small.mkdir()
    (small / "lease-notes.md").write_text("# Lease notes\n\nA lease is renewed every ten seconds.\n")
    (small / "other.md").write_text("# Other\n\nNothing about the subject here.\n")
    for name in ("kb", "small"):
        ok(env, "workspace", "add", name, str(home / name), "--config", WORDS_ONLY)
        ok(env, "index", name)
    yield env
    shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize(
    "pick, query",
    [
        (["-w", "kb"], "lease recovery"),
        ([], "lease"),  # every workspace, merged by confidence
        (["-w", "kb"], "how do I rotate the mongodb atlas api keys"),  # answerable: false
    ],
)
def test_the_score_printed_is_the_confidence_the_hits_are_ordered_by(two_env, pick, query):
    """The number beside each hit was its `relevance` (each search's own scale, 1.00 at the top
    of an answer that says "nothing relevant was found", and out of order in a merged list of
    several workspaces, which is ordered by confidence): it is the calibrated confidence, as
    --compact and MCP print it."""
    answer = json.loads(ok(two_env, "search", *pick, "--json", query).stdout)
    human = ok(two_env, "search", *pick, query).stdout
    printed = [(m.group(1), float(m.group(2))) for line in human.splitlines() if (m := HIT.match(line))]
    assert len(printed) == len(answer["hits"]) > 0, human
    for (loc, shown), h in zip(printed, answer["hits"], strict=True):
        assert h["path"] in loc and shown == pytest.approx(h["confidence"], abs=0.006), (loc, shown, h)
    scores = [s for _, s in printed]
    assert scores == sorted(scores, reverse=True), human


def test_the_left_out_hint_is_a_command_that_keeps_what_is_indexed(short_tmp):
    """`workspace status` said `add "*.md.erb" ... to the workspace option markdown (autodoc workspace
    configure kb '{"markdown": [...]}')`; the option is a list that replaces the one in effect, so
    the user who wrote the entries named there left out every .md file the workspace had (91 files
    of an ADR folder dropped from the index at once). The hint is the whole command, the entries in
    effect and the new ones; run as printed, it keeps the .md files and takes in the others."""
    env = {k: v for k, v in os.environ.items() if k not in ("AUTODOC_STORE", "AUTODOC_SOCKET")}
    env.update(XDG_DATA_HOME=str(short_tmp / "data"), XDG_RUNTIME_DIR=str(short_tmp / "run"))
    env["AUTODOC_STORE"] = str(short_tmp / "store" / "a.db")
    (short_tmp / "run").mkdir(mode=0o700)
    kb = short_tmp / "kb"
    (kb / ".github").mkdir(parents=True)
    (kb / "runbook.md").write_text("# Runbook\n\nRestart the wombat service.\n")
    (kb / "playbook.html.md.erb").write_text("# Playbook\n\n<%= partial 'x' %> Page the grommet team.\n")
    (kb / ".github" / "CONTRIBUTING.md").write_text("# Contributing\n\nRun make frobnicate.\n")
    ok(env, "workspace", "add", "ops.kb", str(kb), "--config", WORDS_ONLY)
    indexed = ok(env, "index", "ops.kb")
    status = ok(env, "workspace", "status", "ops.kb").stdout
    for said in (indexed.stderr, status):
        hint = [line.strip() for line in said.splitlines() if "autodoc workspace configure" in line]
        assert len(hint) == 1, said
        cmd = shlex.split(hint[0][hint[0].index("autodoc workspace configure") :])
        assert cmd[:4] == ["autodoc", "workspace", "configure", "ops.kb"], cmd
        assert json.loads(cmd[4])["markdown"][:5] == [".md", ".markdown", ".mdown", ".mkd", ".mdx"], cmd
    configured = ok(env, *cmd[1:])
    assert "left out" not in configured.stderr, configured.stderr
    ok(env, "index", "ops.kb")
    files = json.loads(ok(env, "workspace", "status", "ops.kb", "--json").stdout)["files"]
    assert files["indexed"] == 3 and not files["left_out"]["files"], files
    for word in ("wombat", "grommet", "frobnicate"):
        assert json.loads(ok(env, "search", "-w", "ops.kb", "--json", word).stdout)["hits"], word


def test_configure_says_at_once_what_a_markdown_list_leaves_out(short_tmp):
    """A `markdown` list without `.md` drops every .md file from the index as it is saved: the
    command says so on stderr (what is left out now, and the command that takes it back in)."""
    env = {k: v for k, v in os.environ.items() if k not in ("AUTODOC_STORE", "AUTODOC_SOCKET")}
    env.update(XDG_DATA_HOME=str(short_tmp / "data"), XDG_RUNTIME_DIR=str(short_tmp / "run"))
    env["AUTODOC_STORE"] = str(short_tmp / "store" / "a.db")
    (short_tmp / "run").mkdir(mode=0o700)
    kb = short_tmp / "kb"
    kb.mkdir()
    (kb / "runbook.md").write_text("# Runbook\n\nRestart the wombat service.\n")
    (kb / "notes.txt").write_text("plain words\n")
    ok(env, "workspace", "add", "kb", str(kb), "--config", WORDS_ONLY)
    ok(env, "index", "kb")
    p = ok(env, "workspace", "configure", "kb", '{"markdown": ["*.txt"]}')
    assert json.loads(p.stdout)["markdown"] == ["*.txt"]  # stdout stays the config, JSON
    assert "left out: 1 file that looks like Markdown (1 .md)" in p.stderr, p.stderr
    assert '"markdown": ["*.txt", "*.md"]' in p.stderr, p.stderr


@pytest.fixture()
def never_indexed(short_tmp):
    """`indexed` (one note, indexed) and `fresh`, a workspace added but never indexed (README's
    tour runs `autodoc index` after `workspace add`: a user who skipped it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("AUTODOC_STORE", "AUTODOC_SOCKET")}
    env.update(XDG_DATA_HOME=str(short_tmp / "data"), XDG_RUNTIME_DIR=str(short_tmp / "run"), HOME=str(short_tmp))
    env["AUTODOC_STORE"] = str(short_tmp / "store" / "a.db")
    (short_tmp / "run").mkdir(mode=0o700)
    for name in ("indexed", "fresh"):
        (short_tmp / name).mkdir()
        (short_tmp / name / "runbook.md").write_text("# Runbook\n\nRestart the wombat service.\n")
        ok(env, "workspace", "add", name, str(short_tmp / name), "--config", WORDS_ONLY)
    ok(env, "index", "indexed")
    return env


def test_a_workspace_never_indexed_says_so_where_a_search_finds_nothing(never_indexed):
    """`autodoc search -w fresh wombat` answered `0 hits ... semantic ready` and `no hits`, as if
    the words were wrong, and `workspace status` `0 indexed of 1 on disk` with no next step."""
    human = ok(never_indexed, "search", "-w", "fresh", "wombat").stdout
    first = human.splitlines()[0]
    assert first.startswith("fresh: 0 hits") and "holds no documents yet: autodoc index fresh" in first, human
    both = ok(never_indexed, "search", "wombat").stdout.splitlines()
    assert "holds no documents" not in next(x for x in both if x.startswith("indexed: ")), both
    assert "autodoc index fresh" in next(x for x in both if x.startswith("fresh: ")), both
    status = ok(never_indexed, "workspace", "status", "fresh").stdout
    assert "0 indexed of 1 on disk" in status and "not indexed yet: autodoc index fresh" in status, status
    assert "not indexed yet" not in ok(never_indexed, "workspace", "status", "indexed").stdout


async def test_mcp_search_of_a_workspace_never_indexed_says_to_index_it(never_indexed):
    """The MCP search answered `nothing relevant found: try other words, fewer filters, or list to
    browse`: an agent tries other words on a workspace that holds nothing."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=AUTODOC, args=["mcp", "--in-process"], env=never_indexed)
    async with Client(params) as c:
        r = await c.call_tool("search", {"query": "wombat", "workspace": "fresh"})
        text, notes = r.content[0].text, (r.structured_content or {}).get("notes", [])
        assert not r.is_error and "try other words" not in text, text
        said = "fresh holds no documents yet: its folder was never indexed (autodoc index fresh)"
        assert said in notes and said in text, text
        r = await c.call_tool("search", {"query": "wombat"})  # every workspace: the indexed one answers
        text, answer = r.content[0].text, r.structured_content or {}
        assert answer["hits"] and answer["hits"][0]["ref"].startswith("indexed:runbook.md"), text
        assert any(n.startswith("fresh holds no documents yet") for n in answer["notes"]), answer["notes"]


def test_a_stage_left_out_by_stages_is_not_said_to_be_off(two_env):
    """`--stages lexical` printed `semantic off`, which reads as a stage that could not run."""
    first = ok(two_env, "search", "-w", "kb", "--stages", "lexical", "lease").stdout.splitlines()[0]
    assert first.endswith("mode lexical (ran lexical); semantic not asked for (--stages)"), first
    first = ok(two_env, "search", "-w", "kb", "lease").stdout.splitlines()[0]
    assert "semantic off: no embedding model is configured" in first, first


async def test_the_tui_says_a_workspace_never_indexed_holds_nothing(never_indexed, tmp_path):
    """The TUI's search of a workspace never indexed read `fresh · 0 hits`, `semantic ready`."""
    from autodoc.config import Settings
    from autodoc.tui.app import AutodocApp

    store = Path(never_indexed["AUTODOC_STORE"])
    settings = Settings(store=store, socket=store.parent / "none.sock")
    app = AutodocApp(settings, start_daemon=False, state_file=tmp_path / "tui.json", workspace="fresh")
    async with app.run_test(size=(120, 40)) as pilot:
        s = app.pickers["search"]

        async def answer(query: str, ws: str) -> str:
            deadline = asyncio.get_running_loop().time() + 30
            while not (app.shown_workspace == ws and s.is_mounted):
                assert asyncio.get_running_loop().time() < deadline, "the workspace"
                await pilot.pause(0.02)
            s.query_one("#query").value = query
            while not (s.answer and s.pending is None and s.answer["query"] == query):
                assert asyncio.get_running_loop().time() < deadline, f"the answer to {query!r}"
                await pilot.pause(0.02)
            return str(s.query_one("#status").render())

        said = await answer("wombat", "fresh")
        assert "fresh holds no documents yet: its folder was never indexed (autodoc index fresh)" in said, said
        app.use_workspace("indexed")
        said = await answer("wombats", "indexed")
        assert s.hits and "never indexed" not in said, said


async def test_the_tui_says_how_many_hits_the_relevance_floor_held_back(short_tmp, tmp_path):
    """Every client reports what the relevance floor held back (issue 35); the TUI's search of a
    word no note holds read `0 hits` alone, as if nothing had been searched."""
    from autodoc.config import Settings
    from autodoc.tui.app import AutodocApp

    env = {k: v for k, v in os.environ.items() if k not in ("AUTODOC_STORE", "AUTODOC_SOCKET")}
    env.update(XDG_RUNTIME_DIR=str(short_tmp), AUTODOC_STORE=str(short_tmp / "store" / "a.db"))
    shutil.copytree(KB, short_tmp / "kb", symlinks=True)
    ok(env, "workspace", "add", "kb", str(short_tmp / "kb"))  # the bundled model: hits by meaning too
    ok(env, "index", "--wait", "kb")
    store = Path(env["AUTODOC_STORE"])
    settings = Settings(store=store, socket=short_tmp / "none.sock")
    app = AutodocApp(settings, start_daemon=False, state_file=tmp_path / "tui.json", workspace="kb")
    async with app.run_test(size=(120, 40)) as pilot:
        s = app.pickers["search"]
        deadline = asyncio.get_running_loop().time() + 30
        while not (app.shown_workspace == "kb" and s.is_mounted):
            assert asyncio.get_running_loop().time() < deadline, "the workspace"
            await pilot.pause(0.02)
        for query in ("lease", "wombat"):
            s.query_one("#query").value = query
            while not (s.answer and s.pending is None and s.answer["query"] == query):
                assert asyncio.get_running_loop().time() < deadline, f"the answer to {query!r}"
                await pilot.pause(0.02)
            held = s.answer["held_back"]
            assert held > 0, s.answer  # the corpus holds a few notes on leases and none on wombats
            assert f"{held} weak hits held back" in str(s.query_one("#status").render()), query


def test_adding_a_folder_another_workspace_covers_says_so(short_tmp):
    """`workspace add dup <the folder of adr>` was taken silently; every search of all workspaces
    then listed each of its files twice. The workspace is added (two configurations of one folder
    are a choice), with a note naming the other and how to undo it."""
    env = {k: v for k, v in os.environ.items() if k not in ("AUTODOC_STORE", "AUTODOC_SOCKET")}
    env.update(XDG_RUNTIME_DIR=str(short_tmp), AUTODOC_STORE=str(short_tmp / "store" / "a.db"))
    docs = short_tmp / "docs"
    (docs / "adr").mkdir(parents=True)
    (short_tmp / "elsewhere").mkdir()
    first = ok(env, "workspace", "add", "adr", str(docs / "adr"), "--config", WORDS_ONLY)
    assert first.stderr == "", first.stderr
    same = ok(env, "workspace", "add", "dup", str(docs / "adr"), "--config", WORDS_ONLY)
    assert same.stdout.startswith("added workspace dup")
    assert f"workspace adr ({docs / 'adr'}) indexes this folder too" in same.stderr, same.stderr
    assert "autodoc workspace remove dup" in same.stderr
    outer = ok(env, "workspace", "add", "all", str(docs), "--config", WORDS_ONLY).stderr
    assert "workspace adr" in outer and "lies in this folder" in outer and "workspace dup" in outer, outer
    inner = ok(env, "workspace", "add", "inner", str(docs / "adr"), "--config", WORDS_ONLY).stderr
    assert "workspace all" in inner and "holds this folder" in inner, inner
    assert ok(env, "workspace", "add", "other", str(short_tmp / "elsewhere"), "--config", WORDS_ONLY).stderr == ""


async def test_a_folder_typed_after_clearing_the_field_is_kept(never_indexed, short_tmp, tmp_path):
    """In the add-a-workspace picker, Ctrl+U and a path typed after it left the field at the
    folder the picker started in: the empty field was read as the working folder, written back
    into the field with the cursor before it, and what was typed next went in front of it."""
    from autodoc.config import Settings
    from autodoc.tui.app import AutodocApp

    target = short_tmp / "fresh"
    store = Path(never_indexed["AUTODOC_STORE"])
    settings = Settings(store=store, socket=store.parent / "none.sock")
    app = AutodocApp(settings, start_daemon=False, state_file=tmp_path / "tui.json", workspace="indexed")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+n")
        a = app.pickers["add"]
        deadline = asyncio.get_running_loop().time() + 30
        while not a.is_mounted:
            assert asyncio.get_running_loop().time() < deadline, "the add picker"
            await pilot.pause(0.02)
        field = a.query_one("#folder")
        field.focus()
        await pilot.press("end", "ctrl+u")
        assert field.value == "", field.value  # cleared, for a path to be typed
        await pilot.press(*str(target))
        while a.folder != target:
            assert asyncio.get_running_loop().time() < deadline, f"at {field.value!r}, not {target}"
            await pilot.pause(0.02)
        assert field.value == str(target) and a.query_one("#name").value == "fresh", field.value
        title = a.query_one("#preview-title")
        while "in fresh" not in str(title.render()):
            assert asyncio.get_running_loop().time() < deadline, "the folder's count"
            await pilot.pause(0.02)
        assert str(title.render()) == "1 Markdown file in fresh"  # it read "1 Markdown files"


FOAM = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora" / "foam-docs"


@pytest.mark.skipif(not FOAM.is_dir(), reason=f"no corpus at {FOAM}")
async def test_mcp_links_say_each_document_once_with_the_lines_that_link(short_tmp):
    """The links tool's text was its JSON: on foam-docs' index page (74 links) ~2,900 tokens, each
    link's path, title, kind and line, a document linked twice said twice. The text says each
    document once, by a ref `read` takes, with its title and lines; the structured answer is kept."""
    from mcp import Client, StdioServerParameters

    env = {k: v for k, v in os.environ.items() if k not in ("AUTODOC_STORE", "AUTODOC_SOCKET")}
    env.update(XDG_RUNTIME_DIR=str(short_tmp), AUTODOC_STORE=str(short_tmp / "store" / "a.db"), HOME=str(short_tmp))
    ok(env, "workspace", "add", "foam", str(FOAM), "--config", WORDS_ONLY)  # read in place, never written
    ok(env, "index", "foam")
    params = StdioServerParameters(command=AUTODOC, args=["mcp", "--in-process"], env=env)
    async with Client(params) as c:
        for path in ("docs/user/index.md", "docs/user/features/tags.md"):
            r = await c.call_tool("links", {"ref": f"foam:{path}"})
            text, out = r.content[0].text, r.structured_content or {}
            assert not r.is_error and out["out"], text
            assert len(text) <= 0.4 * len(json.dumps(out, ensure_ascii=False, separators=(",", ":"))), text
            assert text.splitlines()[0] == f"foam:{path}" and f"links out: {len(out['out'])}" in text, text
            assert f"links in: {len(out['in'])}" in text, text
            head, _, tail = text.partition("\nlinks in: ")
            for links, part in ((out["out"], head), (out["in"], tail)):  # each document once in each
                rows = {line.strip().split(" · ")[0]: line for line in part.splitlines() if line.startswith("  ")}
                assert len(rows) == len([x for x in part.splitlines() if x.startswith("  ")]), part
                for link in links:  # and every line that links (a broken one by its target)
                    doc = link["ref"].split("#L")[0] if "ref" in link else f"{link['target']} (broken)"
                    assert f"L{link['line']}" in rows[doc].split(" · ")[-1].split(", "), (link, rows[doc])
                assert len(rows) == len({(x.get("ref") or x["target"]).split("#L")[0] for x in links}), part
            for ref in [r for r in rows if r.startswith("foam:")][:5]:  # refs as printed are what `read` takes
                got = await c.call_tool("read", {"ref": ref, "max_lines": 1})
                assert not got.is_error, (ref, got.content[0].text)


@pytest.mark.skipif(not FOAM.is_dir(), reason=f"no corpus at {FOAM}")
async def test_mcp_list_changes_and_similar_read_one_line_a_document(short_tmp):
    """`list` (50 documents by default), `changes` (100) and `similar` answered their JSON as the
    text: each key on every line, `similar` each path twice (its ref and `path`). One line a
    document, each path said once, the refs as `read` takes them; the structured answers unchanged."""
    from mcp import Client, StdioServerParameters

    env = {k: v for k, v in os.environ.items() if k not in ("AUTODOC_STORE", "AUTODOC_SOCKET")}
    env.update(XDG_RUNTIME_DIR=str(short_tmp), AUTODOC_STORE=str(short_tmp / "store" / "a.db"), HOME=str(short_tmp))
    features = short_tmp / "foam" / "docs" / "user" / "features"  # 19 pages: embedded in seconds
    shutil.copytree(FOAM / "docs" / "user" / "features", features)
    ok(env, "workspace", "add", "foam", str(short_tmp / "foam"))  # the bundled model: `similar` compares vectors
    ok(env, "index", "--wait", "foam")
    moved = short_tmp / "foam" / "docs" / "user" / "features" / "tags.md"
    moved.rename(moved.with_name("tagging.md"))
    ok(env, "index", "foam")
    params = StdioServerParameters(command=AUTODOC, args=["mcp", "--in-process"], env=env)
    compact = (",", ":")
    async with Client(params) as c:
        for tool, args, key, share in (  # share: the text's length at most this part of the JSON's
            ("list", {"paths": ["docs/user/"]}, "documents", 0.8),
            ("changes", {}, "changes", 0.7),
            ("similar", {"ref": "foam:docs/user/features/wikilinks.md", "limit": 8}, "similar", 0.6),
        ):
            r = await c.call_tool(tool, args)
            text, out = r.content[0].text, r.structured_content or {}
            assert not r.is_error and len(out[key]) >= 8, (tool, text)
            rows = [line.strip() for line in text.splitlines() if line.startswith("  ")]
            assert len(rows) == len(out[key]), (tool, text)  # one line each
            assert len(text) <= share * len(json.dumps(out, ensure_ascii=False, separators=compact)), (tool, text)
            for row, item in zip(rows, out[key], strict=True):
                ref = item.get("ref") or f"{item['workspace']}:{item['path']}"
                assert ref in row and row.count(ref.split("#L")[0]) == 1, (tool, row)
            for item in out[key][:3]:
                ref = item.get("ref") or f"{item['workspace']}:{item['path']}"
                if tool != "changes" or item["op"] != "delete":
                    got = await c.call_tool("read", {"ref": ref, "max_lines": 1})
                    assert not got.is_error, (tool, ref, got.content[0].text)
        r = await c.call_tool("changes", {})
        assert "rename foam:docs/user/features/tagging.md (was docs/user/features/tags.md)" in r.content[0].text
