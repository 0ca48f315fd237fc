"""Vector bases shared with the reader processes (readers/shared_vectors.py,
issue 19: one copy of the vectors at 1M chunks, however many readers search
them).

Real files (a test folder stands in for /dev/shm where a test owns the
Sharing; the daemon test uses /dev/shm itself), a real store with the real
ONNX model's vectors, two real Services on it (the daemon's and a reader's),
and a real daemon with its reader processes.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from autodoc.config import Settings
from autodoc.readers import shared_vectors
from autodoc.readers.pool import compact_invalidations
from autodoc.readers.reader import apply_invalidations
from autodoc.readers.shared_vectors import Sharing
from autodoc.search.semantic.vector_cache import NotShared
from autodoc.search.semantic.vectors import VectorIndex
from autodoc.service import Service
from autodoc.store import vectors as stored_vectors

SEMANTIC = {"stages": ["semantic"], "limit": 8}
QUERIES = ["where does the store keep its lease", "how are embeddings computed offline", "link resolution rules"]


def _index(n: int, dim: int = 48, seed: int = 0, half_above: int | None = None) -> VectorIndex:
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    kw = {} if half_above is None else {"half_above": half_above}
    return VectorIndex(np.arange(10, 10 + n, dtype=np.int64) * 3, vecs, **kw)


@pytest.mark.parametrize("half_above", [None, 0])  # float32 rows, and float16 ones
def test_a_shared_base_searches_as_the_original_and_cannot_be_written(tmp_path, half_above):
    base = _index(3000, half_above=half_above)
    docs = base.ids // 7
    desc, mine, my_docs = shared_vectors.write(tmp_path / "v", base, docs)
    theirs, their_docs = shared_vectors.attach(desc)
    rng = np.random.default_rng(1)
    for _ in range(5):
        q = rng.standard_normal(base.dim).astype(np.float32)
        want = base.search(q, top=20, exact=False)
        assert mine.search(q, top=20, exact=False) == want
        assert theirs.search(q, top=20, exact=False) == want
    assert np.array_equal(their_docs, docs) and np.array_equal(my_docs, docs)
    assert theirs.vecs.dtype == base.vecs.dtype and not theirs.vecs.flags.writeable
    with pytest.raises(ValueError):
        theirs.ids[0] = 1
    # the original's document lists come back from the rows' documents
    chunks = shared_vectors.document_chunks(theirs.ids, their_docs)
    assert set(chunks) == set(docs.tolist())
    for d, ids in chunks.items():
        assert ids.tolist() == sorted(base.ids[docs == d].tolist())
    assert np.array_equal(shared_vectors.row_documents(base.ids, chunks), docs)


@pytest.mark.parametrize("half_above", [None, 0, 3200])  # float32, float16, and float32 turning float16
def test_a_merge_written_straight_into_a_file_is_the_private_merge_row_for_row(tmp_path, monkeypatch, half_above):
    """At 1M chunks a merge used to build the merged base in private memory and then copy it into
    the shared file: the old base, the new one and its copy at once (≈ 2.4 GB). write_merged
    builds it in the file; it must hold what merge() would, row for row."""
    from autodoc.search.semantic.vector_cache import WorkspaceVectors

    monkeypatch.setattr(shared_vectors, "COPY_ROWS", 700)  # several selection chunks, one partial
    base = _index(3000, half_above=half_above)
    wv = WorkspaceVectors("fp", base, VectorIndex.empty(base.dim, half_above=base.half_above))
    rng = np.random.default_rng(5)
    wv.retire(rng.choice(base.ids, 400, replace=False))  # deleted rows
    extra = _index(700, seed=9, half_above=half_above)
    replaced = rng.choice(base.ids[~np.isin(base.ids, list(wv.dead))], 50, replace=False)
    added_ids = np.concatenate([replaced, extra.ids[:650] + 10**6])  # ids present in the base: replaced
    wv.add(added_ids.tolist(), extra.vecs[:700].astype(np.float32), extra.codes[:700])
    doc_chunks = {d: np.sort(c) for d, c in _by_doc(np.concatenate([base.ids, added_ids])).items()}

    keep, added = wv.merge_parts()
    desc, shared, docs = shared_vectors.write_merged(tmp_path / "m", wv.base, keep, added, doc_chunks)
    wv.merge()
    private = wv.base
    assert np.array_equal(shared.ids, private.ids) and shared.vecs.dtype == private.vecs.dtype
    assert np.array_equal(shared.vecs, private.vecs)
    assert np.array_equal(shared._hamming_words(), private._hamming_words())
    assert np.array_equal(docs, shared_vectors.row_documents(private.ids, doc_chunks))
    for _ in range(5):
        q = rng.standard_normal(base.dim).astype(np.float32)
        assert shared.search(q, top=30, exact=False) == private.search(q, top=30, exact=False)
    theirs, _ = shared_vectors.attach(desc)
    assert np.array_equal(theirs.vecs, private.vecs)


def _by_doc(ids: np.ndarray) -> dict[int, np.ndarray]:
    out: dict[int, list[int]] = {}
    for i in np.unique(ids).tolist():
        out.setdefault(i % 97, []).append(i)
    return {d: np.array(c, dtype=np.int64) for d, c in out.items()}


def test_files_go_with_their_daemon(tmp_path):
    announced = []
    sharing = Sharing(lambda *item: announced.append(item), directory=tmp_path)
    base = _index(100)
    first = sharing.publish(1, "fp", base, {0: base.ids})
    assert first is not None and announced[0][:3] == ("base", 1, "fp")
    path1 = Path(announced[0][3].path)
    assert path1.exists() and path1.name.startswith(f"{shared_vectors.PREFIX}{os.getpid()}-")
    sharing.publish(1, "fp", base, {0: base.ids})  # a newer base of the same workspace and model
    assert not path1.exists() and Path(announced[1][3].path).exists()
    sharing.publish(2, "fp", base, {0: base.ids})
    sharing.drop(1)
    assert not Path(announced[1][3].path).exists() and Path(announced[2][3].path).exists()
    sharing.close()
    assert not list(tmp_path.iterdir())
    # a daemon killed before it could unlink: the next one removes its files, never a live one's
    dead = tmp_path / f"{shared_vectors.PREFIX}{2**22 + 12345}-1"
    live = tmp_path / f"{shared_vectors.PREFIX}{os.getppid()}-1"
    dead.write_bytes(b"x")
    live.write_bytes(b"x")
    Sharing(lambda *item: None, directory=tmp_path).close()
    assert not dead.exists() and live.exists()


def test_no_room_means_no_sharing_for_a_while_not_a_crash(tmp_path, monkeypatch):
    """A full /dev/shm: posix_fallocate fails with ENOSPC before any byte is written (a sparse
    map would SIGBUS the daemon). Here the failure is injected: filling a real tmpfs is not ours to do."""

    def full(fd, offset, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    sharing = Sharing(lambda *item: None, directory=tmp_path)
    assert sharing.publish(1, "fp", _index(50), {}) is None
    assert sharing.failed and not list(tmp_path.iterdir())
    # Room again (another program's files went): after RETRY_S, sharing resumes.
    monkeypatch.undo()
    assert sharing.publish(1, "fp", _index(50), {}) is None  # not yet: no try within RETRY_S
    monkeypatch.setattr(shared_vectors, "RETRY_S", 0.0)
    assert not sharing.failed
    assert sharing.publish(1, "fp", _index(50), {0: _index(50).ids}) is not None
    assert len(list(tmp_path.iterdir())) == 1
    sharing.close()


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """A store of the kb corpus with the real model's vectors."""
    import shutil

    root = tmp_path_factory.mktemp("shared")
    kb = root / "kb"
    shutil.copytree(Path(__file__).parents[1] / "corpora" / "kb", kb, symlinks=True)
    svc = Service(Settings.from_env(store=root / "s.db"))
    try:
        svc.workspace_add("kb", str(kb))
        svc.index("kb")
        svc.embed_pending("kb")
    finally:
        svc.close()
    return root, kb


