"""What an agent reads: compact vs full answers vs whole files, and whether
`answerable` tells a corpus that can answer from one that cannot (issue 15).

    python -m bench.agents                 # report on SciFact test: docs/benchmarks/agents.{md,json}
    python -m bench.agents --calibrate     # fit answerable's model on the train sets, print it
                                           # (bench/confidence.py fits and reports it in full)
    python -m bench.agents --queries 40 --out -   # a small run, printed only

Stores: the cached SciFact store (``<bench cache>/stores/scifact-*``, built by
``python -m bench.quality``) and the five known-item stores
(``<bench cache>/known/<corpus>-*``, built by ``python -m bench.known_item
--build-only``); both are opened read-only through ``Service``.

**Tokens** (SciFact test queries, the default hybrid, k = 5 documents, one
entry per document so every row reaches the same documents): the compact
answer at the default budget and with a budget that never bites; the full
answer of the same 5 documents; that full answer plus the whole files read in
rank order until the first relevant one (all 5 when none is); and the default
full answer (limit 10 hits). Tokens are the product's estimate (characters /
4 of the JSON, or of the file's text). A row's recall is the share of queries
whose answer holds a relevant document (for the compact answer at the default
budget, among the passages the budget kept).

**Answerable**: a query is answerable against its own corpus and not against
another. Calibration (``--calibrate``, never the test split): SciFact train
queries against SciFact and against the five Markdown corpora in turn, and the
75 known-item questions against their corpus and against SciFact. The report
gives precision and recall of ``answerable`` on SciFact test queries against
SciFact (positives) and against the Markdown corpora (negatives), with the
default stages and lexical alone, and the same on the calibration sets.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from .common import DEFAULT_DATA, RESULTS, cache_root, command_line, git_commit, log, machine_note
from .common import scifact_store as cached_scifact_store
from .known_item import CORPORA, load_questions
from .quality import WORKSPACE, doc_path, load_collection

K = 5
PROBE_LIMIT = 10  # answerable reads the page a default search gives
BIG_BUDGET = 32000
LEXICAL = ["lexical"]


# ---------------------------------------------------------------- stores


def fresh(opts: dict[str, Any]) -> dict[str, Any]:
    """A default client's options on a workspace added today. A workspace stores the fusion it was
    created with (config/workspace.py writes every default), and the cached bench stores were made
    under RRF k 20 / semantic 0.8: without this the benchmark measured that, not today's default."""
    from autodoc.config import RRF_K, RRF_WEIGHTS

    return {"fusion": {"method": "rrf", "k": RRF_K, "weights": dict(RRF_WEIGHTS)}, **opts}


def scifact_store(cache: Path) -> Path:
    found = cached_scifact_store(cache)
    if found is None:  # one made with an earlier model is searched by its words alone
        raise SystemExit(
            f"no SciFact store embedded with this model in {cache / 'stores'} (python -m bench.quality builds it)"
        )
    return found


def known_store(cache: Path, corpus: str) -> Path:
    found = sorted((cache / "known").glob(f"{corpus}-*/autodoc.db"))
    if not found:
        raise SystemExit(f"no cached store for {corpus} (python -m bench.known_item --build-only builds it)")
    return max(found, key=lambda p: p.stat().st_mtime)


class Stores:
    """One read-only Service per store, opened on first use."""

    def __init__(self, cache: Path, corpora: list[str] | None = None, scifact: Path | None = None):
        from autodoc.config import Settings
        from autodoc.service import Service

        self._open = lambda p: Service(Settings.from_env(store=p), writer=False)
        self.paths = {"scifact": (scifact or scifact_store(cache), WORKSPACE)}
        for c in CORPORA if corpora is None else corpora:
            self.paths[c] = (known_store(cache, c), c)
        self._svc: dict[str, Any] = {}

    def get(self, name: str):
        if name not in self._svc:
            self._svc[name] = self._open(self.paths[name][0])
        return self._svc[name], self.paths[name][1]

    def close(self) -> None:
        for s in self._svc.values():
            s.close()


# ---------------------------------------------------------------- answerable


def probe(stores: Stores, store: str, query: str, relevant: set[str], stages: list[str] | None) -> dict[str, Any]:
    """One search as a default client makes it; each hit's signals and whether it is relevant
    (bench/confidence.py, where the model is fitted)."""
    from .confidence import probe as signals_probe

    return signals_probe(stores, store, query, relevant, stages)


