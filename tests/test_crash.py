"""Issue 16: a short run of the crash harness (bench/crash.py; the long run's figures
are in docs/benchmarks/reliability.md). Real `autodoc` CLI processes are killed with
SIGKILL mid-operation; after each kill the store must pass integrity_check and the
row invariants, the lease must be free, and the next index must equal a clean index
of the same folder (tables and lexical answers, the order of equal scores included: the
harness's store starts with a renamed twin file, so its tied chunks' ids sort unlike a clean
index's)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import crash  # noqa: E402


def test_sigkill_mid_operation_resumes_to_a_clean_index():
    # Small folder, the cheap operations (embedding has its own resume tests); every
    # failure is listed with the round, the operation and the kill delay.
    t = crash.run(kills=3, files=12, seed=7, ops=("reindex", "configure", "switch", "schema"),
                  verbose=False, max_rounds=3)
    assert t.rounds >= 3
    assert t.failures == 0 and t.tie_order == 0, t.examples