def test_a_reader_borrows_the_daemons_base_and_keeps_its_own_changes(embedded, tmp_path):
    root, kb = embedded
    daemon = Service(Settings.from_env(store=root / "s.db"))
    reader = Service(Settings.from_env(store=root / "s.db"), writer=False)
    told: list[tuple] = []
    daemon.on_invalidate = lambda *item: told.append(item)
    daemon.vectors.sharing = Sharing(lambda *item: told.append(item), directory=tmp_path)
    reader.vectors.private_rows = 0  # it may copy nothing: what it searches is borrowed
    try:
        # no base shared yet: the reader cannot answer by meaning, and says so (the daemon runs it)
        with pytest.raises(NotShared):
            reader.search("kb", QUERIES[0], SEMANTIC)
        want = [daemon.search("kb", q, SEMANTIC)["hits"] for q in QUERIES]
        assert [i[0] for i in told] == ["base"]
        ws_id, fp = told[0][1], told[0][2]
        wv = daemon.vectors._by_key[(ws_id, fp)]
        assert wv.base is wv.shared and not wv.base.vecs.flags.writeable  # the daemon searches the shared copy
        apply_invalidations(reader, told)
        told.clear()
        assert [reader.search("kb", q, SEMANTIC)["hits"] for q in QUERIES] == want
        borrowed = reader.vectors._by_key[(ws_id, fp)]
        assert borrowed.borrowed and not borrowed.base.vecs.flags.owndata  # a view of the map, not a copy
        assert not borrowed.base.vecs.flags.writeable

        # a save: the daemon's writer commits and embeds; the reader hears of it and refreshes on top
        _save(daemon, kb, "zz-borrowed.md", "# Quokka census\n\nThe quokka census counts marsupials on islands.\n")
        apply_invalidations(reader, told)
        told.clear()
        q = "counting marsupials on an island"
        mine, theirs = daemon.search("kb", q, SEMANTIC), reader.search("kb", q, SEMANTIC)
        assert theirs["hits"] == mine["hits"]
        assert theirs["hits"][0]["path"] == "zz-borrowed.md"
        assert reader.vectors._by_key[(ws_id, fp)].base is borrowed.base  # still the borrowed base
    finally:
        _unsave(daemon, kb, "zz-borrowed.md")
        reader.close()
        daemon.vectors.sharing.close()
        daemon.close()


