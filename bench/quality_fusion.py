"""Fusion details re-played on the product's own legs (issue 18, session 4).

    python -m bench.quality_fusion --capture            # SciFact train + known items, through Service.search
    python -m bench.quality_fusion                      # every variant below on the captured legs
    python -m bench.quality_fusion --split test --only now,...   # the final read of SciFact test

Capture runs the product's ``Service.search`` (default options, no ranker) and
records, per query, what reaches ``fusion.fuse_rrf`` (each leg's hits, in the
order the engine hands them over, with the lexical coverage weights) and what
``apply_boosts`` and ``demote_superseded`` read (documents, tags, inbound
links, successors). Replay re-runs fusion → boosts → per-document cap →
demotion with the product's functions or a variant, and ranks documents by
their first hit, as bench/quality_study.py does. The ``now`` variant
reproduces Service.search's figures (up to tie order inside equal scores).

Runs on: the main thread.
"""

from __future__ import annotations

import argparse
import math
import pickle
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import evaluate as E
from .beir import WORKSPACE, load_collection, path_doc
from .common import DEFAULT_DATA, cache_root, log
from .known_item import CORPORA, LIMIT, load_questions, metrics, store_dir, target_rank

SCIFACT_LIMIT = 20


@contextmanager
def recording(box: dict[str, Any]) -> Iterator[None]:
    """Record what the engine hands fusion and the boosts for one search at a time."""
    import autodoc.search.fusion as F

    orig = F.fuse_rrf, F.apply_boosts, F.demote_superseded

    def fuse_rrf(legs, *, k, weights=None):
        box["legs"] = {n: list(h) for n, h in legs.items()}
        box["k"], box["weights"] = k, dict(weights or {})
        return orig[0](legs, k=k, weights=weights)

    def apply_boosts(fused, *, doc_of, tag_match, inbound, max_score, **kw):
        box.update(doc_of=dict(doc_of), tag_match=set(tag_match), inbound=dict(inbound), max_score=max_score)
        return orig[1](fused, doc_of=doc_of, tag_match=tag_match, inbound=inbound, max_score=max_score, **kw)

    def demote(fused, doc_of, successor, path_of):
        box.update(successor=dict(successor), path_of=dict(path_of))
        return orig[2](fused, doc_of, successor, path_of)

    F.fuse_rrf, F.apply_boosts, F.demote_superseded = fuse_rrf, apply_boosts, demote
    try:
        yield
    finally:
        F.fuse_rrf, F.apply_boosts, F.demote_superseded = orig


def _service(store: Path):
    from autodoc.config import Settings
    from autodoc.service import Service

    return Service(Settings.from_env(store=store), writer=False)


def _capture_one(svc, ws: str, text: str, limit: int) -> dict[str, Any]:
    box: dict[str, Any] = {}
    with recording(box):
        ans = svc.search(ws, text, {"stages": ["lexical", "semantic"], "limit": limit})
    db = svc.store.reader()
    docs = sorted(set(box["doc_of"].values()))
    q = ",".join("?" * len(docs))
    box["doc_path"] = (
        dict(db.execute(f"SELECT id, path FROM documents WHERE id IN ({q})", docs).fetchall()) if docs else {}
    )
    box["answer"] = [h["path"] for h in ans["hits"]]
    return box


def capture(cache: Path, split: str, out: Path, sets: list[str]) -> None:
    data: dict[str, Any] = {"scifact": {}, "known": {}}
    if "scifact" in sets:
        col = load_collection(DEFAULT_DATA / "scifact")
        store = sorted((cache / "stores").glob("scifact-*/autodoc.db"))[0]
        svc = _service(store)
        for qid, text in col.split_queries(split):
            data["scifact"][qid] = _capture_one(svc, WORKSPACE, text, SCIFACT_LIMIT)
        data["qrels"] = {q: col.qrels[split][q] for q in data["scifact"]}
        svc.close()
    if "known" in sets and split == "train":
        for c in CORPORA:
            sdir, _ = store_dir(cache / "known", DEFAULT_DATA / "corpora", c)
            svc = _service(sdir / "autodoc.db")
            for q in load_questions():
                if q["corpus"] == c:
                    data["known"][q["id"]] = {**_capture_one(svc, c, q["query"], LIMIT), "q": q}
            svc.close()
    out.write_bytes(pickle.dumps(data))
    log(f"captured {len(data['scifact'])} SciFact {split} queries, {len(data['known'])} known items → {out}")


# ---------------------------------------------------------------- replay


def replay(
    box: dict[str, Any], fuse: Callable, cap: int | None = None, post: Callable | None = None, hits: int | None = None
) -> list[str]:
    """fusion → boosts → cap → demotion with `fuse(legs, box)` in place of the product's RRF; document paths."""
    import autodoc.search.fusion as F
    from autodoc.config import PER_DOCUMENT

    fused = fuse(box["legs"], box)
    doc_of = box["doc_of"]
    fused = [f for f in fused if f.chunk_id in doc_of]
    fused = F.apply_boosts(
        fused, doc_of=doc_of, tag_match=box["tag_match"], inbound=box["inbound"], max_score=box["max_score"]
    )
    if post:
        fused = post(fused, box)
    fused = F.cap_per_document(fused, doc_of, PER_DOCUMENT if cap is None else cap)
    if "successor" in box:
        fused = F.demote_superseded(fused, doc_of, box["successor"], box["path_of"])
    seen: dict[str, None] = {}
    for f in fused[:hits]:
        seen.setdefault(box["doc_path"][doc_of[f.chunk_id]], None)
    return list(seen)


