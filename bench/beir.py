"""A BEIR collection read from disk, written as a Markdown workspace, and
indexed by the product into a cached store.

Input: a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv).
Output: a workspace folder (one ``<doc id>.md`` per document: ``# title``,
a blank line, the text) and a store indexed and embedded by
``autodoc.service.Service`` — the product path, nothing re-implemented.

The store is cached outside the repository and keyed by everything that
changes its contents: the corpus bytes, the embedding model's fingerprint
and the chunking settings (section_tokens, abstract_chunk). A cached store is
brought up to date with an incremental ``Service.index`` (a full re-index when
the ingest code changed since it was built: unchanged chunk texts keep their
rows and so their vectors, which the product keys by text hash) and
``embed_pending`` — so a second run embeds nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .common import REPO, Progress, cache_root, json_digest, log, tree_digest

WORKSPACE = "bench"


@dataclass
class Collection:
    root: Path
    name: str
    corpus: dict[str, tuple[str, str]]  # id -> (title, text), file order
    queries: dict[str, str]
    qrels: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # split -> qid -> {docid: rel}

    def split_queries(self, split: str) -> list[tuple[str, str]]:
        """(qid, text) of the queries judged in this split, in queries.jsonl order."""
        judged = self.qrels[split]
        return [(q, t) for q, t in self.queries.items() if q in judged]


def load_collection(
    root: Path, splits: tuple[str, ...] = ("test", "train"), limit_docs: int | None = None
) -> Collection:
    root = Path(root).resolve()
    corpus: dict[str, tuple[str, str]] = {}
    with open(root / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            d = json.loads(line)
            corpus[str(d["_id"])] = (d.get("title") or "", d.get("text") or "")
    queries: dict[str, str] = {}
    with open(root / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                queries[str(d["_id"])] = d["text"]
    qrels: dict[str, dict[str, dict[str, int]]] = {}
    for split in splits:
        path = root / "qrels" / f"{split}.tsv"
        if not path.exists():
            continue
        table: dict[str, dict[str, int]] = {}
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f):
                parts = line.rstrip("\n").split("\t")
                if len(parts) < 3 or (i == 0 and not parts[2].lstrip("-").isdigit()):
                    continue  # the header line
                table.setdefault(parts[0], {})[parts[1]] = int(parts[2])
        qrels[split] = table
    if limit_docs is not None:
        # a small sub-collection for smoke runs: the judged documents of the
        # first queries first, then corpus order, until limit_docs
        keep: list[str] = []
        for split in splits:
            for _q, docs in qrels.get(split, {}).items():
                for d in docs:
                    if d in corpus and d not in keep and len(keep) < limit_docs:
                        keep.append(d)
        for d in corpus:
            if len(keep) >= limit_docs:
                break
            if d not in keep:
                keep.append(d)
        ks = set(keep)
        corpus = {d: v for d, v in corpus.items() if d in ks}
    return Collection(root, root.name, corpus, queries, qrels)


def doc_markdown(title: str, text: str) -> str:
    title = " ".join(title.split())
    body = text.strip()
    return f"# {title}\n\n{body}\n" if title else f"{body}\n"


def doc_path(doc_id: str) -> str:
    return f"{doc_id}.md"


def path_doc(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".md")


def write_workspace(col: Collection, folder: Path) -> dict[str, int]:
    """Write (or bring up to date) one Markdown file per document; files of
    documents no longer in the corpus are removed. Unchanged files are not
    rewritten (their mtimes stay, so an incremental index skips them)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = kept = removed = 0
    want = set()
    for doc_id, (title, text) in col.corpus.items():
        name = doc_path(doc_id)
        want.add(name)
        p = folder / name
        data = doc_markdown(title, text).encode("utf-8")
        try:
            if p.read_bytes() == data:
                kept += 1
                continue
        except FileNotFoundError:
            pass
        tmp = p.with_suffix(".md.tmp")
        tmp.write_bytes(data)
        tmp.replace(p)
        written += 1
    for p in folder.glob("*.md"):
        if p.name not in want:
            p.unlink()
            removed += 1
    return {"written": written, "unchanged": kept, "removed": removed}


def model_fingerprint() -> tuple[str, str]:
    """(name, fingerprint) of the default embedding provider."""
    from autodoc.embed.onnx import OnnxProvider

    p = OnnxProvider()
    return p.name, p.fingerprint


