"""Scratch measurement: ONNX provider throughput vs a raw onnxruntime loop,
graph-optimisation levels, sanity cosines; and caches SciFact embeddings for
bench/vectors_search.py.

    python -m bench.vectors_embed throughput [--n 128]
    python -m bench.vectors_embed cache [--n 2000]   # -> /tmp/autodoc_vecbench/scifact_<n>.npz
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from autodoc.embed.onnx import OnnxProvider, default_model_path, default_tokenizer_path, mean_pool

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "scifact" / "corpus.jsonl"
CACHE = Path("/tmp/autodoc_vecbench")


def load_docs(n: int | None = None) -> list[tuple[str, str]]:
    out = []
    with open(CORPUS.resolve()) as f:
        for line in f:
            d = json.loads(line)
            out.append((d["_id"], f"{d['title']}. {d['text']}"))
            if n and len(out) >= n:
                break
    return out


_RAW = None


def raw_loop(texts: list[str]) -> np.ndarray:
    """The plain recipe: default SessionOptions (intra threads = cpu count),
    tokenizer padding to the longest of each batch of 32 in input order."""
    global _RAW
    import onnxruntime as ort
    from tokenizers import Tokenizer

    if _RAW is None:  # built once, outside the timed region
        tok = Tokenizer.from_file(str(default_tokenizer_path()))
        tok.enable_truncation(max_length=256)
        tok.enable_padding(direction="right", pad_id=0, pad_token="[PAD]")
        so = ort.SessionOptions()
        so.intra_op_num_threads = os.cpu_count()
        _RAW = tok, ort.InferenceSession(str(default_model_path()), so, providers=["CPUExecutionProvider"])
    tok, sess = _RAW
    out = []
    for s in range(0, len(texts), 32):
        enc = tok.encode_batch(texts[s : s + 32])
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        h = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        out.append(mean_pool(h, mask))
    return np.concatenate(out)


def throughput(n: int) -> None:
    docs = load_docs(600)
    p0 = OnnxProvider()
    counts = p0.count_tokens([t for _, t in docs])
    long = [t for (_, t), c in zip(docs, counts) if c >= 256][:n]
    print(f"{len(long)} texts, all >= 256 tokens (truncated to 256)")
    raw_loop(long[:32])  # warm-up
    p0.embed(long[:32])
    res = {}
    provs = {}
    for _rep in range(3):
        t = time.perf_counter()
        r = raw_loop(long)
        dt = time.perf_counter() - t
        res.setdefault("raw", []).append(len(long) / dt)
        for opt in ("disable", "basic", "extended", "all"):
            p = provs.setdefault(opt, OnnxProvider(opt_level=opt))
            p.embed(long[:4])
            t = time.perf_counter()
            v = p.embed(long)
            dt = time.perf_counter() - t
            res.setdefault(opt, []).append(len(long) / dt)
            assert np.allclose(v, r, atol=1e-4), (opt, np.abs(v - r).max())
    for k, v in res.items():
        print(
            f"{k:9s} chunks/s: {', '.join(f'{x:.2f}' for x in v)}  best {max(v):.2f}  ratio-to-raw(best) {max(v) / max(res['raw']):.3f}"
        )
    # mixed lengths (real corpus order): sorting by length helps here
    mixed = [t for _, t in docs[:n]]
    p = OnnxProvider()
    t = time.perf_counter()
    p.embed(mixed)
    dt1 = time.perf_counter() - t
    t = time.perf_counter()
    raw_loop(mixed)
    dt2 = time.perf_counter() - t
    print(
        f"mixed lengths (mean {np.mean(p.count_tokens(mixed)):.0f} tok before truncation): provider {n / dt1:.2f}/s raw {n / dt2:.2f}/s"
    )
    pairs = [
        ("How do I reset my password?", "What are the steps to change my password?"),
        ("reset my password", "I forgot my password and need a new one"),
        ("How do I reset my password?", "The cat sat on the mat."),
        ("How do I reset my password?", "Quarterly revenue grew by 12 percent."),
    ]
    for a, b in pairs:
        va, vb = p.embed([a, b])
        print(f"cos {float(va @ vb):.3f}  {a!r} ~ {b!r}")


def cache(n: int) -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"scifact_{n}.npz"
    docs = load_docs(n)
    p = OnnxProvider()
    t = time.perf_counter()
    vecs = []
    for s in range(0, len(docs), 256):
        vecs.append(p.embed([t for _, t in docs[s : s + 256]]))
        print(f"{s + 256}/{len(docs)} {time.perf_counter() - t:.0f}s", flush=True)
    v = np.concatenate(vecs)
    dt = time.perf_counter() - t
    print(f"embedded {len(docs)} in {dt:.0f}s = {len(docs) / dt:.2f} docs/s")
    np.savez(path, ids=np.array([int(i) for i, _ in docs]), vecs=v, fingerprint=p.fingerprint)
    return path


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["throughput", "cache"])
    ap.add_argument("--n", type=int, default=None)
    a = ap.parse_args()
    if a.what == "throughput":
        throughput(a.n or 128)
    else:
        cache(a.n or 2000)
