"""Issue 38's CLI findings, each as a user met it: the installed `autodoc` run as a process
on an isolated home (XDG_DATA_HOME, XDG_RUNTIME_DIR, the store under a short temp folder)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

AUTODOC = str(Path(sys.executable).with_name("autodoc"))
KB = Path(__file__).parents[1] / "corpora" / "kb"
LEASE_ADR = "adrs/0012-lease-recovery.md"  # 158 lines


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AUTODOC, *args], env=env, capture_output=True, text=True, timeout=120)


def fresh_env(home: Path) -> dict[str, str]:
    """A user right after install: nothing chosen, so the store and socket are the XDG defaults."""
    e = {k: v for k, v in os.environ.items() if k not in ("AUTODOC_STORE", "AUTODOC_SOCKET")}
    e["XDG_DATA_HOME"] = str(home / "data")
    e["XDG_RUNTIME_DIR"] = str(home / "run")
    (home / "run").mkdir(mode=0o700)
    return e


def test_doctor_right_after_install_is_ok_and_names_the_socket(short_tmp):
    env = fresh_env(short_tmp)
    p = run(env, "doctor")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "FAIL" not in p.stdout
    store = short_tmp / "data" / "autodoc" / "autodoc.db"
    assert f"ok    store: no store yet at {store}" in p.stdout, p.stdout
    assert "autodoc workspace add NAME FOLDER" in p.stdout
    # the README promises a socket line: with no daemon it says none runs and how to start one
    sock_line = [line for line in p.stdout.splitlines() if line.startswith("ok    socket: ")]
    assert sock_line and "no daemon" in sock_line[0] and "autodoc serve --socket" in sock_line[0], p.stdout
    assert not store.exists()  # doctor only reads: it created nothing
    listed = json.loads(run(env, "doctor", "--json").stdout)
    assert [c["name"] for c in listed][:3] == ["store", "lease", "socket"]


def test_doctor_still_fails_on_what_is_broken(short_tmp):
    env = fresh_env(short_tmp)
    store = short_tmp / "data" / "autodoc" / "autodoc.db"
    store.parent.mkdir(parents=True)
    store.write_text("not a database")
    p = run(env, "doctor")
    assert p.returncode == 1 and "FAIL  store:" in p.stdout, p.stdout


@pytest.fixture()
def kb_env(short_tmp):
    """A store with tests/corpora/kb indexed as workspace kb (words only: no model), no daemon."""
    env = fresh_env(short_tmp)
    env["AUTODOC_STORE"] = str(short_tmp / "store" / "a.db")
    shutil.copytree(KB, short_tmp / "kb", symlinks=True)
    ok(env, "workspace", "add", "kb", str(short_tmp / "kb"), "--config", '{"embedding": {"provider": "none"}}')
    ok(env, "index", "kb")
    return env


def ok(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    p = run(env, *args)
    assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
    return p


def test_a_query_may_begin_with_a_dash(kb_env):
    every = json.loads(ok(kb_env, "search", "-w", "kb", "--json", "status:superseded", "-n", "50").stdout)
    others = json.loads(ok(kb_env, "search", "-w", "kb", "--json", "-status:superseded", "-n", "50").stdout)
    assert every["hits"] and others["hits"]
    assert not {h["path"] for h in every["hits"]} & {h["path"] for h in others["hits"]}
    # words after the dash-word still count, options after them still are options, and `--` still works
    mixed = json.loads(ok(kb_env, "search", "-w", "kb", "-status:superseded", "lease", "--json").stdout)
    assert mixed["query"] == "-status:superseded lease", mixed["query"]
    assert json.loads(ok(kb_env, "search", "-w", "kb", "--json", "--", "-status:superseded").stdout)["hits"]
    # a word that starts like a short option (-w, -n) is a word, not -w "iki"
    assert ok(kb_env, "search", "-w", "kb", "lease", "-wiki", "--json").returncode == 0


@pytest.mark.parametrize(
    "args, said",
    [
        (["search", "-w", "kb", "lease", "-n", "500"], "autodoc: -n 500: must be ≤ 200"),
        (["search", "-w", "kb", "lease", "--stages", "lexical,foo"], "autodoc: --stages lexical,foo: must be one of"),
        (["search", "-w", "kb", "lease", "--compact", "--budget", "100"], "autodoc: --budget 100: must be ≥ 300"),
        (["read", "kb", LEASE_ADR, "--lines", "30:20"], "autodoc: --lines 30:20: the end comes before the start"),
    ],
)
def test_errors_name_the_flag_that_was_typed(kb_env, args, said):
    p = run(kb_env, *args)
    assert p.returncode == 2 and said in p.stderr, p.stderr
    assert "opts." not in p.stderr


def test_lines_past_the_end_are_clamped_and_said(kb_env):
    p = ok(kb_env, "read", "kb", LEASE_ADR, "--lines", "150:600")
    whole = (Path(kb_env["AUTODOC_STORE"]).parents[1] / "kb" / LEASE_ADR).read_text().split("\n")
    assert p.stdout.rstrip("\n") == "\n".join(whole[149:158]).rstrip("\n")
    assert "lines clamped to the document's 158 lines" in p.stderr, p.stderr
    # starting past the end: its last lines, said (MCP's read does the same)
    late = ok(kb_env, "read", "kb", LEASE_ADR, "--lines", "500:600")
    assert late.stdout and "the document has 158 lines" in late.stderr, late.stderr


def test_budget_implies_compact_and_stages_help_names_graph(kb_env):
    answer = json.loads(ok(kb_env, "search", "-w", "kb", "--json", "--budget", "400", "lease").stdout)
    assert answer["answer"] == "compact" and answer["tokens"] <= 400
    assert "graph" in ok(kb_env, "search", "--help").stdout


def test_workspace_status_is_a_summary_for_people_and_json_with_json(kb_env):
    human = ok(kb_env, "workspace", "status", "kb").stdout
    assert not human.lstrip().startswith("{"), human
    # notes/bad-encoding.md is indexed, its bad bytes replaced, with a problem saying so (issue 35)
    assert "kb: " in human and "16 indexed" in human and "59 chunks" in human, human
    assert "skipped notes/diagram-export.md: binary file" in human, human
    assert "search by meaning: off" in human and "problems: 2" in human, human
    # what the markdown option leaves out, and how to take it in (issue 35)
    assert "  left out: 1 hidden file (notes/.scratch.md); 1 hidden folder (.obsidian/)" in human, human
    answer = json.loads(ok(kb_env, "workspace", "status", "kb", "--json").stdout)
    assert answer["name"] == "kb" and answer["files"]["indexed"] == 16


def test_session_import_skips_a_line_that_is_not_json_and_says_which(kb_env, short_tmp):
    chat = short_tmp / "chat.jsonl"
    chat.write_text(
        '{"role": "user", "content": "how do we recover the lease"}\n'
        "this line is not JSON\n"
        '{"role": "assistant", "content": "reclaim it after the holder died"}\n'
        "[1, 2]\n"
    )
    p = ok(kb_env, "session", "import", "kb", str(chat))
    assert "2 events read" in p.stdout, p.stdout
    assert "2 lines skipped (not a JSON event: lines 2, 4)" in p.stdout + p.stderr, (p.stdout, p.stderr)
    listed = ok(kb_env, "session", "list", "kb").stdout
    assert "chat\t2 events" in listed, listed
    chat.write_text("nothing here is JSON\n")
    bad = run(kb_env, "session", "import", "kb", str(chat))
    assert bad.returncode == 2 and "no line of" in bad.stderr, bad.stderr


def test_search_says_its_mode_and_semantic_state_first_on_stdout(kb_env):
    p = ok(kb_env, "search", "-w", "kb", "lease")
    first = p.stdout.splitlines()[0]
    assert first.startswith("kb: ") and "mode lexical" in first, p.stdout
    assert "semantic off: no embedding model is configured" in first, first
    assert p.stderr == "", p.stderr


@pytest.fixture()
def two_env(kb_env, short_tmp):
    """kb, and a second workspace `small` of two notes, both about leases."""
    small = short_tmp / "small"
    small.mkdir()
    (small / "lease-notes.md").write_text("# Lease notes\n\nA lease is renewed every ten seconds.\n")
    (small / "other.md").write_text("# Other\n\nNothing about the subject here.\n")
    ok(kb_env, "workspace", "add", "small", str(small), "--config", '{"embedding": {"provider": "none"}}')
    ok(kb_env, "index", "small")
    return kb_env


@pytest.mark.parametrize("pick", [["-w", "kb,small"], ["-w", "*"], []])
def test_search_every_workspace_or_a_list(two_env, pick):
    answer = json.loads(ok(two_env, "search", *pick, "--json", "lease", "-n", "20").stdout)
    assert answer["workspaces"] == ["kb", "small"], answer.get("workspaces")
    found = {h["workspace"] for h in answer["hits"]}
    assert found == {"kb", "small"}, found
    assert len(answer["hits"]) <= 20 and set(answer["answers"]) == {"kb", "small"}
    conf = [h["confidence"] for h in answer["hits"]]
    assert conf == sorted(conf, reverse=True)  # one list, the most confident first, as MCP merges
    human = ok(two_env, "search", *pick, "lease").stdout
    lines = human.splitlines()
    assert lines[0].startswith("kb: ") and lines[[x.startswith("small: ") for x in lines].index(True)]
    assert "small:lease-notes.md#L1-3" in human, human


def test_search_a_list_compact_and_a_wrong_name(two_env):
    answer = json.loads(ok(two_env, "search", "-w", "small,kb", "--json", "--budget", "600", "lease").stdout)
    assert {h["ref"].split(":")[0] for h in answer["hits"]} == {"kb", "small"}
    assert answer["tokens"] <= 600
    p = run(two_env, "search", "-w", "kb,smal", "lease")
    assert p.returncode == 2 and "no workspace named 'smal'" in p.stderr and "did you mean: small" in p.stderr


def test_one_ref_format_quoted_when_needed_and_read_takes_it_back(kb_env, short_tmp):
    """Issue 38: the TUI copied `adr/…md:174-210`, --compact printed `notes:adr/…explorers copy.md#L194-196`
    (a space, unquoted); one format everywhere (`WS:PATH#LA-B`), shell-quoted when needed, and `read`
    takes it back."""
    notes = short_tmp / "notes"
    (notes / "adr").mkdir(parents=True)
    (notes / "adr" / "explorers copy.md").write_text(
        "# Explorers\n\nintro\n\n## Wombat burrows\n\nWombats dig burrows in the bush.\nThey sleep by day.\n"
    )
    ok(kb_env, "workspace", "add", "notes", str(notes), "--config", '{"embedding": {"provider": "none"}}')
    ok(kb_env, "index", "notes")
    compact = ok(kb_env, "search", "-w", "notes", "--compact", "wombats burrows").stdout
    line = next(x for x in compact.splitlines() if x.startswith(" 1. "))
    printed = line[4:].split("  ")[0]
    assert printed.startswith("'notes:adr/explorers copy.md#L") and printed.endswith("'"), line
    full = ok(kb_env, "search", "-w", "notes", "wombats burrows").stdout
    assert " 1. 'notes:adr/explorers copy.md#L" in full, full
    ref = printed[1:-1]  # what the shell hands `read` for the quoted word
    text = ok(kb_env, "read", ref).stdout
    assert "Wombats dig burrows in the bush." in text and "# Explorers" not in text, text
    whole = ok(kb_env, "read", "notes:adr/explorers copy.md").stdout
    assert whole.startswith("# Explorers"), whole
    # the two-argument form still works, and a ref without a workspace is refused with the names
    assert (
        ok(kb_env, "read", "notes", "adr/explorers copy.md", "--lines", "7").stdout
        == "Wombats dig burrows in the bush.\n"
    )
    p = run(kb_env, "read", "adr/explorers copy.md#L7")
    assert p.returncode == 2 and "kb, notes" in p.stderr, p.stderr
    # a name needing no quotes is printed bare
    plain = ok(kb_env, "search", "-w", "kb", "--compact", "lease recovery").stdout
    assert " 1. kb:" in plain and "#L" in plain, plain


def test_workspace_status_without_a_name_is_every_workspace(two_env):
    # a reader of a team's database does not know the workspaces' names yet (README, For a team)
    human = ok(two_env, "workspace", "status").stdout
    firsts = [line.split(":")[0] for line in human.splitlines() if not line.startswith(" ") and line]
    assert firsts == ["kb", "small"], human
    assert "16 indexed" in human and "2 indexed" in human, human
    answers = json.loads(ok(two_env, "workspace", "status", "--json").stdout)
    assert [a["name"] for a in answers] == ["kb", "small"], answers