def test_the_daemon_merges_a_shared_base_straight_into_the_next_file(embedded, tmp_path, monkeypatch):
    """Past the merge threshold the daemon writes the merged base into a new shared file, never
    building it in private memory first; its answers are those of a daemon that does not share."""
    from autodoc.search.semantic import vector_cache

    root, kb = embedded
    daemon = Service(Settings.from_env(store=root / "s.db"))
    plain = Service(Settings.from_env(store=root / "s.db"), writer=False)
    told: list[tuple] = []
    daemon.vectors.sharing = Sharing(lambda *item: told.append(item), directory=tmp_path)
    merges = []
    real_merge = vector_cache.WorkspaceVectors.merge
    monkeypatch.setattr(vector_cache.WorkspaceVectors, "merge", lambda wv: merges.append(wv) or real_merge(wv))
    try:
        daemon.search("kb", QUERIES[0], SEMANTIC)
        ((ws_id, fp),) = [(i[1], i[2]) for i in told]
        first = Path(told[0][3].path)
        monkeypatch.setattr(vector_cache, "MERGE_MIN_ROWS", 0)  # a twentieth of this small base: one new note
        _save(
            daemon,
            kb,
            "zz-merge.md",
            "# Quokka census\n\n"
            + "\n".join(
                f"## Island {i}\n\nThe quokka census on island {i} counts {i * 7} marsupials.\n" for i in range(40)
            ),
        )
        q = "counting marsupials on an island"
        mine = daemon.search("kb", q, SEMANTIC)
        wv = daemon.vectors._by_key[(ws_id, fp)]
        assert [i[0] for i in told] == ["base", "base"], told  # a second base: the merged one
        assert wv.base is wv.shared and not len(wv.delta) and not wv.dead and not merges
        assert not first.exists() and Path(told[1][3].path).exists()
        assert mine["hits"] == plain.search("kb", q, SEMANTIC)["hits"]
        assert mine["hits"][0]["path"] == "zz-merge.md"
    finally:
        _unsave(daemon, kb, "zz-merge.md")
        plain.close()
        daemon.vectors.sharing.close()
        daemon.close()


def _save(daemon: Service, kb: Path, name: str, text: str) -> None:
    """A note saved in the module's shared corpus, indexed and embedded by the daemon's writer."""
    (kb / name).write_text(text)
    daemon.index_paths("kb", [name])
    daemon.embed_pending("kb")


def _unsave(daemon: Service, kb: Path, name: str) -> None:
    """The note gone from the folder and the store: the module's other tests share both."""
    (kb / name).unlink(missing_ok=True)
    daemon.index_paths("kb", [name])


