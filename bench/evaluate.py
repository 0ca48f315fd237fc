"""Retrieval metrics through a standard evaluator (ir-measures), checked
against a hand-computed example and a small reference implementation.

ir-measures 0.4.3 dispatches nDCG@k and R@k to its pytrec_eval provider
(pytrec-eval-terrier, i.e. trec_eval: linear gain rel / log2(rank + 1)) and
RR@k to its msmarco provider. A run is given as each query's ranked list of
document ids; it is turned into scores (n - rank) so the evaluator's own sort
(score desc, then doc id) reproduces our order exactly.

A query that returned nothing counts 0 (evaluators average only over the
queries present in the run, which would inflate the figure), and every mean
is over all judged queries of the split.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

MEASURES = ("nDCG@10", "R@10", "R@100", "RR@10")
LABELS = {"nDCG@10": "nDCG@10", "R@10": "recall@10", "R@100": "recall@100", "RR@10": "MRR@10"}

Run = Mapping[str, Sequence[str]]
Qrels = Mapping[str, Mapping[str, int]]


def _measures():
    import ir_measures

    return [ir_measures.parse_measure(m) for m in MEASURES]


def backends() -> dict[str, str]:
    """Which provider ir-measures uses for each measure."""
    import ir_measures

    out = {}
    for m in _measures():
        for p in ir_measures.DefaultPipeline.providers:
            try:
                if p.supports(m):
                    out[str(m)] = p.NAME
                    break
            except Exception:
                continue
    return out


def per_query(run: Run, qrels: Qrels) -> dict[str, dict[str, float]]:
    """{measure: {qid: value}} over every judged query (0 when absent from the run)."""
    import ir_measures

    judged = {q: d for q, d in qrels.items() if q in run or True}
    qr = [ir_measures.Qrel(q, d, int(r)) for q, docs in judged.items() for d, r in docs.items()]
    sd = []
    for q, docs in run.items():
        if q not in judged:
            continue
        n = len(docs)
        sd += [ir_measures.ScoredDoc(q, d, float(n - i)) for i, d in enumerate(docs)]
    out: dict[str, dict[str, float]] = {m: dict.fromkeys(judged, 0.0) for m in MEASURES}
    for m in ir_measures.iter_calc(_measures(), qr, sd):
        out[str(m.measure)][m.query_id] = float(m.value)
    return out


def evaluate(run: Run, qrels: Qrels) -> dict[str, float]:
    pq = per_query(run, qrels)
    return {m: (sum(v.values()) / len(v) if v else float("nan")) for m, v in pq.items()}


# -- a reference implementation, to cross-check the evaluator -----------------


def ref_ndcg(ranked: Sequence[str], rels: Mapping[str, int], k: int = 10) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if rels.get(d, 0) > 0)
    ideal = sorted((r for r in rels.values() if r > 0), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def ref_recall(ranked: Sequence[str], rels: Mapping[str, int], k: int) -> float:
    rel = {d for d, r in rels.items() if r > 0}
    return len(rel & set(ranked[:k])) / len(rel) if rel else 0.0


def ref_rr(ranked: Sequence[str], rels: Mapping[str, int], k: int = 10) -> float:
    for i, d in enumerate(ranked[:k]):
        if rels.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def ref_evaluate(run: Run, qrels: Qrels) -> dict[str, float]:
    fns = {
        "nDCG@10": lambda r, q: ref_ndcg(r, q, 10),
        "R@10": lambda r, q: ref_recall(r, q, 10),
        "R@100": lambda r, q: ref_recall(r, q, 100),
        "RR@10": lambda r, q: ref_rr(r, q, 10),
    }
    out = {}
    for m, fn in fns.items():
        vals = [fn(list(run.get(q, [])), rels) for q, rels in qrels.items()]
        out[m] = sum(vals) / len(vals) if vals else float("nan")
    return out


# The hand-computed example: judged d1 (1), d3 (2), d9 (1); ranked d0 d1 d2 d3.
# DCG  = 1/log2(3) + 2/log2(5)            = 0.630930 + 0.861353 = 1.492283
# IDCG = 2/log2(2) + 1/log2(3) + 1/log2(4) = 2 + 0.630930 + 0.5 = 3.130930
# nDCG@10 = 0.476626; recall@10 = 2/3; recall@100 = 2/3; MRR@10 = 1/2.
# Query q2 returned nothing and counts 0 for every measure.
HAND_QRELS = {"q1": {"d1": 1, "d3": 2, "d9": 1}, "q2": {"d5": 1}}
HAND_RUN = {"q1": ["d0", "d1", "d2", "d3"]}
HAND_EXPECTED_Q1 = {
    "nDCG@10": (1 / math.log2(3) + 2 / math.log2(5)) / (2 + 1 / math.log2(3) + 0.5),
    "R@10": 2 / 3,
    "R@100": 2 / 3,
    "RR@10": 0.5,
}


def hand_check(tol: float = 1e-6) -> dict[str, float]:
    """Evaluate the hand example; raise if the evaluator disagrees. Returns
    the per-measure value for q1."""
    pq = per_query(HAND_RUN, HAND_QRELS)
    for m, want in HAND_EXPECTED_Q1.items():
        got = pq[m]["q1"]
        if abs(got - want) > tol:
            raise AssertionError(f"{m}: evaluator says {got}, hand computation {want}")
        if pq[m]["q2"] != 0.0:
            raise AssertionError(f"{m}: an empty query must count 0")
    means = evaluate(HAND_RUN, HAND_QRELS)
    for m, want in HAND_EXPECTED_Q1.items():
        if abs(means[m] - want / 2) > tol:
            raise AssertionError(f"{m}: mean over 2 queries should be {want / 2}, got {means[m]}")
    return {m: pq[m]["q1"] for m in MEASURES}


def cross_check(run: Run, qrels: Qrels, got: Mapping[str, float] | None = None, tol: float = 1e-9) -> float:
    """Largest difference between the evaluator and the reference implementation."""
    got = got or evaluate(run, qrels)
    ref = ref_evaluate(run, qrels)
    return max(abs(got[m] - ref[m]) for m in MEASURES)
