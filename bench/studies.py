"""The quality studies, run through `python -m bench.quality CASE` (bench/quality.py
holds the data, the metrics and the SciFact run they build on):

    ranking        ranking variants on SciFact train and the known-item questions (issue 18; quality.md)
    fusion         fusion details re-played on the product's own legs (issue 18; quality.md)
    windows        one vector per chunk or per window for the semantic leg (issue 18; quality.md)
    rrf            fusion alternatives on SciFact's legs (scifact.md; also run by the scifact case)
    instant-tier   the static token table beside the full model (issue 19; instant_tier.md)

plus the lexical-leg study the scifact case runs (`Study`). Each section below
was a script of its own; its docstring is kept as DOC_<CASE>.

Runs on: the benchmark's main thread."""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import pickle
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from autodoc.config import RRF_K, RRF_WEIGHTS

from . import quality as E
from .common import DEFAULT_DATA, RESULTS, cache_root, command_line, git_commit, log, machine_note, scifact_store
from .known_item import CORPORA, LIMIT, distinct_docs, load_questions, metrics, store_dir, target_rank
from .quality import WORKSPACE, Collection, build_store, evaluate, load_collection, path_doc

# ==== ranking (formerly bench/quality_study.py) ===================================================

DOC_RANKING = """Ranking variants on the tuning sets: SciFact train and the known-item questions (issue 18).

    python -m bench.quality ranking                       # every variant, both sets, prints a table
    python -m bench.quality ranking --only base,cov1      # some variants
    python -m bench.quality ranking --json out.json       # rows as JSON too

Each variant is the product's search (in-process ``Service.search`` on the
cached stores of bench/quality.py and bench/known_item.py, opened read-only)
with some of the ranking knobs set for the run: the lexical leg's coverage
weight (``search.lexical.leg.COVERAGE_POWER``, ``TITLE_CREDIT``), question words
out of the relaxed query (``search.lexical.fts.DROP_QUESTION_WORDS``), the BM25 column
weights (``store.lexical.matches.BM25_WEIGHTS``), leg depth (``search.engine.LEG_DEPTH``)
and the fusion options. Every variant also reports each leg alone, and a plain
FTS5 BM25 (OR of the query's tokens, Lucene stopwords out, every column
weight 1, chunks ranked, documents by best chunk) is measured in the same run
as the reference the lexical leg must not fall below.

SciFact test is read only with ``--split test``, for the final figure of the
setting chosen here. A known item counts at k when its target is among the
first k distinct documents (bench/known_item.py's rules, limit 30).

Runs on: the main thread.
"""

HYBRID = ["lexical", "semantic"]

DEFAULT_FUSION = {"method": "rrf", "k": RRF_K, "weights": dict(RRF_WEIGHTS)}
BEFORE_FUSION = {
    "method": "rrf",
    "k": 20,
    "weights": {"lexical": 1.0, "semantic": 0.8},
}  # the default until f/k were re-chosen
SCIFACT_LIMIT = 20  # nDCG@10 reads the first 10 documents; snippets make each hit cost ~1 ms
_OFF = {"search.lexical.leg.COVERAGE_POWER": 0.0, "search.lexical.fts.DROP_QUESTION_WORDS": False}

_QW_INTERROG = "how why what which who whom whose where when we our us i im me my you your".split()
_QW_DO = "do does did done".split()
_QW_MODAL = "can could should would shall may might must".split()
_QW_VERBS = "need needs want wants looking look find know tell explain".split()


def _strip_question_words(text: str, stop: bool = False) -> str:
    """The query without the words the relaxed lexical query drops (never all of them)."""
    import re

    from autodoc.search.lexical.fts import _question_word
    from autodoc.store.lexical.ftstext import STOPWORDS

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
    "qw": (
        "question words out of the relaxed query",
        {**_OFF, "search.lexical.fts.DROP_QUESTION_WORDS": True},
        DEFAULT_FUSION,
    ),
    "cov1": (
        "coverage weight, power 1, title-only words count 0.5",
        {"search.lexical.fts.DROP_QUESTION_WORDS": False},
        DEFAULT_FUSION,
    ),
    "cov1-qw": ("coverage power 1, title credit 0.5, question words out", {}, DEFAULT_FUSION),
    "cov2-qw": (
        "coverage power 2, title credit 0.5, question words out",
        {"search.lexical.leg.COVERAGE_POWER": 2.0},
        DEFAULT_FUSION,
    ),
    "cov.5-qw": (
        "coverage power 0.5, title credit 0.5, question words out",
        {"search.lexical.leg.COVERAGE_POWER": 0.5},
        DEFAULT_FUSION,
    ),
    "cov1-t1-qw": (
        "coverage power 1, title credit 1 (no title discount), question words out",
        {"search.lexical.leg.TITLE_CREDIT": 1.0},
        DEFAULT_FUSION,
    ),
    "cov1-t0-qw": (
        "coverage power 1, title credit 0, question words out",
        {"search.lexical.leg.TITLE_CREDIT": 0.0},
        DEFAULT_FUSION,
    ),
    "cov1-qw-w1111": (
        "coverage 1, question words out, BM25 columns 1/1/1/1",
        {"store.lexical.matches.BM25_WEIGHTS": (1.0, 1.0, 1.0, 1.0)},
        DEFAULT_FUSION,
    ),
    "cov1-qw-w1121": (
        "coverage 1, question words out, BM25 columns 1/1/2/1",
        {"store.lexical.matches.BM25_WEIGHTS": (1.0, 1.0, 2.0, 1.0)},
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
        {"search.lexical.leg.REORDER": True},
        DEFAULT_FUSION,
    ),
    "cov1-qw-re-w1111": (
        "as cov1-qw-re, BM25 columns 1/1/1/1",
        {"search.lexical.leg.REORDER": True, "store.lexical.matches.BM25_WEIGHTS": (1.0, 1.0, 1.0, 1.0)},
        DEFAULT_FUSION,
    ),
    "qw-w1111": (
        "no coverage, question words out, BM25 columns 1/1/1/1",
        {
            **_OFF,
            "search.lexical.fts.DROP_QUESTION_WORDS": True,
            "store.lexical.matches.BM25_WEIGHTS": (1.0, 1.0, 1.0, 1.0),
        },
        DEFAULT_FUSION,
    ),
    "qw-w1111-or": (
        "no coverage, question words out, columns 1/1/1/1, relaxed list in plain BM25 order",
        {
            **_OFF,
            "search.lexical.fts.DROP_QUESTION_WORDS": True,
            "store.lexical.matches.BM25_WEIGHTS": (1.0, 1.0, 1.0, 1.0),
            "search.lexical.leg.STRICT_FIRST": False,
        },
        DEFAULT_FUSION,
    ),
    "cov1-t1-qw-w1111-or": (
        "coverage 1, title credit 1, question words out, columns 1/1/1/1, plain BM25 order",
        {
            "search.lexical.leg.TITLE_CREDIT": 1.0,
            "store.lexical.matches.BM25_WEIGHTS": (1.0, 1.0, 1.0, 1.0),
            "search.lexical.leg.STRICT_FIRST": False,
        },
        DEFAULT_FUSION,
    ),
    "cov1-qw-w1111-or": (
        "coverage 1, title credit 0.5, question words out, columns 1/1/1/1, plain BM25 order",
        {"store.lexical.matches.BM25_WEIGHTS": (1.0, 1.0, 1.0, 1.0), "search.lexical.leg.STRICT_FIRST": False},
        DEFAULT_FUSION,
    ),
    "soft.5-qw": (
        "weight 0.5 + 0.5 · coverage, question words out",
        {"search.lexical.leg.COVERAGE_FLOOR": 0.5},
        DEFAULT_FUSION,
    ),
    "rel1-qw": (
        "coverage relative to the query's best hit, power 1, question words out",
        {"search.lexical.leg.COVERAGE_RELATIVE": True},
        DEFAULT_FUSION,
    ),
    "rel2-qw": (
        "coverage relative to the query's best hit, power 2, question words out (chosen: the default)",
        {"search.lexical.leg.COVERAGE_RELATIVE": True, "search.lexical.leg.COVERAGE_POWER": 2.0},
        DEFAULT_FUSION,
    ),
    "rel1": (
        "relative coverage, power 1, question words kept",
        {"search.lexical.leg.COVERAGE_RELATIVE": True, "search.lexical.fts.DROP_QUESTION_WORDS": False},
        DEFAULT_FUSION,
    ),
    "rel1-qw-eq": (
        "relative coverage 1, question words out, RRF k 20 equal weights",
        {"search.lexical.leg.COVERAGE_RELATIVE": True},
        {"method": "rrf", "k": 20, "weights": {"lexical": 1.0, "semantic": 1.0}},
    ),
    "rel1-qw-k40": (
        "relative coverage 1, question words out, RRF k 40, lexical 1.0 / semantic 0.8",
        {"search.lexical.leg.COVERAGE_RELATIVE": True},
        {"method": "rrf", "k": 40, "weights": {"lexical": 1.0, "semantic": 0.8}},
    ),
    "rel1-qw-t1": (
        "relative coverage 1, title credit 1, question words out",
        {"search.lexical.leg.COVERAGE_RELATIVE": True, "search.lexical.leg.TITLE_CREDIT": 1.0},
        DEFAULT_FUSION,
    ),
    "rel1-qw-w1111": (
        "relative coverage 1, question words out, BM25 columns 1/1/1/1",
        {"search.lexical.leg.COVERAGE_RELATIVE": True, "store.lexical.matches.BM25_WEIGHTS": (1.0, 1.0, 1.0, 1.0)},
        DEFAULT_FUSION,
    ),
    "default-w1111": (
        "the default with BM25 columns 1/1/1/1",
        {"store.lexical.matches.BM25_WEIGHTS": (1.0, 1.0, 1.0, 1.0)},
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
    # session 4: shorter question-word lists (search/lexical/fts.py QUESTION_WORDS)
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
        {"store.lexical.matches.BM25_WEIGHTS": (2.0, 1.0, 1.0, 1.0)},
        DEFAULT_FUSION,
    ),
    "w3221-b": (
        "hybrid BM25 columns 3/2/2/1.5 (body up)",
        {"store.lexical.matches.BM25_WEIGHTS": (3.0, 2.0, 2.0, 1.5)},
        DEFAULT_FUSION,
    ),
    "w5221": (
        "hybrid BM25 columns 5/2/2/1",
        {"store.lexical.matches.BM25_WEIGHTS": (5.0, 2.0, 2.0, 1.0)},
        DEFAULT_FUSION,
    ),
    "w3111": (
        "hybrid BM25 columns 3/1/1/1",
        {"store.lexical.matches.BM25_WEIGHTS": (3.0, 1.0, 1.0, 1.0)},
        DEFAULT_FUSION,
    ),
    "w3121": (
        "hybrid BM25 columns 3/1/2/1",
        {"store.lexical.matches.BM25_WEIGHTS": (3.0, 1.0, 2.0, 1.0)},
        DEFAULT_FUSION,
    ),
    "nofuzzy": (
        "no fuzzy fallback: a word no chunk holds stays unmatched (before issue 35)",
        {"search.lexical.leg.FUZZY": False},
        DEFAULT_FUSION,
    ),
    "later1": (
        "no discount of a document's later passages (before session 4)",
        {"search.fusion.LATER_PASSAGE": 1.0},
        DEFAULT_FUSION,
    ),
    "qw-interrog": (
        "question words: interrogatives and pronouns only (do/modals/request verbs kept)",
        {"search.lexical.fts.QUESTION_WORDS": frozenset(_QW_INTERROG)},
        DEFAULT_FUSION,
    ),
    "qw-do": (
        "question words: interrogatives, pronouns and do/does/did",
        {"search.lexical.fts.QUESTION_WORDS": frozenset(_QW_INTERROG + _QW_DO)},
        DEFAULT_FUSION,
    ),
    "qw-modal": (
        "question words: interrogatives, pronouns, do and modals (request verbs kept)",
        {"search.lexical.fts.QUESTION_WORDS": frozenset(_QW_INTERROG + _QW_DO + _QW_MODAL)},
        DEFAULT_FUSION,
    ),
    "qw-verbs": (
        "question words: interrogatives, pronouns, do and request verbs (modals kept)",
        {"search.lexical.fts.QUESTION_WORDS": frozenset(_QW_INTERROG + _QW_DO + _QW_VERBS)},
        DEFAULT_FUSION,
    ),
}

