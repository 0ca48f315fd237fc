"""What each MCP tool does: the RPC calls behind it and the answer it gives.

A tool returns (structured answer, text for the model): the answer as compact
JSON, or for `read` and `outline` the lines themselves. Calls go through the
Backend, so they run on the daemon when one serves the store. A search of every
workspace asks each at once and merges the answers; a workspace that cannot
answer (a facet it does not have) is left out with a note, not the whole search.

Runs on: the MCP server's event loop (each RPC call on a worker thread).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from ..errors import AutodocError, DocumentNotFound, Unsupported
from ..suggest import close_names
from . import answers
from .args import Args, parse_ref
from .backend import BROWSE_LIMIT, Backend, ToolError
from .sessions import list_sessions, save_session
from .specs import KNOWN_ARGS

Result = tuple[dict[str, Any], str]
STAGES = ("lexical", "semantic", "rerank", "graph")
# Hits under this confidence are left out of search answers (once the workspace's vectors are all
# in): on the test corpus a query it cannot answer scores ~0.0003 everywhere, and the third hit of
# one it can is ~0.01 and off-topic. They cost an agent ~250 tokens each for nothing;
# min_confidence: 0 brings them back.
MIN_CONFIDENCE = 0.05
NOTES_ROOM = 20  # tokens kept for the note a merged answer may still gain (weak hits left out)


def as_text(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


async def gather(calls: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Run the calls at once; results in order (the first exception is raised)."""
    out: list[Any] = [None] * len(calls)

    async def one(i: int) -> None:
        out[i] = await calls[i]()

    async with anyio.create_task_group() as tg:
        for i in range(len(calls)):
            tg.start_soon(one, i)
    return out


def _with_notes(obj: dict[str, Any], a: Args) -> dict[str, Any]:
    if a.notes:
        obj["notes"] = obj.get("notes", []) + a.notes
    return obj


# -- locating a document ---------------------------------------------------------------


async def locate(b: Backend, a: Args) -> tuple[str, str, dict[str, Any], tuple[int, int] | None]:
    """(workspace, path, the whole document as document.read answers it, the ref's lines)."""
    raw = a.str("ref", required=True, example="kb:adrs/0012-lease-recovery.md#L10-15")
    assert raw is not None
    r = parse_ref(raw)
    candidates = await b.workspace(r.workspace or a.str("workspace"), many=True)
    path = r.path
    guesses: list[str] = []
    for ws in candidates:
        for p in (path, path + ".md") if not path.endswith((".md", ".markdown")) else (path,):
            try:
                return ws, p, await b.call("document.read", [ws, p]), r.lines
            except DocumentNotFound as e:
                near = (e.data or {}).get("did_you_mean") or [] if isinstance(e.data, dict) else []
                if p == path:  # the daemon's guesses for what was asked, not for the .md we added
                    guesses += [g if len(candidates) == 1 else answers.ref(ws, g) for g in near]
    where = candidates[0] if len(candidates) == 1 else f"any of {candidates}"
    raise ToolError(
        f"{path!r} is not an indexed document of {where}: pass a path relative to the workspace root "
        "(a search hit's ref works as it is)",
        did_you_mean=guesses[:3] or None,
    )


# -- search -------------------------------------------------------------------------------


