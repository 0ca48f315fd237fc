"""Issue 16: a short load run (bench/reliability.py load; the 32 × 1,000 figures are in
docs/benchmarks/reliability.md). A real daemon on its socket, clients sending mixed
requests while a writer adds, edits, renames and deletes files under the live index:
no error answer, every answer valid, and every writer operation in the change log
exactly once and pushed to the subscriber exactly once."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench import reliability


def test_clients_and_a_writer():
    r = reliability.run_load(clients=4, requests=25, files=30, seed=5, settle=1.0)
    assert sum(len(v) for v in r.latencies.values()) == 4 * 25
    assert r.errors == []
    assert sum(r.writer_ops.values()) > 0 and r.log_entries == sum(r.writer_ops.values())
    assert (r.lost, r.duplicated, r.unexpected, r.polls_out_of_order) == (0, 0, 0, 0), r.examples
    assert r.pushed == r.log_entries
