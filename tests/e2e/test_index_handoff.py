"""`autodoc index` with no daemon running returns once the words are indexed and leaves search by
meaning to a daemon it starts (issue 38: an in-process run embedded 29,575 chunks in the foreground
for tens of minutes, saying nothing about skipped files until it ended); `--wait` embeds first, in
the process, as scripts need. The real CLI on tests/corpora/kb with the shipped model."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
from conftest import CORPORA

from autodoc.config import Settings
from autodoc.connect import call_socket, daemon_socket


@pytest.fixture
def env(short_tmp):
    from corpora.make_special import ensure_special_files

    ensure_special_files()
    shutil.copytree(CORPORA / "kb", short_tmp / "kb", symlinks=True)
    e = {k: v for k, v in os.environ.items() if not k.startswith("AUTODOC_")}
    e.update(
        AUTODOC_STORE=str(short_tmp / "store" / "a.db"),
        AUTODOC_SOCKET=str(short_tmp / "d.sock"),
        XDG_RUNTIME_DIR=str(short_tmp),
        XDG_STATE_HOME=str(short_tmp / "state"),
        AUTODOC_READERS="0",
    )
    run(e, "workspace", "add", "kb", str(short_tmp / "kb"))
    yield e
    sock = daemon_socket(Settings.from_env(store=e["AUTODOC_STORE"], socket=e["AUTODOC_SOCKET"]))
    if sock is not None:  # the daemon the test started: stopped, and gone before the folder is
        pid = call_socket(sock, "server.info", {}, timeout=30)["pid"]
        call_socket(sock, "server.shutdown", {}, timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
            time.sleep(0.1)


def run(env: dict[str, str], *args: str, **kw) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(
        [sys.executable, "-m", "autodoc.cli", *args], env=env, capture_output=True, text=True, timeout=600, **kw
    )
    assert p.returncode == 0, f"autodoc {' '.join(args)} → {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


def test_index_returns_and_a_daemon_it_starts_embeds(env):
    settings = Settings.from_env(store=env["AUTODOC_STORE"], socket=env["AUTODOC_SOCKET"])
    assert daemon_socket(settings) is None
    p = subprocess.run(
        [sys.executable, "-m", "autodoc.cli", "index", "kb"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout
    lines = p.stdout.splitlines()
    report = next(i for i, x in enumerate(lines) if x.startswith("kb: ") and " added" in x)
    skipped = [i for i, x in enumerate(lines) if x.startswith("  skipped ")]
    handed = next(i for i, x in enumerate(lines) if "fills in the background" in x)
    assert skipped and report < min(skipped) and max(skipped) < handed  # what was left out, before the wait
    assert "autodoc workspace status kb" in lines[handed] and "chunks embedded in" not in p.stdout

    sock = daemon_socket(settings)
    assert sock is not None, "no daemon holds the store after the index"
    info = call_socket(sock, "server.info", {}, timeout=30)
    assert str(info["pid"]) in lines[handed]
    # the search right away is answered, and says how far meaning reaches
    answer = json.loads(run(env, "search", "-w", "kb", "--json", "how is a stale lease recovered").stdout)
    assert answer["hits"] and "lexical" in answer["stages"]["performed"]
    assert answer["semantic"] in ("ready", "partial"), answer["semantic"]
    human = run(env, "search", "-w", "kb", "how is a stale lease recovered").stdout
    assert re.search(r"; semantic (partial|ready)", human.splitlines()[0]), human[:300]  # the vectors may land between
    deadline = time.monotonic() + 300
    while (emb := call_socket(sock, "workspace.status", {"workspace": "kb"}, timeout=30)["embedding"])[
        "state"
    ] != "ready":
        assert time.monotonic() < deadline, f"the daemon did not embed kb: {emb}"
        time.sleep(0.5)
    assert emb["embedded"] == emb["total"] > 0
    status = run(env, "workspace", "status", "kb").stdout
    assert f"{emb['total']}/{emb['total']} chunks embedded" in status


def test_index_wait_embeds_in_the_process_and_leaves_no_daemon(env):
    p = run(env, "index", "--wait", "kb")
    assert re.search(r"^kb: \d+ chunks embedded in [\d.]+ s", p.stdout, re.M), p.stdout
    settings = Settings.from_env(store=env["AUTODOC_STORE"], socket=env["AUTODOC_SOCKET"])
    assert daemon_socket(settings) is None
    st = json.loads(run(env, "--call", "workspace.status", '{"workspace": "kb"}').stdout)["embedding"]
    assert st["state"] == "ready" and st["embedded"] == st["total"] > 0


def test_a_workspace_without_a_model_starts_no_daemon(env):
    run(env, "workspace", "configure", "kb", '{"embedding": {"provider": "none"}}')
    p = run(env, "index", "kb")
    assert "kb: search by meaning is off" in p.stdout
    assert daemon_socket(Settings.from_env(store=env["AUTODOC_STORE"], socket=env["AUTODOC_SOCKET"])) is None
