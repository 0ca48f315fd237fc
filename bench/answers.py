"""Answer-in-passage, compact answers and honest confidence on the five real corpora (issue 35).

    python -m bench.answers                     # every question, writes docs/benchmarks/answers.{md,json}
    python -m bench.answers run --split tune    # only the tuning part (what to iterate on)
    python -m bench.answers run --only jekyll --out -   # one corpus, print only
    python -m bench.answers check               # the question files against the corpora (no search)

Questions: ``bench/answer_spans/questions.jsonl`` (69, each with the file and the line span of its
answer) and ``bench/answer_spans/unanswerable.jsonl`` (22 a corpus that it cannot answer); both
frozen, see their README. Stores: the known-item stores (``<bench cache>/known/<corpus>-*``, the
same cache and build as ``python -m bench.known_item``; built here when missing).

Each answerable question runs through
- the MCP `search` tool as an agent calls it: ``autodoc.mcp.tools.call_tool(backend, "search",
  {"query", "workspace"})`` at the default settings and at ``budget_tokens`` 300 and 800, on a
  read-only in-process backend (the code path of ``autodoc mcp`` without a daemon);
- ``search.query`` (``Service.search``) per leg — lexical, semantic, hybrid (the default) — with
  one passage per document (``per_document: true``, limit 10 documents).

A returned passage *holds the answer* when its path is an answer's and its lines overlap that
answer's span. Reported: answer-in-passage at 1 and 3 (the first / any of the first 3 passages
holds it), the document at 1 and 3, and the passage choice alone (of the questions whose document
is among the first 3, how often that document's passage holds the answer); by style, corpus and
split. MCP answers: tokens (what the model reads: characters / 4 of the tool's text, and the
answer's own `tokens`), the share of those characters that is passage text, `truncated`, hits.

Confidence: every hit of the default MCP answers, answerable and unanswerable questions alike
(a hit of an unanswerable question never holds an answer), binned: a reliability table and the
expected calibration error (ECE) against "the passage holds the answer" and against "the
document is the answer's"; how often confidence falls along the order shown. `answerable`:
precision and recall with the answerable questions as positives and the unanswerable as
negatives, for the MCP answer and for search.query hybrid and lexical. ``--scifact`` adds SciFact
test (bench/agents.py's queries and negatives) when its store is cached.

The report is the generated section of ``answers.md`` (between its markers); the rest of the file
(the baseline "before" figures) is kept. While another process builds or embeds a store
(``python -m bench.known_item --build-only``), run with ``--no-build``: a build takes the store's
writer lease. Product code from another commit: see docs/benchmarks/README.md (PYTHONPATH of an
exported snapshot, AUTODOC_BENCH_COMMIT).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import subprocess
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
    Case,
    cache_root,
    git_commit,
    harness,
    log,
    machine_note,
    percentile,
    replace_section,
)
from .common import scifact_store as cached_scifact_store

CORPORA = ["foam-docs", "simpler-grants-adr", "jekyll", "opentelemetry-docs", "swift-evolution"]
DATA = REPO / "bench" / "answer_spans"
QUESTIONS = DATA / "questions.jsonl"
UNANSWERABLE = DATA / "unanswerable.jsonl"
STYLES = ["keywords", "sentence", "agent"]
SPLITS = ["tune", "test"]
LEGS = {"lexical": ["lexical"], "semantic": ["semantic"], "hybrid": ["lexical", "semantic"]}
LEG_DOCS = 10  # documents a leg returns (one passage each)
PASSAGES = 30  # passages of the hybrid with every passage of a document (per_document: false)
MCP_CALLS = {"default": {}, "budget_800": {"budget_tokens": 800}, "budget_300": {"budget_tokens": 300}}
BINS = 10


# ---------------------------------------------------------------- the question files


def load(path: Path) -> list[dict[str, Any]]:
    out = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    ids = Counter(q["id"] for q in out)
    if dup := [i for i, c in ids.items() if c > 1]:
        raise ValueError(f"{path}: duplicate ids {dup}")
    for q in out:
        if q["style"] not in STYLES or q.get("split") not in SPLITS or q["corpus"] not in CORPORA:
            raise ValueError(f"{path}: {q['id']}: style/split/corpus {q['style']}/{q.get('split')}/{q['corpus']}")
    return out


def check_files(corpora: Path, questions: list[dict[str, Any]], negatives: list[dict[str, Any]]) -> list[str]:
    """What is wrong with the question files against the corpora on disk: spans outside their
    files, and `absent` words of an unanswerable question that the corpus holds (unless a
    `near_miss` says so)."""
    bad = []
    for q in questions:
        for a in q["answers"]:
            f = corpora / q["corpus"] / a["path"]
            if not f.is_file():
                bad.append(f"{q['id']}: no file {a['path']}")
                continue
            n = len(f.read_text(encoding="utf-8", errors="replace").split("\n"))
            s, e = a["lines"]
            if not 1 <= s <= e <= n:
                bad.append(f"{q['id']}: lines {s}-{e} outside {a['path']} ({n} lines)")
    for q in negatives:
        if q.get("near_miss"):
            continue
        for word in q["absent"]:
            r = subprocess.run(
                ["grep", "-rilwF", "--include=*.md", "--include=*.markdown", "--", word, str(corpora / q["corpus"])],
                capture_output=True,
                text=True,
            )
            if r.stdout.strip():
                bad.append(f"{q['id']}: {word!r} is in {len(r.stdout.split())} files")
    return bad


# ---------------------------------------------------------------- metrics (pure)


def holds(path: str | None, start: int | None, end: int | None, answers: list[dict[str, Any]]) -> bool:
    """The passage path:start-end overlaps one of the answer spans."""
    if path is None or start is None:
        return False
    end = start if end is None else end
    return any(a["path"] == path and start <= a["lines"][1] and end >= a["lines"][0] for a in answers)


def mcp_hits(out: dict[str, Any]) -> list[dict[str, Any]]:
    """The passages of an MCP search answer, whatever the hit's shape: its own path/line_start/
    line_end, else its ref (`ws:path#La-b`); a hit that groups passages under `passages` gives each."""
    from autodoc.mcp.args import parse_ref

    rows = []
    for h in out.get("hits") or []:
        subs = h.get("passages") if isinstance(h.get("passages"), list) else [{}]
        for p in subs:
            m = {**h, **p}
            path, start, end = m.get("path"), m.get("line_start"), m.get("line_end")
            if (path is None or start is None) and m.get("ref"):
                r = parse_ref(m["ref"])
                path = path or r.path
                if r.lines:
                    start, end = r.lines
            text = m.get("text") if isinstance(m.get("text"), str) else m.get("passage") or ""
            rows.append({"path": path, "start": start, "end": end, "text": text, "confidence": m.get("confidence")})
    return rows


def escaped_len(s: str) -> int:
    """Characters s takes inside the answer's JSON (escapes counted), as the model reads it."""
    return len(json.dumps(s, ensure_ascii=False)) - 2