async def search(b: Backend, a: Args) -> Result:
    query = a.str("query", required=True, example="how do we recover the lease after a crash")
    assert query is not None
    names = await b.workspace(a.str("workspace"), many=True)
    limit = a.int("limit", 5, 1, 50)
    budget = a.int("budget_tokens", 2000, 300, 32000)
    assert limit is not None and budget is not None
    opts: dict[str, Any] = {
        "answer": "compact",
        "limit": limit,
        "budget_tokens": budget,
        "per_document": a.bool("per_document", True),
        "scope": a.choice("scope", ["files", "sessions", "all"], "all"),
    }
    for key in ("paths", "tags"):
        if (v := a.strings(key, '["adrs/"]')) is not None:
            opts[key] = v
    if (facets := a.dict("facets", '{"status": ["accepted"]}')) is not None:
        opts["facets"] = {k: v if isinstance(v, list) else [v] for k, v in facets.items()}
    if (stages := a.strings("stages")) is not None:
        stages = [s.lower() for s in stages if s.lower() != "hybrid"]
        bad = [s for s in stages if s not in STAGES]
        if bad:
            raise ToolError(f"stages may be {list(STAGES)}, not {bad}; omit it for the default")
        opts["stages"] = stages
    got = await gather([lambda ws=ws: _or_error(b.call("search.query", [ws, query, opts])) for ws in names])
    failed = [(ws, g) for ws, g in zip(names, got) if isinstance(g, AutodocError)]
    if len(failed) == len(names) or (failed and len(names) == 1):
        raise failed[0][1]
    names = [ws for ws, g in zip(names, got) if not isinstance(g, AutodocError)]
    got = [g for g in got if not isinstance(g, AutodocError)]
    ran = {ws: _stages(g) for ws, g in zip(names, got)}
    ws_notes = [n for ws, g in zip(names, got) for n in _search_notes(ws, g)]
    if len(got) == 1:
        hits, truncated = got[0]["hits"], got[0]["truncated"]
    else:
        # the budget is the whole answer's: what is not hits (names, stages, notes) comes off first
        # (each workspace's own answer counted its envelope, not this one)
        around = answers.tokens(
            {
                "query": query,
                "workspaces": names,
                "answerable": False,
                "truncated": False,
                "tokens": 9999,
                "hits": [],
                "stages": ran,
                "notes": ws_notes + a.notes,
            }
        )
        hits, truncated, _ = answers.merge(got, limit, max(0, budget - around - NOTES_ROOM))
    floor = a.float("min_confidence", MIN_CONFIDENCE, 0.0, 1.0)
    # while vectors are pending a passage found by its words alone scores far lower than it will
    # (a note written a moment ago: 0.01, then 0.98): the floor waits for a ready semantic leg
    trusted = {ws for ws, g in zip(names, got) if g.get("semantic") == "ready"}
    weak = [
        h for h in hits if h.get("confidence") is not None and h["confidence"] < floor and h.get("workspace") in trusted
    ]
    hits = [h for h in hits if h not in weak]
    out: dict[str, Any] = {
        "query": query,
        "workspaces": names,
        "answerable": any(g["answerable"] for g in got),
        "truncated": truncated,
        "tokens": 0,
        "hits": hits,
        "stages": ran,
    }
    notes = [f"{ws} left out: {e.message}" for ws, e in failed] + ws_notes
    if weak:
        notes.append(
            f"{len(weak)} weak hit{'s' if len(weak) > 1 else ''} left out (confidence under {floor}); "
            "min_confidence: 0 shows them"
        )
    if not hits:
        notes.append("nothing relevant found: try other words, fewer filters, or `list` to browse")
    if notes:
        out["notes"] = notes
    _with_notes(out, a)
    out["tokens"] = answers.tokens(out)  # the size of this answer, counted as search.query counts its own
    return out, as_text(out)


async def _or_error(call: Awaitable[Any]) -> Any:
    try:
        return await call
    except AutodocError as e:
        return e


def _stages(ans: dict[str, Any]) -> dict[str, Any]:
    """Which stages ran in one workspace's search, and why any requested did not."""
    st = ans.get("stages") or {}
    return {"performed": st.get("performed", []), **({"skipped": st["skipped"]} if st.get("skipped") else {})}


def _search_notes(ws: str, ans: dict[str, Any]) -> list[str]:
    """Notes a model should read beyond `stages`, which says what ran and why any did not."""
    if ans.get("semantic") in ("partial", "switching"):
        return [f"{ws}: semantic search is still filling ({ans['semantic']}); hits may improve shortly"]
    return []


# -- reading --------------------------------------------------------------------------------


