"""Which document leads: the product's fused order against re-orderings by document-level signals
(issue 35's bottleneck), on the answer-span questions.

    python -m bench.doc_signals                 # tune parts of both question sets (what to iterate on)
    python -m bench.doc_signals --split all     # a report, test parts included (read, not tuned on)

Most answers lost at AiP@1 name another document first (docs/benchmarks/answers.md). This study
asks whether a signal the product already has, measured for the whole document rather than its
best passage, would order the documents better. For each question, the candidates are the first
20 documents of `search.query` (hybrid, one passage a document), and for each candidate:

- `max` / `top2` / `top3`: its passages' best cosine to the query, or the mean of its best 2 or 3
  (the stored vectors, as search/passages.py reads them);
- `centroid`: the cosine of its passages' mean vector;
- `bm25`: BM25 of the whole document as one text (document frequencies over the workspace's
  documents, b 0.75), and `bm25_b3` (b 0.3: a long page is not penalised as much);
- `coverage`: the share of the query's inverse document frequency its text holds;
- `named`: the share of it its title, file name and folders hold;
- `title_cos`: the cosine of the query and the title.

Each signal orders the candidates alone and fused with the product's order (reciprocal ranks,
k 10 and 60, the signal weighted 0.5 or 1). Reported: how many questions have the answer's
document first (doc@1) and among the first 3 (doc@3). A signal worth taking into the product
beats the fused order on both sets' tune parts, and not by one question.

Stores: the known-item stores (bench/known_item.py, built by ``python -m bench.answers``); missing
ones are skipped. Prints a markdown table; nothing is written.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from . import answers as A
from . import known_item
from .common import DEFAULT_DATA, cache_root

CANDIDATES = 20
SIGNALS = ["max", "top2", "top3", "centroid", "bm25", "bm25_b3", "coverage", "named", "title_cos"]


def _words(text: str) -> set[str]:
    from autodoc.search.lexical.tokens import stems

    return stems(re.sub(r"[-_/.]", " ", text))


def _bm25(tf: Counter[str], length: int, mean: float, idf: dict[str, float], b: float) -> float:
    k1 = 1.2
    norm = k1 * (1 - b + b * (length / mean if mean else 1.0))
    return sum(w * tf[s] * (k1 + 1) / (tf[s] + norm) for s, w in idf.items() if tf[s])


def corpus_features(store: Path, corpus: str, questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each question's candidates, in fused order, with their signals."""
    from autodoc.config import Settings
    from autodoc.search.lexical.tokens import stem_counts
    from autodoc.service import Service
    from autodoc.store import hits as stored_hits
    from autodoc.store import vectors as stored_vectors
    from autodoc.store.filters import Filter
    from autodoc.store.workspaces import get_workspace

    svc = Service(Settings.from_env(store=store), writer=False)
    out = []
    try:
        with svc.store.read() as db:
            ws = get_workspace(db, corpus)
            model = stored_vectors.active_model(db, ws.id)
            provider = svc.providers.get(model.config) if model and model.config else None
            fp = model.fingerprint if model else None
            listed = stored_hits.matching_documents(db, ws.id, Filter(), 1_000_000)
            first = {r[0]: r[6] for r in listed if r[6] is not None}
            doc_of_chunk = stored_hits.chunk_documents(db, list(first.values()))
            doc_of_path = {p: doc_of_chunk[c] for p, c in first.items()}
            texts: dict[int, Counter[str]] = {}
            df: Counter[str] = Counter()
            for did in doc_of_path.values():
                tf: Counter[str] = Counter()
                for _cid, b, t in stored_hits.document_passages(db, ws.id, did, Filter(), 1_000_000):
                    tf.update(stem_counts(b + "\n" + t))
                texts[did] = tf
                df.update(tf.keys())
            n_docs = len(texts)
            mean_len = sum(sum(t.values()) for t in texts.values()) / max(1, n_docs)
            for q in questions:
                ans = svc.search(corpus, q["query"], {"limit": CANDIDATES, "per_document": True})
                cands: list[dict[str, Any]] = []
                for h in ans["hits"]:
                    if h["path"] not in [c["path"] for c in cands]:
                        cands.append({"path": h["path"], "title": h["title"] or ""})
                qv = np.asarray(provider.embed_query(q["query"]), dtype=np.float32) if provider else None
                qstems = _words(q["query"])
                idf = {s: math.log(1 + (n_docs - df[s] + 0.5) / (df[s] + 0.5)) for s in qstems}
                total = sum(idf.values()) or 1.0
                for c in cands:
                    did = doc_of_path.get(c["path"])
                    tf = texts.get(did, Counter()) if did is not None else Counter()
                    vecs = []
                    if qv is not None and fp and did is not None:
                        vecs = [
                            np.frombuffer(f32, dtype=np.float32)
                            for _c, _t, f32 in stored_vectors.document_vectors(db, ws.id, fp, did)
                        ]
                    cos = sorted((float(v @ qv) for v in vecs), reverse=True) if vecs else [0.0]
                    centroid = np.mean(vecs, axis=0) if vecs else None
                    length = sum(tf.values())
                    named = _words(c["title"]) | _words(c["path"].rsplit(".", 1)[0])
                    c.update(
                        max=cos[0],
                        top2=float(np.mean(cos[:2])),
                        top3=float(np.mean(cos[:3])),
                        centroid=float(centroid @ qv / (np.linalg.norm(centroid) or 1.0))
                        if centroid is not None and qv is not None
                        else 0.0,
                        bm25=_bm25(tf, length, mean_len, idf, 0.75),
                        bm25_b3=_bm25(tf, length, mean_len, idf, 0.3),
                        coverage=sum(w for s, w in idf.items() if tf[s]) / total,
                        named=sum(w for s, w in idf.items() if s in named) / total,
                    )
                if provider is not None and cands and qv is not None:
                    tv = provider.embed([c["title"] or c["path"] for c in cands])
                    for c, v in zip(cands, tv):
                        c["title_cos"] = float(np.asarray(v) @ qv)
                else:
                    for c in cands:
                        c["title_cos"] = 0.0
                out.append(
                    {"id": q["id"], "split": q["split"], "want": {a["path"] for a in q["answers"]}, "cands": cands}
                )
                print(q["id"], file=sys.stderr)
    finally:
        svc.close()
    return out