def shown_len(s: str, text: str) -> int:
    """Characters a passage takes in the tool's text: as it is where the text holds it raw (the
    search tool's text since it stopped being JSON), else as escaped in JSON (an older answer)."""
    return len(s) if s in text else escaped_len(s)


def rate(xs: Iterable[bool]) -> float:
    v = list(xs)
    return sum(v) / len(v) if v else float("nan")


def passage_metrics(rows: list[dict[str, Any]]) -> dict[str, float]:
    """rows: per question {"docs": [path...], "holds": [bool...]} in answer order (one passage a document)."""
    n = len(rows)
    if not n:
        return {"n": 0}
    found3 = [r for r in rows if r["doc_rank"] is not None and r["doc_rank"] <= 3]
    return {
        "n": n,
        "AiP@1": rate(bool(r["holds"][:1]) and r["holds"][0] for r in rows),
        "AiP@3": rate(any(r["holds"][:3]) for r in rows),
        "doc@1": rate(r["doc_rank"] == 1 for r in rows),
        "doc@3": len(found3) / n,
        # passage choice alone: the answer's document is among the first 3; does its passage hold the answer?
        "passage|doc@3": rate(r["holds"][r["doc_rank"] - 1] for r in found3),
        "n_doc@3": len(found3),
    }


def reliability(items: list[tuple[float, bool]], bins: int = BINS) -> dict[str, Any]:
    """Equal-width bins of confidence: count, mean confidence, share correct; ECE (weighted |gap|)."""
    rows = []
    ece = 0.0
    n = len(items)
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        sel = [(c, y) for c, y in items if lo <= c < hi or (b == bins - 1 and c == 1.0)]
        if not sel:
            continue
        conf = sum(c for c, _ in sel) / len(sel)
        acc = sum(y for _, y in sel) / len(sel)
        ece += len(sel) / n * abs(acc - conf)
        rows.append({"bin": f"{lo:.1f}-{hi:.1f}", "n": len(sel), "confidence": conf, "correct": acc})
    return {"n": n, "ece": ece if n else float("nan"), "bins": rows}


def precision_recall(pos: list[bool], neg: list[bool]) -> dict[str, Any]:
    tp, fp = sum(pos), sum(neg)
    fn = len(pos) - tp
    return {
        "precision": tp / (tp + fp) if tp + fp else float("nan"),
        "recall": tp / (tp + fn) if tp + fn else float("nan"),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": len(neg) - fp,
    }


