"""Fixtures of the end-to-end tests: real daemons as processes (tests/helpers/daemon.py has the
usual one; this is the fuzz harness's, which the framing and edge tests share)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.reliability import FuzzDaemon


@pytest.fixture(scope="module")
def fuzz_daemon():
    """One fuzz-harness daemon (bench/reliability.py FuzzDaemon) for a module; it must stop cleanly."""
    d = FuzzDaemon()
    try:
        d.prepare()
        d.start()
        yield d
    finally:
        code = d.stop()
        log = d.log_text()
        d.cleanup()
        assert code == 0, f"the daemon did not stop cleanly ({code}):\n{log[-3000:]}"