for _name, (_d, _knobs, _f) in VARIANTS.items():  # "cov…"/"soft…": the absolute coverage share
    if _name.startswith(("cov", "soft")):
        _knobs.setdefault("search.lexical.leg.COVERAGE_RELATIVE", False)
    if _name.startswith(("cov1", "rel1", "soft")):
        _knobs.setdefault("search.lexical.leg.COVERAGE_POWER", 1.0)


@contextmanager
def knobs(settings: dict[str, Any]) -> Iterator[None]:
    """Set autodoc module attributes for the duration (restored after)."""
    old = []
    try:
        for dotted, value in settings.items():
            if dotted == "@semantic_text":  # the semantic leg embeds value(query) instead of the query
                from autodoc.search.semantic.leg import Prepared

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
    from autodoc.store.lexical.ftstext import STOPWORDS, TOKEN

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


def main_ranking(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.quality ranking", description=DOC_RANKING.split("\n")[0])
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
        store = scifact_store(cache)
        if store is None:
            raise SystemExit(
                f"no SciFact store embedded with this model in {cache / 'stores'}: python -m bench.quality builds it"
            )
        sci = SciFact(store, DEFAULT_DATA / "scifact", a.queries, a.split)
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


# ==== fusion (formerly bench/quality_fusion.py) ===================================================

DOC_FUSION = """Fusion details re-played on the product's own legs (issue 18, session 4).

    python -m bench.quality fusion --capture            # SciFact train + known items, through Service.search
    python -m bench.quality fusion                      # every variant below on the captured legs
    python -m bench.quality fusion --split test --only now,...   # the final read of SciFact test

Capture runs the product's ``Service.search`` (default options, no ranker) and
records, per query, what reaches ``fusion.fuse_rrf`` (each leg's hits, in the
order the engine hands them over, with the lexical coverage weights) and what
``apply_boosts`` and ``demote_superseded`` read (documents, tags, inbound
links, successors). Replay re-runs fusion → boosts → per-document cap →
demotion with the product's functions or a variant, and ranks documents by
their first hit, as bench/studies.py does. The ``now`` variant
reproduces Service.search's figures (up to tie order inside equal scores).

Runs on: the main thread.
"""

FUSION_SCIFACT_LIMIT = 20


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
            data["scifact"][qid] = _capture_one(svc, WORKSPACE, text, FUSION_SCIFACT_LIMIT)
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
        run = {
            qid: [path_doc(p) for p in replay(b, fuse, **kw)][:FUSION_SCIFACT_LIMIT]
            for qid, b in data["scifact"].items()
        }
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


def fusion_variants() -> dict[str, tuple[Callable, dict[str, Any]]]:
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


def main_fusion(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.quality fusion", description=DOC_FUSION.split("\n")[0])
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
    vs = fusion_variants()
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


# ==== windows (formerly bench/quality_windows.py) =================================================

DOC_WINDOWS = """What the semantic leg embeds: one vector per chunk, or one per window (issue 18, session 5).

    python -m bench.quality windows --embed                 # window vectors of every set, cached
    python -m bench.quality windows --only mean,max256,...  # SciFact train + known items, hybrid and semantic
    python -m bench.quality windows --split test --sets scifact --only mean,<chosen>   # once, at the end

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

``--replay CAPTURE`` reads SciFact through a bench/studies.py capture
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
    from autodoc.search.semantic.leg import SemanticOutcome

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
WINDOW_VARIANTS: dict[str, tuple[str | None, str, float]] = {"mean": (None, "mean", 0.0)}
for _b in (0.1, 0.2, 0.3, 0.5):
    WINDOW_VARIANTS[f"doc{_b}"] = (None, "doc", _b)
for _fam in FAMILIES:
    WINDOW_VARIANTS[f"max-{_fam}"] = (_fam, "max", 1.0)
    for _a in (0.3, 0.5, 0.7):
        WINDOW_VARIANTS[f"blend{_a}-{_fam}"] = (_fam, "blend", _a)
    for _t in (0.02, 0.05):
        WINDOW_VARIANTS[f"lse{_t}-{_fam}"] = (_fam, "softmax", _t)


def replay_scifact(capture: Path, names: list[str], db_path: Path, vec_dir: Path) -> list[dict[str, Any]]:
    """SciFact through the captured legs (bench/studies.py --capture): each query's lexical leg,
    boosts and metadata as Service.search had them, the semantic leg re-scored by each variant, then
    the product's fusion, boosts, cap and demotion (quality_fusion.replay). Seconds a variant."""
    import pickle

    import apsw

    from autodoc.config import RRF_K, RRF_WEIGHTS
    from autodoc.embed.onnx import OnnxProvider
    from autodoc.search.fusion import LegHit

    from . import quality as E
    from .quality import path_doc

    data = pickle.loads(Path(capture).read_bytes())
    qids = list(data["scifact"])
    db = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    doc_of = dict(db.execute("SELECT id, document_id FROM chunks").fetchall())
    doc_path = dict(db.execute("SELECT id, path FROM documents").fetchall())
    db.close()
    from .quality import load_collection

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
        fam, how, alpha = WINDOW_VARIANTS[vname]
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
            run[q] = [path_doc(p) for p in replay(box, product_rrf())][:FUSION_SCIFACT_LIMIT]
            # the semantic leg alone: documents by their best chunk
            seen: dict[str, None] = {}
            for h in legs["semantic"]:
                seen.setdefault(path_doc(doc_path[doc_of[h.chunk_id]]), None)
            run.setdefault("_sem", {})[q] = list(seen)[:FUSION_SCIFACT_LIMIT]
        sem = run.pop("_sem")
        hyb = E.evaluate(run, data["qrels"])["nDCG@10"]
        se = E.evaluate(sem, data["qrels"])["nDCG@10"]
        rows.append({"variant": vname, "hybrid": round(hyb, 4), "semantic": round(se, 4)})
        print(f"{vname:<18} SciFact ({capture.stem}) hybrid nDCG@10 {hyb:.4f}  semantic {se:.4f}", flush=True)
    return rows


def main_windows(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.quality windows", description=DOC_WINDOWS.split("\n")[0])
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
        names = [n for n in a.only.split(",") if n] or list(WINDOW_VARIANTS)
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
    from autodoc.search.semantic.leg import Prepared

    orig_run = Prepared.run
    current: dict[str, str] = {}
    for svc in services.values():
        _track(svc, current)
    names = [n for n in a.only.split(",") if n] or list(WINDOW_VARIANTS)
    rows = []
    loaded: dict[tuple[str, str | None], WindowIndex] = {}
    for vname in names:
        fam, how, alpha = WINDOW_VARIANTS[vname]
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


# ==== lexical_study (formerly bench/lexical_study.py) =============================================

# Why does the lexical leg score what it scores? Alternatives measured on the
# same store, with the product's own parser and MATCH builder, by raw SQL (no
# product code is changed), and a reference BM25 over the same tokens.
#
# Each variant ranks chunks, documents take their best chunk, top 100 documents
# are evaluated. Both splits are reported: choose on train, read test.
#
# Variants (FTS5 on the product's store, table chunks_fts: title, breadcrumb,
# meta, body; the body of a document's first chunk also holds its '# title'
# line, so the title is indexed three times):
#
# * product-want100 / product-want10: the product's run_lexical as is (AND, and
#   relaxed to OR when AND found fewer than `want` chunks; top 50).
# * and-only: strict AND of the words, top 100.
# * or-3211 / or-1111 / or-0001: OR of the product's terms (its stopword list
#   dropped) with bm25 column weights title/breadcrumb/meta/body.
# * tokens-or-*: the query cut into FTS5 tokens (so 'UCP1-dependent' is two
#   words, not a phrase), Lucene's English stopwords dropped, OR.
# * ref-bm25-*: a reference BM25 over documents (title + text as one field,
#   not chunked) with the FTS5 porter tokenizer: Lucene idf, (k1, b) as named;
#   FTS5's bm25() fixes k1 = 1.2 and b = 0.75.

# Lucene's EnglishAnalyzer stop set (33 words), as the published BM25 runs use.
LUCENE_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)


def _doc_ranking(chunk_rows: list[tuple[int, float]], doc_of: dict[int, str], n: int = 100) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for cid, _ in chunk_rows:
        d = doc_of.get(cid)
        if d is not None and d not in seen:
            seen.add(d)
            out.append(d)
            if len(out) >= n:
                break
    return out


class Study:
    def __init__(self, store: Path, col: Collection, workspace: str = "bench"):
        self.db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
        self.col = col
        self.ws_id = self.db.execute("SELECT id FROM workspaces WHERE name=?", (workspace,)).fetchone()[0]
        self.doc_of = {
            cid: path_doc(p)
            for cid, p in self.db.execute(
                "SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id=c.document_id WHERE c.workspace_id=?",
                (self.ws_id,),
            )
        }
        self.tok_query = self.db.fts5_tokenizer("unicode61", ["remove_diacritics", "2"])
        self.tok_stem = self.db.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
        self._ref: dict[str, Any] | None = None

    # -- FTS5 variants -----------------------------------------------------------

    def _sql(self, weights: tuple[float, ...], limit: int) -> str:
        w = ", ".join(str(x) for x in weights)
        return (
            f"SELECT c.id, bm25(chunks_fts, {w}) AS s FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
            f"WHERE chunks_fts MATCH ? AND c.workspace_id = ? ORDER BY s, c.id LIMIT {int(limit)}"
        )

    def _terms(self, text: str):
        from autodoc.search.query import parse_query, resolve_facets

        return resolve_facets(parse_query(text), set()).terms

    def product(self, text: str, want: int) -> list[tuple[int, float]]:
        from autodoc.search.lexical.leg import run_lexical
        from autodoc.store.filters import build_filter

        filt = build_filter(self.ws_id, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True)
        hits = run_lexical(self.db, self.ws_id, self._terms(text), filt, want=want).hits
        return [(h.chunk_id, h.score) for h in hits]

    def fts(self, match: str | None, weights=(3.0, 2.0, 2.0, 1.0), limit: int = 300) -> list[tuple[int, float]]:
        if not match:
            return []
        return self.db.execute(self._sql(weights, limit), (match, self.ws_id)).fetchall()

    def product_match(self, text: str, mode: str) -> str | None:
        from autodoc.search.lexical.fts import build_match

        return build_match(self._terms(text), mode)

    def token_match(self, text: str, stopwords=LUCENE_STOPWORDS) -> str | None:
        toks = []
        for _, _, t in self.tok_query(text.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None):
            if t in stopwords or t in toks:
                continue
            toks.append(t)
        return " OR ".join('"' + t.replace('"', '""') + '"' for t in toks) or None

    # -- reference BM25 ------------------------------------------------------------

    def _stem(self, text: str) -> list[str]:
        return [t for _, _, t in self.tok_stem(text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None)]

    def ref_index(self) -> dict[str, Any]:
        if self._ref is None:
            ids = list(self.col.corpus)
            postings: dict[str, list[tuple[int, int]]] = {}
            lengths = np.zeros(len(ids), dtype=np.float64)
            for i, d in enumerate(ids):
                title, text = self.col.corpus[d]
                toks = self._stem(f"{title} {text}")
                lengths[i] = len(toks)
                for t, c in Counter(toks).items():
                    postings.setdefault(t, []).append((i, c))
            post = {
                t: (np.array([i for i, _ in p], np.int64), np.array([c for _, c in p], np.float64))
                for t, p in postings.items()
            }
            stop_stems = {s for w in LUCENE_STOPWORDS for s in self._stem(w)}
            self._ref = {"ids": ids, "post": post, "len": lengths, "avg": lengths.mean(), "stop": stop_stems}
        return self._ref

    def ref_bm25(self, text: str, k1: float, b: float, n: int = 100) -> list[str]:
        r = self.ref_index()
        N = len(r["ids"])
        scores = np.zeros(N)
        norm = k1 * (1 - b + b * r["len"] / r["avg"])
        for t in dict.fromkeys(self._stem(text)):
            if t in r["stop"] or t not in r["post"]:
                continue
            idx, tf = r["post"][t]
            idf = math.log(1 + (N - len(idx) + 0.5) / (len(idx) + 0.5))
            scores[idx] += idf * tf * (k1 + 1) / (tf + norm[idx])
        nz = np.flatnonzero(scores > 0)
        order = nz[np.lexsort((nz, -scores[nz]))][:n]
        return [r["ids"][i] for i in order]

    # -- driving -------------------------------------------------------------------

    def variants(self) -> list[tuple[str, str, Callable[[str], list[str]]]]:
        d = self.doc_of

        def via(rows_fn):
            return lambda q: _doc_ranking(rows_fn(q), d)

        return [
            (
                "product-want100",
                "product leg as is at limit 100 (AND → relaxed to OR), 3/2/2/1, top 50",
                via(lambda q: self.product(q, 100)),
            ),
            (
                "product-want10",
                "product leg as is at limit 10 (relaxes only when AND finds < 10), top 50",
                via(lambda q: self.product(q, 10)),
            ),
            ("and-only", "strict AND of the words, 3/2/2/1", via(lambda q: self.fts(self.product_match(q, "all")))),
            (
                "or-3211",
                "OR of the product's terms, weights 3/2/2/1",
                via(lambda q: self.fts(self.product_match(q, "any"))),
            ),
            (
                "or-1111",
                "OR of the product's terms, weights 1/1/1/1",
                via(lambda q: self.fts(self.product_match(q, "any"), (1.0, 1.0, 1.0, 1.0))),
            ),
            (
                "or-0001",
                "OR of the product's terms, body only (0/0/0/1)",
                via(lambda q: self.fts(self.product_match(q, "any"), (0.0, 0.0, 0.0, 1.0))),
            ),
            (
                "tokens-or-3211",
                "OR of FTS5 tokens, Lucene stopwords, 3/2/2/1",
                via(lambda q: self.fts(self.token_match(q))),
            ),
            (
                "tokens-or-1111",
                "OR of FTS5 tokens, Lucene stopwords, 1/1/1/1",
                via(lambda q: self.fts(self.token_match(q), (1.0, 1.0, 1.0, 1.0))),
            ),
            (
                "tokens-or-0001",
                "OR of FTS5 tokens, Lucene stopwords, body only",
                via(lambda q: self.fts(self.token_match(q), (0.0, 0.0, 0.0, 1.0))),
            ),
            (
                "ref-bm25-1.2-0.75",
                "reference BM25 per document (not chunked), k1 1.2 b 0.75",
                lambda q: self.ref_bm25(q, 1.2, 0.75),
            ),
            (
                "ref-bm25-0.9-0.4",
                "reference BM25 per document (not chunked), k1 0.9 b 0.4",
                lambda q: self.ref_bm25(q, 0.9, 0.4),
            ),
        ]

    def run(self, splits=("train", "test"), query_limit: int | None = None) -> list[dict[str, Any]]:
        out = []
        for name, desc, fn in self.variants():
            row: dict[str, Any] = {"name": name, "description": desc}
            for split in splits:
                if split not in self.col.qrels:
                    continue
                qs = self.col.split_queries(split)[:query_limit]
                qrels = {q: self.col.qrels[split][q] for q, _ in qs}
                t0 = time.perf_counter()
                run = {q: fn(text) for q, text in qs}
                dt = (time.perf_counter() - t0) / max(1, len(qs))
                m = evaluate(run, qrels)
                row[split] = {k: round(v, 4) for k, v in m.items()}
                row[split]["ms_per_query"] = round(dt * 1000, 2)
            out.append(row)
        return out

    def stats(self) -> dict[str, Any]:
        """Facts that bear on the lexical figures."""
        db = self.db
        per_doc = db.execute(
            "SELECT n, COUNT(*) FROM (SELECT document_id, COUNT(*) n FROM chunks WHERE workspace_id=? "
            "GROUP BY document_id) GROUP BY n ORDER BY n",
            (self.ws_id,),
        ).fetchall()
        over = db.execute(
            "SELECT COUNT(*), SUM(tokens > 256) FROM chunks WHERE workspace_id=?", (self.ws_id,)
        ).fetchone()
        test = self.col.split_queries("test") if "test" in self.col.qrels else []
        relaxed = 0
        for _, text in test:
            m = self.product_match(text, "all")
            n = len(self.fts(m, limit=10)) if m else 0
            relaxed += n < 10
        return {
            "chunks_per_document": {str(n): c for n, c in per_doc},
            "chunks": over[0],
            "chunks_over_256_tokens": over[1] or 0,
            "test_queries_whose_and_finds_fewer_than_10": relaxed,
            "test_queries": len(test),
        }


# ==== rrf (formerly bench/fusion_study.py) ========================================================

DOC_RRF = """Fusion alternatives, measured on the product's own legs (no product code
changed): each query's lexical leg (`run_lexical`) and semantic leg (the
runtime's `leg`) are taken once, top 100 each, and fused here in several ways.
Documents are ranked by their best chunk; the product's RRF is reproduced
with its own `fuse_rrf` for the top-50 rows, so the first row should match
the Service's hybrid figure up to boosts and the per-document cap (which do
not change a best-chunk document ranking on SciFact: no tags, no links).

Variants:
* rrf-kK-topN: the product's chunk-level RRF, k = K, each leg cut at N.
* rrfw-kK-sW: the product's chunk-level RRF with per-leg weights (its
  `weights` option): Σ w_leg / (k + rank), lexical 1.0, semantic W, legs cut
  at 50 as the product does. W = 1.0 is `rrf-kK-top50`.
* rrf-doc-kK: RRF over documents (each leg's chunks collapsed to their
  document's best rank first), so a document found lexically through one chunk
  and semantically through another gets both legs' credit.
* convex-a: min-max normalised scores, a·cos + (1 − a)·bm25, per chunk.
* weighted: the product's weighted sum (0.6·cos + 0.4·bm25/(bm25+1), ≥ 0.2).
"""


def collect_legs(
    store: Path, col: Collection, splits=("train", "test"), top: int = 100, query_limit: int | None = None
) -> dict[str, Any]:
    from autodoc.config import Settings, WorkspaceConfig
    from autodoc.search.lexical.leg import run_lexical
    from autodoc.search.query import parse_query, resolve_facets
    from autodoc.service import Service
    from autodoc.store.filters import build_filter
    from autodoc.store.workspaces import get_workspace

    svc = Service(Settings.from_env(store=store), writer=False)
    legs: dict[str, dict[str, Any]] = {}
    try:
        db = svc.store.reader()
        ws = get_workspace(db, WORKSPACE)
        embedding = WorkspaceConfig.from_json(ws.config).embedding
        doc_of = {
            cid: path_doc(p)
            for cid, p in db.execute(
                "SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id=c.document_id WHERE c.workspace_id=?",
                (ws.id,),
            )
        }
        filt = build_filter(ws.id, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True)
        tok = db.fts5_tokenizer("unicode61", ["remove_diacritics", "2"])
        for split in splits:
            if split not in col.qrels:
                continue
            for qid, text in col.split_queries(split)[:query_limit]:
                parsed = resolve_facets(parse_query(text), set())
                with db:
                    lex = run_lexical(db, ws.id, parsed.terms, filt, want=top, top=top).hits
                with db:
                    sem = svc.semantic.search(db, ws, embedding, parsed.text, filt, top)
                tm = token_match(tok, text)
                alt = db.execute(_ALT_SQL.format(limit=int(top)), (tm, ws.id)).fetchall() if tm else []
                legs[qid] = {
                    "lexical": [(h.chunk_id, h.score) for h in lex],
                    "semantic": [(h.chunk_id, h.score) for h in (sem.hits or [])],
                    "lexical_tokens": [(c, -sc) for c, sc in alt],
                }
    finally:
        svc.close()
    return {"legs": legs, "doc_of": doc_of}


# The lexical study's best variant on train (tokens-or-1111) as an alternative lexical leg.
_ALT_SQL = (
    "SELECT c.id, bm25(chunks_fts, 1.0, 1.0, 1.0, 1.0) AS s FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
    "WHERE chunks_fts MATCH ? AND c.workspace_id = ? ORDER BY s, c.id LIMIT {limit}"
)


def token_match(tok, text: str) -> str | None:
    import apsw

    toks: list[str] = []
    for _, _, t in tok(text.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None):
        if t not in LUCENE_STOPWORDS and t not in toks:
            toks.append(t)
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in toks) or None


def _rrf_docs(chunk_order: list[int], doc_of: dict[int, str], n: int = 100) -> list[str]:
    out, seen = [], set()
    for c in chunk_order:
        d = doc_of[c]
        if d not in seen:
            seen.add(d)
            out.append(d)
            if len(out) >= n:
                break
    return out


def _rrf_product(legs, k, top, weights=None):
    from autodoc.search.fusion import LegHit, fuse_rrf

    cut = {n: [LegHit(c, s) for c, s in hs[:top]] for n, hs in _product_legs(legs).items()}
    return [f.chunk_id for f in fuse_rrf(cut, k=k, weights=weights)]


def _product_legs(legs):
    """The two legs the product fuses. `legs` also carries `lexical_tokens` (an alternative
    lexical leg for the *-tokens rows): passed to RRF it would be a third leg with weight 1."""
    return {"lexical": legs["lexical"], "semantic": legs["semantic"]}


def _rrf_doc(legs, doc_of, k, top):
    score: dict[str, float] = {}
    for _name, hs in _product_legs(legs).items():
        seen = []
        for c, _ in hs[:top]:
            d = doc_of[c]
            if d not in seen:
                seen.append(d)
        for r, d in enumerate(seen):
            score[d] = score.get(d, 0.0) + 1.0 / (k + r + 1)
    return sorted(score, key=lambda d: (-score[d], d))


def _convex(legs, a, top):
    def norm(hs):
        if not hs:
            return {}
        xs = [s for _, s in hs]
        lo, hi = min(xs), max(xs)
        return {c: ((s - lo) / (hi - lo) if hi > lo else 1.0) for c, s in hs}

    L, S = norm(legs["lexical"][:top]), norm(legs["semantic"][:top])
    score = {c: a * S.get(c, 0.0) + (1 - a) * L.get(c, 0.0) for c in set(L) | set(S)}
    return sorted(score, key=lambda c: (-score[c], c))


def _weighted(legs, top):
    from autodoc.search.fusion import LegHit, fuse_weighted

    cut = {n: [LegHit(c, s) for c, s in hs[:top]] for n, hs in _product_legs(legs).items()}
    return [f.chunk_id for f in fuse_weighted(cut)]


# Weighted RRF grid (lexical weight 1.0; semantic weight below 1 leans on the
# stronger lexical leg, as the convex sweep did). W = 1.0 is the plain rrf-kK-top50 row.
RRFW_KS = (20, 40, 60)
RRFW_SEMANTIC = (0.5, 0.6, 0.7, 0.8, 0.9)


def rrfw_name(k: int, w: float) -> str:
    return f"rrfw-k{k}-s{w}"


def rrf_family(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The product-shaped RRF rows (chunk-level, legs at 50): plain k ∈ RRFW_KS and the weighted grid."""
    names = {f"rrf-k{k}-top50" for k in RRFW_KS} | {rrfw_name(k, w) for k in RRFW_KS for w in RRFW_SEMANTIC}
    return [r for r in rows if r["name"] in names]


def rrf_setting(name: str) -> dict[str, Any]:
    """The product's fusion option for a row of rrf_family."""
    parts = name.split("-")
    k = int(parts[1][1:])
    w = float(parts[2][1:]) if name.startswith("rrfw-") else 1.0
    return {"method": "rrf", "k": k, "weights": {"lexical": 1.0, "semantic": w}}


def rrf_variants(doc_of):
    v = []
    for k in (10, 20, 40, 60):
        v.append(
            (
                f"rrf-k{k}-top50",
                f"product chunk-level RRF, k {k}, legs cut at 50",
                lambda L, k=k: _rrf_docs(_rrf_product(L, k, 50), doc_of),
            )
        )
    for k in RRFW_KS:
        for w in RRFW_SEMANTIC:
            v.append(
                (
                    rrfw_name(k, w),
                    f"product chunk-level RRF, k {k}, weights lexical 1.0 / semantic {w}, legs cut at 50",
                    lambda L, k=k, w=w: _rrf_docs(_rrf_product(L, k, 50, {"lexical": 1.0, "semantic": w}), doc_of),
                )
            )
    for k in (20, 60):
        v.append(
            (
                f"rrf-k{k}-top100",
                f"chunk-level RRF, k {k}, legs cut at 100",
                lambda L, k=k: _rrf_docs(_rrf_product(L, k, 100), doc_of),
            )
        )
    for k in (10, 20, 60):
        v.append(
            (
                f"rrf-doc-k{k}-top100",
                f"RRF over documents (best chunk per leg), k {k}, legs at 100",
                lambda L, k=k: _rrf_doc(L, doc_of, k, 100)[:100],
            )
        )
    for a in (0.3, 0.4, 0.5, 0.6):
        v.append(
            (
                f"convex-{a}",
                f"min-max normalised {a}·cos + {1 - a:.1f}·bm25, legs at 100",
                lambda L, a=a: _rrf_docs(_convex(L, a, 100), doc_of),
            )
        )
    for a in (0.4, 0.5):
        v.append(
            (
                f"convex-{a}-top50",
                f"min-max normalised {a}·cos + {1 - a:.1f}·bm25, legs at 50 (the product's)",
                lambda L, a=a: _rrf_docs(_convex(L, a, 50), doc_of),
            )
        )

    def tokens(L):
        return {"lexical": L["lexical_tokens"], "semantic": L["semantic"]}

    for a in (0.4, 0.5):
        v.append(
            (
                f"convex-{a}-tokens",
                f"convex {a} as above, lexical leg = `tokens-or-1111` (lexical study), legs at 100",
                lambda L, a=a: _rrf_docs(_convex(tokens(L), a, 100), doc_of),
            )
        )
    v.append(
        (
            "rrf-k20-tokens",
            "chunk-level RRF k 20, lexical leg = `tokens-or-1111`, legs at 100",
            lambda L: _rrf_docs(_rrf_product(tokens(L), 20, 100), doc_of),
        )
    )
    v.append(
        (
            "weighted-top50",
            "product weighted sum 0.6·cos + 0.4·bm25/(bm25+1), threshold 0.2, legs at 50",
            lambda L: _rrf_docs(_weighted(L, 50), doc_of),
        )
    )
    v.append(
        ("lexical-top100", "lexical leg alone, 100 chunks", lambda L: _rrf_docs([c for c, _ in L["lexical"]], doc_of))
    )
    v.append(
        (
            "semantic-top100",
            "semantic leg alone, 100 chunks",
            lambda L: _rrf_docs([c for c, _ in L["semantic"]], doc_of),
        )
    )
    return v


def run(
    col: Collection, collected: dict[str, Any], splits=("train", "test"), only: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    legs, doc_of = collected["legs"], collected["doc_of"]
    out = []
    for name, desc, fn in rrf_variants(doc_of):
        if only and not name.startswith(only):
            continue
        row: dict[str, Any] = {"name": name, "description": desc}
        for split in splits:
            if split not in col.qrels:
                continue
            qids = [q for q, _ in col.split_queries(split) if q in legs]
            if not qids:
                continue
            runs = {q: fn(legs[q]) for q in qids}
            row[split] = {k: round(v, 4) for k, v in evaluate(runs, {q: col.qrels[split][q] for q in qids}).items()}
        out.append(row)
    return out


# -- run the fusion study alone ----------------------------------------------------
#   python -m bench.quality rrf                        # every variant, table on stdout
#   python -m bench.quality rrf --only rrf --legs /tmp/scifact-legs.json
# The legs are collected once from the cached store (built by bench.quality) and can be
# kept in a JSON file outside the repository, so re-fusing costs seconds.


def _find_store(name: str) -> Path:
    from .common import cache_root

    found = sorted((cache_root() / "stores").glob(f"{name}-*/autodoc.db"))
    if len(found) != 1:
        raise SystemExit(f"expected one cached store for {name!r}, found {[str(f) for f in found]}; pass --store")
    return found[0]


def main_rrf(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import time

    from .common import DEFAULT_DATA, command_line, git_commit, log
    from .quality import load_collection

    ap = argparse.ArgumentParser(
        prog="python -m bench.quality rrf",
        description="Fusion variants over the product's legs (choose on train, read test).",
    )
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA / "scifact")
    ap.add_argument("--store", type=Path, default=None, help="store (default the one cached store for the collection)")
    ap.add_argument(
        "--legs",
        type=Path,
        default=None,
        help="JSON file of collected legs: read when it exists, else collected and written there",
    )
    ap.add_argument("--only", default="", help="';'-separated name prefixes of the variants to run (default all)")
    ap.add_argument("--json", default="-", help="rows as JSON to this path, '-' for none")
    args = ap.parse_args(argv)

    col = load_collection(args.data)
    if args.legs and args.legs.exists():
        collected = json.loads(args.legs.read_text())
        collected["doc_of"] = {int(c): d for c, d in collected["doc_of"].items()}
        log(f"legs read from {args.legs} ({len(collected['legs'])} queries, collected {collected.get('meta')})")
    else:
        store = args.store or _find_store(col.name)
        t0 = time.time()
        log(f"collecting legs from {store}")
        collected = collect_legs(store, col)
        import autodoc

        collected["meta"] = {
            "store": str(store),
            "commit": git_commit(),
            "code": str(Path(autodoc.__file__).parent),
            "seconds": round(time.time() - t0, 1),
            "date": time.strftime("%Y-%m-%d %H:%M"),
        }
        log(f"collected {len(collected['legs'])} queries in {collected['meta']['seconds']} s")
        if args.legs:
            args.legs.write_text(json.dumps(collected))
    rows = run(col, collected, only=tuple(p for p in args.only.split(";") if p))
    print("| variant | train nDCG@10 | test nDCG@10 | test recall@100 | test MRR@10 |")
    print("|---|---|---|---|---|")
    for r in rows:
        tr, te = r.get("train", {}), r.get("test", {})
        print(
            f"| `{r['name']}` | {tr.get('nDCG@10', float('nan')):.4f} | {te.get('nDCG@10', float('nan')):.4f} | "
            f"{te.get('R@100', float('nan')):.4f} | {te.get('RR@10', float('nan')):.4f} |"
        )
    fam = [r for r in rrf_family(rows) if "train" in r]
    if fam:
        best = max(fam, key=lambda r: (r["train"]["nDCG@10"], r["name"]))
        print(
            f"\nRRF family (k {RRFW_KS}, semantic weight {RRFW_SEMANTIC} and 1.0, legs at 50): best on train "
            f"`{best['name']}` = {json.dumps(rrf_setting(best['name']))}, train nDCG@10 {best['train']['nDCG@10']:.4f}"
            f" → test {best.get('test', {}).get('nDCG@10', float('nan')):.4f}"
        )
    if args.json != "-":
        Path(args.json).write_text(
            json.dumps({"command": command_line(), "legs_meta": collected.get("meta"), "variants": rows}, indent=1)
        )
    return 0


# ==== instant-tier (formerly bench/instant_tier.py) ===============================================

DOC_INSTANT_TIER = """The instant tier (issue 19): distillation time, embedding speed and SciFact
quality of a static per-token table beside the full model.

    python -m bench.quality instant-tier            # writes docs/benchmarks/instant_tier.md + .json
    python -m bench.quality instant-tier --out -    # print only

Steps, all in one process so the ratios share the machine's load:
1. distil the table from the bundled model (autodoc.embed.static.distil_table);
   timed, then cached in the bench cache keyed by the model fingerprint;
2. speed on the same 1,000 SciFact chunk texts: the instant tier (tokenise +
   numpy), the product's OnnxProvider.embed, and raw onnxruntime (tokenise,
   one padded batch of 32 at a time, session.run, mean pool — no windows, no
   sorting); the transformer on a 64-text subset since it runs ~20/s here;
3. quality on SciFact's cached store (bench/quality.py builds it): chunk texts
   and the full model's stored vectors read read-only from it; each tier's
   semantic leg is an exact cosine scan over every chunk, a document ranked
   by its best chunk; the lexical leg is the product's (Service.search with
   stages ["lexical"], limit 100); the hybrid is weighted RRF over document
   ranks with the product's default (k 20, lexical 1.0 / semantic 0.8).
   The full model goes through the same code, so the comparison is like for
   like (its figure differs slightly from quality.md's, which fuses chunks).
   Weighting of the instant tier (plain mean, IDF, SIF) is chosen on the
   TRAIN queries; the test figures are reported.
"""

K_RRF, W_LEX, W_SEM = 20, 1.0, 0.8


def distil(provider, cache: Path, again: bool) -> tuple[np.ndarray, dict[str, Any]]:
    """The table, distilled now (timed) or, without --distil, read from the
    bench cache with the figures of the run that distilled it."""
    from autodoc.embed.static import distil_table

    path = cache / f"instant-table-{provider.fingerprint[:16]}.npy"
    sidecar = path.with_suffix(".json")
    vocab = provider._count_tok.get_vocab_size()
    cls_id, sep_id = provider._open[0], provider._close[0]
    if not again and path.exists() and sidecar.exists():
        table = np.load(path)
        figures = json.loads(sidecar.read_text())
        figures["from_cache"] = True
        return table, figures
    t0 = time.perf_counter()
    table = distil_table(provider._session, provider._output, vocab, cls_id, sep_id, feed_types=provider._feed_types)
    secs = time.perf_counter() - t0
    # determinism: a slice distilled again gives the same bytes
    again = distil_table(
        provider._session,
        provider._output,
        vocab,
        cls_id,
        sep_id,
        feed_types=provider._feed_types,
        start=1000,
        stop=1512,
    )
    same = bool(np.array_equal(again, table[1000:1512]))
    np.save(path, table)
    figures = {
        "seconds": round(secs, 1),
        "tokens": vocab,
        "tokens_per_s": round(vocab / secs, 1),
        "shape": list(table.shape),
        "dtype": str(table.dtype),
        "bytes": int(table.nbytes),
        "deterministic_slice": same,
        "load": [round(x, 2) for x in os.getloadavg()],
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    sidecar.write_text(json.dumps(figures))
    return table, figures


def read_store(store: Path) -> tuple[list[str], list[str], list[str], dict[str, np.ndarray]]:
    """(chunk doc ids, chunk embed texts, chunk text hashes, {model fp: f32 by hash})."""
    import apsw

    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    ws = db.execute("SELECT id FROM workspaces WHERE name=?", (WORKSPACE,)).fetchone()[0]
    rows = db.execute(
        "SELECT d.path, c.breadcrumb || char(10) || c.text, c.text_hash FROM chunks c "
        "JOIN documents d ON d.id=c.document_id WHERE c.workspace_id=? ORDER BY c.id",
        (ws,),
    ).fetchall()
    fp = db.execute("SELECT active_fp FROM embed_state WHERE workspace_id=?", (ws,)).fetchone()[0]
    vecs = {
        h: np.frombuffer(b, dtype=np.float32)
        for h, b in db.execute("SELECT text_hash, f32 FROM vectors WHERE workspace_id=? AND model_fp=?", (ws, fp))
    }
    db.close()
    return [path_doc(r[0]) for r in rows], [r[1] for r in rows], [r[2] for r in rows], vecs


def doc_run(q: np.ndarray, mat: np.ndarray, chunk_docs: list[str], depth: int = 100) -> list[str]:
    scores = mat @ q
    order = np.argsort(-scores, kind="stable")
    out: list[str] = []
    seen: set[str] = set()
    for i in order:
        d = chunk_docs[i]
        if d not in seen:
            seen.add(d)
            out.append(d)
            if len(out) >= depth:
                break
    return out


SWEEP = (0.05, 0.1, 0.2, 0.4)  # the instant leg's weight in the hybrid, besides the product's (embed/instant.py)


def rrf(lex: list[str], sem: list[str], limit: int = 100, w_sem: float = W_SEM) -> list[str]:
    s: dict[str, float] = {}
    for w, run in ((W_LEX, lex), (w_sem, sem)):
        for r, d in enumerate(run):
            s[d] = s.get(d, 0.0) + w / (K_RRF + r + 1)
    return sorted(s, key=lambda d: (-s[d], d))[:limit]


def speed(provider, make_emb, texts: list[str]) -> dict[str, Any]:
    """chunks/s of the three paths, interleaved twice so load drifts hit all. The instant
    tier gets a new embedder each round: its word cache starts empty, as on a fresh
    knowledge base's first batch (a warm cache is faster)."""
    sess = provider._session
    tok = provider._count_tok
    # texts that fit one 256-token window: the provider and the raw loop then do the same work
    # (a longer text is one window per 254 tokens in the provider, truncated in the raw loop)
    counts = provider.count_tokens(texts)
    small = [t for t, n in zip(texts, counts) if n <= 256][:64]

    def raw():
        for s in range(0, len(small), 32):
            encs = tok.encode_batch(small[s : s + 32])
            w = min(max(len(e.ids) for e in encs), 256)
            ids = np.zeros((len(encs), w), dtype=np.int64)
            mask = np.zeros_like(ids)
            for r, e in enumerate(encs):
                n = min(len(e.ids), 256)
                ids[r, :n] = e.ids[:n]
                mask[r, :n] = 1
            h = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
            (h * mask[:, :, None]).sum(1)

    out: dict[str, list[float]] = {"instant": [], "full_provider": [], "raw_onnxruntime": []}
    for _ in range(2):
        emb = make_emb()
        t0 = time.perf_counter()
        emb.embed(texts)
        out["instant"].append(len(texts) / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        provider.embed(small)
        out["full_provider"].append(len(small) / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        raw()
        out["raw_onnxruntime"].append(len(small) / (time.perf_counter() - t0))
    from autodoc.embed.static import embed_flat

    emb = make_emb()
    t0 = time.perf_counter()
    flat, ends = emb._flat_ids(texts)
    t_tok = time.perf_counter() - t0
    t0 = time.perf_counter()
    embed_flat(emb.table, flat, ends, emb.weights)
    t_np = time.perf_counter() - t0
    res = {k: round(max(v), 1) for k, v in out.items()}
    res["instant_split_s"] = {"tokenise": round(t_tok, 3), "numpy": round(t_np, 3)}
    res["instant_over_full"] = round(res["instant"] / res["full_provider"], 1)
    res["full_over_raw"] = round(res["full_provider"] / res["raw_onnxruntime"], 3)
    res["texts"] = {"instant": len(texts), "transformer": len(small)}
    res["load"] = [round(x, 2) for x in os.getloadavg()]
    return res


def first_answer(store: Path, table_file: Path, query: str, workspace: str = WORKSPACE) -> dict[str, Any]:
    """Time from an indexed, unembedded SciFact workspace to its first semantic
    answer, through the product (Service, its embed queue's steps, search):
    a copy of the cached store with every vector deleted, the instant tier's
    table already built (the distillation is the one-off above)."""
    import shutil
    import tempfile

    from autodoc.config import Settings
    from autodoc.service import Service
    from autodoc.store import vectors as stored
    from autodoc.store.workspaces import get_workspace

    tmp = Path(tempfile.mkdtemp(prefix="instant-first-"))
    try:
        shutil.copy(store, tmp / "s.db")
        if Path(f"{store}-wal").exists():  # what is not checkpointed yet
            shutil.copy(f"{store}-wal", tmp / "s.db-wal")
        svc = Service(Settings(store=tmp / "s.db", socket=tmp / "s.sock", instant_dir=tmp / "instant"))
        try:
            with svc.store.write() as w:
                ws = get_workspace(w, workspace)
                stored.drop_other_models(w, ws.id, "none")  # every vector: a fresh knowledge base's state
            svc.vectors.forget(ws.id)
            from autodoc.embed.onnx import OnnxProvider

            (tmp / "instant").mkdir()
            os.symlink(table_file, tmp / "instant" / f"{OnnxProvider().fingerprint}.npy")
            t0 = time.perf_counter()
            steps = []
            while True:
                step = svc.embed_queue.step(ws)
                ans = svc.search(workspace, query, {"stages": ["semantic"], "limit": 10})
                steps.append(
                    {
                        "s": round(time.perf_counter() - t0, 1),
                        "tier": ans["semantic_tier"],
                        "hits": len(ans["hits"]),
                        "embedded": step["embedded"],
                    }
                )
                if ans["semantic_tier"] == "instant" or len(steps) > 20:
                    break
            with svc.store.read() as db:
                done, pending = stored.coverage(db, ws.id, svc.providers.get({"provider": "onnx"}).fingerprint)
        finally:
            svc.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "seconds": steps[-1]["s"],
        "steps": steps,
        "model_vectors_by_then": done,
        "chunks": done + pending,
        "load": [round(x, 2) for x in os.getloadavg()],
    }


def main_instant_tier(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.quality instant-tier", description=DOC_INSTANT_TIER.split("\n\n")[0]
    )
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA / "scifact")
    ap.add_argument("--out", default=str(RESULTS / "instant_tier"))
    ap.add_argument(
        "--distil", action="store_true", help="distil the table again (else the cached one and its figures)"
    )
    ap.add_argument("--first-answer-only", action="store_true", help="only the fresh-workspace timing (printed)")
    ap.add_argument("--render", action="store_true", help="write the .md again from the .json")
    ap.add_argument("--speed-only", action="store_true", help="only the speed comparison (printed)")
    ap.add_argument(
        "--timings-only",
        action="store_true",
        help="measure the times again (first answers, speed) into the .json and .md; keep its quality "
        "figures (they do not depend on the machine's load)",
    )
    args = ap.parse_args(argv)
    if args.render:
        Path(args.out + ".md").write_text(render(json.loads(Path(args.out + ".json").read_text())) + "\n")
        return 0
    from autodoc.embed.instant import GUARD_TOP, WEIGHTING, rrf_weight
    from autodoc.embed.onnx import OnnxProvider
    from autodoc.embed.static import StaticEmbedder, idf_weights, sif_weights, zipf_weights

    t_start = time.perf_counter()
    col = load_collection(args.data)
    built = build_store(col, quiet=True)
    provider = OnnxProvider()
    if args.speed_only:
        from autodoc.embed.static import StaticEmbedder as _S

        tab = np.load(cache_root() / f"instant-table-{provider.fingerprint[:16]}.npy")
        _, texts0, _, _ = read_store(built.store)
        print(
            json.dumps(
                speed(
                    provider, lambda: _S(tab, provider._count_tok, [101, 102, 0], zipf_weights(len(tab))), texts0[:1000]
                ),
                indent=1,
            )
        )
        return 0
    log("distilling the table")
    table, dist = distil(provider, cache_root(), args.distil)
    log(f"distilled in {dist['seconds']} s")
    first = first_answer(
        built.store,
        cache_root() / f"instant-table-{provider.fingerprint[:16]}.npy",
        col.queries[next(iter(col.qrels["test"]))],
    )
    log(f"first answer {first}")
    # the speed benchmark's 10k-chunk store (bench/speed.py; never written: first_answer copies it)
    first_10k = None
    meta10k = cache_root() / "stores" / f"speed-10000-{provider.fingerprint[:12]}" / "bench-meta.json"
    if meta10k.exists() and json.loads(meta10k.read_text()).get("complete"):
        first_10k = first_answer(
            meta10k.parent / "autodoc.db",
            cache_root() / f"instant-table-{provider.fingerprint[:16]}.npy",
            col.queries[next(iter(col.qrels["test"]))],
            workspace="speed",
        )
        first_10k["index_seconds"] = json.loads(meta10k.read_text())["index_build"]["seconds"]
        log(f"first answer at 10k {first_10k}")
    if args.first_answer_only:
        print(json.dumps({"scifact": first, "speed-10000": first_10k}, indent=1))
        return 0
    special = [provider._open[0], provider._close[0], 0]  # [CLS], [SEP], [PAD]
    chunk_docs, texts, _hashes, full_by_hash = read_store(built.store)
    vocab = table.shape[0]
    product = zipf_weights(vocab) if WEIGHTING == "zipf" else None
    sp = speed(provider, lambda: StaticEmbedder(table, provider._count_tok, special, product), texts[:1000])
    log(f"speed {sp}")
    # the whole corpus as the embed queue sends it (steps of 4,096), from an empty word cache
    emb = StaticEmbedder(table, provider._count_tok, special, product)
    t0 = time.perf_counter()
    for s in range(0, len(texts), 4096):
        emb.embed(texts[s : s + 4096])
    t_all = time.perf_counter() - t0
    if args.timings_only:
        report = json.loads(Path(args.out + ".json").read_text())
        report.update(
            {
                "first_answer": first,
                "first_answer_10k": first_10k,
                "speed": sp,
                "instant_corpus_embed_s": round(t_all, 2),
                "timings_commit": git_commit(),
                "timings_command": command_line(),
            }
        )
        Path(args.out + ".json").write_text(json.dumps(report, indent=1) + "\n")
        Path(args.out + ".md").write_text(render(report) + "\n")
        return 0

    ids = emb.token_ids(texts)
    weightings = {
        "mean": None,
        "zipf": zipf_weights(vocab),
        "idf": idf_weights(ids, vocab),
        "sif-1e-3": sif_weights(ids, vocab, 1e-3),
    }
    mats = {}
    for name, w in weightings.items():
        emb.weights = w
        mats[name] = emb.embed(texts)
    w_product = rrf_weight(K_RRF, W_LEX)
    full = np.stack([full_by_hash[h] for h in _hashes])

    from autodoc.config import Settings
    from autodoc.service import Service

    svc = Service(Settings.from_env(store=built.store))
    results: dict[str, dict[str, Any]] = {}
    try:
        for split in ("train", "test"):
            qs = col.split_queries(split)
            qrels = col.qrels[split]
            lex: dict[str, list[str]] = {}
            for qid, text in qs:
                ans = svc.search(WORKSPACE, text, {"stages": ["lexical"], "limit": 100})
                seen: list[str] = []
                for h in ans["hits"]:
                    d = path_doc(h["path"])
                    if d not in seen:
                        seen.append(d)
                lex[qid] = seen
            qtexts = [t for _, t in qs]
            qfull = provider.embed(qtexts)
            runs: dict[str, dict[str, list[str]]] = {"lexical": lex}
            runs["full semantic"] = {q: doc_run(qfull[i], full, chunk_docs) for i, (q, _) in enumerate(qs)}
            runs["full hybrid"] = {q: rrf(lex[q], runs["full semantic"][q]) for q, _ in qs}
            for name, w in weightings.items():
                emb.weights = w
                qv = emb.embed(qtexts)
                runs[f"instant {name} semantic"] = {
                    q: doc_run(qv[i], mats[name], chunk_docs) for i, (q, _) in enumerate(qs)
                }
                runs[f"instant {name} hybrid"] = {q: rrf(lex[q], runs[f"instant {name} semantic"][q]) for q, _ in qs}
                runs[f"instant {name} hybrid, product weight {w_product}"] = {
                    q: rrf(lex[q], runs[f"instant {name} semantic"][q], w_sem=w_product) for q, _ in qs
                }
                if name in ("mean", "zipf", "idf"):
                    for w_sem in SWEEP:
                        runs[f"instant {name} hybrid, semantic weight {w_sem}"] = {
                            q: rrf(lex[q], runs[f"instant {name} semantic"][q], w_sem=w_sem) for q, _ in qs
                        }
            results[split] = {k: {m: round(v, 4) for m, v in E.evaluate(r, qrels).items()} for k, r in runs.items()}
            results[split]["_queries"] = len(qs)
    finally:
        svc.close()
    train = results["train"]
    # the product can only use a weighting that needs no corpus statistics (mean, zipf): chosen among those
    chosen = max(("mean", "zipf"), key=lambda n: train[f"instant {n} semantic"]["nDCG@10"])
    sweep = {
        n: max(
            [W_SEM, *SWEEP],
            key=lambda w: train[f"instant {n} hybrid" + ("" if w == W_SEM else f", semantic weight {w}")]["nDCG@10"],
        )
        for n in ("mean", "zipf", "idf")
    }
    report = {
        "commit": git_commit(),
        "command": command_line(),
        "machine": machine_note(),
        "distillation": dist,
        "first_answer": first,
        "first_answer_10k": first_10k,
        "speed": sp,
        "instant_corpus_embed_s": round(t_all, 2),
        "chunks": len(texts),
        "chosen_weighting_on_train": chosen,
        "product_weighting": WEIGHTING,
        "chosen_semantic_weight_on_train": sweep,
        "product_rrf_weight": w_product,
        "guard_top": GUARD_TOP,
        "results": results,
        "fusion": {"method": "rrf", "k": K_RRF, "lexical": W_LEX, "semantic": W_SEM, "level": "document"},
        "seconds": round(time.perf_counter() - t_start, 1),
    }
    text = json.dumps(report, indent=1)
    if args.out == "-":
        print(text)
        return 0
    Path(args.out + ".json").write_text(text + "\n")
    Path(args.out + ".md").write_text(render(report) + "\n")
    log(f"wrote {args.out}.md/.json")
    return 0


def render(r: dict[str, Any]) -> str:
    d, s, res = r["distillation"], r["speed"], r["results"]
    rows = [k for k in res["test"] if not k.startswith("_")]
    lines = [
        "# Instant tier: a static token table distilled from the bundled model",
        "",
        f"`{r['command']}` · commit {r['commit']} · load average {r['machine']['load']} on {r['machine']['nproc']} cores "
        "(the machine was shared by other jobs: read ratios, which were measured in one process, over absolutes).",
        *(
            [
                f"Times (first answers, speed) measured again by `{r['timings_command']}` at commit {r['timings_commit']}; "
                "the quality figures are the run above's."
            ]
            if r.get("timings_commit")
            else []
        ),
        "",
        "## Distillation",
        f"- every one of {d['tokens']:,} vocabulary tokens as `[CLS] tok [SEP]`, batches of 512, mean of the 3 outputs"
        + (
            f" (distilled {d.get('when', 'earlier')} by this command with `--distil`, load {d['load']}; this run read the cached table)"
            if d.get("from_cache")
            else f" (load after {d['load']})"
        )
        + ":",
        f"  {d['seconds']} s ({d['tokens_per_s']:,} tokens/s), table {d['shape'][0]:,} × {d['shape'][1]} {d['dtype']} "
        f"= {d['bytes'] / 1e6:.1f} MB; a slice distilled again is byte-identical: {d['deterministic_slice']}.",
        "",
        "## Time to the first semantic answer (product path)",
        f"A copy of the cached SciFact store ({r['first_answer']['chunks']:,} chunks, indexed) with every vector deleted, "
        "the table already built: the embed queue's steps (`EmbedQueue.step`: the instant tier's batches of up to 4,096 "
        "texts, each a step of its own, until every chunk has one; then the model's batches of 16) until a semantic-only search answers with `semantic_tier: instant`: "
        f"**{r['first_answer']['seconds']} s** (load {r['first_answer']['load']}; the model had "
        f"{r['first_answer']['model_vectors_by_then']} vectors by then). Steps: "
        + ", ".join(f"{x['s']} s → {x['tier']} ({x['hits']} hits)" for x in r["first_answer"]["steps"])
        + ".",
        "Not included: indexing (131 s for SciFact's 5,183 files when its store was first built, under load) and, "
        "once per model per machine, the distillation above.",
        *(
            [
                f"The speed benchmark's 10k store (bench/speed.py: {r['first_answer_10k']['chunks']:,} chunks of SciFact "
                f"text in 1,000 files, indexed in {r['first_answer_10k']['index_seconds']} s when built), the same way: "
                f"**{r['first_answer_10k']['seconds']} s** to the first answer with `semantic_tier: instant` "
                f"(load {r['first_answer_10k']['load']}); with its indexing, a fresh 10k-chunk knowledge base answers by "
                f"meaning after ≈ {r['first_answer_10k']['seconds'] + r['first_answer_10k']['index_seconds']:.0f} s "
                "(the issue's target: ≤ 60 s)."
            ]
            if r.get("first_answer_10k")
            else []
        ),
        "",
        "## Embedding speed (chunks/s, SciFact chunk texts, best of 2 interleaved rounds)",
        "| path | chunks/s |",
        "|---|---:|",
        f"| instant tier (tokenise + numpy, an empty word cache), {s['texts']['instant']} texts | {s['instant']:,} |",
        f"| full model, product's OnnxProvider.embed, {s['texts']['transformer']} texts | {s['full_provider']} |",
        f"| full model, raw onnxruntime (batches of 32 in input order, mean pool) | {s['raw_onnxruntime']} |",
        "",
        f"Instant / full: **{s['instant_over_full']}×**. Full provider / raw onnxruntime: {s['full_over_raw']} "
        f"(load {s['load']}). All {r['chunks']:,} SciFact chunks embed with the instant tier in "
        f"{r['instant_corpus_embed_s']} s in steps of 4,096 from an empty word cache "
        f"(**{r['chunks'] / r['instant_corpus_embed_s']:,.0f} chunks/s**; numpy only, no store).",
        "Before the word cache (commit 6293962, this command, load ≈ 6): 680.8 chunks/s on the 1,000 texts, all "
        "7,422 in 14.19 s, the first semantic answer on SciFact after 19.1 s.",
        "The tokenizer is the tier's cost: each distinct whitespace-separated word is tokenised once and "
        "remembered (embed/static.py; the ids equal tokenising whole texts), so later batches pay only for new words.",
        *(
            [
                f"Measured apart once more (a new embedder), on those 1,000 texts tokenising took {s['instant_split_s']['tokenise']} s and "
                f"the numpy sums {s['instant_split_s']['numpy']} s; the transformer texts each fit one 256-token window, so "
                "the provider and the raw loop do the same work."
            ]
            if "instant_split_s" in s
            else []
        ),
        "",
        "## SciFact quality (nDCG@10; semantic = exact cosine over every chunk, document = best chunk;",
        f"hybrid = the product's lexical leg + RRF k {r['fusion']['k']}, lexical {r['fusion']['lexical']} / semantic "
        f"{r['fusion']['semantic']}, over document ranks)",
        "",
        f"| configuration | train nDCG@10 ({res['train']['_queries']} q) | test nDCG@10 ({res['test']['_queries']} q) | test R@100 |",
        "|---|---:|---:|---:|",
    ]
    for k in rows:
        lines.append(
            f"| {k} | {res['train'][k]['nDCG@10']:.4f} | {res['test'][k]['nDCG@10']:.4f} | {res['test'][k]['R@100']:.4f} |"
        )
    c = r["chosen_weighting_on_train"]
    wp = r.get("product_rrf_weight")
    pk = f"instant {c} hybrid, product weight {wp}"
    lines += [
        "",
        f"Chosen on train among the weightings that need no corpus statistics (mean, zipf): **{c}** "
        f"(the product's: {r.get('product_weighting')}). Test: instant semantic "
        f"{res['test'][f'instant {c} semantic']['nDCG@10']:.4f} vs full {res['test']['full semantic']['nDCG@10']:.4f}; "
        f"instant hybrid at the product's weight {res['test'][pk]['nDCG@10']:.4f} vs full hybrid "
        f"{res['test']['full hybrid']['nDCG@10']:.4f} vs lexical alone {res['test']['lexical']['nDCG@10']:.4f}.",
        "",
        "zipf: an IDF read off the vocabulary's order — bert-base-uncased's WordPiece vocabulary lists word pieces "
        "by frequency rank r in its training corpus, so by Zipf's law a token's IDF is log r plus a constant; the "
        "weight is log(1 + r/10) (lone characters as the commonest word, `##x` pieces as rank 5,000; the scale and "
        "those ranks chosen on train). It needs nothing from the workspace, so chunks and later queries share it. "
        "IDF and SIF are computed over the embedded corpus's own tokens (all SciFact chunks): the product would have "
        "to keep document frequencies with each workspace, identical for its chunks and every later query.",
        "",
        f"The instant leg's weight in the hybrid (RRF k {r['fusion']['k']}, lexical {r['fusion']['lexical']}): the "
        f"product's is {wp} (embed/instant.py rrf_weight: too small to reorder the lexical leg's first "
        f"{r.get('guard_top', 10)} documents or to put one of its own among them). Best on train, the product's "
        "weight among the swept ones: "
        + "; ".join(
            f"{n}: {best.split(', ')[-1] if ', ' in best else f'weight {W_SEM}'} (train {res['train'][best]['nDCG@10']:.4f} → test {res['test'][best]['nDCG@10']:.4f}, "
            f"test R@100 {res['test'][best]['R@100']:.4f})"
            for n in r["chosen_semantic_weight_on_train"]
            for best in [
                max(
                    (k for k in res["train"] if k.startswith(f"instant {n} hybrid")),
                    key=lambda k: (res["train"][k]["nDCG@10"], "product" in k),
                )
            ]
        )
        + f" (lexical alone: train {res['train']['lexical']['nDCG@10']:.4f}, test {res['test']['lexical']['nDCG@10']:.4f}, "
        f"test R@100 {res['test']['lexical']['R@100']:.4f}: the tier adds only documents the lexical leg missed).",
        *(
            [
                "On train no swept weight beats the lexical leg alone: on SciFact the instant tier adds nothing to a "
                "hybrid at any weight tried, so the product's weight keeps the hybrid's first ten exactly the lexical "
                "leg's whenever it finds ten; the tier's use is semantic-only searches and queries whose words match "
                "little."
            ]
            if all(
                res["train"][k]["nDCG@10"] <= res["train"]["lexical"]["nDCG@10"]
                for k in res["train"]
                if k.startswith("instant") and "hybrid" in k
            )
            else []
        ),
    ]
    return "\n".join(lines)
