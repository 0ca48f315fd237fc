"""What each MCP tool does: the RPC calls behind it and the answer it gives.

A tool returns (structured answer, text for the model): the answer as compact
JSON, or for `read` and `outline` the lines themselves, for `links` each
document once with the lines that link (toolkit.py: what the
tools share; browse.py: list, changes, status, reindex). Calls go through the
Backend, so they run on the daemon when one serves the store. A search of every
workspace asks each at once and merges the answers; a workspace that cannot
answer (a facet it does not have) is left out with a note, not the whole search.

Runs on: the MCP server's event loop (each RPC call on a worker thread).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from ..errors import AutodocError, Unsupported
from ..suggest import close_names
from . import answers
from .args import Args
from .backend import Backend, ToolError
from .browse import changes, list_documents, reindex, status
from .sessions import list_sessions, save_session
from .specs import KNOWN_ARGS
from .toolkit import Result, gather, locate, with_notes

STAGES = ("lexical", "semantic", "rerank", "graph")
WHOLE = 32000  # each workspace's passages come whole: the answer is fitted to the budget here
DEFAULT_BUDGET = 800  # tokens: the top passage whole, the next ones' first lines (docs/benchmarks/quality.md)


# -- search -------------------------------------------------------------------------------


async def search(b: Backend, a: Args) -> Result:
    query = a.str("query", required=True, example="how do we recover the lease after a crash")
    assert query is not None
    names = await b.workspace(a.str("workspace"), many=True)
    limit = a.int("limit", 5, 1, 50)
    budget = a.int("budget_tokens", DEFAULT_BUDGET, 300, WHOLE)
    assert limit is not None and budget is not None
    opts: dict[str, Any] = {
        "answer": "compact",
        "limit": limit,
        "per_document": a.bool("per_document", True),
        "budget_tokens": WHOLE,
        "scope": a.choice("scope", ["files", "sessions", "all"], "all"),
    }
    # the one relevance floor is the server's (search.query min_confidence, PROTOCOL.md): what it
    # holds back is counted in held_back; 0 brings it back
    if a.has("min_confidence"):
        opts["min_confidence"] = a.float("min_confidence", 0.0, 0.0, 1.0)
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

    async def ask(ws: str) -> Any:
        return await _or_error(b.call("search.query", [ws, query, opts]))

    got = await gather([partial(ask, ws) for ws in names])
    failed = [(ws, g) for ws, g in zip(names, got) if isinstance(g, AutodocError)]
    if len(failed) == len(names) or (failed and len(names) == 1):
        raise failed[0][1]
    names = [ws for ws, g in zip(names, got) if not isinstance(g, AutodocError)]
    got = [g for g in got if not isinstance(g, AutodocError)]
    ran = {ws: _stages(g) for ws, g in zip(names, got)}
    ws_notes = [n for ws, g in zip(names, got) for n in _search_notes(ws, g)]
    empty = await _never_indexed(b, [ws for ws, g in zip(names, got) if not g["hits"]])
    ws_notes += [f"{ws} holds no documents yet: its folder was never indexed (autodoc index {ws})" for ws in empty]
    if len(got) == 1:
        hits = got[0]["hits"]
    else:  # confidence is the one score the workspaces' hits share; equal ones keep each workspace's order
        hits = sorted((h for g in got for h in g["hits"]), key=lambda h: -(h.get("confidence") or 0.0))
    hits = hits[:limit]
    held = sum(g.get("held_back", 0) for g in got)
    out: dict[str, Any] = {
        "query": query,
        "workspaces": names,
        "answerable": any(g["answerable"] for g in got),
        "truncated": False,
        "tokens": 0,
        "hits": [],
        "held_back": held,
        "stages": ran,
    }
    notes = [f"{ws} left out: {e.message}" for ws, e in failed] + ws_notes
    if held:
        notes.append(
            f"{held} held back by the relevance floor (passages that stopped matching the query); "
            "min_confidence: 0 shows them"
        )
    if not hits and len(empty) < len(names):  # other words find nothing in a workspace that holds nothing
        notes.append("nothing relevant found: try other words, fewer filters, or `list` to browse")
    if notes:
        out["notes"] = notes
    with_notes(out, a)
    # the passages are fitted here, to this answer's own fields (each workspace's search was asked for
    # them whole): counted against search.query's envelope instead, a budget left hundreds of tokens
    # unused, or at 300 no passage at all
    out = answers.fit(out, hits, budget, query)
    return out, answers.search_text(out)


async def _never_indexed(b: Backend, names: list[str]) -> list[str]:
    """Those of `names` that hold nothing (no document, no session): added, never indexed. Asked
    only of workspaces whose search found nothing."""
    if not names:
        return []
    listed = (await b.call("workspace.list", {}))["workspaces"]
    return [w["name"] for w in listed if w["name"] in names and not w.get("documents") and not w.get("chunks")]


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
    """Notes a model should read beyond `stages`, which says what ran and why any did not: the
    fuzzy fallback's corrections (the passages are about the word searched, not the word typed)."""
    notes = [
        f'{ws}: searched "{to}" for "{typed}" (no passage holds the word typed)'
        for typed, to in (ans.get("corrections") or {}).items()
    ]
    if ans.get("semantic") in ("partial", "switching"):
        notes.append(f"{ws}: semantic search is still filling ({ans['semantic']}); hits may improve shortly")
    return notes


