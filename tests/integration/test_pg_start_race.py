"""Two clients that start the store's daemon at the same moment (two editors, an agent and the TUI
opening at once) on a fresh PostgreSQL database: each spawns one (connect.start_daemon), one daemon
takes the store's lease and migrates the new schema, the other finds the lease taken and exits. The
client whose daemon lost must wait for the winner's socket, not give up and work in-process ("the
daemon exited with status 1"): its daemon exits before the winner, still migrating, listens."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from helpers.daemon import isolated_env, wait_gone
from helpers.pg import missing_reason

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

CLIENT = """
import json, sys, time
from autodoc.config import Settings
from autodoc.connect import daemon_socket, start_daemon
from autodoc.store.lease import read_holder
settings = Settings.from_env()
time.sleep(max(0.0, float(sys.argv[1]) - time.time()))  # both start together
why = start_daemon(settings, settings.daemon_log, wait_s=60)
sock = daemon_socket(settings)
print(json.dumps({"why": why, "socket": sock and str(sock), "holder": read_holder(settings.store), "log": str(settings.daemon_log)}))
"""


def test_two_clients_starting_the_daemon_of_a_fresh_database_at_once_both_reach_the_one_that_won(pg_uri):
    import psycopg

    from autodoc.connect import call_socket
    from autodoc.errors import AutodocError

    name = f"race_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_uri, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    uri = pg_uri.replace("/postgres?", f"/{name}?", 1)
    assert uri != pg_uri
    base = Path(tempfile.mkdtemp(prefix="ad-race-", dir="/tmp"))
    env = isolated_env(base, extra={"AUTODOC_STORE": uri, "AUTODOC_READERS": "0"})
    env.pop("AUTODOC_SOCKET", None)
    for var in ("XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        Path(env[var]).mkdir(parents=True, exist_ok=True, mode=0o700)
    at = time.time() + 3  # both interpreters loaded by then
    clients = [
        subprocess.Popen([sys.executable, "-c", CLIENT, str(at)], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    answers = []
    try:
        answers = [json.loads(c.communicate(timeout=120)[0]) for c in clients]
        log = Path(answers[0]["log"]).read_text(errors="replace")
        assert "autodoc: error:" in log, log[-3000:]  # the race was run: one of the two daemons lost it
        holder = answers[0]["holder"]
        assert holder and holder["socket"], (answers, log[-3000:])
        # both clients reach the one daemon that won; neither gave up on it
        assert [(a["why"], a["socket"], a["holder"]) for a in answers] == [(None, holder["socket"], holder)] * 2, (
            answers,
            log[-3000:],
        )
        assert call_socket(Path(holder["socket"]), "server.info", {}, timeout=10)["pid"] == holder["pid"]
    finally:
        for c in clients:
            if c.poll() is None:
                c.kill()
        for held in {a["holder"]["pid"]: a["holder"] for a in answers if a.get("holder")}.values():
            try:
                call_socket(Path(held["socket"]), "server.shutdown", {}, timeout=10)
            except (OSError, AutodocError):
                pass
            wait_gone(held["pid"])
        with psycopg.connect(pg_uri, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        shutil.rmtree(base, ignore_errors=True)
