"""The MCP tools for browsing and the state of things: list, changes, status, reindex.

Input: the Backend and one call's Args. Output: (structured answer, text for the model).
A tool over every workspace asks each at once (toolkit.gather) and merges the answers.

Runs on: the MCP server's event loop (each RPC call on a worker thread).
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Any

from ..errors import AutodocError, DocumentNotFound
from . import answers
from .args import Args
from .backend import BROWSE_LIMIT, Backend, ToolError, no_workspace
from .toolkit import Result, as_text, gather, with_notes


async def list_documents(b: Backend, a: Args) -> Result:
    [ws] = await b.workspace(a.str("workspace"))
    limit = a.int("limit", 50, 1, 200)
    assert limit is not None
    # the cursor is the last path of the previous page: search.query's `after` lists the files past it,
    # so paging reaches every document however many match (one answer holds at most BROWSE_LIMIT)
    cursor = a.str("cursor")
    opts: dict[str, Any] = {"limit": min(BROWSE_LIMIT, limit + 1), "scope": "files"}  # sessions are not files
    if cursor:
        opts["after"] = cursor
    for key in ("paths", "tags"):
        if (v := a.strings(key)) is not None:
            opts[key] = v
    if (facets := a.dict("facets", '{"type": ["adr"]}')) is not None:
        opts["facets"] = {k: v if isinstance(v, list) else [v] for k, v in facets.items()}
    if (count := a.strings("count", '["status"]')) is not None:
        opts["facet_counts"] = count[:20]
    ans, tags = await gather(
        [lambda: b.call("search.query", [ws, "", opts]), lambda: b.call("workspace.tags", [ws, None, 30])]
    )
    docs = ans["hits"]
    page = docs[:limit]
    out: dict[str, Any] = {
        "workspace": ws,
        "documents": [
            {"ref": answers.ref(ws, d["path"]), "title": d["title"], "tags": d["tags"], "lines": d["line_end"]}
            for d in page
        ],
        # a full answer of BROWSE_LIMIT may have more behind it (the next page says: maybe none)
        "next_cursor": page[-1]["path"] if len(docs) > limit or len(docs) == BROWSE_LIMIT else None,
        "tag_counts": {t["tag"]: t["documents"] for t in tags["tags"]},
    }
    if ans.get("facet_counts"):
        out["facet_counts"] = ans["facet_counts"]
    with_notes(out, a)
    return out, list_text(out)


def list_text(out: dict[str, Any]) -> str:
    """A page of documents as a model reads it: one line each (its ref, title, length, tags), then
    how to page on and the workspace's tags; the JSON said each key on every line."""
    docs = out["documents"]
    more = f'more: cursor "{out["next_cursor"]}"' if out["next_cursor"] else "the last page"
    rows = [f"{out['workspace']}: {len(docs)} document{'' if len(docs) == 1 else 's'} ({more})"]
    for d in docs:
        tags = "".join(f" #{t}" for t in d["tags"])
        rows.append(f"  {d['ref']} · {d['title'] or '(untitled)'} · {d['lines']} lines{tags and ' ·' + tags}")
    if out["tag_counts"]:
        rows.append("tags: " + ", ".join(f"{t} {n}" for t, n in out["tag_counts"].items()))
    for field, values in (out.get("facet_counts") or {}).items():
        rows.append(f"{field}: " + ", ".join(f"{v} {n}" for v, n in values.items()))
    return "\n".join(rows + [f"note: {n}" for n in out.get("notes", [])])


async def changes(b: Backend, a: Args) -> Result:
    names = await b.workspace(a.str("workspace"), many=True)
    cursor = a.int("cursor", 0, 0, 2**62)
    limit = a.int("limit", 100, 1, 1000)
    got = await gather([partial(b.call, "changes.since", [ws, cursor, limit]) for ws in names])
    merged = sorted((c for g in got for c in g["changes"]), key=lambda c: c["cursor"])
    more = len(merged) > (limit or 0) or any(g["has_more"] for g in got)
    merged = merged[:limit]
    nxt = merged[-1]["cursor"] if merged else max([cursor or 0] + [g["next_cursor"] for g in got])
    out = {
        "changes": [
            {
                "cursor": c["cursor"],
                "workspace": c["workspace"],
                "path": c["path"],
                "op": c["op"],
                **({"old_path": c["old_path"]} if c.get("old_path") else {}),
                "time": c["time"],
            }
            for c in merged
        ],
        "next_cursor": nxt,
        "has_more": more,
    }
    with_notes(out, a)
    return out, changes_text(out)