# -- reading --------------------------------------------------------------------------------


MAX_REFS = 20  # documents one `read` reads (`refs`); each keeps its own max_lines


async def read(b: Backend, a: Args) -> Result:
    """One ref, or several (`refs`: a multi-get, each answered as one `read` answers it; a ref
    that cannot be read is its entry's `error`, not the whole call's)."""
    if isinstance(a.values.get("ref"), list) and not a.has("refs"):  # several refs sent as `ref`
        a.values["refs"] = a.values.pop("ref")
        a.notes.append("read the list given as 'ref' as 'refs'")
    if not a.has("refs"):
        return await _read_one(b, a)
    raws = a.strings("refs", '["kb:adrs/0012-lease-recovery.md#L34-42", "kb:index.md"]') or []
    if a.has("ref"):
        raise ToolError("send ref (one document) or refs (several), not both")
    for key in ("lines", "around", "section"):
        if a.has(key):
            raise ToolError(f"{key} narrows one document: with refs, give each ref its own lines (`path#L40-80`)")
    if len(raws) > MAX_REFS:
        a.notes.append(f"read the first {MAX_REFS} of {len(raws)} refs: send the rest in another call")
        raws = raws[:MAX_REFS]
    shared, a.notes = a.notes, []
    documents: list[dict[str, Any]] = []
    texts: list[str] = []
    for raw in raws:
        try:
            one, text = await _read_one(b, a, raw)
        except ToolError as e:
            one = {"ref": raw, "error": e.message, **e.data}
            text = f"{raw}: {e.message}"
        except AutodocError as e:
            one, text = {"ref": raw, "error": e.message}, f"{raw}: {e.message}"
        a.notes = []
        documents.append(one)
        texts.append(text)
    out: dict[str, Any] = {"documents": documents}
    if shared:
        out["notes"] = shared
    tail = "".join(f"\nnote: {n}" for n in shared)
    return out, "\n\n".join(texts) + tail


async def _read_one(b: Backend, a: Args, raw: str | None = None) -> Result:
    ws, path, doc, ref_lines = await locate(b, a, raw)
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
    out: dict[str, Any] = {
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
    with_notes(out, a)
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
    out = with_notes(
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
    with_notes(out, a)
    return out, links_text(out)


def links_text(out: dict[str, Any]) -> str:
    """The links as a model reads them: each document once, by the ref `read` takes, with its title
    and the lines that link (the JSON said each link's path, title, kind and line; an index page of
    74 links came to ~2,900 tokens)."""
    rows: list[str] = []

    def grouped(links: list[dict[str, Any]], key: str) -> dict[str, list[dict[str, Any]]]:
        by: dict[str, list[dict[str, Any]]] = {}
        for link in links:
            by.setdefault(link[key], []).append(link)
        return by

    def lines(links: list[dict[str, Any]]) -> str:
        return ", ".join(f"L{n}" for n in dict.fromkeys(link["line"] for link in links))

    if "out" in out:
        broken = sum(1 for link in out["out"] if not link["resolved"])
        rows.append(f"links out: {len(out['out'])}" + (f" ({broken} broken)" if broken else ""))
        resolved = grouped([link for link in out["out"] if link["resolved"]], "ref")
        rows += [f"  {ref} · {ls[0]['title'] or '(untitled)'} · {lines(ls)}" for ref, ls in resolved.items()]
        for target, ls in grouped([link for link in out["out"] if not link["resolved"]], "target").items():
            rows.append(f"  {target} (broken) · {lines(ls)}")
    if "in" in out:
        rows.append(f"links in: {len(out['in'])}")
        sources = grouped([{**link, "doc": link["ref"].rpartition("#L")[0]} for link in out["in"]], "doc")
        rows += [f"  {doc} · {ls[0]['title'] or '(untitled)'} · {lines(ls)}" for doc, ls in sources.items()]
    notes = "".join(f"\nnote: {n}" for n in out.get("notes", []))
    return f"{out['ref']}\n" + "\n".join(rows) + notes


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
    out = with_notes({"ref": answers.ref(ws, path), "similar": out_hits}, a)
    rows = [f"documents like {out['ref']}:"] + [
        f"  {h['ref']} · {h['section'] or h['title']} · {h['score']}" for h in out_hits
    ]
    return out, "\n".join(rows + [f"note: {n}" for n in out.get("notes", [])])


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
