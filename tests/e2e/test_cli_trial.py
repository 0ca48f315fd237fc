"""Issue 38's CLI findings, each as a user met it: the installed `autodoc` run as a process
on an isolated home (XDG_DATA_HOME, XDG_RUNTIME_DIR, the store under a short temp folder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

AUTODOC = str(Path(sys.executable).with_name("autodoc"))


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
