"""The embed queue's sorted window (embed/queue.py, LINE_TEXTS): small steps
take texts of similar length from a window of pending texts read at once, so
their batches pad little; a text edited away while it waits in the window is
not embedded, and every text still pending is.

Real store, real ONNX model (the daemon's path: steps of a few texts).
"""

from __future__ import annotations

from pathlib import Path

from autodoc.config import Settings
from autodoc.config.workspace import WorkspaceConfig
from autodoc.service import Service
from autodoc.store import vectors as stored
from autodoc.store.workspaces import get_workspace

WORDS = "ledger quorum replica snapshot lease compaction shard tombstone".split()


def _section(i: int, words: int) -> str:
    body = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(words))
    return f"## Part {i}\n\n{body}.\n"


def _write(kb: Path, name: str, sizes: list[int], offset: int) -> None:
    kb.mkdir(exist_ok=True)
    (kb / name).write_text(f"# {name}\n\n" + "\n".join(_section(offset + i, n) for i, n in enumerate(sizes)))


def _embedded(svc: Service, ws_id: int, fp: str) -> set[str]:
    with svc.store.read() as db:
        return {
            h for (h,) in db.execute("SELECT text_hash FROM vectors WHERE workspace_id=? AND model_fp=?", (ws_id, fp))
        }


def test_small_steps_take_similar_lengths_and_skip_texts_edited_away(tmp_path):
    kb = tmp_path / "kb"
    # lengths interleaved in chunk order: short, long, short, long, …
    _write(kb, "a.md", [3, 150, 4, 160, 5, 170, 6, 180], 0)
    _write(kb, "b.md", [7, 190, 8, 200], 20)
    svc = Service(Settings(store=tmp_path / "s.db", socket=tmp_path / "s.sock", instant_dir=tmp_path / "instant"))
    try:
        svc.workspace_add("kb", str(kb))
        svc.index("kb")
        with svc.store.read() as db:
            ws = get_workspace(db, "kb")
            provider, _ = svc.providers.target(WorkspaceConfig.from_json(ws.config).embedding)
            fp = provider.fingerprint
            pending = stored.pending_texts(db, ws.id, fp, 1000)
        length = dict(zip([h for h, _ in pending], provider.count_tokens([t for _, t in pending])))
        by_length = sorted(length, key=length.get)

        step = svc.embed_queue.step(ws, 4, instant=False)
        assert step["embedded"] == 4
        first = _embedded(svc, ws.id, fp)
        # the four shortest texts of the window in the model's tokens, not the first four chunks
        assert first == set(by_length[:4])

        # b.md's long sections change while their old texts wait in the window
        _write(kb, "b.md", [7, 9, 8, 11], 40)
        svc.index("kb")
        with svc.store.read() as db:
            gone = {h for h in length if not stored.still_pending(db, ws.id, fp, [h]) and h not in first}
            now_pending = {h for h, _ in stored.pending_texts(db, ws.id, fp, 1000)}
        assert gone, "the edit should have left some of the window's texts without a chunk"

        while svc.embed_queue.step(ws, 4, instant=False)["embedded"]:
            pass
        done = _embedded(svc, ws.id, fp)
        assert not (done & gone), "a text edited away was embedded anyway"
        assert now_pending <= done, "a pending text was left out"
        with svc.store.read() as db:
            assert stored.coverage(db, ws.id, fp)[1] == 0

        # a workspace removed with texts waiting in its window: the window goes with it
        _write(kb, "c.md", [5, 50, 6], 60)
        svc.index("kb")
        svc.embed_queue.step(ws, 1, instant=False)
        assert (ws.id, fp) in svc.embed_queue._line
        svc.workspace_remove("kb")
        assert not any(k[0] == ws.id for k in svc.embed_queue._line)
    finally:
        svc.close()


def test_an_eta_is_never_zero_while_chunks_wait():
    """Seen in test_serve_bridge once small steps got faster: 16 chunks pending at ~400 a
    second reported eta_seconds 0.0. Rounded up to the tenth, it says a tenth of a second."""
    from autodoc.embed.status import _eta

    assert _eta(16, 400.0) == 0.1
    assert _eta(0, 400.0) == 0.0 and _eta(5, None) is None
    assert _eta(300, 30.0) == 10.0 and _eta(301, 30.0) == 10.1 and _eta(3, 0.3) == 10.0