# ---------------------------------------------------------------- running


def open_backend(store: Path) -> Any:
    """The MCP server's Backend on this store, read-only and in-process: the bench never writes,
    and several runs (or a known-item build) may share the store."""
    from autodoc.config import Settings
    from autodoc.connect import Backend as Link
    from autodoc.mcp.backend import Backend

    b = Backend(Settings.from_env(store=store))
    b.link = Link(b.settings, writer=False, name="bench")
    return b


async def _mcp(b: Any, ws: str, query: str, extra: dict[str, Any]) -> dict[str, Any]:
    from autodoc.mcp.tools import call_tool

    try:
        out, text = await call_tool(b, "search", {"query": query, "workspace": ws, **extra})
    except Exception as e:  # an error is an answer too: no hits, and said
        return {"error": f"{type(e).__name__}: {getattr(e, 'message', e)}", "hits": [], "chars": 0}
    hits = mcp_hits(out)
    return {
        "hits": [[h["path"], h["start"], h["end"], h["confidence"], shown_len(h["text"], text)] for h in hits],
        "answerable": out.get("answerable"),
        "truncated": out.get("truncated"),
        "tokens": out.get("tokens"),  # the answer's own count
        "chars": len(text),  # what the model reads (the tool's text)
        "passage_chars": sum(shown_len(h["text"], text) for h in hits),
        "notes": out.get("notes") or [],
    }


def _leg(svc: Any, ws: str, query: str, stages: list[str], per_document: bool = True) -> dict[str, Any]:
    limit = LEG_DOCS if per_document else PASSAGES
    try:
        ans = svc.search(ws, query, {"limit": limit, "stages": stages, "per_document": per_document})
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}", "hits": [], "answerable": None}
    return {
        "hits": [[h["path"], h.get("line_start"), h.get("line_end")] for h in ans.get("hits") or []],
        "answerable": ans.get("answerable"),
        "semantic": ans.get("semantic"),
    }


def run_corpus(store: Path, corpus: str, questions: list[dict[str, Any]], negatives: list[dict[str, Any]]) -> dict:
    """Every question of one corpus: the MCP calls and the legs (negatives: the default MCP call,
    hybrid and lexical)."""
    import anyio

    from autodoc.config import Settings
    from autodoc.service import Service

    svc = Service(Settings.from_env(store=store), writer=False)
    b = open_backend(store)
    out: dict[str, Any] = {}

    async def all_mcp() -> None:
        for q in questions:
            out[q["id"]] = {"mcp": {k: await _mcp(b, corpus, q["query"], v) for k, v in MCP_CALLS.items()}}
        for q in negatives:
            out[q["id"]] = {"mcp": {"default": await _mcp(b, corpus, q["query"], {})}}

    try:
        anyio.run(all_mcp)
        for q in questions:
            out[q["id"]]["legs"] = {leg: _leg(svc, corpus, q["query"], st) for leg, st in LEGS.items()}
            out[q["id"]]["passages"] = _leg(svc, corpus, q["query"], LEGS["hybrid"], per_document=False)
        for q in negatives:
            out[q["id"]]["legs"] = {leg: _leg(svc, corpus, q["query"], LEGS[leg]) for leg in ("hybrid", "lexical")}
    finally:
        b.close()
        svc.close()
    return out


# ---------------------------------------------------------------- summaries


def _rows(q: dict[str, Any], hits: list[list[Any]]) -> dict[str, Any]:
    paths = {a["path"] for a in q["answers"]}
    docs: list[str] = []
    hs: list[bool] = []
    for h in hits:
        if h[0] in docs:  # one passage a document: a later passage of a listed document counts for it
            i = docs.index(h[0])
            hs[i] = hs[i] or holds(h[0], h[1], h[2], q["answers"])
            continue
        docs.append(h[0])
        hs.append(holds(h[0], h[1], h[2], q["answers"]))
    rank = next((i for i, d in enumerate(docs, 1) if d in paths), None)
    return {"docs": docs, "holds": hs, "doc_rank": rank}