def changes_text(out: dict[str, Any]) -> str:
    """The changes one a line (cursor, time UTC, what happened, the document's ref), then where to
    go on from; the JSON said each key on every line."""
    n = len(out["changes"])
    more = "more after it: call again with it" if out["has_more"] else "nothing more yet"
    rows = [f"{n} change{'' if n == 1 else 's'}; next_cursor {out['next_cursor']} ({more})"]
    for c in out["changes"]:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(c["time"])) if c.get("time") else "?"
        was = f" (was {c['old_path']})" if c.get("old_path") else ""
        rows.append(f"  {c['cursor']} {when} {c['op']} {answers.ref(c['workspace'], c['path'])}{was}")
    return "\n".join(rows + [f"note: {x}" for x in out.get("notes", [])])


async def status(b: Backend, a: Args) -> Result:
    names = await b.workspace(a.str("workspace"), many=True) if await b.workspaces() else []
    info = await b.call("server.info", [])
    got = await gather([partial(b.call, "workspace.status", [ws]) for ws in names])
    about = await b.descriptions()
    out = {
        "server": {
            "mode": b.mode,
            "version": info["version"],
            "store": info["store"],
            "store_from": b.settings.store_from,  # --store, AUTODOC_STORE or default: a client passes no env on
            **({"daemon_not_started": b.link.why_local} if b.link.why_local and b.mode != "daemon" else {}),
            "writable": info["writable"],
            "models": {kind: [m.get("name") for m in ms] for kind, ms in info["models"].items()},
            **({"semantic": info["semantic"]} if "semantic" in info else {}),
        },
        "workspaces": [_ws_status(s, about.get(s["name"], "")) for s in got],
    }
    if not names:
        out["notes"] = [no_workspace(b.settings)]
    with_notes(out, a)
    return out, as_text(out)


def _ws_status(s: dict[str, Any], description: str) -> dict[str, Any]:
    emb = s["embedding"]
    semantic = {k: emb[k] for k in emb if k not in ("fingerprint", "available", "skipped")}
    return {
        "workspace": s["name"],
        "description": description,  # workspace.configure's, for an agent choosing among several
        "root": s["root"],
        "root_exists": s["root_exists"],
        "files": {
            "on_disk": s["files"]["on_disk"],
            "indexed": s["files"]["indexed"],
            "skipped": len(s["files"]["skipped"]),
            "skipped_examples": s["files"]["skipped"][:5],
        },
        "chunks": s["chunks"],
        "semantic": semantic,
        "ranker": s["ranker"],
        "problems": len(s["problems"]),
        "problem_examples": s["problems"][:5],
        "broken_links": len(s["broken_links"]),
        "change_cursor": s["change_cursor"],
    }


async def reindex(b: Backend, a: Args) -> Result:
    paths = a.strings("paths", '["notes/new-note.md"]')
    if not paths:
        raise ToolError(
            'paths is required: the files to index, relative to the workspace root, e.g. ["notes/new-note.md"]'
        )
    [ws] = await b.workspace(a.str("workspace"))
    report = await b.call("workspace.index", [ws])
    root = next(w["root"] for w in (await b.call("workspace.list", {}))["workspaces"] if w["name"] == ws)
    skipped = {s["path"]: s["reason"] for s in report["skipped"]}
    results = []
    for p in paths:
        rel = p
        if Path(p).is_absolute() and Path(p).is_relative_to(root):
            rel = Path(p).relative_to(root).as_posix()
        try:
            doc = await b.call("document.read", [ws, rel, {"line_start": 1, "line_end": 1}])
            results.append({"path": rel, "indexed": True, "ref": answers.ref(ws, rel), "lines": doc["total_lines"]})
        except DocumentNotFound:
            why = skipped.get(rel) or (
                "not found under the workspace root " + root
                if not (Path(root) / rel).exists()
                else "not a Markdown file the workspace indexes (.md, .markdown)"
            )
            results.append({"path": rel, "indexed": False, "reason": why})
        except AutodocError as e:
            results.append({"path": rel, "indexed": False, "reason": e.message})
    out = {
        "workspace": ws,
        "files": results,
        "index": {k: report[k] for k in ("added", "modified", "deleted", "renamed", "unchanged", "seconds")},
        "semantic": report["embedding"].get("reason") or "vectors are made in the background",
    }
    with_notes(out, a)
    return out, as_text(out)