class _Caches:
    """Where apply_invalidations puts things in a reader: the vector cache's offers and marks,
    recorded (a VectorCache of its own, with nothing loaded, is what a reader starts with)."""

    def __init__(self):
        from autodoc.search.semantic.vector_cache import VectorCache

        self.vectors = VectorCache()
        self.embed_queue = type("Q", (), {"changed": lambda self, ws: None})()

    def offers(self):
        return {k: (o.shared, o.all_dirty or sorted(o.dirty)) for k, o in self.vectors._offers.items()}


def test_a_compacted_list_leaves_each_offer_as_the_whole_list_does():
    """Review findings: compaction dropped the marks that came after a forget (a base shared
    after it then missed them), and a "changed everything" from before a base spoiled the
    offer it made (the reader then answered retry on every call)."""
    import random

    a, b = "desc-a", "desc-b"
    cases = [
        [("forget", 1), ("base", 1, "fp", a, []), ("vectors", 1, [7])],
        [("vectors", 1, None), ("base", 1, "fp", a, [3]), ("vectors", 1, [4])],
        [
            ("vectors", 1, [1]),
            ("base", 1, "fp", a, []),
            ("vectors", 1, [2]),
            ("model", 2, "fp"),
            ("base", 2, "fp", b, []),
            ("base", 3, "fp", a, []),
            ("forget", 3),
        ],
    ]
    rng = random.Random(3)
    for _ in range(300):
        items = []
        for _ in range(rng.randrange(1, 30)):
            ws, r = rng.randrange(1, 3), rng.random()
            if r < 0.55:
                items.append(("vectors", ws, rng.sample(range(20), 2)))
            elif r < 0.62:
                items.append(("vectors", ws, None))
            elif r < 0.85:
                items.append(
                    (
                        "base",
                        ws,
                        rng.choice(["f", "g"]),
                        rng.choice([a, b]),
                        None if rng.random() < 0.1 else rng.sample(range(20), 1),
                    )
                )
            elif r < 0.93:
                items.append(("model", ws, rng.choice(["f", "g"])))
            else:
                items.append(("forget", ws))
        cases.append(items)
    for items in cases:
        whole, small = _Caches(), _Caches()
        apply_invalidations(whole, items)
        apply_invalidations(small, compact_invalidations(items))
        assert small.offers() == whole.offers(), items


def test_readers_of_a_real_daemon_share_one_copy(embedded, short_tmp, daemon_factory):
    """The daemon with its reader pool: searches in the readers answer as in the daemon,
    the base lives in one /dev/shm file while the daemon runs, and goes with it."""
    from autodoc_client import call_socket

    if not shared_vectors.available():
        pytest.skip("no writable /dev/shm on this machine")
    root, _kb = embedded
    sock = short_tmp / "d.sock"
    proc = daemon_factory(short_tmp, store=root / "s.db", sock=sock, env={"AUTODOC_READERS": "2"})
    try:
        mine = f"{shared_vectors.PREFIX}{proc.pid}-"
        want = [call_socket(sock, "search.query", ["kb", q, SEMANTIC])["hits"] for q in QUERIES]
        # several clients at once: the readers start, and take the searches
        import threading

        got: dict[int, list] = {}

        def client(k: int) -> None:
            got[k] = [call_socket(sock, "search.query", ["kb", q, SEMANTIC])["hits"] for q in QUERIES * 3]

        deadline = time.monotonic() + 60
        while True:
            threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for k in range(4):
                assert got[k] == want * 3
            files = [p for p in shared_vectors.SHM_DIR.iterdir() if p.name.startswith(mine)]
            mapped = [pid for pid in _readers(proc.pid) if files and str(files[0]) in _maps(pid)]
            if mapped or time.monotonic() > deadline:
                break
        assert len(files) == 1, files
        assert mapped, "no reader process maps the shared base"
    finally:
        proc.stop(timeout=30)
    assert not [p for p in shared_vectors.SHM_DIR.iterdir() if p.name.startswith(mine)]