def product_rrf(k: float | None = None, sem: float | None = None) -> Callable:
    import autodoc.search.fusion as F

    def fuse(legs, box):
        w = dict(box["weights"])
        w["lexical"] = 1.0
        if sem is not None:
            w["semantic"] = sem
        return F.fuse_rrf(legs, k=box["k"] if k is None else k, weights=w)

    return fuse


def score_sets(data: dict[str, Any], fuse: Callable, **kw) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if data["scifact"]:
        run = {qid: [path_doc(p) for p in replay(b, fuse, **kw)][:SCIFACT_LIMIT] for qid, b in data["scifact"].items()}
        m = E.evaluate(run, data["qrels"])
        r5 = sum(1 for q, docs in run.items() if set(docs[:5]) & {d for d, g in data["qrels"][q].items() if g > 0})
        out["scifact"] = {"nDCG@10": round(m["nDCG@10"], 4), "R5any": round(r5 / len(run), 4)}
    if data["known"]:
        ranks: dict[str, list] = {"all": [], "keywords": [], "sentence": [], "agent": []}
        for b in data["known"].values():
            r = target_rank(replay(b, fuse, **kw)[:LIMIT], b["q"]["targets"])
            ranks["all"].append(r)
            ranks[b["q"]["style"]].append(r)
        out["known"] = {s: {m: round(v, 3) for m, v in metrics(rs).items() if m != "n"} for s, rs in ranks.items()}
    return out


# ---------------------------------------------------------------- variants


def _fused_record(F, names, cid):
    return F.Fused(cid, 0.0, dict.fromkeys(names), dict.fromkeys(names))


def doc_sum(alpha: float, k: float | None = None) -> Callable:
    """After the product's RRF: a chunk's score + alpha × the rest of its document's chunks' fused scores
    (each document's chunks add up, weighted; the best passage still stands for the document)."""
    import autodoc.search.fusion as F

    def fuse(legs, box):
        fused = F.fuse_rrf(legs, k=box["k"] if k is None else k, weights=box["weights"])
        doc_of = box["doc_of"]
        total: dict[int, float] = {}
        for f in fused:
            d = doc_of.get(f.chunk_id)
            total[d] = total.get(d, 0.0) + f.score
        for f in fused:
            d = doc_of.get(f.chunk_id)
            f.score = f.score + alpha * (total[d] - f.score)
        fused.sort(key=lambda f: (-f.score, f.chunk_id))
        return fused

    return fuse


def doc_legs(alpha: float) -> Callable:
    """RRF where a chunk also earns alpha × the share its document's best chunk in each leg earns
    (a document found lexically through one passage and semantically through another gets both)."""
    import autodoc.search.fusion as F

    def fuse(legs, box):
        k, w = box["k"], box["weights"]
        doc_of = box["doc_of"]
        fused = F.fuse_rrf(legs, k=k, weights=w)
        best: dict[tuple[str, int], float] = {}
        own: dict[tuple[str, int], float] = {}
        for name, hits in legs.items():
            wl = float(w.get(name, 1.0))
            for rank, h in enumerate(hits):
                d = doc_of.get(h.chunk_id)
                s = wl * h.weight / (k + rank + 1)
                best[(name, d)] = max(best.get((name, d), 0.0), s)
                own[(name, h.chunk_id)] = max(own.get((name, h.chunk_id), 0.0), s)
        for f in fused:
            d = doc_of.get(f.chunk_id)
            for name in legs:
                gap = best.get((name, d), 0.0) - own.get((name, f.chunk_id), 0.0)
                f.score += alpha * gap
        fused.sort(key=lambda f: (-f.score, f.chunk_id))
        return fused

    return fuse


def calibrated(sem: float, lex: float, temp: float, k: float | None = None, mode: str = "rrf+cos") -> Callable:
    """The product's RRF with the semantic leg's rank share scaled by a calibrated cosine:
    share × exp((cos − best cos) / temp), so a hit far below the query's best cosine earns less."""
    import autodoc.search.fusion as F

    def fuse(legs, box):
        kk = box["k"] if k is None else k
        sem_hits = legs.get("semantic", [])
        best = max((h.score for h in sem_hits), default=0.0)
        new = dict(legs)
        if sem_hits:
            new["semantic"] = [F.LegHit(h.chunk_id, h.score, math.exp((h.score - best) / temp)) for h in sem_hits]
        return F.fuse_rrf(new, k=kk, weights={"lexical": lex, "semantic": sem})

    return fuse