async def read(b: Backend, a: Args) -> Result:
    ws, path, doc, ref_lines = await locate(b, a)
    lines = doc["text"].split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    total = max(1, len(lines))
    max_lines = a.int("max_lines", 400, 1, 2000)
    assert max_lines is not None
    span = a.lines("lines")
    section_title = None
    if span is None and (around := a.int("around", None, 1, 10**9)) is not None:
        ctx = a.int("context", 15, 0, 500) or 0
        span = (around - ctx, around + ctx)
    if span is None and (want := a.str("section")) is not None:
        flat = answers.flatten_outline(await _outline(b, ws, path))
        node = _find_section(flat, want)
        section_title = node["title"]
        span = (node["line_start"], node["line_end"])
    if span is None:
        span = ref_lines or (1, total)
    start, end = max(1, span[0]), min(span[1], total)
    if start > total:
        a.notes.append(f"the document has {total} lines: read its last lines instead of {span[0]}-{span[1]}")
        start, end = max(1, total - 20), total
    elif span[1] > total:
        a.notes.append(f"lines clamped to the document's {total} lines")
    more = None
    if end - start + 1 > max_lines:
        end = start + max_lines - 1
        more = f"{end + 1}-{min(total, end + max_lines)}"
        a.notes.append(f'cut at {max_lines} lines: continue with lines="{more}"')
    text = "\n".join(lines[start - 1 : end])
    out = {
        "ref": answers.ref(ws, path, start, end),
        "workspace": ws,
        "path": path,
        "line_start": start,
        "line_end": end,
        "total_lines": total,
        "text": text,
    }
    if section_title:
        out["section"] = section_title
    if more:
        out["next_lines"] = more
    _with_notes(out, a)
    head = f"{out['ref']} (lines {start}-{end} of {total})"
    tail = "".join(f"\nnote: {n}" for n in out.get("notes", []))
    return out, f"{head}\n{answers.numbered(text, start)}{tail}"


def _find_section(flat: list[dict[str, Any]], want: str) -> dict[str, Any]:
    w = want.strip().lstrip("#").strip().lower()
    for test in (lambda t: t == w, lambda t: t.startswith(w), lambda t: w in t):
        for node in flat:
            if test(node["title"].lower()):
                return node
    titles = [n["title"] for n in flat]
    near = close_names(want, titles, 3, cutoff=0.4, fold_case=False)
    raise ToolError(f"no heading matches {want!r}", did_you_mean=near or None, headings=titles[:40])


async def _outline(b: Backend, ws: str, path: str) -> list[dict[str, Any]]:
    return (await b.call("document.outline", [ws, path]))["headings"]


async def outline(b: Backend, a: Args) -> Result:
    ws, path, doc, _ = await locate(b, a)
    tree = await _outline(b, ws, path)
    out = _with_notes(
        {
            "ref": answers.ref(ws, path),
            "workspace": ws,
            "path": path,
            "total_lines": doc["total_lines"],
            "outline": tree,
        },
        a,
    )
    text = f"{out['ref']} ({doc['total_lines']} lines)\n{answers.outline_text(tree) or '(no headings)'}"
    return out, text + "".join(f"\nnote: {n}" for n in out.get("notes", []))


async def links(b: Backend, a: Args) -> Result:
    ws, path, _, _ = await locate(b, a)
    direction = a.choice("direction", ["out", "in", "both"], "both")
    out: dict[str, Any] = {"ref": answers.ref(ws, path), "workspace": ws, "path": path}
    if direction in ("out", "both"):
        got = await b.call("document.links", [ws, path])
        out["out"] = [
            {
                "target": link["target"],
                "kind": link["kind"],
                "line": link["line"],
                "resolved": link["target_path"] is not None,
                **(
                    {"ref": answers.ref(ws, link["target_path"]), "title": link["target_title"]}
                    if link["target_path"]
                    else {"broken": True}
                ),
            }
            for link in got["links"]
        ]
    if direction in ("in", "both"):
        got = await b.call("document.backlinks", [ws, path])
        out["in"] = [
            {
                "ref": answers.ref(ws, link["source_path"], link["line"]),
                "title": link["source_title"],
                "kind": link["kind"],
                "line": link["line"],
            }
            for link in got["backlinks"]
        ]
    _with_notes(out, a)
    return out, as_text(out)


