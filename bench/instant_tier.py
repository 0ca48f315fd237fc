"""The instant tier (issue 19): distillation time, embedding speed and SciFact
quality of a static per-token table beside the full model.

    python -m bench.instant_tier            # writes docs/benchmarks/instant_tier.md + .json
    python -m bench.instant_tier --out -    # print only

Steps, all in one process so the ratios share the machine's load:
1. distil the table from the bundled model (autodoc.embed.static.distil_table);
   timed, then cached in the bench cache keyed by the model fingerprint;
2. speed on the same 1,000 SciFact chunk texts: the instant tier (tokenise +
   numpy), the product's OnnxProvider.embed, and raw onnxruntime (tokenise,
   one padded batch of 32 at a time, session.run, mean pool — no windows, no
   sorting); the transformer on a 64-text subset since it runs ~20/s here;
3. quality on SciFact's cached store (bench/beir.py builds it): chunk texts
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

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from . import evaluate as E
from .beir import WORKSPACE, build_store, load_collection, path_doc
from .common import DEFAULT_DATA, RESULTS, cache_root, command_line, git_commit, log, machine_note

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
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


if __name__ == "__main__":
    sys.exit(main())