@dataclass
class BuiltStore:
    store: Path
    workspace_dir: Path
    key: dict[str, Any]
    report: dict[str, Any]


def build_store(
    col: Collection,
    *,
    cache: Path | None = None,
    section_tokens: int = 350,
    abstract_chunk: bool = True,
    embed: bool = True,
    tag: str | None = None,
    quiet: bool = False,
) -> BuiltStore:
    """Workspace folder + an indexed (and, with embed, fully embedded) store."""
    from autodoc.config import Settings
    from autodoc.service import Service

    cache = cache or cache_root()
    corpus_digest = json_digest(sorted(col.corpus.items()), 16)
    label = tag or col.name
    ws_dir = cache / f"{label}-md-{corpus_digest[:8]}"
    t0 = time.monotonic()
    wrote = write_workspace(col, ws_dir)
    t_write = time.monotonic() - t0
    model_name, fp = model_fingerprint() if embed else ("none", "none")
    key = {
        "corpus": corpus_digest,
        "model": model_name,
        "model_fp": fp,
        "section_tokens": section_tokens,
        "abstract_chunk": abstract_chunk,
    }
    store_dir = cache / "stores" / f"{label}-{json_digest(key)}"
    store = store_dir / "autodoc.db"
    meta_path = store_dir / "bench-meta.json"
    ingest_digest = tree_digest(REPO / "daemon" / "autodoc" / "ingest")
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    store_dir.mkdir(parents=True, exist_ok=True)
    config = {
        "section_tokens": section_tokens,
        "abstract_chunk": abstract_chunk,
        "embedding": {"provider": "onnx"} if embed else {"provider": "none"},
    }
    report: dict[str, Any] = {"workspace_files": wrote, "write_seconds": round(t_write, 2), "cached": store.exists()}

    def open_service():
        return Service(Settings.from_env(store=store))

    try:
        svc = open_service()
    except Exception as e:  # an incompatible old store: start again
        log(f"cached store unusable ({e}); rebuilding {store}")
        shutil.rmtree(store_dir)
        store_dir.mkdir(parents=True)
        svc = open_service()
    try:
        if WORKSPACE not in svc.workspaces():
            svc.workspace_add(WORKSPACE, str(ws_dir), config)
        else:
            # a cached store keeps the fusion its workspace was created with; measure the product's
            # current default, as a new workspace would have it
            from autodoc.config import WorkspaceConfig

            svc.workspace_configure(WORKSPACE, {"fusion": WorkspaceConfig().fusion})
        full = meta.get("ingest_digest") != ingest_digest and report["cached"]
        t0 = time.monotonic()
        idx = svc.index(WORKSPACE, full=full, progress=None if quiet else Progress("index", 15))
        report["index"] = {k: idx[k] for k in ("added", "modified", "deleted", "unchanged", "chunks", "seconds")}
        report["index"]["full"] = full
        report["index_seconds"] = round(time.monotonic() - t0, 2)
        if embed:
            t0 = time.monotonic()
            emb = svc.embed_pending(WORKSPACE, None if quiet else Progress("embed", 30))
            report["embed"] = emb
            report["embed_seconds"] = round(time.monotonic() - t0, 2)
            st = svc.workspace_status(WORKSPACE)["embedding"]
            report["embedding_state"] = st["state"]
            if st["state"] != "ready":
                raise RuntimeError(f"embedding not ready after embed_pending: {st}")
        status = svc.workspace_status(WORKSPACE)
        report["documents"] = status["files"]["indexed"]
        report["chunks"] = status["chunks"]
        report["skipped"] = status["files"]["skipped"]
    finally:
        svc.close()
    if report.get("embed", {}).get("embedded") or report.get("index", {}).get("added"):
        meta["first_build" if "first_build" not in meta else "last_update"] = {
            "index_seconds": report.get("index_seconds"),
            "index_files": report.get("index", {}).get("added"),
            "chunks": report.get("chunks"),
            "embed_seconds": report.get("embed_seconds"),
            "embedded": report.get("embed", {}).get("embedded"),
            "load": list(os.getloadavg()),
        }
    report["history"] = {k: meta[k] for k in ("first_build", "last_update") if k in meta}
    meta.update({"key": key, "ingest_digest": ingest_digest, "built": time.time()})
    meta_path.write_text(json.dumps(meta, indent=1))
    return BuiltStore(store, ws_dir, key, report)