def lex_weight_only(sem: float) -> Callable:
    import autodoc.search.fusion as F

    def fuse(legs, box):
        new = {n: [F.LegHit(h.chunk_id, h.score) for h in hs] if n == "lexical" else hs for n, hs in legs.items()}
        return F.fuse_rrf(new, k=box["k"], weights={**box["weights"], "semantic": sem})

    return fuse


def per_leg_k(k_lex: float, k_sem: float, sem: float) -> Callable:
    """RRF with a k of its own per leg: Σ w_leg · w_hit / (k_leg + rank)."""
    import autodoc.search.fusion as F

    def fuse(legs, box):
        parts = [
            F.fuse_rrf({n: hs}, k=(k_lex if n == "lexical" else k_sem), weights={n: (1.0 if n == "lexical" else sem)})
            for n, hs in legs.items()
        ]
        names = sorted(legs)
        out: dict[int, Any] = {}
        for name, part in zip(legs, parts):
            for f in part:
                g = out.setdefault(f.chunk_id, _fused_record(F, names, f.chunk_id))
                g.score += f.score
                g.ranks[name], g.scores[name] = f.ranks[name], f.scores[name]
        fused = list(out.values())
        for f in fused:
            f.via = [n for n in names if f.ranks[n] is not None]
        fused.sort(key=lambda f: (-f.score, f.chunk_id))
        return fused

    return fuse


def later_passages(decay: float) -> Callable:
    """After the boosts: a document's n-th passage (n ≥ 2, in fused order) scores × decay^(n-1)."""

    def post(fused, box):
        doc_of, seen = box["doc_of"], {}
        for f in fused:
            d = doc_of[f.chunk_id]
            f.score *= decay ** seen.get(d, 0)
            seen[d] = seen.get(d, 0) + 1
        fused.sort(key=lambda f: (-f.score, f.chunk_id))
        return fused

    return post


def variants() -> dict[str, tuple[Callable, dict[str, Any]]]:
    from autodoc.config import RRF_K, RRF_WEIGHTS

    # the captured searches ran with the store's workspace fusion (the bench stores were made under k 20 / 0.8)
    v: dict[str, tuple[Callable, dict[str, Any]]] = {
        "stored": (product_rrf(20, 0.8), {}),
        "now": (product_rrf(RRF_K, RRF_WEIGHTS["semantic"]), {}),
    }
    for cap in (1, 2, 3, 5):  # what a page of 10 hits shows: documents in its first 10 hits
        v[f"page10-cap{cap}"] = (product_rrf(), {"cap": cap, "hits": 10})
    for dec in (0.3, 0.5, 0.7):
        v[f"page10-later{dec}"] = (product_rrf(), {"hits": 10, "post": later_passages(dec)})
    for kl in (5, 10, 20):
        for ks in (5, 10, 20, 40):
            for sw in (0.6, 0.8, 1.0):
                v[f"k{kl}/{ks}-s{sw}"] = (per_leg_k(kl, ks, sw), {})
    for a in (0.1, 0.2, 0.3, 0.5):
        v[f"docsum{a}"] = (doc_sum(a), {})
    for a in (0.25, 0.5, 1.0):
        v[f"doclegs{a}"] = (doc_legs(a), {})
    for t in (0.02, 0.05, 0.1, 0.2):
        for s in (0.6, 0.8, 1.0):
            v[f"calib-t{t}-s{s}"] = (calibrated(s, 1.0, t), {})
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--capture", action="store_true")
    ap.add_argument("--split", default="train")
    ap.add_argument("--sets", default="scifact,known")
    ap.add_argument("--only", default="")
    ap.add_argument("--file", type=Path, default=None)
    a = ap.parse_args(argv)
    cache = cache_root()
    path = a.file or cache / f"fusion-capture-{a.split}.pkl"
    if a.capture:
        capture(cache, a.split, path, a.sets.split(","))
        return 0
    data = pickle.loads(path.read_bytes())
    from autodoc.config import RRF_K, RRF_WEIGHTS

    for box in [*data["scifact"].values(), *data["known"].values()]:  # variants start from the product's default
        box["k"], box["weights"] = RRF_K, dict(RRF_WEIGHTS)
    vs = variants()
    names = [n for n in a.only.split(",") if n] or list(vs)
    for name in names:
        fuse, kw = vs[name]
        r = score_sets(data, fuse, **kw)
        s, k = r.get("scifact", {}), r.get("known", {})
        ka = k.get("all", {})
        st = " ".join(
            f"{x[:3]} {k[x]['R@1']:.3f}/{k[x]['R@3']:.3f}/{k[x]['MRR']:.3f}"
            for x in ("keywords", "sentence", "agent")
            if x in k
        )
        print(
            f"{name:<22} SciFact {s.get('nDCG@10', float('nan')):.4f} R5 {s.get('R5any', float('nan')):.4f}  known "
            f"{ka.get('R@1', float('nan')):.3f}/{ka.get('R@3', float('nan')):.3f}/{ka.get('R@10', float('nan')):.3f}/"
            f"{ka.get('MRR', float('nan')):.3f}  {st}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
