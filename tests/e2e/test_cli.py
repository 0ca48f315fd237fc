"""The command line, for people and scripts: real processes on a real store,
in-process when no daemon runs and through the daemon's socket when one does."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.daemon import Daemon

CORPUS = Path(__file__).parents[1] / "corpora" / "kb"


def run(env, *args, check=True):
    p = subprocess.run(
        [sys.executable, "-m", "autodoc.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )
    if check and p.returncode != 0:
        raise AssertionError(f"autodoc {' '.join(args)} → {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def start_daemon(daemon_factory, env) -> Daemon:
    """`autodoc serve --socket` (its store and socket from the env), once its socket answers."""
    argv = [sys.executable, "-m", "autodoc.cli", "serve", "--socket"]
    return daemon_factory(
        store=Path(env["AUTODOC_STORE"]), sock=Path(env["AUTODOC_SOCKET"]), argv=argv, env=env, timeout=30
    )


@pytest.fixture()
def env(short_tmp):
    e = dict(os.environ)
    e["AUTODOC_STORE"] = str(short_tmp / "store" / "a.db")
    e["AUTODOC_SOCKET"] = str(short_tmp / "d.sock")
    e["XDG_RUNTIME_DIR"] = str(short_tmp)
    kb = short_tmp / "kb"
    from corpora.make_special import ensure_special_files

    ensure_special_files()
    shutil.copytree(CORPUS, kb, symlinks=True)
    run(e, "workspace", "add", "kb", str(kb), "--config", '{"embedding": {"provider": "none"}}')
    return e


def test_people_commands_in_process(env):
    out = run(env, "index", "kb")
    assert "added" in out.stdout and "skipped" in out.stdout
    assert "notes/diagram-export.md" in out.stderr  # the skip reasons are shown
    # stderr is a pipe here, as in scripts and CI: plain progress lines, not a bar that turns itself
    # off (a trial's index sat silent for minutes); the embedding's outcome has a line of its own
    assert re.search(r"^autodoc: indexing \d+/\d+ files$", out.stderr, re.M), out.stderr
    assert "kb: search by meaning is off: " in out.stdout
    listed = run(env, "workspace", "list").stdout
    assert listed.startswith("kb\t") and "documents" in listed
    human = run(env, "search", "-w", "kb", "reclaimBatch", "-n", "2").stdout
    assert "«reclaimBatch»" in human and ".md#L" in human
    answer = json.loads(run(env, "search", "-w", "kb", "--json", "reclaimBatch").stdout)
    assert answer["stages"]["performed"] == ["lexical"] and answer["hits"]
    h = answer["hits"][0]
    text = run(env, "read", "kb", h["path"], "--lines", f"{h['line_start']}:{h['line_end']}").stdout
    assert "reclaimBatch" in text
    again = run(env, "workspace", "add", "kb", "/tmp", "--if-missing").stdout
    assert "exists" in again


def test_call_prints_the_rpc_answer_and_fails_on_errors(env):
    run(env, "index", "kb")
    ok = run(env, "--call", "search.query", '["kb", "lease recovery lock", {"limit": 2}]')
    assert len(json.loads(ok.stdout)["hits"]) == 2
    bad = run(env, "--call", "search.query", '["kb", "x", {"limit": 0}]', check=False)
    assert bad.returncode == 1 and json.loads(bad.stdout)["error"]["data"]["field"] == "opts.limit"
    missing = run(env, "search", "-w", "nope", "x", check=False)
    assert missing.returncode == 2 and "-32001" in missing.stderr


def test_commands_go_to_a_running_daemon(env, short_tmp, daemon_factory):
    d = start_daemon(daemon_factory, env)
    try:
        sock = Path(env["AUTODOC_SOCKET"])
        assert sock.exists()
        info = json.loads(run(env, "--call", "server.info", "{}").stdout)
        assert info["pid"] == d.pid  # answered by the daemon, not in-process
        # a write while the daemon holds the lease goes through the daemon too
        out = run(
            env, "workspace", "add", "kb2", str(short_tmp / "kb"), "--config", '{"embedding": {"provider": "none"}}'
        )
        assert "added workspace kb2" in out.stdout
        answer = json.loads(run(env, "search", "-w", "kb", "--json", "lease").stdout)
        assert answer["hits"]
    finally:
        run(env, "--call", "server.shutdown", "{}", check=False)
        d.wait(timeout=30)
    assert d.proc.returncode == 0


def test_the_forms_people_type_get_one_line_never_a_traceback(env, short_tmp):
    # search prints path:10-15; people paste that span back, or guess names that do not exist
    kb = short_tmp / "kb"
    (kb / "loopA.md").symlink_to("loopB.md")  # a symlink loop: indexing skips it, reading it is "not indexed"
    (kb / "loopB.md").symlink_to("loopA.md")
    run(env, "index", "kb")
    h = json.loads(run(env, "search", "-w", "kb", "--json", "reclaimBatch").stdout)["hits"][0]
    for span in (f"{h['line_start']}-{h['line_end']}", f"{h['line_start']}:{h['line_end']}", f" {h['line_start']} "):
        assert "reclaimBatch" in run(env, "read", "kb", h["path"], "--lines", span).stdout or span.strip().isdigit()
    wrong = [
        (("read", "kb", h["path"], "--lines", "ten-15"), 2, "--lines wants"),
        (("read", "kb", h["path"], "--lines", "99999-100000"), 0, "lines: printed its last lines"),  # as MCP clamps
        (("read", "nope", h["path"]), 2, "no workspace named 'nope'"),
        (("read", "kb", "adrs/ADR-10.md"), 2, "is not an indexed document"),
        (("read", "kb", "../../etc/passwd"), 2, "leaves the workspace"),
        (("search", "-w", "nope", "x"), 2, "-32001"),
        (("search", "-w", "kbb", "x"), 2, "did you mean: kb"),  # the answer's did_you_mean, shown
        (("read", "kb", "loopA.md"), 2, "is not an indexed document"),  # was an internal error (trial, session 12)
        (("index", "nope"), 2, "no workspace named"),
        (("workspace", "configure", "kb", "{not json"), 2, "not JSON"),
        (("--call", "no.such.method", "[]"), 1, "-32601"),
    ]
    for args, code, said in wrong:
        p = run(env, *args, check=False)
        assert p.returncode == code, (args, p.returncode, p.stderr)
        assert "Traceback" not in p.stderr + p.stdout, (args, p.stderr)
        assert said in p.stderr + p.stdout, (args, p.stderr, p.stdout)


def test_doctor_names_each_problem_and_its_fix(env, short_tmp):
    kb = short_tmp / "kb"
    ok = run(env, "doctor")
    lines = ok.stdout.splitlines()
    assert ok.returncode == 0, ok.stdout
    for name in ("store", "lease", "model", "tokenizer", "onnxruntime", "workspace kb"):
        assert any(line.startswith(f"ok    {name}:") for line in lines), (name, ok.stdout)
    assert "Traceback" not in ok.stderr

    # a workspace root that went away, a socket left by a killed daemon
    moved = short_tmp / "kb-moved"
    kb.rename(moved)
    Path(env["AUTODOC_SOCKET"]).parent.mkdir(parents=True, exist_ok=True)
    Path(env["AUTODOC_SOCKET"]).write_text("")
    bad = run(env, "doctor", check=False)
    assert bad.returncode == 1
    assert f"FAIL  workspace kb: root {kb} does not exist" in bad.stdout
    assert "autodoc workspace remove kb" in bad.stdout
    assert f"rm {env['AUTODOC_SOCKET']}" in bad.stdout
    checks = json.loads(run(env, "doctor", "--json", check=False).stdout)
    assert {c["name"] for c in checks if not c["ok"]} == {"workspace kb", "socket"}

    missing = dict(env, AUTODOC_STORE=str(short_tmp / "none" / "x.db"))
    out = run(missing, "doctor", check=False)
    # no store before the first workspace is normal (issue 38): said, not failed
    assert "ok    store: no store yet at" in out.stdout and "FAIL  store" not in out.stdout
    assert "Traceback" not in out.stderr


def test_doctor_asks_a_running_daemon(env, daemon_factory):
    d = start_daemon(daemon_factory, env)
    try:
        sock = Path(env["AUTODOC_SOCKET"])
        out = run(env, "doctor")
        assert f"ok    lease: held by pid {d.pid}" in out.stdout
        assert f"ok    socket: {sock} answers" in out.stdout
    finally:
        d.stop(timeout=30)


def test_an_internal_error_the_daemon_answers_exits_70():
    """-32603 relayed from a daemon is a bug, as one raised in-process is (README's exit codes)."""
    from autodoc.cli import EXIT_INTERNAL, EXIT_USAGE, _failed
    from autodoc.errors import from_rpc

    assert _failed(from_rpc({"code": -32603, "message": "internal error"})) == EXIT_INTERNAL
    assert _failed(from_rpc({"code": -32003, "message": "x.md is not an indexed document"})) == EXIT_USAGE
