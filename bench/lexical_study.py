"""Why does the lexical leg score what it scores? Alternatives measured on the
same store, with the product's own parser and MATCH builder, by raw SQL (no
product code is changed), and a reference BM25 over the same tokens.

Each variant ranks chunks, documents take their best chunk, top 100 documents
are evaluated. Both splits are reported: choose on train, read test.

Variants (FTS5 on the product's store, table chunks_fts: title, breadcrumb,
meta, body; the body of a document's first chunk also holds its '# title'
line, so the title is indexed three times):

* product-want100 / product-want10: the product's run_lexical as is (AND, and
  relaxed to OR when AND found fewer than `want` chunks; top 50).
* and-only: strict AND of the words, top 100.
* or-3211 / or-1111 / or-0001: OR of the product's terms (its stopword list
  dropped) with bm25 column weights title/breadcrumb/meta/body.
* tokens-or-*: the query cut into FTS5 tokens (so 'UCP1-dependent' is two
  words, not a phrase), Lucene's English stopwords dropped, OR.
* ref-bm25-*: a reference BM25 over documents (title + text as one field,
  not chunked) with the FTS5 porter tokenizer: Lucene idf, (k1, b) as named;
  FTS5's bm25() fixes k1 = 1.2 and b = 0.75.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from .beir import Collection, path_doc
from .evaluate import evaluate

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
        from autodoc.search.lexical import run_lexical
        from autodoc.store.filters import build_filter

        filt = build_filter(self.ws_id, facets=[], opt_facets={}, tags=(), paths=(), include_abstract=True)
        hits = run_lexical(self.db, self.ws_id, self._terms(text), filt, want=want).hits
        return [(h.chunk_id, h.score) for h in hits]

    def fts(self, match: str | None, weights=(3.0, 2.0, 2.0, 1.0), limit: int = 300) -> list[tuple[int, float]]:
        if not match:
            return []
        return self.db.execute(self._sql(weights, limit), (match, self.ws_id)).fetchall()

    def product_match(self, text: str, mode: str) -> str | None:
        from autodoc.search.fts import build_match

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
