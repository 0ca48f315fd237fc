"""Per-hit confidence, `answerable` and the relevance floor, measured (issue 35).

    python -m bench.confidence --calibrate     # fit the model on the train sets, print it (never test)
    python -m bench.confidence                 # report: docs/benchmarks/confidence.{md,json}

Every probe is a search as a default client makes it (limit 10, up to 3 passages a document), with
`min_confidence: 0` so nothing is held back, and the signals the engine scored each hit with are
recorded (search/evidence.py's hit_signals, wrapped). A hit is relevant when its document is
(SciFact's qrels; the known-item question's target); with the answer-span set
(bench/answer_spans/, when present) when its lines overlap the answer's span.

Sets. Train (fitted on): SciFact train queries against SciFact (positives) and against the five
Markdown corpora in turn (negatives), and the known-item questions of odd number against their
corpus and against SciFact. Test (reported, never fitted): SciFact test queries the same way, the
known-item questions of even number, those questions against the next Markdown corpus (a negative
of the same domain), the answer-span set, and the unanswerable questions. Each with the default
stages (hybrid) and lexical alone.

Figures: ECE (10 equal-width bins, weighted by hits) and a reliability table of the shown
confidence; how often the shown confidences rise down a list; precision and recall of
`answerable`; recall@10 of relevant documents with and without the floor, and the share of hits
it holds back. The "before" rows recompute the previous model (an answer-level logistic over
coverage, cosine and both legs, threshold 0.34) from the same recorded signals.

Stores: as bench/agents.py (the cached SciFact store and the five known-item stores).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .common import DEFAULT_DATA, RESULTS, cache_root, command_line, git_commit, log, machine_note
from .known_item import CORPORA, load_questions
from .quality import doc_path, load_collection

LIMIT = 10
LEXICAL = ["lexical"]
SPANS = Path(__file__).parent / "answer_spans"
# the model before issue 35: (intercept, coverage, cosine, both legs), answerable at 0.34 of the best hit
OLD_HYBRID = (-7.835, 6.181, 15.471, 0.837)
OLD_LEXICAL = (-4.082, 11.331, 0.0, 0.0)
OLD_THRESHOLD = 0.34


def fresh(opts: dict[str, Any]) -> dict[str, Any]:
    from .agents import fresh as f

    return f(opts)


@contextmanager
def recording():
    """Wraps evidence.hit_signals (shape.py calls it through the module) to keep what it returned."""
    from autodoc.search import evidence

    got: list[Any] = []
    real = evidence.hit_signals

    def wrapped(*a, **k):
        out = real(*a, **k)
        got.append(out)
        return out

    evidence.hit_signals = wrapped  # type: ignore[assignment]
    try:
        yield got
    finally:
        evidence.hit_signals = real  # type: ignore[assignment]


def probe(stores, store: str, query: str, relevant, stages: list[str] | None) -> dict[str, Any]:
    """One search; each page hit's signals and whether it is relevant. `relevant` is a set of paths
    or a function (path, line_start, line_end) → bool."""
    svc, ws = stores.get(store)
    opts: dict[str, Any] = {"limit": LIMIT, "min_confidence": 0}
    if stages:
        opts["stages"] = stages
    with recording() as got:
        a = svc.search(ws, query, fresh(opts))
    sigs = got[-1] if got else []
    is_rel = relevant if callable(relevant) else (lambda p, s, e: p in relevant)
    hits = [
        {"rel": bool(is_rel(h["path"], h["line_start"], h["line_end"])), "s": asdict(s), "shown": h["confidence"]}
        for h, s in zip(a["hits"], sigs)
    ]
    return {"answerable": a["answerable"], "hits": hits, "lexical": stages == LEXICAL}


def answer_spans(name: str) -> list[dict[str, Any]]:
    """A frozen file of bench/answer_spans/, if it is in the tree."""
    p = SPANS / name
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


def built(cache: Path, fp: str | None) -> dict[str, Path]:
    """The known-item corpora whose store is complete (bench/known_item.py writes its meta last) and,
    given `fp`, holds vectors of that model (the one the SciFact store was embedded with)."""
    import sqlite3

    out: dict[str, Path] = {}
    for c in CORPORA:
        for d in sorted((cache / "known").glob(f"{c}-*"), key=lambda d: d.stat().st_mtime):
            if not (d / "bench-meta.json").exists():
                continue
            if fp is not None:
                with sqlite3.connect(f"file:{d / 'autodoc.db'}?mode=ro", uri=True) as db:
                    if not db.execute("SELECT 1 FROM vectors WHERE model_fp=? LIMIT 1", (fp,)).fetchone():
                        continue
            out[c] = d / "autodoc.db"
    return out


def model_fp(store: Path) -> str | None:
    import sqlite3

    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        row = db.execute("SELECT model_fp FROM vectors LIMIT 1").fetchone()
    return row[0] if row else None


def probe_sets(stores, split: str, n: int | None, corpora: list[str]) -> dict[str, list[dict[str, Any]]]:
    col = load_collection(DEFAULT_DATA / "scifact", splits=(split,))
    queries = col.split_queries(split)
    if n:
        queries = queries[:: max(1, len(queries) // n)][:n]
    qs = [
        q
        for q in load_questions()
        if q["corpus"] in corpora and int(q["id"].rsplit("-", 1)[1]) % 2 == (1 if split == "train" else 0)
    ]
    out: dict[str, list[dict[str, Any]]] = {}
    for leg, stages in (("hybrid", None), ("lexical", LEXICAL)):
        t = time.monotonic()
        out[f"scifact_pos/{leg}"] = [
            probe(stores, "scifact", q, {doc_path(d) for d in col.qrels[split][qid]}, stages) for qid, q in queries
        ]
        out[f"scifact_neg/{leg}"] = [
            probe(stores, corpora[i % len(corpora)], q, set(), stages) for i, (_, q) in enumerate(queries)
        ]
        out[f"known_pos/{leg}"] = [probe(stores, q["corpus"], q["query"], set(q["targets"]), stages) for q in qs]
        out[f"known_neg/{leg}"] = [probe(stores, "scifact", q["query"], set(), stages) for q in qs]
        if split == "test":
            other = {c: corpora[(i + 1) % len(corpora)] for i, c in enumerate(corpora)}
            out[f"markdown_neg/{leg}"] = [probe(stores, other[q["corpus"]], q["query"], set(), stages) for q in qs]
        # the answer-span set (bench/answer_spans/): its tune part is fitted on (answerable), its test
        # part is only reported
        part, tag = ("tune", "") if split == "train" else ("test", "_test")
        spans = [q for q in answer_spans("questions.jsonl") if q["corpus"] in corpora and q["split"] == part]
        nothing = [q for q in answer_spans("unanswerable.jsonl") if q["corpus"] in corpora and q["split"] == part]
        if spans:
            out[f"spans{tag}_pos/{leg}"] = [
                probe(stores, q["corpus"], q["query"], span_check(q), stages) for q in spans
            ]
        if nothing:
            out[f"unanswerable{tag}_neg/{leg}"] = [
                probe(stores, q["corpus"], q["query"], set(), stages) for q in nothing
            ]
        log(f"  {split} {leg}: {time.monotonic() - t:.0f} s")
    return out


def span_check(q: dict[str, Any]):
    """(path, line_start, line_end) → whether the passage overlaps one of the question's answer spans."""
    spans = [(a["path"], a["lines"][0], a["lines"][1]) for a in q["answers"]]
    return lambda p, s, e: any(p == sp and s <= b and e >= a for sp, a, b in spans)