def probe_sets(stores: Stores, split: str, n: int | None, *, with_known: bool) -> dict[str, list[dict[str, Any]]]:
    """group → probes: SciFact queries of `split` against SciFact (pos) and against a Markdown
    corpus in turn (neg); with_known adds the known-item questions against theirs (pos) and SciFact (neg)."""
    col = load_collection(DEFAULT_DATA / "scifact", splits=(split,))
    queries = col.split_queries(split)[:n] if n else col.split_queries(split)
    out: dict[str, list[dict[str, Any]]] = {}
    for leg, stages in (("hybrid", None), ("lexical", LEXICAL)):
        t = time.monotonic()
        out[f"scifact_pos/{leg}"] = [
            probe(stores, "scifact", q, {doc_path(d) for d in col.qrels[split][qid]}, stages) for qid, q in queries
        ]
        out[f"scifact_neg/{leg}"] = [
            probe(stores, CORPORA[i % len(CORPORA)], q, set(), stages) for i, (_, q) in enumerate(queries)
        ]
        if with_known:
            qs = load_questions()
            qs = qs[:n] if n else qs
            out[f"known_pos/{leg}"] = [probe(stores, q["corpus"], q["query"], set(q["targets"]), stages) for q in qs]
            out[f"known_neg/{leg}"] = [probe(stores, "scifact", q["query"], set(), stages) for q in qs]
            # report only, never fitted: another Markdown corpus of software docs, the harder negative
            other = {c: CORPORA[(i + 1) % len(CORPORA)] for i, c in enumerate(CORPORA)}
            out[f"markdown_neg/{leg}"] = [probe(stores, other[q["corpus"]], q["query"], set(), stages) for q in qs]
        log(f"  {split} {leg}: {len(queries)} queries, {time.monotonic() - t:.0f} s")
    return out


