"""Issue 16: equal scores are ordered by what the store holds (document path, then the
chunk's place in it), not by chunk ids, which follow the store's history. Two stores of
the same files must answer alike, ties included: one whose chunk ids were shuffled by a
rename, and a clean index of the same folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from autodoc.config import Settings
from autodoc.search import fusion as F
from autodoc.search.ties import TieKeys, order_fused, order_leg, ordered_scores
from autodoc.service import Service

TWIN = (
    "# Lease recovery\n\nThe writer takes the lease beside the store file and releases it on exit.\n\n"
    "## Stale leases\n\nA lease left by a killed writer is recovered by the next writer.\n"
)
OTHER = {
    "zebra.md": "# Zebra migration\n\nA lease is not needed to read the zebra table.\n",
    "plan.md": "# Rollback plan\n\nRestore the last checkpoint, then replay the log.\n",
}


def _write(root: Path, names: list[str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        (root / name).write_text(TWIN)
    for name, text in OTHER.items():
        (root / name).write_text(text)


def _answers(s: Service, stages: list[str]) -> list[list[tuple]]:
    out = []
    for q in ("lease", "writer lease recovered", "killed writer"):
        got = s.search("kb", q, {"stages": stages, "limit": 20})
        out.append(
            [
                (h["path"], h["line_start"], h["score"], h["ranks"]["lexical"], h["ranks"]["semantic"])
                for h in got["hits"]
            ]
        )
    return out


def _store(tmp: Path, name: str, kb: Path, embedding: dict) -> Service:
    s = Service(Settings.from_env(store=tmp / name / "s.db"))
    s.workspace_add("kb", str(kb), {"embedding": embedding})
    return s


@pytest.mark.parametrize(
    "embedding,stages",
    [
        ({"provider": "none"}, ["lexical"]),
        ({"provider": "onnx"}, ["lexical", "semantic"]),  # the real bundled model: each leg's ties feed RRF
    ],
)
def test_a_renamed_twin_answers_as_a_clean_index(tmp_path, embedding, stages):
    kb = tmp_path / "kb"
    _write(kb, ["a.md", "b.md"])
    history = _store(tmp_path, "history", kb, embedding)
    try:
        history.index("kb", embed=True)
        (kb / "a.md").rename(kb / "c.md")  # c.md keeps a.md's rows, so its chunk ids are below b.md's
        history.index("kb", embed=True)
        got = _answers(history, stages)
    finally:
        history.close()
    clean = _store(tmp_path, "clean", kb, embedding)
    try:
        clean.index("kb", embed=True)
        want = _answers(clean, stages)
    finally:
        clean.close()
    assert got == want
    lease = [p for p, *_ in want[0]]
    assert lease.index("b.md") < lease.index("c.md")  # the tie is broken by path


def test_a_leg_reorders_only_runs_of_equal_scores():
    key = {1: ("z.md", 0), 2: ("a.md", 1), 3: ("a.md", 0), 4: ("m.md", 0), 5: ("b.md", 0)}
    hits = [F.LegHit(1, 2.0), F.LegHit(2, 2.0), F.LegHit(3, 2.0), F.LegHit(4, 1.0), F.LegHit(5, 1.5)]
    # 5 scores above 4 but stays below it: only equal neighbours are reordered (the lexical
    # leg's strict matches lead its relaxed ones whatever their scores)
    assert [h.chunk_id for h in order_leg(hits, key.__getitem__)] == [3, 2, 1, 4, 5]
    # a group splits a run of equal scores: strict 1, 2 stay above relaxed 3
    got = order_leg(hits[:3], key.__getitem__, group=lambda h: h.chunk_id != 3)
    assert [h.chunk_id for h in got] == [2, 1, 3]
    assert order_leg(hits[3:], key.__getitem__) == hits[3:]


def test_fused_ties_follow_the_key_and_lookups_are_batched():
    calls = []

    def lookup(ids):
        calls.append(sorted(ids))
        return {i: (f"p{10 - i}.md", 0) for i in ids}

    keys = TieKeys(lookup)
    fused = [F.Fused(1, 0.5, {}, {}), F.Fused(2, 0.5, {}, {}), F.Fused(3, 0.25, {}, {}), F.Fused(4, 0.25, {}, {})]
    assert [f.chunk_id for f in order_fused(fused, keys)] == [2, 1, 4, 3]
    assert calls == [[1, 2, 3, 4]]  # one query for every tie of the list
    order_fused([F.Fused(1, 0.5, {}, {}), F.Fused(5, 0.4, {}, {})], keys)
    assert calls == [[1, 2, 3, 4]]  # no tie: nothing is looked up
    assert ordered_scores([(7, 0.9), (8, 0.9), (9, 1.0)], keys) == [9, 8, 7]


def test_graph_neighbours_of_one_seed_follow_paths_not_history(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "hub.md").write_text("# Hub\n\nThe quokka registry lists every service.\n")
    for name in ("a.md", "b.md"):  # each links to the hub: one link to the one seed, a tie
        (kb / name).write_text(f"# Service {name[0]}\n\nOwned by the platform team. See [[hub]].\n")
    q = {"stages": ["lexical", "graph"], "limit": 10}

    def paths(s: Service) -> list[str]:
        return [h["path"] for h in s.search("kb", "quokka", q)["hits"]]

    history = _store(tmp_path, "history", kb, {"provider": "none"})
    try:
        history.index("kb")
        (kb / "a.md").rename(kb / "c.md")  # c.md keeps a.md's document id, below b.md's
        history.index("kb")
        got = paths(history)
    finally:
        history.close()
    clean = _store(tmp_path, "clean", kb, {"provider": "none"})
    try:
        clean.index("kb")
        want = paths(clean)
    finally:
        clean.close()
    assert want == ["hub.md", "b.md", "c.md"]
    assert got == want


@pytest.mark.parametrize(
    "embedding,stages",
    [
        ({"provider": "none"}, ["lexical"]),
        ({"provider": "onnx"}, ["semantic"]),  # identical sections share one vector: a run of equal cosines
    ],
)
def test_a_run_of_ties_cut_by_the_legs_depth_keeps_its_first_members_by_path(tmp_path, embedding, stages):
    """120 files with one identical section and legs 50 deep: which of the tied chunks make
    a leg must follow their paths too, or the page differs from a clean index's."""
    kb = tmp_path / "kb"
    kb.mkdir()
    for i in range(120):  # one word of its own, so a rename is told from a copy; the same length, so ties stay
        (kb / f"f{i:03d}.md").write_text(TWIN + f"\nFiled as k{i:03d}.\n")
    opts = {"stages": stages, "limit": 10}
    history = _store(tmp_path, "history", kb, embedding)
    try:
        history.index("kb", embed=True)
        for i in range(60):  # the renamed files keep their rows: the lowest chunk ids, the last paths
            (kb / f"f{i:03d}.md").rename(kb / f"z{i:03d}.md")
        history.index("kb", embed=True)
        got = [h["path"] for h in history.search("kb", "lease recovery", opts)["hits"]]
    finally:
        history.close()
    clean = _store(tmp_path, "clean", kb, embedding)
    try:
        clean.index("kb", embed=True)
        want = [h["path"] for h in clean.search("kb", "lease recovery", opts)["hits"]]
    finally:
        clean.close()
    assert got == want, (got, want)
    assert want[0] == "f060.md" and set(want) <= {f"f{i:03d}.md" for i in range(60, 70)}