# ---------------------------------------------------------------- model


def fit_logistic(X, y, w, l2: float = 1e-2) -> list[float]:
    import numpy as np

    Xa = np.array([[1.0, *x] for x in X])
    ya, wa = np.array(y, float), np.array(w, float)
    b = np.zeros(Xa.shape[1])
    for _ in range(100):
        p = 1 / (1 + np.exp(-np.clip(Xa @ b, -50, 50)))
        g = Xa.T @ (wa * (p - ya)) + l2 * b
        H = (Xa * (wa * p * (1 - p))[:, None]).T @ Xa + l2 * np.eye(len(b))
        step = np.linalg.solve(H, g)
        b -= step
        if np.abs(step).max() < 1e-9:
            break
    return [round(float(v), 3) for v in b]


def signals(h: dict[str, Any]):
    from autodoc.search import answerable as A

    return A.Signals(**h["s"])


HIT_SETS = ("scifact_", "known_")  # the hit model's sets: a hit is relevant when its document is


def calibrate(sets: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The hit model: one logistic regression (is this passage's document relevant?) over every hit of
    the SciFact and known-item train sets, each set (source x positive/negative x stages) weighing the
    same. The answer model: a logistic regression per query over the page's features (answerable.py
    answer_features) on every train set, the answer-span tune questions and the unanswerable tune
    questions included, each set weighing the same; its threshold the one maximising balanced accuracy."""
    from autodoc.search import answerable as A

    X, y, w = [], [], []
    for g, probes in sets.items():
        if not g.startswith(HIT_SETS):
            continue
        rows = [h for p in probes for h in p["hits"]]
        for h in rows:
            X.append(A.features(signals(h)))
            y.append(int(h["rel"]))
            w.append(1.0 / max(1, len(rows)))
    model = fit_logistic(X, y, w)
    X, y, w = [], [], []
    for g, probes in sets.items():
        pages = [p for p in probes if p["hits"]]
        for p in pages:
            sig = [signals(h) for h in p["hits"]]
            X.append(A.answer_features(sig, [A.probability(s, model) for s in sig]))
            y.append(int("_pos/" in g))
            w.append(1.0 / len(pages))
    answer_model = fit_logistic(X, y, w)
    best = (0.0, 0.5)
    for t in [i / 100 for i in range(2, 99)]:
        bal = balanced(sets, lambda p, t=t: found(p, model, answer_model, t))
        if bal > best[0] + 1e-9:
            best = (bal, t)
    floors = {f: floor_effect(sets, model, f) for f in (0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.1)}
    return {
        "features": list(A.FEATURES),
        "model": model,
        "answer_features": list(A.ANSWER_FEATURES),
        "answer_model": answer_model,
        "threshold": best[1],
        "balanced_accuracy": round(best[0], 4),
        "floors": floors,
        "current": {"model": list(A.MODEL), "answer_model": list(A.ANSWER_MODEL), "threshold": A.THRESHOLD},
    }


def found(p: dict[str, Any], model, answer_model, t: float) -> bool:
    """answerable as the product decides it, with these models and threshold."""
    from autodoc.search import answerable as A

    sig = [signals(h) for h in p["hits"]]
    return A.answerable(sig, [A.probability(s, model) for s in sig], model=answer_model, threshold=t)


def old_conf(h: dict[str, Any], lexical: bool) -> float:
    s = h["s"]
    coef = OLD_LEXICAL if lexical or (s["cosine"] is None and not s["missed"]) else OLD_HYBRID
    z = coef[0] + coef[1] * s["coverage"] + coef[2] * (s["cosine"] or 0.0) + coef[3] * s["both"]
    return 1 / (1 + math.exp(-z))


def balanced(sets, verdict) -> float:
    pos = [sum(map(verdict, v)) / len(v) for g, v in sets.items() if "_pos/" in g and v]
    neg = [sum(not verdict(p) for p in v) / len(v) for g, v in sets.items() if "_neg/" in g and v]
    return (statistics.mean(pos) + statistics.mean(neg)) / 2


def floor_effect(sets, model, floor: float) -> dict[str, Any]:
    """Relevant hits kept (recall@10 of the page) and hits held back, with this floor."""
    from autodoc.search import answerable as A

    rel = kept_rel = held = total = held_neg = total_neg = 0
    for g, probes in sets.items():
        for p in probes:
            matched = A.words_matched([signals(h) for h in p["hits"]])
            for h in p["hits"]:
                s = signals(h)
                out = A.held_back(s, A.match_probability(s, model), floor, words_matched=matched)
                total += 1
                held += out
                if "_neg/" in g:
                    total_neg += 1
                    held_neg += out
                if h["rel"]:
                    rel += 1
                    kept_rel += not out
    return {
        "relevant_kept": round(kept_rel / rel, 4) if rel else None,
        "relevant_held": rel - kept_rel,
        "held_share": round(held / total, 4) if total else None,
        "held_share_negatives": round(held_neg / total_neg, 4) if total_neg else None,
    }


# ---------------------------------------------------------------- figures


def shown_confidences(p: dict[str, Any], model) -> list[float]:
    from autodoc.search import answerable as A

    return A.monotone([A.probability(signals(h), model) for h in p["hits"]])


def reliability(pairs: list[tuple[float, bool]], bins: int = 10) -> dict[str, Any]:
    """ECE over equal-width bins, and each bin's mean confidence and observed share relevant."""
    table = []
    ece = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [(c, r) for c, r in pairs if lo <= c < hi or (b == bins - 1 and c == 1.0)]
        if not inside:
            continue
        mc = statistics.mean(c for c, _ in inside)
        obs = statistics.mean(float(r) for _, r in inside)
        ece += len(inside) / len(pairs) * abs(mc - obs)
        table.append(
            {"bin": f"{lo:.1f}-{hi:.1f}", "hits": len(inside), "confidence": round(mc, 3), "relevant": round(obs, 3)}
        )
    return {"hits": len(pairs), "ece": round(ece, 4), "table": table}


def rises(lists: list[list[float]]) -> dict[str, Any]:
    """Lists where a confidence is higher than the one shown before it."""
    bad = sum(any(b > a + 1e-12 for a, b in itertools.pairwise(v)) for v in lists)
    return {"lists": len(lists), "rising": bad}


def pr(pos: list[bool], neg: list[bool]) -> dict[str, Any]:
    tp, fp = sum(pos), sum(neg)
    prec = tp / (tp + fp) if tp + fp else float("nan")
    rec = tp / len(pos) if pos else float("nan")
    return {
        "positives": len(pos),
        "negatives": len(neg),
        "precision": round(prec, 4),
        "recall": round(rec, 4),
        "specificity": round(1 - fp / len(neg), 4) if neg else None,
    }


def report(sets: dict[str, list[dict[str, Any]]], model, answer_model, threshold: float) -> dict[str, Any]:
    from autodoc.search import answerable as A

    out: dict[str, Any] = {"calibration": {}, "order": {}, "answerable": {}, "floor": {}}
    for g, probes in sets.items():
        lex = g.endswith("/lexical")
        new = [(c, h["rel"]) for p in probes for c, h in zip(shown_confidences(p, model), p["hits"])]
        old = [(old_conf(h, lex), h["rel"]) for p in probes for h in p["hits"]]
        out["calibration"][g] = {"before": reliability(old), "after": reliability(new)}
        out["order"][g] = {
            "before": rises([[old_conf(h, lex) for h in p["hits"]] for p in probes]),
            "after": rises([shown_confidences(p, model) for p in probes]),
        }
        out["floor"][g] = {f: floor_effect({g: probes}, model, f) for f in (A.FLOOR,)}
    for leg in ("hybrid", "lexical"):
        for pos, neg in (
            ("scifact_pos", "scifact_neg"),
            ("known_pos", "known_neg"),
            ("known_pos", "markdown_neg"),
            ("spans_pos", "unanswerable_neg"),
            ("spans_test_pos", "unanswerable_test_neg"),
            ("known_pos", "unanswerable_neg"),
            ("known_pos", "unanswerable_test_neg"),
        ):
            P, N = sets.get(f"{pos}/{leg}"), sets.get(f"{neg}/{leg}")
            if not P or not N:
                continue
            lex = leg == "lexical"

            def before(p: dict[str, Any], lex: bool = lex) -> bool:
                return max((old_conf(h, lex) for h in p["hits"]), default=0.0) >= OLD_THRESHOLD

            def after(p: dict[str, Any]) -> bool:
                return found(p, model, answer_model, threshold)

            out["answerable"][f"{pos} vs {neg}/{leg}"] = {
                "before": pr([before(p) for p in P], [before(p) for p in N]),
                "after": pr([after(p) for p in P], [after(p) for p in N]),
            }
    return out


def floor_quality(stores, split: str, n: int | None = None, limits: tuple[int, ...] = (10, 100)) -> dict[str, Any]:
    """SciFact `split` through the default hybrid search, without the floor (min_confidence 0) and with
    it (the default): nDCG@10, R@10, R@100 (bench/quality.py's evaluator) and the hits held back."""
    from .quality import evaluate, path_doc

    col = load_collection(DEFAULT_DATA / "scifact", splits=(split,))
    queries = col.split_queries(split)
    if n:
        queries = queries[:: max(1, len(queries) // n)][:n]
    qrels = {q: col.qrels[split][q] for q, _ in queries}
    svc, ws = stores.get("scifact")
    out: dict[str, Any] = {}
    for limit in limits:
        for name, extra in (("without the floor", {"min_confidence": 0}), ("with the floor", {})):
            run: dict[str, list[str]] = {}
            held = shown = 0
            for qid, text in queries:
                a = svc.search(ws, text, fresh({"limit": limit, **extra}))
                run[qid] = list(dict.fromkeys(path_doc(h["path"]) for h in a["hits"]))
                held += a["held_back"]
                shown += len(a["hits"])
            m = {k: round(v, 4) for k, v in evaluate(run, qrels).items()}
            out[f"limit {limit}, {name}"] = {**m, "hits": shown, "held_back": held}
    return out


def render(res: dict[str, Any]) -> str:
    L = [
        "# Per-hit confidence, `answerable` and the relevance floor (issue 35)",
        "",
        f"`{res['command']}` at {res['commit']} ({res['machine']['cpu']}, {res['machine']['nproc']} cores). "
        "Probes: limit 10, up to 3 passages a document, `min_confidence: 0`. Relevant: the hit's document is "
        "(SciFact qrels, the known-item target); for the answer-span set, its lines overlap the answer span. "
        "Before: the previous model recomputed from the same signals (answer-level logistic, threshold 0.34). "
        f"Model: {res['model']} over {res['features']}; threshold {res['threshold']}; floor {res['floor']}.",
        "",
    ]
    for split in ("test", "train"):
        if split not in res:
            continue
        r = res[split]
        L += [
            f"## {split}" + (" (never fitted)" if split == "test" else " (fitted on)"),
            "",
            "| set | hits | ECE before | ECE after | lists with a rising confidence before | after | floor: relevant kept | hits held back |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for g, c in r["calibration"].items():
            o = r["order"][g]
            fl = next(iter(r["floor"][g].values()))
            L.append(
                f"| {g} | {c['after']['hits']} | {c['before']['ece']:.3f} | {c['after']['ece']:.3f} | "
                f"{o['before']['rising']}/{o['before']['lists']} | {o['after']['rising']}/{o['after']['lists']} | "
                f"{fl['relevant_kept']} ({fl['relevant_held']} held) | {fl['held_share']} |"
            )
        L += [
            "",
            "| `answerable` | precision before | recall before | specificity before | precision after | recall after | specificity after |",
            "|---|---|---|---|---|---|---|",
        ]
        for k, v in r["answerable"].items():
            b, a = v["before"], v["after"]
            L.append(
                f"| {k} ({b['positives']} / {b['negatives']}) | {b['precision']:.3f} | {b['recall']:.3f} | "
                f"{b['specificity']:.3f} | {a['precision']:.3f} | {a['recall']:.3f} | {a['specificity']:.3f} |"
            )
        L.append("")
        pooled = [g for g in r["calibration"] if g.endswith("/hybrid")]
        for g in pooled[:3]:
            t = r["calibration"][g]["after"]["table"]
            L += [
                f"Reliability, {split} {g} (after):",
                "",
                "| bin | hits | mean confidence | share relevant |",
                "|---|---|---|---|",
            ]
            L += [f"| {b['bin']} | {b['hits']} | {b['confidence']:.3f} | {b['relevant']:.3f} |" for b in t]
            L.append("")
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    from .agents import Stores

    ap = argparse.ArgumentParser(prog="python -m bench.confidence")
    ap.add_argument("--calibrate", action="store_true", help="fit on the train sets and print the model")
    ap.add_argument(
        "--floor", choices=["train", "test"], help="only SciFact nDCG/recall with and without the floor, on this split"
    )
    ap.add_argument("--queries", type=int, default=None, help="at most this many SciFact queries a split")
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument(
        "--scifact", type=Path, default=None, help="the SciFact store (autodoc.db) when the cache holds several"
    )
    ap.add_argument("--out", default=str(RESULTS / "confidence"), help="output stem, or - to print only")
    ap.add_argument(
        "--probes", type=Path, default=None, help="save/load the probes here (json), to refit without searching"
    )
    args = ap.parse_args(argv)
    from autodoc.search import answerable as A

    cache = args.cache or cache_root()
    from .agents import scifact_store

    sf = args.scifact or scifact_store(cache)
    found = built(cache, model_fp(sf))
    corpora = list(found)
    log(f"known-item stores, complete and of the SciFact store's model: {found}")
    stores = Stores(cache, corpora, sf)
    for c, path in found.items():
        stores.paths[c] = (path, c)
    if args.floor:
        try:
            print(json.dumps(floor_quality(stores, args.floor, args.queries), indent=1))
        finally:
            stores.close()
        return 0
    probes: dict[str, Any] = {}
    if args.probes and args.probes.exists():
        probes = json.loads(args.probes.read_text())
    try:
        if "train" not in probes:
            probes["train"] = probe_sets(stores, "train", args.queries, corpora)
        if args.calibrate:
            if args.probes:
                args.probes.write_text(json.dumps(probes))
            print(json.dumps(calibrate(probes["train"]), indent=1))
            return 0
        if "test" not in probes:
            probes["test"] = probe_sets(stores, "test", args.queries, corpora)
        if args.probes:
            args.probes.write_text(json.dumps(probes))
    finally:
        stores.close()
    res: dict[str, Any] = {
        "command": command_line(),
        "commit": git_commit(),
        "machine": machine_note(),
        "features": list(A.FEATURES),
        "model": list(A.MODEL),
        "answer_model": list(A.ANSWER_MODEL),
        "threshold": A.THRESHOLD,
        "floor": A.FLOOR,
        "corpora": corpora,
    }
    for split in ("train", "test"):
        res[split] = report(probes[split], A.MODEL, A.ANSWER_MODEL, A.THRESHOLD)
    md = render(res)
    if args.out == "-":
        print(md)
    else:
        Path(args.out + ".json").write_text(json.dumps(res, indent=1) + "\n")
        Path(args.out + ".md").write_text(md + "\n")
        log(f"wrote {args.out}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
