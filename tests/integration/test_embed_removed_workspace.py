"""A workspace removed while the embed loop holds its name (the CLI's index hand-off passes the
names to embed; the daemon read them at the round's start) is dropped quietly: the daemon kept
logging "embed step for small failed: no workspace named 'small'" after `workspace remove small`."""

from __future__ import annotations

import logging


def test_a_removed_workspace_is_dropped_from_the_embed_loop_without_a_warning(service_factory, short_tmp, caplog):
    kb = short_tmp / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("# a\n\nalpha\n")
    svc = service_factory(kb, name="small")
    svc.workspace_remove("small")
    caplog.set_level(logging.DEBUG, logger="autodoc")
    assert svc.embed_queue.work(["small"], until_idle=True) == 0
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warned == []
    assert any("small is gone" in r.getMessage() for r in caplog.records)