def summarise(questions: list[dict[str, Any]], negatives: list[dict[str, Any]], runs: dict[str, Any]) -> dict:
    questions = [q for q in questions if q["id"] in runs]
    negatives = [q for q in negatives if q["id"] in runs]
    groups: dict[str, list[dict[str, Any]]] = {"all": questions}
    for s in SPLITS:
        groups[f"split:{s}"] = [q for q in questions if q["split"] == s]
    for s in STYLES:
        groups[f"style:{s}"] = [q for q in questions if q["style"] == s]
    for c in CORPORA:
        groups[f"corpus:{c}"] = [q for q in questions if q["corpus"] == c]
    groups = {g: v for g, v in groups.items() if v}

    def table(pick: Any) -> dict[str, Any]:
        return {g: passage_metrics([_rows(q, pick(runs[q["id"]])) for q in sel]) for g, sel in groups.items()}

    legs = {leg: table(lambda r, leg=leg: r["legs"][leg]["hits"]) for leg in LEGS}
    mcp = {k: table(lambda r, k=k: r["mcp"][k]["hits"]) for k in MCP_CALLS}

    def size(k: str, sel: list[dict[str, Any]]) -> dict[str, Any]:
        rs = [runs[q["id"]]["mcp"][k] for q in sel]
        ok = [r for r in rs if not r.get("error")]
        toks = [math.ceil(r["chars"] / 4) for r in ok]
        shares = [r["passage_chars"] / r["chars"] for r in ok if r["chars"]]
        return {
            "n": len(rs),
            "errors": len(rs) - len(ok),
            "tokens_p50": percentile(toks, 50),
            "tokens_p90": percentile(toks, 90),
            "answer_tokens_p50": percentile([r["tokens"] or 0 for r in ok], 50),
            "passage_share_p50": percentile(shares, 50),
            "passage_share_all": sum(r["passage_chars"] for r in ok) / max(1, sum(r["chars"] for r in ok)),
            "hits_mean": sum(len(r["hits"]) for r in ok) / max(1, len(ok)),
            "truncated": sum(bool(r.get("truncated")) for r in ok),
            "empty": sum(not r["hits"] for r in ok),
            "empty_but_answerable": sum(not r["hits"] and bool(r.get("answerable")) for r in ok),
        }

    sizes = {
        k: {g: size(k, sel) for g, sel in groups.items() if g in ("all", "split:tune", "split:test")} for k in MCP_CALLS
    }

    # confidence: every hit of the default MCP answers
    passage_items: list[tuple[float, bool]] = []
    doc_items: list[tuple[float, bool]] = []
    monotone = [0, 0]
    for q in questions + negatives:
        hits = runs[q["id"]]["mcp"]["default"]["hits"]
        answers = q.get("answers") or []
        paths = {a["path"] for a in answers}
        confs = [h[3] for h in hits if h[3] is not None]
        if len(confs) >= 2:
            monotone[0] += all(a >= b for a, b in itertools.pairwise(confs))
            monotone[1] += 1
        for h in hits:
            if h[3] is None:
                continue
            passage_items.append((h[3], holds(h[0], h[1], h[2], answers)))
            doc_items.append((h[3], h[0] in paths))
    first_conf = {
        "answerable_questions": percentile(
            [
                runs[q["id"]]["mcp"]["default"]["hits"][0][3] or 0
                for q in questions
                if runs[q["id"]]["mcp"]["default"]["hits"]
            ],
            50,
        ),
        "unanswerable_questions": percentile(
            [
                runs[q["id"]]["mcp"]["default"]["hits"][0][3] or 0
                for q in negatives
                if runs[q["id"]]["mcp"]["default"]["hits"]
            ],
            50,
        ),
    }

    def flags(sel: list[dict[str, Any]], where: str) -> list[bool]:
        out = []
        for q in sel:
            r = runs[q["id"]]
            v = r["mcp"]["default"].get("answerable") if where == "mcp" else r["legs"][where].get("answerable")
            out.append(bool(v))
        return out

    answerable: dict[str, Any] = {}
    for where in ("mcp", "hybrid", "lexical"):
        answerable[where] = {"all": precision_recall(flags(questions, where), flags(negatives, where))}
        for s in SPLITS:
            answerable[where][f"split:{s}"] = precision_recall(
                flags([q for q in questions if q["split"] == s], where),
                flags([q for q in negatives if q["split"] == s], where),
            )
        for c in CORPORA:
            pos = [q for q in questions if q["corpus"] == c]
            neg = [q for q in negatives if q["corpus"] == c]
            if pos or neg:
                answerable[where][f"corpus:{c}"] = precision_recall(flags(pos, where), flags(neg, where))
    # every passage (per_document false): where the first passage holding the answer ranks, and whether
    # the answer's document has one among the 30 at all (what a choice among a document's passages can reach)
    pranks = []
    for q in questions:
        hits = runs[q["id"]].get("passages", {}).get("hits") or []
        pranks.append(next((i for i, h in enumerate(hits, 1) if holds(h[0], h[1], h[2], q["answers"])), None))
    passages = {
        "n": len(pranks),
        **{f"P@{k}": rate(r is not None and r <= k for r in pranks) for k in (1, 3, 10, PASSAGES)},
        "MRR": sum(1 / r for r in pranks if r) / max(1, len(pranks)),
    }
    per_question = {
        q["id"]: {
            "mcp_default": _rows(q, runs[q["id"]]["mcp"]["default"]["hits"]),
            "hybrid": _rows(q, runs[q["id"]]["legs"]["hybrid"]["hits"]),
            "passage_rank": pranks[i],
        }
        for i, q in enumerate(questions)
    }
    return {
        "legs": legs,
        "passages": passages,
        "mcp": mcp,
        "mcp_size": sizes,
        "reliability_passage": reliability(passage_items),
        "reliability_document": reliability(doc_items),
        "confidence_monotone": {"answers_with_2_or_more_hits": monotone[1], "non_increasing": monotone[0]},
        "first_hit_confidence_p50": first_conf,
        "answerable": answerable,
        "per_question": per_question,
    }


