"""A moved file is logged as one `rename` in the change log (its rows and vectors stay), never as
its old path's delete and its new path's add, whichever way the index sees the move: a full run
whose changes span several write batches (index/job.py writes WRITE_BATCH documents a transaction,
and only the last one knew the paths gone), or the live index given the two sides of the move in
two of the watcher's batches. Real SQLite stores."""

from __future__ import annotations

from pathlib import Path

from autodoc.index.job import WRITE_BATCH


def ops(svc, cursor: int) -> list[tuple[str, str]]:
    return sorted((c["path"], c["op"]) for c in svc.changes_since("kb", cursor, 10_000)["changes"])


def head(svc) -> int:
    return svc.changes_since("kb", 0, 10_000)["next_cursor"]


def test_a_move_in_a_run_of_many_batches_is_one_rename(service_factory, tmp_path: Path):
    root = tmp_path / "kb"
    root.mkdir()
    many = WRITE_BATCH + 6
    for i in range(many):
        (root / f"n{i:03}.md").write_text(f"# Note {i}\n\nversion one of note {i}\n")
    (root / "z-old.md").write_text("# Moved\n\nthe note that moves\n")
    svc = service_factory(root)
    start = head(svc)
    # the new name comes first in the scan: its batch is written long before the last one's deletes
    (root / "z-old.md").rename(root / "a-new.md")
    for i in range(many):
        (root / f"n{i:03}.md").write_text(f"# Note {i}\n\nversion two of note {i}\n")
    report = svc.index("kb")
    assert (report["renamed"], report["added"], report["deleted"]) == (1, 0, 0), report
    assert [c for c in ops(svc, start) if c[1] != "modify"] == [("a-new.md", "rename")]


def test_a_move_after_a_batch_of_files_read_again_is_one_rename(service_factory, tmp_path: Path, monkeypatch):
    """The flake test_pg_daemons saw once: every stat stored as too recent to trust (a run within
    RACY_NS of the files' writes, as a test's copy then index is), so the next run reads each file
    again; those same-bytes files filled a batch before the moved file's new path was reached."""
    import autodoc.index.job as job

    monkeypatch.setattr(job, "RACY_NS", 10**18)  # every stat too recent: each file is read again
    root = tmp_path / "kb"
    root.mkdir()
    for i in range(WRITE_BATCH + 6):
        (root / f"n{i:03}.md").write_text(f"# Note {i}\n\nnote {i}\n")
    (root / "a-old.md").write_text("# Moved\n\nthe note that moves\n")
    svc = service_factory(root)
    start = head(svc)
    (root / "a-old.md").rename(root / "z-new.md")
    report = svc.index("kb")
    assert (report["renamed"], report["added"], report["deleted"]) == (1, 0, 0), report
    assert ops(svc, start) == [("z-new.md", "rename")]


def _live(svc):
    """A LiveIndex on `svc`, its store calls run on a worker thread (the daemon's reader and writer)."""
    from functools import partial

    import anyio

    from autodoc.index.live import LiveIndex

    async def run(fn, *a, **k):
        return await anyio.to_thread.run_sync(partial(fn, *a, **k))

    return LiveIndex(svc, read=run, write=run, set_watching=lambda _: None)


async def test_a_move_split_across_two_watcher_batches_is_one_rename(service_factory, tmp_path: Path):
    """The watcher's debounce may cut between the two events of one rename (MOVED_FROM, then
    MOVED_TO in its next batch): the deletion waits one debounce for its other half."""
    from watchfiles import Change

    root = tmp_path / "kb"
    (root / "sub").mkdir(parents=True)
    (root / "old.md").write_text("# Moved\n\nthe note that moves\n")
    (root / "kept.md").write_text("# Kept\n\nstays\n")
    svc = service_factory(root)
    start = head(svc)
    live = _live(svc)
    roots = {"kb": root}
    (root / "old.md").rename(root / "sub" / "new.md")
    await live._apply({(Change.deleted, str(root / "old.md"))}, roots)
    (root / "kept.md").write_text("# Kept\n\nstays, edited\n")
    await live._apply({(Change.added, str(root / "sub" / "new.md")), (Change.modified, str(root / "kept.md"))}, roots)
    assert ops(svc, start) == [("kept.md", "modify"), ("sub/new.md", "rename")]


async def test_the_watcher_logs_a_move_as_a_rename_and_a_lone_delete_soon(service_factory, tmp_path: Path):
    """Through the real watcher: a move (both halves in one batch, or two) is a rename, and a
    deletion held for its other half is written once none comes."""
    import anyio

    root = tmp_path / "kb"
    root.mkdir()
    (root / "old.md").write_text("# Moved\n\nthe note that moves\n")
    (root / "doomed.md").write_text("# Doomed\n\nabout to go\n")
    svc = service_factory(root)
    start = head(svc)
    watching: list[list[str]] = []
    live = _live(svc)
    live._set_watching = watching.append
    async with anyio.create_task_group() as tg:
        tg.start_soon(live.run)
        with anyio.fail_after(20):
            while not (watching and watching[-1] == ["kb"]):
                await anyio.sleep(0.01)
            (root / "old.md").rename(root / "new.md")
            (root / "doomed.md").unlink()
            while len(ops(svc, start)) < 2:
                await anyio.sleep(0.01)
        live.stop()
        tg.cancel_scope.cancel()
    assert ops(svc, start) == [("doomed.md", "delete"), ("new.md", "rename")]