async def similar(b: Backend, a: Args) -> Result:
    ws, path, _, _ = await locate(b, a)
    limit = a.int("limit", 5, 1, 50)
    assert limit is not None
    try:
        ans = await b.call("search.similar", [ws, path, {"limit": limit}])
    except Unsupported as e:
        reason = (e.data or {}).get("reason") if isinstance(e.data, dict) else None
        raise ToolError(
            f"similar compares stored vectors, and there are none to compare yet "
            f"({reason or e.message}); use search with the document's subject instead"
        ) from None
    out_hits = [
        {
            "ref": answers.ref(ws, h["path"], h["line_start"], h["line_end"]),
            "path": h["path"],
            "title": h["title"],
            "section": h["breadcrumb"],
            "score": round(h["score"], 3),
        }
        for h in ans["similar"]
    ]
    if ans.get("semantic") == "partial":
        a.notes.append("some chunks still wait for vectors: their documents cannot be found yet")
    out = _with_notes({"ref": answers.ref(ws, path), "similar": out_hits}, a)
    return out, as_text(out)


# -- browsing and the state of things -----------------------------------------------------------


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
    _with_notes(out, a)
    return out, as_text(out)


async def changes(b: Backend, a: Args) -> Result:
    names = await b.workspace(a.str("workspace"), many=True)
    cursor = a.int("cursor", 0, 0, 2**62)
    limit = a.int("limit", 100, 1, 1000)
    got = await gather([lambda ws=ws: b.call("changes.since", [ws, cursor, limit]) for ws in names])
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
    _with_notes(out, a)
    return out, as_text(out)


async def status(b: Backend, a: Args) -> Result:
    names = await b.workspace(a.str("workspace"), many=True) if await b.workspaces() else []
    info = await b.call("server.info", [])
    got = await gather([lambda ws=ws: b.call("workspace.status", [ws]) for ws in names])
    out = {
        "server": {
            "mode": b.mode,
            "version": info["version"],
            "store": info["store"],
            "writable": info["writable"],
            "models": {kind: [m.get("name") for m in ms] for kind, ms in info["models"].items()},
            **({"semantic": info["semantic"]} if "semantic" in info else {}),
        },
        "workspaces": [_ws_status(s) for s in got],
    }
    if not names:
        out["notes"] = ["no workspace yet: `autodoc workspace add NAME FOLDER`, then `autodoc index NAME`"]
    _with_notes(out, a)
    return out, as_text(out)


def _ws_status(s: dict[str, Any]) -> dict[str, Any]:
    emb = s["embedding"]
    semantic = {k: emb[k] for k in emb if k not in ("fingerprint", "available", "skipped")}
    return {
        "workspace": s["name"],
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
    _with_notes(out, a)
    return out, as_text(out)


HANDLERS: dict[str, Callable[[Backend, Args], Awaitable[Result]]] = {
    "search": search,
    "read": read,
    "outline": outline,
    "links": links,
    "similar": similar,
    "list": list_documents,
    "changes": changes,
    "status": status,
    "reindex": reindex,
    "save_session": save_session,
    "sessions": list_sessions,
}


async def call_tool(b: Backend, name: str, raw: Any) -> Result:
    """Run one tool; a ToolError or an AutodocError comes back as the tool's error."""
    if name not in HANDLERS:
        near = close_names(name, HANDLERS, 1, cutoff=0.5, fold_case=False)
        raise ToolError(f"no tool {name!r}; the tools are {list(HANDLERS)}", did_you_mean=near or None)
    return await HANDLERS[name](b, Args(raw, KNOWN_ARGS[name]))
