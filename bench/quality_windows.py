"""What the semantic leg embeds: one vector per chunk, or one per window (issue 18, session 5).

    python -m bench.quality_windows --embed                 # window vectors of every set, cached
    python -m bench.quality_windows --only mean,max256,...  # SciFact train + known items, hybrid and semantic
    python -m bench.quality_windows --split test --sets scifact --only mean,<chosen>   # once, at the end

Today a chunk (a section of up to ``section_tokens`` model tokens, breadcrumb
first) is cut into windows of 256 tokens and embedded as the mean over every
token of every window (embed/onnx.py). The variants keep the chunks and score
a chunk by its windows instead:

- ``w256``: the product's own windows (split_windows), one vector each;
- ``w256bc``: the same, every window after the first led by the chunk's
  breadcrumb again (the title is then in every window's vector);
- ``w128``: windows of 128 tokens overlapping by half (a smaller section
  for the semantic leg alone, without re-chunking the store);
- ``docβ`` (no new vectors): (1 − β) × the chunk's cosine + β × the cosine of
  its document's vector, the normalised mean of the document's chunk vectors.

``--replay CAPTURE`` reads SciFact through a bench/quality_fusion.py capture
(each query's lexical leg and boosts as Service.search had them) with the
semantic leg re-scored, in seconds instead of minutes; it gives the same
figures as the Service.search path (docs/benchmarks/quality.md, session 5).

A chunk that fits one window keeps its stored vector (the same vector: the
embed is checked against the store). Window vectors are computed with the
product's model session and tokenizer and cached under /tmp/quality/vec/
(``--vec-dir``), never in the repository.

Scoring (``Prepared.run`` replaced for the run): the query's embedding, each
chunk's score from its windows' cosines (max, or a blend of the max with the
stored mean vector's cosine), the leg's top chunks handed to the product's
engine as the semantic leg; everything else (lexical leg, fusion, boosts,
caps) is ``Service.search`` as it stands. ``mean`` scores the stored vectors
the same way (float32, not the index's float16 rounding), the baseline the
variants compare with.

Runs on: the main thread.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .beir import WORKSPACE
from .common import DEFAULT_DATA, cache_root, log
from .known_item import CORPORA, store_dir
from .quality_study import DEFAULT_FUSION, LEGS, Known, SciFact, _print

VEC_DIR = Path("/tmp/quality/vec")
FAMILIES = ("w256", "w256bc", "w128")


# ---------------------------------------------------------------- stores and chunks


def stores(cache: Path, sets: list[str]) -> dict[str, Path]:
    """workspace name -> store file."""
    out: dict[str, Path] = {}
    if "scifact" in sets:
        out[WORKSPACE] = sorted((cache / "stores").glob("scifact-*/autodoc.db"))[0]
    if "known" in sets:
        for c in CORPORA:
            sdir, _ = store_dir(cache / "known", DEFAULT_DATA / "corpora", c)
            out[c] = sdir / "autodoc.db"
    return out


def read_chunks(db_path: Path, docs: bool = False):
    """(chunk ids, breadcrumbs, texts, stored vectors [n, dim] of the active model) by chunk id
    (and each chunk's document id with ``docs``)."""
    import apsw

    db = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    fp = db.execute("SELECT active_fp FROM embed_state").fetchone()[0]
    rows = db.execute(
        "SELECT c.id, c.breadcrumb, c.text, v.f32, c.document_id FROM chunks c JOIN vectors v ON v.workspace_id=c.workspace_id "
        "AND v.model_fp=? AND v.text_hash=c.text_hash ORDER BY c.id",
        (fp,),
    ).fetchall()
    db.close()
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    vecs = np.stack([np.frombuffer(r[3], dtype="<f4") for r in rows]).astype(np.float32)
    if docs:
        return ids, [r[1] for r in rows], [r[2] for r in rows], vecs, np.array([r[4] for r in rows], dtype=np.int64)
    return ids, [r[1] for r in rows], [r[2] for r in rows], vecs


# ---------------------------------------------------------------- windows


def windows_of(family: str, ids: list[int], bc_len: int, open_: list[int], close: list[int]) -> list[list[int]]:
    """The model inputs of one chunk under a family (``ids``: the tokenised breadcrumb + newline + text,
    special tokens included; ``bc_len``: how many inner tokens the breadcrumb took)."""
    from autodoc.embed.onnx import split_windows

    inner = ids[len(open_) : len(ids) - len(close)]
    if family == "w256":
        return split_windows(ids, 256, open_, close)
    if family == "w256bc":
        if len(ids) <= 256:
            return [ids]
        first = split_windows(ids, 256, open_, close)[0]
        bc, body = inner[:bc_len], inner[bc_len:]
        step = 256 - len(open_) - len(close) - len(bc)
        done = len(first) - len(open_) - len(close) - len(bc)  # body tokens the first window held
        return [first] + [open_ + bc + body[s : s + step] + close for s in range(done, len(body), step)]
    if family == "w128":
        if len(ids) <= 128:
            return [ids]
        size = 128 - len(open_) - len(close)
        stride = size // 2
        starts = list(range(0, max(1, len(inner) - size) + 1, stride))
        if starts[-1] + size < len(inner):
            starts.append(len(inner) - size)
        return [open_ + inner[s : s + size] + close for s in starts]
    raise ValueError(family)


def embed_windows(prov, seqs: list[list[int]], batch: int = 32) -> np.ndarray:
    """Each input's mean-pooled, L2-normalised vector (the product's recipe for one window)."""
    from autodoc.embed.onnx import masked_sum, normalise

    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    order = np.argsort(lengths, kind="stable")
    out = np.empty((len(seqs), prov.dim), dtype=np.float32)
    t0, done = time.time(), 0
    for start in range(0, len(order), batch):
        rows = order[start : start + batch]
        width = int(lengths[rows].max())
        input_ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for r, i in enumerate(rows):
            input_ids[r, : lengths[i]] = seqs[i]
            mask[r, : lengths[i]] = 1
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if prov._feed_types:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        hidden = prov._session.run([prov._output], feed)[0]
        out[rows] = masked_sum(hidden, mask) / mask.sum(axis=1, keepdims=True)
        done += len(rows)
        if start // batch % 50 == 0:
            log(f"    {done}/{len(seqs)} windows, {done / max(1e-9, time.time() - t0):.1f}/s")
    return normalise(out)


def embed_store(prov, name: str, db_path: Path, families: list[str], vec_dir: Path) -> None:
    ids, bcs, texts, stored_vecs = read_chunks(db_path)
    tok = prov._count_tok
    encs = tok.encode_batch([f"{b}\n{t}" for b, t in zip(bcs, texts)])
    bc_lens = [len(e.ids) - 2 for e in tok.encode_batch(list(bcs))]
    for fam in families:
        path = vec_dir / f"{name}-{fam}.npz"
        if path.exists():
            continue
        owner: list[int] = []
        seqs: list[list[int]] = []
        # w256bc's first window is w256's: only the later windows (breadcrumb again) are embedded
        skip = 1 if fam == "w256bc" else 0
        for row, e in enumerate(encs):
            wins = windows_of(fam, e.ids, bc_lens[row], prov._open, prov._close)
            if len(wins) > 1:
                seqs.extend(wins[skip:])
                owner.extend([row] * (len(wins) - skip))
        log(f"  {name} {fam}: {len(ids)} chunks, {len(set(owner))} longer than one window, {len(seqs)} windows")
        t0 = time.time()
        vecs = embed_windows(prov, seqs) if seqs else np.zeros((0, prov.dim), np.float32)
        if skip:
            z = np.load(vec_dir / f"{name}-w256.npz")
            first = np.unique(z["owner"], return_index=True)[1]
            owner = list(z["owner"][first]) + owner
            vecs = np.concatenate([z["vecs"][first], vecs])
        np.savez(path, owner=np.array(owner, dtype=np.int64), vecs=vecs, ids=ids, seconds=np.array(time.time() - t0))
        if fam == "w256" and seqs:  # the product's vector is the token-weighted mean of these windows
            _check_mean(encs, owner, seqs, vecs, stored_vecs)


def _check_mean(encs, owner, seqs, vecs, stored_vecs) -> None:
    lens = np.array([len(s) for s in seqs], dtype=np.float32)
    own = np.array(owner)
    for row in list(dict.fromkeys(owner))[:20]:
        sel = own == row
        # window vectors were normalised, so the unnormalised means are lost: compare directions only
        cos = float(np.dot(stored_vecs[row], vecs[sel].T @ lens[sel] / np.linalg.norm(vecs[sel].T @ lens[sel])))
        if cos < 0.98:
            log(f"  warning: chunk row {row}: windows' weighted mean vs stored cosine {cos:.4f}")


# ---------------------------------------------------------------- scoring


class WindowIndex:
    """One workspace's chunk scores from window vectors (and the stored mean vectors)."""

    def __init__(
        self,
        ids: np.ndarray,
        stored_vecs: np.ndarray,
        owner: np.ndarray | None,
        wvecs: np.ndarray | None,
        doc: np.ndarray | None = None,
    ):
        self.ids = ids
        self.mean = stored_vecs
        self.owner = owner
        self.wvecs = wvecs
        if doc is not None:  # each chunk's document: the normalised mean of the document's chunk vectors
            _, inv = np.unique(doc, return_inverse=True)
            dv = np.zeros((inv.max() + 1, stored_vecs.shape[1]), dtype=np.float32)
            np.add.at(dv, inv, stored_vecs)
            dv /= np.maximum(np.linalg.norm(dv, axis=1, keepdims=True), 1e-9)
            self.doc_inv, self.doc_vecs = inv, dv

    def scores(self, q: np.ndarray, how: str, alpha: float) -> np.ndarray:
        mean_cos = self.mean @ q
        if how == "doc":  # the chunk's cosine blended with its document's
            return (1 - alpha) * mean_cos + alpha * (self.doc_vecs @ q)[self.doc_inv]
        if how == "mean" or self.owner is None:
            return mean_cos
        best = mean_cos.copy()  # a chunk of one window: its stored vector is that window
        multi = np.unique(self.owner)
        best[multi] = -2.0
        np.maximum.at(best, self.owner, self.wvecs @ q)
        if how == "max":
            return best
        if how == "blend":
            return alpha * best + (1 - alpha) * mean_cos
        if how == "softmax":  # log-sum-exp over windows at temperature alpha
            lse = np.exp(mean_cos / alpha)
            lse[multi] = 0.0
            np.add.at(lse, self.owner, np.exp(self.wvecs @ q / alpha))
            return alpha * np.log(lse)
        raise ValueError(how)


def load_index(name: str, db_path: Path, family: str | None, vec_dir: Path) -> WindowIndex:
    ids, _, _, stored_vecs, doc = read_chunks(db_path, docs=True)
    if family is None:
        return WindowIndex(ids, stored_vecs, None, None, doc)
    z = np.load(vec_dir / f"{name}-{family}.npz")
    assert np.array_equal(z["ids"], ids), f"{name}: the store's chunks changed since {family} was embedded"
    return WindowIndex(ids, stored_vecs, z["owner"], z["vecs"])


def patched_run(indexes: dict[str, WindowIndex], current: dict[str, str], how: str, alpha: float) -> Callable:
    from autodoc.search.fusion import LegHit
    from autodoc.search.semantic import SemanticOutcome

    qcache: dict[str, np.ndarray] = {}

    def run(self, text: str, top: int):
        ws = current["ws"]
        if text not in qcache:
            qcache[text] = np.asarray(self.provider.embed_query(text), dtype=np.float32)
        idx = indexes[ws]
        s = idx.scores(qcache[text], how, alpha)
        top = min(top, len(s))
        part = np.argpartition(-s, top - 1)[:top]
        part = part[np.lexsort((idx.ids[part], -s[part]))]
        return SemanticOutcome(
            [LegHit(int(idx.ids[i]), round(float(s[i]), 6)) for i in part],
            "ready",
            None,
            None,
            model=self.provider.name,
            tier="full",
        )

    return run


# variant -> (family or None, how, alpha)
VARIANTS: dict[str, tuple[str | None, str, float]] = {"mean": (None, "mean", 0.0)}
for _b in (0.1, 0.2, 0.3, 0.5):
    VARIANTS[f"doc{_b}"] = (None, "doc", _b)
for _fam in FAMILIES:
    VARIANTS[f"max-{_fam}"] = (_fam, "max", 1.0)
    for _a in (0.3, 0.5, 0.7):
        VARIANTS[f"blend{_a}-{_fam}"] = (_fam, "blend", _a)
    for _t in (0.02, 0.05):
        VARIANTS[f"lse{_t}-{_fam}"] = (_fam, "softmax", _t)


def replay_scifact(capture: Path, names: list[str], db_path: Path, vec_dir: Path) -> list[dict[str, Any]]:
    """SciFact through the captured legs (bench/quality_fusion.py --capture): each query's lexical leg,
    boosts and metadata as Service.search had them, the semantic leg re-scored by each variant, then
    the product's fusion, boosts, cap and demotion (quality_fusion.replay). Seconds a variant."""
    import pickle

    import apsw

    from autodoc.config import RRF_K, RRF_WEIGHTS
    from autodoc.embed.onnx import OnnxProvider
    from autodoc.search.fusion import LegHit

    from . import evaluate as E
    from .beir import path_doc
    from .quality_fusion import SCIFACT_LIMIT, product_rrf, replay

    data = pickle.loads(Path(capture).read_bytes())
    qids = list(data["scifact"])
    db = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    doc_of = dict(db.execute("SELECT id, document_id FROM chunks").fetchall())
    doc_path = dict(db.execute("SELECT id, path FROM documents").fetchall())
    db.close()
    from .beir import load_collection

    col = load_collection(DEFAULT_DATA / "scifact")
    texts = {q: t for split in ("train", "test") for q, t in col.split_queries(split)}
    qfile = vec_dir / f"queries-{capture.stem}.npy"
    if qfile.exists():
        qv = np.load(qfile)
    else:
        prov = OnnxProvider()
        qv = np.stack([np.asarray(prov.embed_query(texts[q]), dtype=np.float32) for q in qids])
        np.save(qfile, qv)
    rows = []
    cache: dict[str | None, WindowIndex] = {}
    for vname in names:
        fam, how, alpha = VARIANTS[vname]
        if fam not in cache:
            cache[fam] = load_index(WORKSPACE, db_path, fam, vec_dir)
        idx = cache[fam]
        run = {}
        for i, q in enumerate(qids):
            box = dict(data["scifact"][q])
            depth = len(box["legs"].get("semantic", [])) or 100
            sc = idx.scores(qv[i], how, alpha)
            part = np.argpartition(-sc, depth - 1)[:depth]
            part = part[np.lexsort((idx.ids[part], -sc[part]))]
            legs = dict(box["legs"])
            legs["semantic"] = [LegHit(int(idx.ids[j]), round(float(sc[j]), 6)) for j in part]
            # the capture ran with the store's own fusion (k 20 / 0.8 when it was added): the product's default here
            box.update(legs=legs, doc_of=doc_of, doc_path=doc_path, k=RRF_K, weights=dict(RRF_WEIGHTS))
            run[q] = [path_doc(p) for p in replay(box, product_rrf())][:SCIFACT_LIMIT]
            # the semantic leg alone: documents by their best chunk
            seen: dict[str, None] = {}
            for h in legs["semantic"]:
                seen.setdefault(path_doc(doc_path[doc_of[h.chunk_id]]), None)
            run.setdefault("_sem", {})[q] = list(seen)[:SCIFACT_LIMIT]
        sem = run.pop("_sem")
        hyb = E.evaluate(run, data["qrels"])["nDCG@10"]
        se = E.evaluate(sem, data["qrels"])["nDCG@10"]
        rows.append({"variant": vname, "hybrid": round(hyb, 4), "semantic": round(se, 4)})
        print(f"{vname:<18} SciFact ({capture.stem}) hybrid nDCG@10 {hyb:.4f}  semantic {se:.4f}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--embed", action="store_true", help="compute and cache the window vectors")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--only", default="")
    ap.add_argument("--legs", default="hybrid,semantic")
    ap.add_argument("--sets", default="scifact,known")
    ap.add_argument("--split", default="train")
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--vec-dir", type=Path, default=VEC_DIR)
    ap.add_argument("--json", default="-")
    ap.add_argument("--corpora", default="", help="only these known-item corpora (comma-separated)")
    ap.add_argument(
        "--replay", type=Path, default=None, help="SciFact only, through a quality_fusion capture file (fast)"
    )
    a = ap.parse_args(argv)
    cache = a.cache or cache_root()
    sets = a.sets.split(",")
    paths = stores(cache, sets)
    if a.corpora:
        keep = set(a.corpora.split(","))
        paths = {ws: p for ws, p in paths.items() if ws == WORKSPACE or ws in keep}
    a.vec_dir.mkdir(parents=True, exist_ok=True)
    if a.embed:
        from autodoc.embed.onnx import OnnxProvider

        prov = OnnxProvider()
        for fam in a.families.split(","):
            for name, p in paths.items():
                embed_store(prov, name, p, [fam], a.vec_dir)
        return 0
    if a.replay:
        names = [n for n in a.only.split(",") if n] or list(VARIANTS)
        rows = replay_scifact(a.replay, names, paths[WORKSPACE], a.vec_dir)
        if a.json != "-":
            Path(a.json).write_text(json.dumps(rows, indent=1))
        return 0
    sci = SciFact(paths[WORKSPACE], DEFAULT_DATA / "scifact", None, a.split) if "scifact" in sets else None
    known = Known(cache / "known", DEFAULT_DATA / "corpora") if "known" in sets else None
    if known and a.corpora:
        known.questions = [q for q in known.questions if q["corpus"] in paths]
    services = {WORKSPACE: sci.svc} if sci else {}
    if known:
        services.update(known.svcs)
    from autodoc.search.semantic import Prepared

    orig_run = Prepared.run
    current: dict[str, str] = {}
    for svc in services.values():
        _track(svc, current)
    names = [n for n in a.only.split(",") if n] or list(VARIANTS)
    rows = []
    loaded: dict[tuple[str, str | None], WindowIndex] = {}
    for vname in names:
        fam, how, alpha = VARIANTS[vname]
        indexes = {}
        for ws, p in paths.items():
            if (ws, fam) not in loaded:
                loaded[(ws, fam)] = load_index(ws, p, fam, a.vec_dir)
            indexes[ws] = loaded[(ws, fam)]
        Prepared.run = patched_run(indexes, current, how, alpha)
        try:
            for leg in a.legs.split(","):
                row = {"variant": vname, "leg": leg}
                if sci:
                    row["scifact"] = sci.run(LEGS[leg], DEFAULT_FUSION)
                if known:
                    row["known"] = known.run(LEGS[leg], DEFAULT_FUSION)
                rows.append(row)
                _print(row)
                if known:
                    k = row["known"]
                    print(
                        "    "
                        + "  ".join(
                            f"{st[:3]} {k[st]['R@1']:.3f}/{k[st]['R@3']:.3f}/{k[st]['R@10']:.3f}/{k[st]['MRR']:.3f}"
                            for st in ("keywords", "sentence", "agent")
                        ),
                        flush=True,
                    )
        finally:
            Prepared.run = orig_run
    if a.json != "-":
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


def _track(svc, current: dict[str, str]) -> None:
    """The workspace of the search in flight (searches run one at a time here; the leg on a pool thread)."""
    orig = svc.search

    def search(ws, text, opts, *args, **kw):
        current["ws"] = ws
        return orig(ws, text, opts, *args, **kw)

    svc.search = search


if __name__ == "__main__":
    sys.exit(main())
