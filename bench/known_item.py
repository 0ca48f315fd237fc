"""Known-item retrieval on the five real Markdown corpora (issue 18).

    python -m bench.known_item --build-only      # index + embed every corpus (cached), no search
    python -m bench.known_item                   # build if needed, then run every question, write docs/benchmarks/known_items.{md,json}
    python -m bench.known_item --out -           # print only

Each corpus folder of ``$AUTODOC_CORPORA`` (default ``../shared/data/corpora``)
is its own workspace in its own store under ``<bench cache>/known/`` (outside
the repository); the store is reused when it exists, and the product's
incremental ``Service.index`` brings it in line with the disk (unchanged files
are skipped). Every chunk is embedded with the default provider (the bundled
ONNX MiniLM) before any question runs.

Questions: ``bench/known_items/questions.jsonl`` (frozen; see its README).
Each runs through ``Service.search`` with ``limit`` 30 and stages
["lexical"], ["semantic"], ["lexical", "semantic"] (the default hybrid, with
the workspace's default fusion). A question is a hit at k when one of its
target paths is among the first k DISTINCT documents of the answer (hits in
answer order, a document counted at its first hit). MRR is 1/rank of the first
target document within those distinct documents (0 when absent from the 30
hits). Only public Service methods are used.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .common import (
    DEFAULT_DATA,
    REPO,
    RESULTS,
    Progress,
    cache_root,
    git_commit,
    json_digest,
    log,
    machine_note,
    tree_digest,
)

CORPORA = ["foam-docs", "simpler-grants-adr", "jekyll", "opentelemetry-docs", "swift-evolution"]
QUESTIONS = REPO / "bench" / "known_items" / "questions.jsonl"
STYLES = ["keywords", "sentence", "agent"]
TYPO_STYLES = ["typo", "filename"]  # typos.jsonl's (issue 35)
LIMIT = 30
KS = (1, 3, 10)
LEGS = {
    "lexical": ["lexical"],
    "semantic": ["semantic"],
    "hybrid": ["lexical", "semantic"],
}
BOOT = 10000


# ---------------------------------------------------------------- questions


def load_questions(path: Path = QUESTIONS) -> list[dict[str, Any]]:
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        q = json.loads(line)
        targets = q.get("targets") or [q["target"]]
        q["targets"] = list(targets)
        for key in ("id", "corpus", "style", "query"):
            if key not in q:
                raise ValueError(f"{path}:{n}: missing {key!r}")
        if q["style"] not in STYLES + TYPO_STYLES:
            raise ValueError(f"{path}:{n}: style {q['style']!r}")
        out.append(q)
    ids = Counter(q["id"] for q in out)
    dup = [i for i, c in ids.items() if c > 1]
    if dup:
        raise ValueError(f"duplicate question ids: {dup}")
    return out


def check_targets(questions: list[dict[str, Any]], corpora: Path) -> list[str]:
    """Target paths that do not exist on disk (a typo would read as a miss)."""
    bad = []
    for q in questions:
        for t in q["targets"]:
            if not (corpora / q["corpus"] / t).is_file():
                bad.append(f"{q['id']}: {q['corpus']}/{t}")
    return bad


# ---------------------------------------------------------------- metrics (pure)


def distinct_docs(paths: Iterable[str]) -> list[str]:
    """Documents in answer order, each at its first hit."""
    seen: set[str] = set()
    out = []
    for p in paths:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def target_rank(docs: list[str], targets: Iterable[str]) -> int | None:
    """1-based rank of the first target among the distinct documents, None when absent."""
    ts = set(targets)
    for i, d in enumerate(docs, 1):
        if d in ts:
            return i
    return None


def metrics(ranks: list[int | None], ks: tuple[int, ...] = KS) -> dict[str, float]:
    n = len(ranks)
    if n == 0:
        return {**{f"R@{k}": float("nan") for k in ks}, "MRR": float("nan"), "n": 0}
    out: dict[str, float] = {f"R@{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in ks}
    out["MRR"] = sum(1.0 / r for r in ranks if r is not None) / n
    out["n"] = n
    return out


def bootstrap_diff(
    a: list[int | None], b: list[int | None], k: int = 3, n: int = BOOT, seed: int = 18
) -> dict[str, float]:
    """Paired bootstrap of mean(hit@k of a) − mean(hit@k of b) over questions: point, 2.5 %, 97.5 %."""
    ha = [1.0 if r is not None and r <= k else 0.0 for r in a]
    hb = [1.0 if r is not None and r <= k else 0.0 for r in b]
    d = [x - y for x, y in zip(ha, hb)]
    m = len(d)
    if m == 0:
        return {"diff": float("nan"), "lo": float("nan"), "hi": float("nan"), "n": 0}
    rng = random.Random(seed)
    means = []
    for _ in range(n):
        s = 0.0
        for _ in range(m):
            s += d[rng.randrange(m)]
        means.append(s / m)
    means.sort()
    return {"diff": sum(d) / m, "lo": means[int(0.025 * n)], "hi": means[min(n - 1, int(0.975 * n))], "n": m}


# ---------------------------------------------------------------- stores


def corpus_key(corpora: Path, corpus: str) -> dict[str, Any]:
    from autodoc.config import WorkspaceConfig
    from autodoc.embed.onnx import OnnxProvider

    p = OnnxProvider()
    manifest = corpora / "manifests" / f"{corpus}.tsv"
    return {
        "corpus": corpus,
        "manifest": json_digest(manifest.read_text()) if manifest.exists() else None,
        "model": p.name,
        "model_fp": p.fingerprint,
        "section_tokens": WorkspaceConfig().section_tokens,
    }


def store_dir(cache: Path, corpora: Path, corpus: str) -> tuple[Path, dict[str, Any]]:
    key = corpus_key(corpora, corpus)
    return cache / f"{corpus}-{json_digest(key)}", key


def build(corpora: Path, corpus: str, cache: Path) -> dict[str, Any]:
    """Index + embed one corpus into its cached store. Returns what was done."""
    from autodoc.config import Settings, WorkspaceConfig
    from autodoc.service import Service

    sdir, key = store_dir(cache, corpora, corpus)
    sdir.mkdir(parents=True, exist_ok=True)
    store = sdir / "autodoc.db"
    meta_path = sdir / "bench-meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    ingest_digest = tree_digest(REPO / "daemon" / "autodoc" / "ingest")
    cached = store.exists()
    svc = Service(Settings.from_env(store=store))
    rep: dict[str, Any] = {"corpus": corpus, "store": str(store), "cached": cached, "key": key}
    try:
        if corpus not in svc.workspaces():
            svc.workspace_add(corpus, str(corpora / corpus), {"embedding": {"provider": "onnx"}})
        else:  # measure the product's current default fusion, as a new workspace would have it
            svc.workspace_configure(corpus, {"fusion": WorkspaceConfig().fusion})
        # re-chunk everything only when the chunker changed since the last completed build
        full = cached and "ingest_digest" in meta and meta["ingest_digest"] != ingest_digest
        t0 = time.monotonic()
        idx = svc.index(corpus, full=full, progress=Progress(f"index {corpus}", 30))
        rep["index"] = {k: idx.get(k) for k in ("scanned", "added", "modified", "deleted", "unchanged", "chunks")}
        rep["index"]["full"] = full
        rep["index"]["skipped"] = len(idx.get("skipped") or [])
        rep["index_seconds"] = round(time.monotonic() - t0, 2)
        t0 = time.monotonic()
        emb = svc.embed_pending(corpus, Progress(f"embed {corpus}", 30))
        rep["embed"] = emb
        rep["embed_seconds"] = round(time.monotonic() - t0, 2)
        st = svc.workspace_status(corpus)
        rep["documents"] = st["files"]["indexed"]
        rep["chunks"] = st["chunks"]
        rep["embedding_state"] = st["embedding"]["state"]
        if st["embedding"]["state"] != "ready":
            raise RuntimeError(f"{corpus}: embedding not ready after embed_pending: {st['embedding']}")
    finally:
        svc.close()
    if rep["embed"].get("embedded") or rep["index"].get("added"):
        meta.setdefault("builds", []).append(
            {
                "index_seconds": rep["index_seconds"],
                "added": rep["index"].get("added"),
                "chunks": rep["chunks"],
                "embed_seconds": rep["embed_seconds"],
                "embedded": rep["embed"].get("embedded"),
                "load": [round(x, 2) for x in os.getloadavg()],
                "at": time.time(),
            }
        )
    rep["history"] = meta.get("builds", [])
    meta.update({"key": key, "ingest_digest": ingest_digest, "built": time.time()})
    meta_path.write_text(json.dumps(meta, indent=1))
    log(
        f"{corpus}: {rep['documents']} documents, {rep['chunks']} chunks; index {rep['index_seconds']} s, "
        f"embed {rep['embed_seconds']} s ({rep['embed'].get('embedded')} embedded)"
    )
    return rep


# ---------------------------------------------------------------- running the questions


def _hit_brief(h: dict[str, Any]) -> dict[str, Any]:
    return {
        "path": h.get("path"),
        "breadcrumb": h.get("breadcrumb"),
        "via": h.get("via"),
        "ranks": h.get("ranks"),
        "lines": [h.get("line_start"), h.get("line_end")],
        "bytes": (h.get("byte_end") or 0) - (h.get("byte_start") or 0),
    }


def run_corpus(
    store: Path, corpus: str, questions: list[dict[str, Any]], legs: dict[str, list[str]] | None = None
) -> dict[str, dict[str, Any]]:
    """Every question of one corpus through Service.search, once per leg configuration."""
    from autodoc.config import Settings
    from autodoc.service import Service

    svc = Service(Settings.from_env(store=store), writer=False)
    out: dict[str, dict[str, Any]] = {}
    try:
        for q in questions:
            per: dict[str, Any] = {}
            for leg, stages in (legs or LEGS).items():
                t0 = time.perf_counter()
                try:
                    ans = svc.search(corpus, q["query"], {"limit": LIMIT, "stages": stages})
                    err = None
                except Exception as e:  # an error is an answer too: no hits, and said
                    ans, err = {"hits": []}, f"{type(e).__name__}: {e}"
                ms = (time.perf_counter() - t0) * 1000
                hits = ans.get("hits") or []
                docs = distinct_docs(h["path"] for h in hits)
                r = target_rank(docs, q["targets"])
                first10 = hits[:10]
                per[leg] = {
                    "rank": r,
                    "hits": len(hits),
                    "distinct_docs": len(docs),
                    "docs_in_first_10_hits": len(distinct_docs(h["path"] for h in first10)),
                    "ms": round(ms, 2),
                    "lexical_match": ans.get("lexical_match"),
                    "semantic": ans.get("semantic"),
                    "performed": (ans.get("stages") or {}).get("performed"),
                    "error": err,
                    "top_docs": docs[:10],
                    # the first 10 hits, compactly: path, breadcrumb, via, lexical rank, semantic rank
                    # (0-based; None = not found by that leg), bytes
                    "first_hits": [
                        [
                            h.get("path"),
                            h.get("breadcrumb"),
                            "+".join(h.get("via") or []),
                            (h.get("ranks") or {}).get("lexical"),
                            (h.get("ranks") or {}).get("semantic"),
                            (h.get("byte_end") or 0) - (h.get("byte_start") or 0),
                        ]
                        for h in hits[:10]
                    ],
                    # every hit: path, via, per-leg ranks (used by the summary; not written to the JSON)
                    "all_hits": [
                        [
                            h.get("path"),
                            "+".join(h.get("via") or []),
                            (h.get("ranks") or {}).get("lexical"),
                            (h.get("ranks") or {}).get("semantic"),
                        ]
                        for h in hits
                    ],
                    "target_hit": next((_hit_brief(h) for h in hits if h["path"] in q["targets"]), None),
                }
            out[q["id"]] = per
    finally:
        svc.close()
    return out


# ---------------------------------------------------------------- summaries


def summarise(questions: list[dict[str, Any]], runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    def ranks(leg: str, sel: Iterable[dict[str, Any]]) -> list[int | None]:
        return [runs[q["id"]][leg]["rank"] for q in sel]

    groups: dict[str, list[dict[str, Any]]] = {"all": questions}
    for s in STYLES + TYPO_STYLES:
        groups[f"style:{s}"] = [q for q in questions if q["style"] == s]
    for c in CORPORA:
        groups[f"corpus:{c}"] = [q for q in questions if q["corpus"] == c]
    table = {g: {leg: metrics(ranks(leg, sel)) for leg in LEGS} for g, sel in groups.items() if sel}

    # the best single leg, chosen on all questions by R@3 (then MRR)
    best = max(("lexical", "semantic"), key=lambda l: (table["all"][l]["R@3"], table["all"][l]["MRR"]))
    boot = {}
    for g, sel in groups.items():
        if not sel:
            continue
        # the better single leg of this set (by R@3, then MRR): chosen after the fact, so the
        # difference is the hybrid's least favourable reading
        gbest = max(("lexical", "semantic"), key=lambda l: (table[g][l]["R@3"], table[g][l]["MRR"]))
        boot[g] = {
            "best_single_leg": gbest,
            "hybrid-best": bootstrap_diff(ranks("hybrid", sel), ranks(gbest, sel)),
            "hybrid-lexical": bootstrap_diff(ranks("hybrid", sel), ranks("lexical", sel)),
            "hybrid-semantic": bootstrap_diff(ranks("hybrid", sel), ranks("semantic", sel)),
        }

    inf = 10**6
    worse = []
    for q in questions:
        r = {leg: runs[q["id"]][leg]["rank"] for leg in LEGS}
        single = min(r["lexical"] or inf, r["semantic"] or inf)
        if single < inf and (r["hybrid"] or inf) > single:
            # what stands in front of the target in the hybrid answer: each document at its first hit,
            # by which legs found that hit
            above: Counter = Counter()
            seen: set[str] = set()
            target_via = None
            for path, via, _lr, _sr in runs[q["id"]]["hybrid"]["all_hits"]:
                if path in q["targets"]:
                    target_via = via
                    break
                if path in seen:
                    continue
                seen.add(path)
                above[via] += 1
            worse.append(
                {
                    "id": q["id"],
                    "corpus": q["corpus"],
                    "style": q["style"],
                    "query": q["query"],
                    "ranks": r,
                    "docs_above_target_by_via": dict(above),
                    "target_hit_via": target_via,
                }
            )
    # per question: the hybrid's rank against the better of the two legs' ranks
    wlt = Counter()
    for q in questions:
        r = {leg: runs[q["id"]][leg]["rank"] or inf for leg in LEGS}
        single = min(r["lexical"], r["semantic"])
        wlt[
            "better"
            if r["hybrid"] < single
            else "worse"
            if r["hybrid"] > single
            else ("equal (both missing)" if single == inf else "equal")
        ] += 1
    short = {leg: [q["id"] for q in questions if runs[q["id"]][leg]["distinct_docs"] < 10] for leg in LEGS}
    docs10 = {
        leg: round(sum(runs[q["id"]][leg]["docs_in_first_10_hits"] for q in questions) / len(questions), 2)
        for leg in LEGS
    }
    relaxed = {leg: dict(Counter(str(runs[q["id"]][leg]["lexical_match"]) for q in questions)) for leg in LEGS}
    sem_state = {leg: dict(Counter(str(runs[q["id"]][leg]["semantic"]) for q in questions)) for leg in LEGS}
    errors = {
        leg: {q["id"]: runs[q["id"]][leg]["error"] for q in questions if runs[q["id"]][leg]["error"]} for leg in LEGS
    }
    lat = {leg: sorted(runs[q["id"]][leg]["ms"] for q in questions) for leg in LEGS}
    p50 = {leg: round(v[len(v) // 2], 1) for leg, v in lat.items()}

    # ja/zh mirrors of the target (opentelemetry-docs): same path under content/ja or content/zh
    mirrors = {}
    for leg in LEGS:
        above = 0
        in_top10 = 0
        n = 0
        for q in questions:
            if q["corpus"] != "opentelemetry-docs":
                continue
            n += 1
            t = q["targets"][0]
            mir = {t.replace("content/en/", f"content/{lang}/", 1) for lang in ("ja", "zh")}
            docs = runs[q["id"]][leg]["top_docs"]
            cjk = [d for d in docs if d.startswith(("content/ja/", "content/zh/"))]
            in_top10 += bool(cjk)
            rt = runs[q["id"]][leg]["rank"] or inf
            if any((i + 1) < rt for i, d in enumerate(docs) if d in mir):
                above += 1
        mirrors[leg] = {"questions": n, "any_ja_zh_doc_in_top10": in_top10, "target_mirror_above_target": above}
    return {
        "table": table,
        "best_single_leg": best,
        "hybrid_vs_better_leg_per_question": dict(wlt),
        "bootstrap": boot,
        "hybrid_worse": worse,
        "fewer_than_10_docs": short,
        "mean_docs_in_first_10_hits": docs10,
        "lexical_match": relaxed,
        "semantic_state": sem_state,
        "errors": errors,
        "p50_ms": p50,
        "mirrors": mirrors,
    }


# ---------------------------------------------------------------- report


def _f(x: float) -> str:
    return f"{x:.3f}"


def _table(rows: dict[str, dict[str, dict[str, float]]], keys: list[str]) -> list[str]:
    out = ["| set | n | leg | R@1 | R@3 | R@10 | MRR |", "|---|---:|---|---:|---:|---:|---:|"]
    for g in keys:
        if g not in rows:
            continue
        for leg in LEGS:
            m = rows[g][leg]
            out.append(
                f"| {g.split(':', 1)[-1]} | {m['n']} | {leg} | {_f(m['R@1'])} | {_f(m['R@3'])} | "
                f"{_f(m['R@10'])} | {_f(m['MRR'])} |"
            )
    return out


_FROZEN = "bench/known_items/"  # the frozen sets: questions.jsonl, typos.jsonl


def _questions_file(doc: dict[str, Any]) -> str:
    """The questions file the run read (`--questions`), named in the repository when it is one of
    its sets (the run may have been in another checkout)."""
    path = Path(doc.get("questions_file") or QUESTIONS).resolve()
    if path.is_relative_to(REPO):
        return path.relative_to(REPO).as_posix()
    cut = path.as_posix().rfind("/" + _FROZEN)
    return path.as_posix()[cut + 1 :] if cut >= 0 else str(path)


def render(doc: dict[str, Any]) -> str:
    s = doc["summary"]
    t = s["table"]
    best = s["best_single_leg"]
    L = [
        "# Known-item retrieval on the real corpora (issue 18)",
        "",
        "Generated by `bench/known_item.py`; do not edit by hand — re-run the command below.",
        "",
        f"- Command: `{doc['command']}`",
        f"- Commit: `{doc['commit']}` · date {doc['date']} · product code from `{doc['product']}`",
        f"- Machine: {doc['machine']['nproc']} cores ({doc['machine']['cpu']}), load average "
        f"{doc['machine']['load']} at the start; Python {doc['machine']['python']}",
        f"- Questions: `{_questions_file(doc)}` ({'frozen; ' if _questions_file(doc).startswith(_FROZEN) else ''}"
        f"{len(doc['questions'])} questions, sha256 `{doc['questions_digest']}`), see bench/known_items/README.md.",
        f'- Searches: in-process `Service.search(workspace, query, {{"limit": {LIMIT}, "stages": …}})` with '
        'stages `["lexical"]`, `["semantic"]`, `["lexical", "semantic"]` (the default hybrid and '
        "the workspace's default fusion, "
        f"`{json.dumps(doc['fusion'])}`, no ranker). A question is a hit at k when a target is among "
        "the first k DISTINCT documents of the answer (each document at its first hit); MRR is "
        f"1/rank among those documents, 0 when no target is in the {LIMIT} hits.",
        *(
            [
                f"- **Not run here**: {sum(doc['questions_not_run'].values())} questions of "
                f"{', '.join(f'{c} ({n})' for c, n in doc['questions_not_run'].items())} — only "
                f"{', '.join(doc['corpora_run'])} were run (`--only`); every figure below is over the "
                f"{len(doc['questions'])} questions of those corpora."
            ]
            if doc.get("questions_not_run")
            else []
        ),
        f"- Time: build {doc['build_seconds']:.0f} s (cached stores are only brought up to date), "
        f"questions {doc['search_seconds']:.0f} s; total {doc['total_seconds']:.0f} s.",
        "",
    ]
    L += [
        "## Stores",
        "",
        "| corpus | documents | chunks | embedding | store | first build: index s / embed s (chunks) |",
        "|---|---:|---:|---|---|---|",
    ]
    for c, b in doc["builds"].items():
        hist = b.get("history") or []
        first = hist[0] if hist else {}
        fb = f"{first.get('index_seconds')} / {first.get('embed_seconds')} ({first.get('embedded')})" if first else "—"
        L.append(f"| {c} | {b['documents']} | {b['chunks']} | {b['embedding_state']} | `{b['store']}` | {fb} |")
    L += [
        "",
        "Each corpus folder is its own workspace in its own store (the ja/zh trees of "
        "opentelemetry-docs are indexed with the English pages and act as distractors).",
        "",
    ]

    L += [
        "## Headline (all questions)",
        "",
        "| leg | R@1 | R@3 | R@10 | MRR | p50 ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for leg in LEGS:
        m = t["all"][leg]
        L.append(f"| {leg} | {_f(m['R@1'])} | {_f(m['R@3'])} | {_f(m['R@10'])} | {_f(m['MRR'])} | {s['p50_ms'][leg]} |")
    L += [
        "",
        f"Best single leg (by R@3, then MRR, on all questions): **{best}**. Paired bootstrap ({BOOT} "
        "resamples of the questions, 95 % percentile interval) of the difference in R@3; the last "
        "column compares with the better single leg of each set, chosen after the fact:",
        "",
    ]
    L += [
        "| set | n | hybrid − lexical | hybrid − semantic | better single leg | hybrid − better leg |",
        "|---|---:|---|---|---|---|",
    ]
    for g, v in s["bootstrap"].items():
        cells = []
        for key in ("hybrid-lexical", "hybrid-semantic"):
            d = v[key]
            cells.append(f"{d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]")
        d = v["hybrid-best"]
        cells += [v["best_single_leg"], f"{d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"]
        L.append(f"| {g.split(':', 1)[-1]} | {d['n']} | " + " | ".join(cells) + " |")
    L += ["", "## By style", ""] + _table(t, [f"style:{x}" for x in STYLES + TYPO_STYLES])
    L += ["", "## By corpus", ""] + _table(t, [f"corpus:{x}" for x in CORPORA])

    L += [
        "",
        "## Where the hybrid ranked the target worse than the better single leg",
        "",
        f"Per question, the hybrid's rank against the better of the two legs' ranks: "
        f"{s['hybrid_vs_better_leg_per_question']}.",
        "",
        f"{len(s['hybrid_worse'])} of {len(doc['questions'])} questions (ranks are distinct-document "
        f"ranks within {LIMIT} hits; — = not found).",
        "",
        "Last two columns: how the target's first hybrid hit was found, and the documents in front of "
        "it in the hybrid answer by which legs found their first hit (lexical / semantic / both).",
        "",
        "| id | style | lexical | semantic | hybrid | query | target via | in front: lex / sem / both |",
        "|---|---|---:|---:|---:|---|---|---|",
    ]
    for w in s["hybrid_worse"]:
        r = w["ranks"]
        a = w["docs_above_target_by_via"]
        L.append(
            f"| {w['id']} | {w['style']} | {r['lexical'] or '—'} | {r['semantic'] or '—'} | "
            f"{r['hybrid'] or '—'} | {w['query'][:80]}{'…' if len(w['query']) > 80 else ''} | "
            f"{w['target_hit_via'] or 'not in the 30 hits'} | {a.get('lexical', 0)} / {a.get('semantic', 0)} / "
            f"{a.get('lexical+semantic', 0)} |"
        )
    L += ["", "## What the answers said", ""]
    for leg in LEGS:
        L.append(
            f"- {leg}: lexical_match {s['lexical_match'][leg]}; semantic {s['semantic_state'][leg]}; "
            f"mean distinct documents in the first 10 hits {s['mean_docs_in_first_10_hits'][leg]}; "
            f"questions with fewer than 10 distinct documents in {LIMIT} hits: "
            f"{len(s['fewer_than_10_docs'][leg])}"
            + (f" ({', '.join(s['fewer_than_10_docs'][leg])})" if s["fewer_than_10_docs"][leg] else "")
            + (f"; errors {s['errors'][leg]}" if s["errors"][leg] else "")
        )
    L += ["", "ja/zh mirrors (opentelemetry-docs questions): "]
    for leg in LEGS:
        m = s["mirrors"][leg]
        L.append(
            f"- {leg}: {m['any_ja_zh_doc_in_top10']} of {m['questions']} answers have a ja/zh page among "
            f"the first 10 documents; the target's own ja/zh mirror ranks above the target in "
            f"{m['target_mirror_above_target']}."
        )
    if doc.get("observations"):
        L += ["", "## Observations (written after reading the failures; not generated)", ""] + doc["observations"]
    L += ["", "Per-question ranks, the first hits of every leg and the target's own hit are in `known_items.json`."]
    return "\n".join(L) + "\n"


def _dump(doc: dict[str, Any]) -> str:
    """JSON with one line per question under "runs" and "questions" (the file stays diffable and small)."""
    head = {k: v for k, v in doc.items() if k not in ("runs", "questions")}
    text = json.dumps(head, indent=1, ensure_ascii=False)[:-2]
    qs = ",\n  ".join(json.dumps(q, ensure_ascii=False) for q in doc["questions"])

    def slim(per: dict[str, Any]) -> dict[str, Any]:
        return {leg: {k: v for k, v in r.items() if k != "all_hits"} for leg, r in per.items()}

    runs = ",\n  ".join(
        f"{json.dumps(k)}: {json.dumps(slim(v), ensure_ascii=False, separators=(',', ':'))}"
        for k, v in doc["runs"].items()
    )
    return f'{text},\n "questions": [\n  {qs}\n ],\n "runs": {{\n  {runs}\n }}\n}}\n'


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.known_item", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--corpora", type=Path, default=Path(os.environ.get("AUTODOC_CORPORA", DEFAULT_DATA / "corpora")))
    ap.add_argument("--cache", type=Path, default=None, help="store folder (default <bench cache>/known)")
    ap.add_argument("--questions", type=Path, default=QUESTIONS)
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--only", nargs="*", default=None, help="corpora to run (default all five)")
    ap.add_argument(
        "--observations",
        type=Path,
        default=None,
        help="a Markdown file of hand-written observations to include in the report",
    )
    ap.add_argument("--out", default=str(RESULTS / "known_items"), help="output stem, or - to print only")
    args = ap.parse_args(argv)
    t_start = time.monotonic()
    machine = machine_note()
    commit = git_commit()
    cache = (args.cache or cache_root() / "known").expanduser().resolve()
    corpora = args.corpora.resolve()
    names = args.only or CORPORA
    all_questions = load_questions(args.questions)
    questions = [q for q in all_questions if q["corpus"] in names]
    not_run = dict(Counter(q["corpus"] for q in all_questions if q["corpus"] not in names))
    bad = check_targets(questions, corpora)
    if bad:
        raise SystemExit(f"targets missing on disk: {bad}")
    builds = {c: build(corpora, c, cache) for c in names}
    t_built = time.monotonic()
    if args.build_only:
        print(json.dumps(builds, indent=1))
        return 0
    runs: dict[str, dict[str, Any]] = {}
    for c in names:
        qs = [q for q in questions if q["corpus"] == c]
        log(f"{c}: {len(qs)} questions × {len(LEGS)} legs")
        runs.update(run_corpus(Path(builds[c]["store"]), c, qs))
    t_done = time.monotonic()
    import hashlib

    import autodoc

    doc = {
        "command": " ".join(["python -m bench.known_item", *(argv if argv is not None else sys.argv[1:])]),
        "commit": commit,
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()) + " UTC",
        "product": str(Path(autodoc.__file__).parent),
        "machine": machine,
        "limit": LIMIT,
        "fusion": __import__("autodoc.config", fromlist=["WorkspaceConfig"]).WorkspaceConfig().fusion,
        "legs": LEGS,
        "questions_file": str(args.questions),
        "questions_digest": hashlib.sha256(args.questions.read_bytes()).hexdigest()[:16],
        "questions": questions,
        "corpora_run": names,
        "questions_not_run": not_run,
        "builds": builds,
        "build_seconds": t_built - t_start,
        "search_seconds": t_done - t_built,
        "total_seconds": time.monotonic() - t_start,
        "summary": summarise(questions, runs),
        "runs": runs,
        "observations": args.observations.read_text().splitlines() if args.observations else None,
    }
    md = render(doc)
    if args.out == "-":
        print(md)
    else:
        Path(args.out + ".json").write_text(_dump(doc))
        Path(args.out + ".md").write_text(md)
        log(f"wrote {args.out}.md and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
