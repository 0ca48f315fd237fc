"""Ranking variants on the tuning sets: SciFact train and the known-item questions (issue 18).

    python -m bench.quality_study                       # every variant, both sets, prints a table
    python -m bench.quality_study --only base,cov1      # some variants
    python -m bench.quality_study --json out.json       # rows as JSON too

Each variant is the product's search (in-process ``Service.search`` on the
cached stores of bench/quality.py and bench/known_item.py, opened read-only)
with some of the ranking knobs set for the run: the lexical leg's coverage
weight (``search.lexical.COVERAGE_POWER``, ``TITLE_CREDIT``), question words
out of the relaxed query (``search.fts.DROP_QUESTION_WORDS``), the BM25 column
weights (``store.matches.BM25_WEIGHTS``), leg depth (``search.engine.LEG_DEPTH``)
and the fusion options. Every variant also reports each leg alone, and a plain
FTS5 BM25 (OR of the query's tokens, Lucene stopwords out, every column
weight 1, chunks ranked, documents by best chunk) is measured in the same run
as the reference the lexical leg must not fall below.

SciFact test is read only with ``--split test``, for the final figure of the
setting chosen here. A known item counts at k when its target is among the
first k distinct documents (bench/known_item.py's rules, limit 30).

Runs on: the main thread.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import evaluate as E
from .beir import WORKSPACE, load_collection, path_doc
from .common import DEFAULT_DATA, cache_root, log
from .known_item import CORPORA, LIMIT, distinct_docs, load_questions, metrics, store_dir, target_rank

HYBRID = ["lexical", "semantic"]
from autodoc.config import RRF_K, RRF_WEIGHTS  # noqa: E402 (the product's default, whatever it is now)

DEFAULT_FUSION = {"method": "rrf", "k": RRF_K, "weights": dict(RRF_WEIGHTS)}
BEFORE_FUSION = {
    "method": "rrf",
    "k": 20,
    "weights": {"lexical": 1.0, "semantic": 0.8},
}  # the default until f/k were re-chosen
SCIFACT_LIMIT = 20  # nDCG@10 reads the first 10 documents; snippets make each hit cost ~1 ms
_OFF = {"search.lexical.COVERAGE_POWER": 0.0, "search.fts.DROP_QUESTION_WORDS": False}

_QW_INTERROG = "how why what which who whom whose where when we our us i im me my you your".split()
_QW_DO = "do does did done".split()
_QW_MODAL = "can could should would shall may might must".split()
_QW_VERBS = "need needs want wants looking look find know tell explain".split()


def _strip_question_words(text: str, stop: bool = False) -> str:
    """The query without the words the relaxed lexical query drops (never all of them)."""
    import re

    from autodoc.search.fts import _question_word
    from autodoc.store.ftstext import STOPWORDS

    keep = []
    for m in re.finditer(r"\S+", text):
        toks = list(re.finditer(r"[^\W_]+", m.group(0)))
        low = [t.group(0).lower() for t in toks]
        if toks and all(
            _question_word(m.group(0), t.start(), w) or (stop and w in STOPWORDS) for t, w in zip(toks, low)
        ):
            continue
        keep.append(m.group(0))
    return " ".join(keep) or text


# name -> (description, knob settings, fusion options)
VARIANTS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "default": ("the product as it stands (no knob set)", {}, DEFAULT_FUSION),
    "base": (
        "no coverage weight, question words kept (the defects fixed, ranking as before)",
        dict(_OFF),
        DEFAULT_FUSION,
    ),
    "qw": ("question words out of the relaxed query", {**_OFF, "search.fts.DROP_QUESTION_WORDS": True}, DEFAULT_FUSION),
    "cov1": (
        "coverage weight, power 1, title-only words count 0.5",
        {"search.fts.DROP_QUESTION_WORDS": False},
        DEFAULT_FUSION,
    ),
    "cov1-qw": ("coverage power 1, title credit 0.5, question words out", {}, DEFAULT_FUSION),
    "cov2-qw": (
        "coverage power 2, title credit 0.5, question words out",
        {"search.lexical.COVERAGE_POWER": 2.0},
        DEFAULT_FUSION,
    ),
    "cov.5-qw": (
        "coverage power 0.5, title credit 0.5, question words out",
        {"search.lexical.COVERAGE_POWER": 0.5},
        DEFAULT_FUSION,
    ),
    "cov1-t1-qw": (
        "coverage power 1, title credit 1 (no title discount), question words out",
        {"search.lexical.TITLE_CREDIT": 1.0},
        DEFAULT_FUSION,
    ),
    "cov1-t0-qw": (
        "coverage power 1, title credit 0, question words out",
        {"search.lexical.TITLE_CREDIT": 0.0},
        DEFAULT_FUSION,
    ),
    "cov1-qw-w1111": (
        "coverage 1, question words out, BM25 columns 1/1/1/1",
        {"store.matches.BM25_WEIGHTS": (1.0, 1.0, 1.0, 1.0)},
        DEFAULT_FUSION,
    ),
    "cov1-qw-w1121": (
        "coverage 1, question words out, BM25 columns 1/1/2/1",
        {"store.matches.BM25_WEIGHTS": (1.0, 1.0, 2.0, 1.0)},
        DEFAULT_FUSION,
    ),
    "cov1-qw-eq": (
        "coverage 1, question words out, RRF k 20 equal weights",
        {},
        {"method": "rrf", "k": 20, "weights": {"lexical": 1.0, "semantic": 1.0}},
    ),
    "cov1-qw-k60": (
        "coverage 1, question words out, RRF k 60 equal weights",
        {},
        {"method": "rrf", "k": 60, "weights": {"lexical": 1.0, "semantic": 1.0}},
    ),
    "cov1-qw-k40": (
        "coverage 1, question words out, RRF k 40, lexical 1.0 / semantic 0.8",
        {},
        {"method": "rrf", "k": 40, "weights": {"lexical": 1.0, "semantic": 0.8}},
    ),
    "cov1-qw-k10": (
        "coverage 1, question words out, RRF k 10, lexical 1.0 / semantic 0.8",
        {},
        {"method": "rrf", "k": 10, "weights": {"lexical": 1.0, "semantic": 0.8}},
    ),
    "cov1-qw-convex": (
        "coverage 1, question words out, convex 0.4 semantic / 0.6 lexical",
        {},
        {"method": "convex", "weights": {"semantic": 0.4, "lexical": 0.6}},
    ),
    "cov1-qw-re": (
        "coverage 1, question words out, leg ordered by BM25 × coverage",
        {"search.lexical.REORDER": True},
        DEFAULT_FUSION,
    ),
    "cov1-qw-re-w1111": (
        "as cov1-qw-re, BM25 columns 1/1/1/1",
        {"search.lexical.REORDER": True, "store.matches.BM25_WEIGHTS": (1.0, 1.0, 1.0, 1.0)},
        DEFAULT_FUSION,
    ),
    "qw-w1111": (
        "no coverage, question words out, BM25 columns 1/1/1/1",
        {**_OFF, "search.fts.DROP_QUESTION_WORDS": True, "store.matches.BM25_WEIGHTS": (1.0, 1.0, 1.0, 1.0)},
        DEFAULT_FUSION,
    ),
    "qw-w1111-or": (
        "no coverage, question words out, columns 1/1/1/1, relaxed list in plain BM25 order",
        {
            **_OFF,
            "search.fts.DROP_QUESTION_WORDS": True,
            "store.matches.BM25_WEIGHTS": (1.0, 1.0, 1.0, 1.0),
            "search.lexical.STRICT_FIRST": False,
        },
        DEFAULT_FUSION,
    ),
    "cov1-t1-qw-w1111-or": (
        "coverage 1, title credit 1, question words out, columns 1/1/1/1, plain BM25 order",
        {
            "search.lexical.TITLE_CREDIT": 1.0,
            "store.matches.BM25_WEIGHTS": (1.0, 1.0, 1.0, 1.0),
            "search.lexical.STRICT_FIRST": False,
        },
        DEFAULT_FUSION,
    ),
    "cov1-qw-w1111-or": (
        "coverage 1, title credit 0.5, question words out, columns 1/1/1/1, plain BM25 order",
        {"store.matches.BM25_WEIGHTS": (1.0, 1.0, 1.0, 1.0), "search.lexical.STRICT_FIRST": False},
        DEFAULT_FUSION,
    ),
    "soft.5-qw": (
        "weight 0.5 + 0.5 · coverage, question words out",
        {"search.lexical.COVERAGE_FLOOR": 0.5},
        DEFAULT_FUSION,
    ),
    "rel1-qw": (
        "coverage relative to the query's best hit, power 1, question words out",
        {"search.lexical.COVERAGE_RELATIVE": True},
        DEFAULT_FUSION,
    ),
    "rel2-qw": (
        "coverage relative to the query's best hit, power 2, question words out (chosen: the default)",
        {"search.lexical.COVERAGE_RELATIVE": True, "search.lexical.COVERAGE_POWER": 2.0},
        DEFAULT_FUSION,
    ),
    "rel1": (
        "relative coverage, power 1, question words kept",
        {"search.lexical.COVERAGE_RELATIVE": True, "search.fts.DROP_QUESTION_WORDS": False},
        DEFAULT_FUSION,
    ),
    "rel1-qw-eq": (
        "relative coverage 1, question words out, RRF k 20 equal weights",
        {"search.lexical.COVERAGE_RELATIVE": True},
        {"method": "rrf", "k": 20, "weights": {"lexical": 1.0, "semantic": 1.0}},
    ),
    "rel1-qw-k40": (
        "relative coverage 1, question words out, RRF k 40, lexical 1.0 / semantic 0.8",
        {"search.lexical.COVERAGE_RELATIVE": True},
        {"method": "rrf", "k": 40, "weights": {"lexical": 1.0, "semantic": 0.8}},
    ),
    "rel1-qw-t1": (
        "relative coverage 1, title credit 1, question words out",
        {"search.lexical.COVERAGE_RELATIVE": True, "search.lexical.TITLE_CREDIT": 1.0},
        DEFAULT_FUSION,
    ),
    "rel1-qw-w1111": (
        "relative coverage 1, question words out, BM25 columns 1/1/1/1",
        {"search.lexical.COVERAGE_RELATIVE": True, "store.matches.BM25_WEIGHTS": (1.0, 1.0, 1.0, 1.0)},
        DEFAULT_FUSION,
    ),
    "default-w1111": (
        "the default with BM25 columns 1/1/1/1",
        {"store.matches.BM25_WEIGHTS": (1.0, 1.0, 1.0, 1.0)},
        DEFAULT_FUSION,
    ),
    "prev": (
        "the default before the fusion was re-chosen: RRF k 20, semantic 0.8, link boost 0.1",
        {"search.fusion.LINK_BOOST": 0.1},
        BEFORE_FUSION,
    ),
    "k20-s0.8": ("RRF k 20, semantic 0.8 with the current link boost", {}, BEFORE_FUSION),
    "link.1": ("the default fusion with the spec's link boost 0.1", {"search.fusion.LINK_BOOST": 0.1}, DEFAULT_FUSION),
    "link0": ("the default fusion without a link boost", {"search.fusion.LINK_BOOST": 0.0}, DEFAULT_FUSION),
    "k8-s0.6": ("RRF k 8, semantic 0.6", {}, {"method": "rrf", "k": 8, "weights": {"lexical": 1.0, "semantic": 0.6}}),
    "k10-s0.8": (
        "RRF k 10, semantic 0.8",
        {},
        {"method": "rrf", "k": 10, "weights": {"lexical": 1.0, "semantic": 0.8}},
    ),
    "k5-s0.8": ("RRF k 5, semantic 0.8", {}, {"method": "rrf", "k": 5, "weights": {"lexical": 1.0, "semantic": 0.8}}),
    "convex.4": (
        "convex min-max, semantic 0.4 (the coverage weight does not enter convex fusion)",
        {},
        {"method": "convex", "weights": {"semantic": 0.4, "lexical": 0.6}},
    ),
    "cov1-qw-d4": (
        "coverage 1, question words out, legs 4× the page deep",
        {"search.engine.LEG_DEPTH": 4},
        DEFAULT_FUSION,
    ),
    # session 4: shorter question-word lists (search/fts.py QUESTION_WORDS)
    "sem-noqw": (
        "the semantic leg embeds the query without its question words (the relaxed query's rule)",
        {"@semantic_text": _strip_question_words},
        DEFAULT_FUSION,
    ),
    "sem-nostop": (
        "the semantic leg embeds the query without question words and stopwords",
        {"@semantic_text": lambda t: _strip_question_words(t, stop=True)},
        DEFAULT_FUSION,
    ),
    "w2111": (
        "hybrid BM25 columns title/breadcrumb/meta/body 2/1/1/1",
        {"store.matches.BM25_WEIGHTS": (2.0, 1.0, 1.0, 1.0)},
        DEFAULT_FUSION,
    ),
    "w3221-b": (
        "hybrid BM25 columns 3/2/2/1.5 (body up)",
        {"store.matches.BM25_WEIGHTS": (3.0, 2.0, 2.0, 1.5)},
        DEFAULT_FUSION,
    ),
    "w5221": ("hybrid BM25 columns 5/2/2/1", {"store.matches.BM25_WEIGHTS": (5.0, 2.0, 2.0, 1.0)}, DEFAULT_FUSION),
    "w3111": ("hybrid BM25 columns 3/1/1/1", {"store.matches.BM25_WEIGHTS": (3.0, 1.0, 1.0, 1.0)}, DEFAULT_FUSION),
    "w3121": ("hybrid BM25 columns 3/1/2/1", {"store.matches.BM25_WEIGHTS": (3.0, 1.0, 2.0, 1.0)}, DEFAULT_FUSION),
    "later1": (
        "no discount of a document's later passages (before session 4)",
        {"search.fusion.LATER_PASSAGE": 1.0},
        DEFAULT_FUSION,
    ),
    "qw-interrog": (
        "question words: interrogatives and pronouns only (do/modals/request verbs kept)",
        {"search.fts.QUESTION_WORDS": frozenset(_QW_INTERROG)},
        DEFAULT_FUSION,
    ),
    "qw-do": (
        "question words: interrogatives, pronouns and do/does/did",
        {"search.fts.QUESTION_WORDS": frozenset(_QW_INTERROG + _QW_DO)},
        DEFAULT_FUSION,
    ),
    "qw-modal": (
        "question words: interrogatives, pronouns, do and modals (request verbs kept)",
        {"search.fts.QUESTION_WORDS": frozenset(_QW_INTERROG + _QW_DO + _QW_MODAL)},
        DEFAULT_FUSION,
    ),
    "qw-verbs": (
        "question words: interrogatives, pronouns, do and request verbs (modals kept)",
        {"search.fts.QUESTION_WORDS": frozenset(_QW_INTERROG + _QW_DO + _QW_VERBS)},
        DEFAULT_FUSION,
    ),
}

for _name, (_d, _knobs, _f) in VARIANTS.items():  # "cov…"/"soft…": the absolute coverage share
    if _name.startswith(("cov", "soft")):
        _knobs.setdefault("search.lexical.COVERAGE_RELATIVE", False)
    if _name.startswith(("cov1", "rel1", "soft")):
        _knobs.setdefault("search.lexical.COVERAGE_POWER", 1.0)


@contextmanager
def knobs(settings: dict[str, Any]) -> Iterator[None]:
    """Set autodoc module attributes for the duration (restored after)."""
    old = []
    try:
        for dotted, value in settings.items():
            if dotted == "@semantic_text":  # the semantic leg embeds value(query) instead of the query
                from autodoc.search.semantic import Prepared

                run = Prepared.run
                old.append((Prepared, "run", run))
                Prepared.run = lambda self, text, top, _f=value, _run=run: _run(self, _f(text), top)
                continue
            mod_name, attr = dotted.rsplit(".", 1)
            mod = importlib.import_module(f"autodoc.{mod_name}")
            if not hasattr(mod, attr):  # the code measured predates this knob: say so, measure without it
                log(f"  (knob {dotted} absent in this code: ignored)")
                continue
            old.append((mod, attr, getattr(mod, attr)))
            setattr(mod, attr, value)
        yield
    finally:
        for mod, attr, value in reversed(old):
            setattr(mod, attr, value)


# ---------------------------------------------------------------- plain BM25


def plain_bm25_docs(db, text: str, top: int, doc_key) -> list[str]:
    from autodoc.store.ftstext import STOPWORDS, TOKEN

    toks = [t for t in dict.fromkeys(TOKEN.findall(text.lower())) if t not in STOPWORDS]
    if not toks:
        return []
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in toks)
    rows = db.execute(
        "SELECT d.path FROM (SELECT rowid, bm25(chunks_fts) AS s FROM chunks_fts WHERE chunks_fts MATCH ? "
        "ORDER BY s, rowid LIMIT ?) m JOIN chunks c ON c.id = m.rowid JOIN documents d ON d.id = c.document_id "
        "ORDER BY m.s, m.rowid",
        (match, top),
    ).fetchall()
    return distinct_docs(doc_key(r[0]) for r in rows)


# ---------------------------------------------------------------- the two sets


def _service(store: Path):
    from autodoc.config import Settings
    from autodoc.service import Service

    return Service(Settings.from_env(store=store), writer=False)


def _docs(ans: dict[str, Any], key=lambda p: p) -> list[str]:
    return distinct_docs(key(h["path"]) for h in ans["hits"])


class SciFact:
    def __init__(self, store: Path, data: Path, queries: int | None, split: str = "train"):
        self.col = load_collection(data)
        self.queries = self.col.split_queries(split)[:queries]
        self.qrels = {q: self.col.qrels[split][q] for q, _ in self.queries}
        self.svc = _service(store)
        self.limit = SCIFACT_LIMIT
        self.svc.search(WORKSPACE, "warm up", {"stages": HYBRID, "limit": 5, "fusion": DEFAULT_FUSION})

    def run(self, stages: list[str] | None, fusion: dict[str, Any]) -> dict[str, Any]:
        run: dict[str, list[str]] = {}
        t0 = time.perf_counter()
        if stages is None:  # the plain BM25 reference
            db = self.svc.store.reader()
            for qid, text in self.queries:
                run[qid] = plain_bm25_docs(db, text, 300, path_doc)[:SCIFACT_LIMIT]
        else:
            for qid, text in self.queries:
                ans = self.svc.search(WORKSPACE, text, {"stages": stages, "limit": self.limit, "fusion": fusion})
                run[qid] = _docs(ans, path_doc)
        m = E.evaluate(run, self.qrels)
        return {
            "nDCG@10": round(m["nDCG@10"], 4),
            "R@100": round(m.get("R@100", float("nan")), 4),
            "ms": round((time.perf_counter() - t0) * 1000 / max(1, len(self.queries)), 1),
        }


class Known:
    def __init__(self, cache: Path, corpora: Path):
        self.questions = load_questions()
        self.limit = LIMIT
        self.svcs = {}
        for c in CORPORA:
            sdir, _ = store_dir(cache, corpora, c)
            self.svcs[c] = _service(sdir / "autodoc.db")

    def run(self, stages: list[str] | None, fusion: dict[str, Any]) -> dict[str, Any]:
        ranks: dict[str, list] = {"all": [], "keywords": [], "sentence": [], "agent": []}
        per: dict[str, Any] = {}
        for q in self.questions:
            svc = self.svcs[q["corpus"]]
            if stages is None:
                docs = plain_bm25_docs(svc.store.reader(), q["query"], 200, lambda p: p)[:LIMIT]
            else:
                docs = _docs(
                    svc.search(q["corpus"], q["query"], {"stages": stages, "limit": self.limit, "fusion": fusion})
                )
            r = target_rank(docs, q["targets"])
            per[q["id"]] = r
            ranks["all"].append(r)
            ranks[q["style"]].append(r)
        out = {k: {m: round(v, 3) for m, v in metrics(rs).items() if m != "n"} for k, rs in ranks.items()}
        out["ranks"] = per
        return out


LEGS = {"hybrid": HYBRID, "lexical": ["lexical"], "semantic": ["semantic"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated variant names (default all)")
    ap.add_argument("--legs", default="hybrid,lexical", help="comma-separated: hybrid, lexical, semantic, plain")
    ap.add_argument("--sets", default="scifact,known")
    ap.add_argument("--queries", type=int, default=None, help="only this many SciFact train queries")
    ap.add_argument(
        "--split", default="train", help="SciFact split: train (choose here); test only for the final figure"
    )
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--corpora", type=Path, default=DEFAULT_DATA / "corpora")
    ap.add_argument("--json", default="-")
    ap.add_argument(
        "--limit",
        type=int,
        default=None,
        help="hits a search returns (default 20 on SciFact, 30 on the known items); 10 = a default page",
    )
    a = ap.parse_args(argv)
    cache = a.cache or cache_root()
    names = [n for n in a.only.split(",") if n] or list(VARIANTS)
    sets = a.sets.split(",")
    sci = known = None
    if "scifact" in sets:
        from .beir import build_store  # noqa: F401 (the store's path comes from its key)

        stores = sorted((cache / "stores").glob("scifact-*/autodoc.db"))
        sci = SciFact(stores[0], DEFAULT_DATA / "scifact", a.queries, a.split)
    if "known" in sets:
        known = Known(cache / "known", a.corpora)
    for st in (sci, known):
        if st is not None and a.limit:
            st.limit = a.limit
    rows = []
    legs = a.legs.split(",")
    if "plain" in legs:
        row = {"variant": "plain-bm25", "leg": "plain"}
        if sci:
            row["scifact"] = sci.run(None, {})
        if known:
            row["known"] = known.run(None, {})
        rows.append(row)
        _print(row)
    for name in names:
        desc, settings, fusion = VARIANTS[name]
        with knobs(settings):
            for leg in legs:
                if leg == "plain":
                    continue
                row = {"variant": name, "desc": desc, "leg": leg}
                if sci:
                    row["scifact"] = sci.run(LEGS[leg], fusion)
                if known:
                    row["known"] = known.run(LEGS[leg], fusion)
                rows.append(row)
                _print(row)
    if a.json != "-":
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


def _print(row: dict[str, Any]) -> None:
    s = row.get("scifact", {})
    k = row.get("known", {})
    ka = k.get("all", {})
    styles = " ".join(f"{st[:3]} R@3 {k[st]['R@3']:.3f}" for st in ("keywords", "sentence", "agent") if st in k)
    print(
        f"{row['variant']:<16} {row['leg']:<8} SciFact nDCG@10 {s.get('nDCG@10', float('nan')):.4f} "
        f"({s.get('ms', 0)} ms)  known R@1 {ka.get('R@1', float('nan')):.3f} R@3 {ka.get('R@3', float('nan')):.3f} "
        f"R@10 {ka.get('R@10', float('nan')):.3f} MRR {ka.get('MRR', float('nan')):.3f}  {styles}",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