def reorder(
    cands: list[dict[str, Any]], signal: str | None, k: int = 60, weight: float = 1.0, alone: bool = False
) -> list[str]:
    """The candidates' paths: fused order (signal None), by the signal alone, or both by reciprocal rank."""
    paths = [c["path"] for c in cands]
    if signal is None:
        return paths
    by = sorted(range(len(cands)), key=lambda i: (-cands[i][signal], i))
    if alone:
        return [paths[i] for i in by]
    score = {p: 1.0 / (k + i) for i, p in enumerate(paths)}
    for r, i in enumerate(by):
        score[paths[i]] += weight / (k + r)
    return sorted(paths, key=lambda p: -score[p])


def table(rows: list[dict[str, Any]]) -> str:
    variants: list[tuple[str, str | None, dict[str, Any]]] = [("fused order (the product)", None, {})]
    for s in SIGNALS:
        variants.append((f"{s} alone", s, {"alone": True}))
        for k in (10, 60):
            for w in (0.5, 1.0):
                variants.append((f"{s} + fused, k {k}, weight {w}", s, {"k": k, "weight": w}))
    lines = ["| order | doc@1 | doc@3 |", "|---|---:|---:|"]
    for name, s, kw in variants:
        at1 = at3 = 0
        for r in rows:
            order = reorder(r["cands"], s, **kw)
            at1 += bool(order) and order[0] in r["want"]
            at3 += any(p in r["want"] for p in order[:3])
        lines.append(f"| {name} | {at1} | {at3} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.doc_signals", description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", choices=["tune", "test", "all"], default="tune")
    ap.add_argument("--corpora", type=Path, default=DEFAULT_DATA / "corpora")
    ap.add_argument("--cache", type=Path, default=None, help="store folder (default <bench cache>/known)")
    args = ap.parse_args(argv)
    cache = args.cache or cache_root() / "known"
    questions = [
        q
        for f in (A.QUESTIONS, A.DATA / "questions-v2.jsonl")
        for q in A.load(f)
        if args.split == "all" or q["split"] == args.split
    ]
    rows: list[dict[str, Any]] = []
    for corpus in A.CORPORA:
        mine = [q for q in questions if q["corpus"] == corpus]
        store = known_item.store_dir(cache, args.corpora, corpus)[0] / "autodoc.db"
        if not mine or not store.exists():
            print(f"{corpus}: skipped (no questions or no store at {store})", file=sys.stderr)
            continue
        rows += corpus_features(store, corpus, mine)
    print(f"{len(rows)} questions ({args.split}), the first {CANDIDATES} documents of search.query each\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
