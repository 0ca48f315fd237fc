"""Issue 36 Low 9: SIGKILL of `autodoc index` leaves no parsing worker and no resource_tracker behind.

A real `autodoc index` (in-process, AUTODOC_READERS=2, enough files for the
worker path) is SIGKILLed while its spawned workers run; every process it had
started must be gone soon after. Before, the workers and multiprocessing's
resource_tracker were reparented and kept running (13 times in 30, still alive
after 60 s).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited (its reaper is not ours)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.fixture
def env(short_tmp):
    kb = short_tmp / "kb"
    kb.mkdir()
    for i in range(400):
        body = "\n\n".join(f"## part {j}\n\n" + f"word{i} text{j} " * 60 for j in range(8))
        (kb / f"n{i:03d}.md").write_text(f"# note {i}\n\n{body}\n")
    e = dict(os.environ)
    e["AUTODOC_STORE"] = str(short_tmp / "store" / "a.db")
    e["AUTODOC_SOCKET"] = str(short_tmp / "d.sock")
    e["XDG_RUNTIME_DIR"] = str(short_tmp)
    e["AUTODOC_READERS"] = "2"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "autodoc.cli",
            "workspace",
            "add",
            "kb",
            str(kb),
            "--config",
            '{"embedding": {"provider": "none"}}',
        ],
        env=e,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return e


@pytest.mark.parametrize("attempt", range(2))
def test_sigkill_of_autodoc_index_leaves_no_worker(env, attempt):
    proc = subprocess.Popen(
        [sys.executable, "-m", "autodoc.cli", "index", "kb"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            kids = _children(proc.pid)
            spawned = [k for k in kids if "spawn_main" in _cmdline(k)]
            workers |= set(kids)
            if len(spawned) >= 2:  # both workers have started and parse
                time.sleep(0.3)
                workers |= set(_children(proc.pid))
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the index ended before its workers started"
        assert any("spawn_main" in _cmdline(k) for k in workers), [_cmdline(k) for k in workers]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.1)
        left = {w: _cmdline(w) for w in workers if _alive(w)}
        assert left == {}, left
    finally:
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