def scifact_store(given: Path | None) -> Path | None:
    """The SciFact store to read: the one given, else the cached one (bench.quality builds it) made with
    the embedding model this product runs (several may be cached while the model changes)."""
    return given if given is not None else cached_scifact_store(cache_root())


def scifact_confidence(store: Path | None, corpora: dict[str, Path], n: int | None) -> dict[str, Any]:
    """SciFact test as bench/agents.py probes it (its queries, its negatives: each query against one
    Markdown corpus in turn), asked through search.query's compact answer (10 documents, a budget that
    never bites) so any product version answers it: reliability of per-hit confidence against qrels
    relevance (a hit against another corpus is never relevant), answerable precision/recall."""
    from autodoc.config import Settings
    from autodoc.service import Service

    from .quality import WORKSPACE, doc_path, load_collection

    if store is None:
        return {"skipped": "no cached SciFact store made with this embedding model (python -m bench.quality builds it)"}
    if set(corpora) != set(CORPORA):
        return {"skipped": "needs the stores of all five corpora (the negatives)"}
    col = load_collection(DEFAULT_DATA / "scifact", splits=("test",))
    queries = col.split_queries("test")
    queries = queries[:n] if n else queries
    where = {"scifact": (store, WORKSPACE), **{c: (p, c) for c, p in corpora.items()}}
    svcs: dict[str, Any] = {}

    def ask(name: str, query: str, stages: list[str] | None) -> dict[str, Any]:
        if name not in svcs:
            svcs[name] = Service(Settings.from_env(store=where[name][0]), writer=False)
        opts: dict[str, Any] = {"answer": "compact", "budget_tokens": 32000, "limit": 10, "per_document": True}
        return svcs[name].search(where[name][1], query, {**opts, **({"stages": stages} if stages else {})})

    out: dict[str, Any] = {"store": str(store)}
    try:
        for leg, stages in (("hybrid", None), ("lexical", ["lexical"])):
            pos, neg, items = [], [], []
            for i, (qid, q) in enumerate(queries):
                rel = {doc_path(d) for d in col.qrels["test"][qid]}
                a = ask("scifact", q, stages)
                items += [(h["confidence"], h["path"] in rel) for h in mcp_hits(a) if h["confidence"] is not None]
                pos.append(bool(a.get("answerable")))
                b = ask(CORPORA[i % len(CORPORA)], q, stages)
                items += [(h["confidence"], False) for h in mcp_hits(b) if h["confidence"] is not None]
                neg.append(bool(b.get("answerable")))
            out[leg] = {
                "queries": len(queries),
                "reliability": reliability(items),
                "answerable": precision_recall(pos, neg),
            }
    finally:
        for s in svcs.values():
            s.close()
    return out


# ---------------------------------------------------------------- report


def _f(x: Any, d: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{d}f}" if isinstance(x, float) else str(x)


def _group_name(g: str) -> str:
    return g.split(":", 1)[-1]