def calibrate(sets: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The per-hit model, threshold and floor, fitted as bench/confidence.py fits them."""
    from .confidence import calibrate as fit

    return fit({g: v for g, v in sets.items() if not g.startswith("markdown_")})


def pr(pos: list[dict[str, Any]], neg: list[dict[str, Any]]) -> dict[str, Any]:
    tp = sum(p["answerable"] for p in pos)
    fp = sum(p["answerable"] for p in neg)
    fn = len(pos) - tp
    prec = tp / (tp + fp) if tp + fp else float("nan")
    rec = tp / len(pos) if pos else float("nan")
    return {
        "positives": len(pos),
        "negatives": len(neg),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": round(prec, 4),
        "recall": round(rec, 4),
        "f1": round(2 * prec * rec / (prec + rec), 4) if prec + rec else 0.0,
        "specificity": round(1 - fp / len(neg), 4) if neg else float("nan"),
    }


def answerable_report(sets: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out = {}
    for leg in ("hybrid", "lexical"):
        for src in ("scifact", "known"):
            if f"{src}_pos/{leg}" in sets:
                out[f"{src}/{leg}"] = pr(sets[f"{src}_pos/{leg}"], sets[f"{src}_neg/{leg}"])
        if f"markdown_neg/{leg}" in sets:
            out[f"known vs another Markdown corpus/{leg}"] = pr(sets[f"known_pos/{leg}"], sets[f"markdown_neg/{leg}"])
    return out


# ---------------------------------------------------------------- tokens


def file_tokens(svc, ws: str, path: str) -> int:
    return math.ceil(len(svc.document_read(ws, path)["text"]) / 4)


def token_rows(stores: Stores, store: str, queries: list[tuple[str, set[str]]]) -> dict[str, Any]:
    """Per strategy: tokens read per query and whether a relevant document was reached."""
    from autodoc.budget import answer_tokens

    svc, ws = stores.get(store)
    rows: dict[str, list[tuple[int, bool]]] = {k: [] for k, _ in STRATEGIES}
    truncated = 0
    for q, rel in queries:
        c = svc.search(ws, q, fresh({"answer": "compact", "limit": K}))
        truncated += c["truncated"]
        rows["compact"].append((c["tokens"], any(h["path"] in rel for h in c["hits"])))
        cu = svc.search(ws, q, fresh({"answer": "compact", "limit": K, "budget_tokens": BIG_BUDGET}))
        found = any(h["path"] in rel for h in cu["hits"])
        rows["compact_unbounded"].append((cu["tokens"], found))
        f = svc.search(ws, q, fresh({"limit": K, "per_document": True}))
        ft = answer_tokens(f)
        rows["full_k"].append((ft, any(h["path"] in rel for h in f["hits"])))
        read = ft
        for h in f["hits"]:
            read += file_tokens(svc, ws, h["path"])
            if h["path"] in rel:
                break
        rows["full_k_then_files"].append((read, any(h["path"] in rel for h in f["hits"])))
        read = ft
        for h in f["hits"]:
            span = svc.document_read(ws, h["path"], {"line_start": h["line_start"], "line_end": h["line_end"]})
            read += math.ceil(len(span["text"]) / 4)
            if h["path"] in rel:
                break
        rows["full_k_then_passages"].append((read, any(h["path"] in rel for h in f["hits"])))
        d = svc.search(ws, q, fresh({}))
        rows["full_default"].append((answer_tokens(d), any(h["path"] in rel for h in d["hits"])))
    return {"queries": len(queries), "compact_truncated": truncated, "rows": rows}


def summarise(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Per strategy over every query of these runs: recall and tokens (mean, median, p90)."""
    out: dict[str, Any] = {
        "queries": sum(p["queries"] for p in parts),
        "compact_truncated": sum(p["compact_truncated"] for p in parts),
    }
    for key, _ in STRATEGIES:
        v = [r for p in parts for r in p["rows"][key]]
        toks = sorted(t for t, _ in v)
        out[key] = {
            "mean_tokens": round(statistics.mean(toks), 1),
            "median_tokens": statistics.median(toks),
            "p90_tokens": toks[int(0.9 * (len(toks) - 1))],
            "recall": round(sum(ok for _, ok in v) / len(v), 4),
        }
    return out


# ---------------------------------------------------------------- report

STRATEGIES = [
    ("compact", f"compact answer, {K} documents, default budget (1200)"),
    ("compact_unbounded", f"compact answer, {K} documents, budget {BIG_BUDGET} (never bites)"),
    ("full_k", f"full answer, {K} documents (per_document)"),
    (
        "full_k_then_passages",
        f"full answer of {K} documents, then each hit's lines (document.read) in rank order until the relevant one",
    ),
    ("full_k_then_files", f"full answer of {K} documents, then whole files in rank order until the relevant one"),
    ("full_default", "default full answer (limit 10 hits, up to 3 a document)"),
]


def render(res: dict[str, Any]) -> str:
    L = [
        "# What an agent reads: compact answers and `answerable`",
        "",
        f"`{res['command']}` at {res['commit']} ({res['machine']['cpu']}, {res['machine']['nproc']} cores). "
        "Tokens are the product's estimate: characters / 4 of the answer's JSON, or of a file's text.",
        "",
    ]
    for name, t in res["tokens"].items():
        L += [
            f"## Tokens to reach the relevant document: {name}",
            "",
            f"{t['queries']} queries, the default stages; the compact answer at the default budget was "
            f"truncated for {t['compact_truncated']} of them.",
            "",
            "| strategy | recall | mean tokens | median | p90 |",
            "|---|---|---|---|---|",
        ]
        for key, label in STRATEGIES:
            r = t[key]
            L.append(
                f"| {label} | {r['recall']:.3f} | {r['mean_tokens']:.0f} | {r['median_tokens']:.0f} | "
                f"{r['p90_tokens']:.0f} |"
            )
        L.append("")
    L += [
        "## `answerable`",
        "",
        "Positives: queries against their own corpus; negatives: the same queries against another "
        "(SciFact queries against the five Markdown corpora in turn; known-item questions against SciFact).",
        "",
        "| set | stages | queries (pos / neg) | precision | recall | specificity | F1 |",
        "|---|---|---|---|---|---|---|",
    ]
    for split, rep in res["answerable"].items():
        for key, r in rep.items():
            src, leg = key.split("/")
            label = f"{src} (never fitted)" if "another" in src else f"{src} {split}"
            L.append(
                f"| {label} | {leg} | {r['positives']} / {r['negatives']} | {r['precision']:.3f} | "
                f"{r['recall']:.3f} | {r['specificity']:.3f} | {r['f1']:.3f} |"
            )
    L += [
        "",
        "The test rows are SciFact's test split, never used to fit. The train rows are what the model was "
        "fitted on (`python -m bench.agents --calibrate`): SciFact train queries and the 75 known-item "
        'questions, so the known-item figures are in-sample. The row "known vs another Markdown corpus" '
        "was never fitted on: each known-item question against the next of the five software-documentation "
        "corpora (foam-docs → simpler-grants-adr → jekyll → opentelemetry-docs → swift-evolution → foam-docs), "
        "a negative in the same domain, where a few questions may in fact be answerable.",
        "",
    ]
    L += findings(res)
    if res.get("calibration"):
        c = res["calibration"]
        L += [
            f"Fitted model (intercept, {', '.join(c['features'])}): {c['model']}, threshold "
            f"{c['threshold']} (balanced accuracy {c['balanced_accuracy']} on the calibration sets).",
            "",
        ]
    return "\n".join(L)


def findings(res: dict[str, Any]) -> list[str]:
    """What the figures say, worded from them."""
    out = ["## Reading it", ""]
    sf, ki = res["tokens"].get("SciFact test"), res["tokens"].get("known-item questions (five Markdown corpora)")
    for name, t in (("SciFact", sf), ("the known-item questions", ki)):
        if not t:
            continue
        c, f, p, w = t["compact"], t["full_k"], t["full_k_then_passages"], t["full_k_then_files"]
        out.append(
            f"- {name}: the compact answer at the default budget reaches the relevant document as often as the "
            f"full answer of the same {res['k']} documents (recall {c['recall']:.3f} vs {f['recall']:.3f}) for "
            f"{c['mean_tokens']:.0f} tokens against {f['mean_tokens']:.0f}, but it carries the passages: an agent "
            f"that reads the full answer and then the hits' lines until the relevant one reads {p['mean_tokens']:.0f} "
            f"tokens on average, and whole files {w['mean_tokens']:.0f} (median {w['median_tokens']:.0f})."
        )
    if sf:
        out.append(
            "- SciFact documents are one abstract each, so a passage is nearly the whole file there; the "
            "Markdown corpora, with long files of many sections, show the gap between passages and files."
        )
    test = res["answerable"].get("test", {}).get("scifact/hybrid")
    dom = res["answerable"].get("train", {}).get("known vs another Markdown corpus/hybrid")
    if test:
        out.append(
            f"- `answerable` on held-out SciFact test queries: precision {test['precision']:.3f}, recall "
            f"{test['recall']:.3f} against corpora of another domain."
        )
    if dom:
        out.append(
            f"- Against a corpus of the same kind (software documentation answering another project's "
            f"question) it is much weaker: specificity {dom['specificity']:.3f}, i.e. "
            f"{dom['fp']} of {dom['negatives']} such questions are still called answerable. Near-topic "
            "passages have cosines and word coverage like real answers', and a few of these questions are "
            "in part answerable by the other corpus (a security contact, a maintenance branch). A caller "
            'should read `answerable: false` as a strong "nothing here" and `true` as "something '
            'on topic", and use `confidence` per passage.'
        )
    out.append("")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.agents")
    ap.add_argument("--calibrate", action="store_true", help="fit the answerable model on the train sets and print it")
    ap.add_argument("--queries", type=int, default=None, help="at most this many queries a set (a small run)")
    ap.add_argument("--no-train", action="store_true", help="skip the calibration sets' figures")
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--out", default=str(RESULTS / "agents"), help="output stem, or - to print only")
    ap.add_argument("--render", action="store_true", help="only re-render the .md from the stem's .json")
    args = ap.parse_args(argv)
    if args.render:
        res = json.loads(Path(args.out + ".json").read_text())
        Path(args.out + ".md").write_text(render(res) + "\n")
        return 0
    stores = Stores(args.cache or cache_root())
    try:
        if args.calibrate:
            sets = probe_sets(stores, "train", args.queries, with_known=True)
            print(json.dumps(calibrate(sets), indent=1))
            return 0
        res: dict[str, Any] = {
            "command": command_line(),
            "commit": git_commit(),
            "machine": machine_note(),
            "k": K,
            "answerable": {},
            "tokens": {},
        }
        col = load_collection(DEFAULT_DATA / "scifact", splits=("test",))
        qs = col.split_queries("test")[: args.queries] if args.queries else col.split_queries("test")
        t = time.monotonic()
        res["tokens"]["SciFact test"] = summarise(
            [token_rows(stores, "scifact", [(q, {doc_path(d) for d in col.qrels["test"][qid]}) for qid, q in qs])]
        )
        log(f"  tokens: {time.monotonic() - t:.0f} s")
        kq = load_questions()[: args.queries] if args.queries else load_questions()
        by_corpus: dict[str, list[tuple[str, set[str]]]] = {}
        for q in kq:
            by_corpus.setdefault(q["corpus"], []).append((q["query"], set(q["targets"])))
        parts = [token_rows(stores, c, v) for c, v in by_corpus.items()]
        res["tokens"]["known-item questions (five Markdown corpora)"] = summarise(parts)
        res["answerable"]["test"] = answerable_report(probe_sets(stores, "test", args.queries, with_known=False))
        if not args.no_train:
            train = probe_sets(stores, "train", args.queries, with_known=True)
            res["answerable"]["train"] = answerable_report(train)
            res["calibration"] = calibrate(train)
    finally:
        stores.close()
    md = render(res)
    if args.out == "-":
        print(md)
    else:
        Path(args.out + ".json").write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
        Path(args.out + ".md").write_text(md + "\n")
        log(f"wrote {args.out}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