def _readers(pid: int) -> list[int]:
    try:
        kids = [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []
    return [k for k in kids if "autodoc.readers.reader" in Path(f"/proc/{k}/cmdline").read_text(errors="replace")]


def _maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""


def test_a_reader_started_later_is_told_of_each_base_and_what_changed_since(tmp_path):
    """Review finding: a reader started after a base was shared never heard of it, and past
    300,000 chunks answered retry on every call. It is seeded with each base still shared and
    the documents marked since."""
    from autodoc.readers.pool import ReaderPool

    class Svc:
        on_invalidate = None
        vectors = None

    pool = ReaderPool(Svc(), size=2)
    live = tmp_path / "live"
    live.write_bytes(b"x")
    shared = shared_vectors.Shared(str(live), 1, 4, "float32", 1)
    gone = shared_vectors.Shared(str(tmp_path / "gone"), 1, 4, "float32", 1)
    pool.invalidate("base", 1, "fp", shared, [5])
    pool.invalidate("vectors", 1, [9, 2])
    pool.invalidate("base", 2, "fp", gone, [])  # its file was removed since: not offered
    pool.invalidate("base", 3, "fp", shared, [])
    pool.invalidate("forget", 3)
    assert pool._bases.seed() == [("base", 1, "fp", shared, [2, 5, 9])]
    pool.invalidate("vectors", 1, None)
    assert pool._bases.seed() == [("base", 1, "fp", shared, None)]


def test_a_snapshot_older_than_a_mark_leaves_its_documents_dirty(embedded, tmp_path):
    """Review finding: a write that commits and marks its documents between a search opening
    its snapshot and reading the vectors had its mark cleared by a refresh from the older
    snapshot, so the daemon (and every reader borrowing what it shared) kept the stale vectors
    until that document changed again. Marks after the search's marker stay dirty."""
    root, kb = embedded
    svc = Service(Settings.from_env(store=root / "s.db"))
    note = kb / "zz-race.md"
    try:
        svc.search("kb", QUERIES[0], SEMANTIC)  # the vectors are loaded
        ws_id = svc._ws("kb").id
        with svc.store.read() as db:
            fp = stored_vectors.active_model(db, ws_id).fingerprint
        dim = svc.vectors._by_key[(ws_id, fp)].base.dim
        since = svc.vectors.marker()
        with svc.store.read() as db:
            db.execute("SELECT COUNT(*) FROM chunks").fetchone()  # the snapshot starts here
            note.write_text("# Wombat burrows\n\nWombats dig burrows with their strong claws.\n")

            def write() -> None:  # another thread: a read on this one would join this snapshot
                svc.index_paths("kb", ["zz-race.md"])  # commits after the snapshot, and marks
                svc.embed_pending("kb")

            writer = threading.Thread(target=write)
            writer.start()
            writer.join()
            wv = svc.vectors.get(db, ws_id, fp, dim, since)
            assert wv.dirty, "the marks made after the snapshot were cleared"
        hits = svc.search("kb", "how do wombats dig", SEMANTIC)["hits"]
        assert hits and hits[0]["path"] == "zz-race.md"
    finally:
        note.unlink(missing_ok=True)
        svc.index_paths("kb", ["zz-race.md"])
        svc.close()


def test_a_retry_makes_the_daemon_share_anew(embedded, tmp_path):
    """A reader whose shared file went (systemd's RemoveIPC, say) or whose changes outgrew it
    answers retry; the daemon shares the same vectors anew on its next search (at most every
    RESHARE_S), so readers stop bouncing."""
    root, _kb = embedded
    svc = Service(Settings.from_env(store=root / "s.db"))
    told: list[tuple] = []
    svc.vectors.sharing = Sharing(lambda *item: told.append(item), directory=tmp_path)
    try:
        svc.search("kb", QUERIES[0], SEMANTIC)
        assert [i[0] for i in told] == ["base"]
        ws_id, fp = told[0][1], told[0][2]
        Path(told[0][3].path).unlink()  # removed behind the daemon's back
        svc.vectors.reshare(ws_id, fp)
        svc.search("kb", QUERIES[0], SEMANTIC)
        assert [i[0] for i in told] == ["base", "base"] and Path(told[1][3].path).exists()
        svc.vectors.reshare(ws_id, fp)  # again at once: not before RESHARE_S
        svc.search("kb", QUERIES[0], SEMANTIC)
        assert len(told) == 2
        # a reader told of a newer base lets go of the one it borrowed
        reader = Service(Settings.from_env(store=root / "s.db"), writer=False)
        try:
            reader.vectors.private_rows = 0
            apply_invalidations(reader, told[1:])
            reader.search("kb", QUERIES[0], SEMANTIC)
            assert reader.vectors._by_key[(ws_id, fp)].borrowed
            apply_invalidations(reader, [("base", ws_id, fp, told[1][3], [])])
            assert (ws_id, fp) not in reader.vectors._by_key
        finally:
            reader.close()
    finally:
        svc.vectors.sharing.close()
        svc.close()