def render(doc: dict[str, Any]) -> str:
    s = doc["summary"]
    nq, nn = len(doc["questions_run"]), len(doc["negatives_run"])
    L = [
        "## The last run (generated by `python -m bench.answers`; replaced by the next run)",
        "",
        f"`{doc['command']}` at commit `{doc['commit']}` ({doc['date']}; product code from `{doc['product']}`; "
        f"{doc['machine']['cpu']}, {doc['machine']['nproc']} cores, load {doc['machine']['load']}).",
        "",
        f"{nq} answerable questions and {nn} unanswerable ones over {', '.join(doc['corpora_run'])} "
        f"(`bench/answer_spans/`, frozen; digests {doc['digests']}); split run: {doc['split']}. "
        "A passage *holds the answer* when its lines overlap the answer's span in the answer's file. "
        "AiP@k: one of the first k passages holds it (one passage a document); doc@k: the answer's document "
        "is among the first k; passage|doc@3: of the questions whose document is among the first 3, the share "
        "where that document's passage holds the answer (passage choice alone). Targets (issue 35): AiP ≥ 0.9; "
        "default MCP answer ≤ 800 tokens p50 with ≥ 80 % passage text.",
        "",
    ]
    if doc.get("not_run"):
        L += [f"**Not run**: {doc['not_run']}", ""]
    L += ["## The MCP `search` tool (what an agent receives)", ""]
    L += [
        "| call | set | n | AiP@1 | AiP@3 | doc@1 | doc@3 | passage\\|doc@3 |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for k in MCP_CALLS:
        for g, m in s["mcp"][k].items():
            if g in ("all", "split:tune", "split:test"):
                L.append(
                    f"| {k} | {_group_name(g)} | {m['n']} | {_f(m['AiP@1'])} | {_f(m['AiP@3'])} | {_f(m['doc@1'])} | "
                    f"{_f(m['doc@3'])} | {_f(m['passage|doc@3'])} ({m['n_doc@3']}) |"
                )
    L += [
        "",
        "Size (tokens = characters / 4 of the tool's text, what the model reads; `answer tokens` = the answer's own "
        "`tokens` field; passage share = characters of passage text / characters of the answer):",
        "",
        "| call | set | tokens p50 | p90 | answer tokens p50 | passage share p50 | passage share (all) | hits (mean) | truncated | empty | empty but answerable |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for k in MCP_CALLS:
        for g, m in s["mcp_size"][k].items():
            L.append(
                f"| {k} | {_group_name(g)} | {_f(m['tokens_p50'], 0)} | {_f(m['tokens_p90'], 0)} | "
                f"{_f(m['answer_tokens_p50'], 0)} | {_f(m['passage_share_p50'])} | {_f(m['passage_share_all'])} | "
                f"{_f(m['hits_mean'], 1)} | {m['truncated']} | {m['empty']} | {m['empty_but_answerable']} |"
            )
    L += ["", "## search.query per leg (one passage a document, 10 documents)", ""]
    L += [
        "| leg | set | n | AiP@1 | AiP@3 | doc@1 | doc@3 | passage\\|doc@3 |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for leg in LEGS:
        for g, m in s["legs"][leg].items():
            if g in ("all", "split:tune", "split:test"):
                L.append(
                    f"| {leg} | {_group_name(g)} | {m['n']} | {_f(m['AiP@1'])} | {_f(m['AiP@3'])} | {_f(m['doc@1'])} | "
                    f"{_f(m['doc@3'])} | {_f(m['passage|doc@3'])} ({m['n_doc@3']}) |"
                )
    p = s["passages"]
    L += [
        "",
        f"Every passage (hybrid, `per_document: false`, {PASSAGES} passages): the first passage holding the answer is "
        f"#1 for {_f(p['P@1'])}, in the first 3 for {_f(p['P@3'])}, the first 10 for {_f(p['P@10'])}, the {PASSAGES} for "
        f"{_f(p[f'P@{PASSAGES}'])} of the questions (MRR {_f(p['MRR'])}): what choosing among a document's passages "
        "after fusion can reach.",
    ]
    for title, prefix in (("By style", "style:"), ("By corpus", "corpus:")):
        L += ["", f"## {title} (AiP@1 / AiP@3 / doc@3)", ""]
        cols = ["mcp default", "mcp 800", "mcp 300", "lexical", "semantic", "hybrid"]
        L += ["| set | n | " + " | ".join(cols) + " |", "|---|---:|" + "---|" * len(cols)]
        tables = [s["mcp"]["default"], s["mcp"]["budget_800"], s["mcp"]["budget_300"], *(s["legs"][x] for x in LEGS)]
        for g in s["legs"]["hybrid"]:
            if not g.startswith(prefix):
                continue
            cells = [f"{_f(t[g]['AiP@1'])} / {_f(t[g]['AiP@3'])} / {_f(t[g]['doc@3'])}" for t in tables]
            L.append(f"| {_group_name(g)} | {tables[0][g]['n']} | " + " | ".join(cells) + " |")
    L += ["", "## Confidence", ""]
    for key, what in (
        ("reliability_passage", "the hit's passage holds the answer"),
        ("reliability_document", "the hit's document is the answer's"),
    ):
        r = s[key]
        L += [
            f"Reliability of per-hit `confidence` against *{what}*: every hit of the default MCP answers to the "
            f"{nq} answerable and {nn} unanswerable questions ({r['n']} hits); **ECE {_f(r['ece'], 3)}**.",
            "",
            "| confidence | hits | mean confidence | share correct |",
            "|---|---:|---:|---:|",
        ]
        L += [f"| {b['bin']} | {b['n']} | {_f(b['confidence'], 3)} | {_f(b['correct'], 3)} |" for b in r["bins"]]
        L.append("")
    mono = s["confidence_monotone"]
    fc = s["first_hit_confidence_p50"]
    L += [
        f"Confidence non-increasing along the order shown: {mono['non_increasing']} of "
        f"{mono['answers_with_2_or_more_hits']} default MCP answers with two or more hits. Median confidence of the "
        f"first hit: {_f(fc['answerable_questions'], 3)} on answerable questions, {_f(fc['unanswerable_questions'], 3)} "
        "on unanswerable ones.",
        "",
        "`answerable` (positives: the answerable questions; negatives: the unanswerable ones, each against its own corpus):",
        "",
        "| answer | set | precision | recall | tp | fp | fn | tn |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for where, label in (
        ("mcp", "MCP default"),
        ("hybrid", "search.query hybrid"),
        ("lexical", "search.query lexical"),
    ):
        for g, m in s["answerable"][where].items():
            L.append(
                f"| {label} | {_group_name(g)} | {_f(m['precision'])} | {_f(m['recall'])} | {m['tp']} | {m['fp']} | "
                f"{m['fn']} | {m['tn']} |"
            )
    sf = doc.get("scifact")
    if sf and not sf.get("skipped"):
        L += ["", "### SciFact test", "", f"Store `{sf['store']}`."]
        for leg in ("hybrid", "lexical"):
            r, a = sf[leg]["reliability"], sf[leg]["answerable"]
            L += [
                "",
                f"{leg}: {sf[leg]['queries']} test queries (compact answers, 10 documents): per-hit ECE against "
                f"qrels relevance **{_f(r['ece'], 3)}** over {r['n']} hits; `answerable` against SciFact (positives) vs "
                f"the Markdown corpora (negatives): precision {_f(a.get('precision'))}, recall {_f(a.get('recall'))}.",
                "",
                "| confidence | hits | mean confidence | share relevant |",
                "|---|---:|---:|---:|",
            ]
            L += [f"| {b['bin']} | {b['n']} | {_f(b['confidence'], 3)} | {_f(b['correct'], 3)} |" for b in r["bins"]]
    else:
        why = sf["skipped"] if sf else "`--scifact` runs it"
        L += ["", f"SciFact test: not run ({why})."]
    misses = [
        (q, s["per_question"][q["id"]]["mcp_default"])
        for q in doc["questions_run"]
        if s["per_question"][q["id"]]["mcp_default"]["doc_rank"] == 1
        and not s["per_question"][q["id"]]["mcp_default"]["holds"][0]
    ]
    L += [
        "",
        "## Where the default MCP answer named the right document first but not the answer's passage",
        "",
        f"{len(misses)} questions. Lines returned vs the answer's span:",
        "",
        "| id | split | style | passage returned | answer |",
        "|---|---|---|---|---|",
    ]
    for q, r in misses:
        h = next(h for h in doc["runs"][q["id"]]["mcp"]["default"]["hits"] if h[0] == r["docs"][0])
        ans = ", ".join(f"{a['lines'][0]}-{a['lines'][1]}" for a in q["answers"] if a["path"] == h[0])
        L.append(f"| {q['id']} | {q['split']} | {q['style']} | `{h[0]}` L{h[1]}-{h[2]} | L{ans} |")
    L += ["", "Per-question answers (every hit's path, lines, confidence) are in `answers.json`."]
    return "\n".join(L) + "\n"


def _dump(doc: dict[str, Any]) -> str:
    """JSON with one line per question under "runs" (diffable)."""
    head = {k: v for k, v in doc.items() if k not in ("runs", "questions_run", "negatives_run")}
    text = json.dumps(head, indent=1, ensure_ascii=False)[:-2]
    runs = ",\n  ".join(
        f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False, separators=(',', ':'))}" for k, v in doc["runs"].items()
    )
    return f'{text},\n "runs": {{\n  {runs}\n }}\n}}\n'


# ---------------------------------------------------------------- cases


def _corpora_arg(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--corpora", type=Path, default=Path(os.environ.get("AUTODOC_CORPORA", DEFAULT_DATA / "corpora")))
    ap.add_argument("--questions", type=Path, default=QUESTIONS)
    ap.add_argument("--unanswerable", type=Path, default=UNANSWERABLE)


def main_run(argv: list[str] | None) -> int:
    """Every question through the MCP search tool (default, budget 800, budget 300) and search.query per
    leg; answer-in-passage, tokens, confidence reliability and answerable precision/recall."""
    ap = argparse.ArgumentParser(prog="python -m bench.answers run", description=main_run.__doc__)
    _corpora_arg(ap)
    ap.add_argument("--cache", type=Path, default=None, help="store folder (default <bench cache>/known)")
    ap.add_argument("--only", nargs="*", default=None, help="corpora to run (default all five)")
    ap.add_argument("--split", choices=["tune", "test", "all"], default="all", help="which part of each file to run")
    ap.add_argument("--ids", nargs="*", default=None, help="only these question ids (a smoke run)")
    ap.add_argument("--no-build", action="store_true", help="use the cached stores as they are (missing: not run)")
    ap.add_argument(
        "--scifact", type=int, nargs="?", const=0, default=None, help="add SciFact test (N queries, 0 = all)"
    )
    ap.add_argument("--scifact-store", type=Path, default=None, help="the SciFact store (default: the cached one)")
    ap.add_argument("--out", default=str(RESULTS / "answers"), help="output stem, or - to print only")
    args = ap.parse_args(argv)
    from . import known_item

    t0 = time.monotonic()
    corpora = args.corpora.resolve()
    cache = (args.cache or cache_root() / "known").expanduser().resolve()
    names = args.only or CORPORA
    questions, negatives = load(args.questions), load(args.unanswerable)

    def keep(q: dict[str, Any]) -> bool:
        return (
            q["corpus"] in names
            and (args.split == "all" or q["split"] == args.split)
            and (args.ids is None or q["id"] in args.ids)
        )

    questions, negatives = [q for q in questions if keep(q)], [q for q in negatives if keep(q)]
    if bad := check_files(corpora, questions, []):
        raise SystemExit(f"question files do not match the corpora: {bad}")
    stores: dict[str, Path] = {}
    not_run = []
    for c in names:
        if args.no_build:
            # the store keyed as known_item keys it (this embedding model, this chunking): another model's
            # store may sit beside it
            store = known_item.store_dir(cache, corpora, c)[0] / "autodoc.db"
            if store.exists():
                stores[c] = store
            else:
                not_run.append(f"{c} (no store {store})")
        else:
            stores[c] = Path(known_item.build(corpora, c, cache)["store"])
    runs: dict[str, Any] = {}
    for c, store in stores.items():
        qs = [q for q in questions if q["corpus"] == c]
        ns = [q for q in negatives if q["corpus"] == c]
        log(f"{c}: {len(qs)} questions, {len(ns)} unanswerable")
        runs.update(run_corpus(store, c, qs, ns))
    import hashlib

    import autodoc

    doc: dict[str, Any] = {
        "command": " ".join(["python -m bench.answers", *(sys.argv[1:] if argv is None else ["run", *argv])]),
        "commit": git_commit(),
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()) + " UTC",
        "product": str(Path(autodoc.__file__).parent),
        "machine": machine_note(),
        "split": args.split,
        "corpora_run": list(stores),
        "not_run": ", ".join(not_run) if not_run else None,
        "digests": {
            p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:12] for p in (args.questions, args.unanswerable)
        },
        "mcp_calls": MCP_CALLS,
        "counts": {
            "questions": sum(q["id"] in runs for q in questions),
            "unanswerable": sum(q["id"] in runs for q in negatives),
        },
        "questions_run": [q for q in questions if q["id"] in runs],
        "negatives_run": [q for q in negatives if q["id"] in runs],
    }
    doc["summary"] = summarise(questions, negatives, runs)
    if args.scifact is not None:
        doc["scifact"] = scifact_confidence(scifact_store(args.scifact_store), stores, args.scifact or None)
    doc["seconds"] = round(time.monotonic() - t0, 1)
    doc["runs"] = runs
    md = render(doc)
    if args.out == "-":
        print(md)
    else:
        Path(args.out + ".json").write_text(_dump(doc))
        # the generated part only: what the file says around it (the baseline "before" figures,
        # observations) stays
        replace_section(Path(args.out + ".md"), "answers", md)
        log(f"wrote {args.out}.md and .json")
    return 0


def main_check(argv: list[str] | None) -> int:
    """Check the question files against the corpora: every span inside its file, every `absent` word of an
    unanswerable question absent (grep -rilwF), no search run."""
    ap = argparse.ArgumentParser(prog="python -m bench.answers check", description=main_check.__doc__)
    _corpora_arg(ap)
    args = ap.parse_args(argv)
    questions, negatives = load(args.questions), load(args.unanswerable)
    bad = check_files(args.corpora.resolve(), questions, negatives)
    for b in bad:
        print(b)
    print(f"{len(questions)} questions, {len(negatives)} unanswerable: {len(bad)} problems")
    return 1 if bad else 0


CASES = [Case("run", main_run, main_run.__doc__ or ""), Case("check", main_check, main_check.__doc__ or "")]


def main(argv: list[str] | None = None) -> int:
    return harness("python -m bench.answers", __doc__ or "", CASES, argv, default="run")


if __name__ == "__main__":
    sys.exit(main())
