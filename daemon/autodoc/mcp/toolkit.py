"""What every MCP tool shares: the answer's two forms, running calls at once, notes, finding a document.

Input: the Backend and one call's Args. Output: a tool's (structured answer,
text for the model), the calls' results in order, the document a ref names.

Runs on: the MCP server's event loop (each RPC call on a worker thread).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from ..errors import DocumentNotFound
from . import answers
from .args import Args, parse_ref
from .backend import Backend, ToolError

Result = tuple[dict[str, Any], str]


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


def with_notes(obj: dict[str, Any], a: Args) -> dict[str, Any]:
    if a.notes:
        obj["notes"] = obj.get("notes", []) + a.notes
    return obj


# -- locating a document ---------------------------------------------------------------


async def locate(
    b: Backend, a: Args, raw: str | None = None
) -> tuple[str, str, dict[str, Any], tuple[int, int] | None]:
    """(workspace, path, the whole document as document.read answers it, the ref's lines).

    Never a silent guess: a ref whose workspace disagrees with `workspace` is refused; a path
    in several workspaces is refused with each one's ref; a path found in one of several, with
    no workspace named, says in a note which one it was; an absolute path is read as the
    workspace-relative path under the root that holds it (and answered with that standard ref)."""
    if raw is None:
        raw = a.str("ref", required=True, example="kb:adrs/0012-lease-recovery.md#L10-15")
        assert raw is not None
    r = parse_ref(raw)
    given = a.str("workspace")
    if r.workspace and given and r.workspace.lower() != given.lower():
        raise ToolError(
            f"the ref {raw!r} names workspace {r.workspace!r} and workspace is {given!r}: send one of them "
            "(a ref's own workspace is enough)"
        )
    named = r.workspace or given
    path = r.path
    if path.startswith(("/", "~")):
        root_ws, path = await _under_a_root(b, path)
        if named and named.lower() != root_ws.lower():
            raise ToolError(f"{r.path} is under the root of workspace {root_ws!r}, not {named!r}")
        named = root_ws
        a.notes.append(f"read the absolute path as {answers.ref(root_ws, path)}")
    candidates = await b.workspace(named, many=True)
    found: list[tuple[str, str, dict[str, Any]]] = []
    guesses: list[str] = []
    for ws in candidates:
        for p in (path, path + ".md") if not path.endswith((".md", ".markdown")) else (path,):
            try:
                found.append((ws, p, await b.call("document.read", [ws, p])))
                break
            except DocumentNotFound as e:
                near = (e.data or {}).get("did_you_mean") or [] if isinstance(e.data, dict) else []
                if p == path:  # the daemon's guesses for what was asked, not for the .md we added
                    guesses += [g if len(candidates) == 1 else answers.ref(ws, g) for g in near]
    if len(found) > 1:
        raise ToolError(
            f"{path!r} is in several workspaces: name one (workspace, or a ref such as {answers.ref(*found[0][:2])!r})",
            did_you_mean=[answers.ref(ws, p) for ws, p, _ in found],
        )
    if found:
        ws, p, doc = found[0]
        if len(candidates) > 1:
            a.notes.append(f"found in workspace {ws!r} (the only one of {candidates} that has it)")
        return ws, doc.get("path", p), doc, r.lines
    where = candidates[0] if len(candidates) == 1 else f"any of {candidates}"
    raise ToolError(
        f"{path!r} is not an indexed document of {where}: pass a path relative to the workspace root "
        "(a search hit's ref works as it is)",
        did_you_mean=guesses[:3] or None,
    )


async def _under_a_root(b: Backend, path: str) -> tuple[str, str]:
    """(workspace, relative path) of an absolute path, by the deepest workspace root holding it."""
    listed = (await b.call("workspace.list", {}))["workspaces"]
    target = Path(path).expanduser()
    for w in sorted(listed, key=lambda w: -len(w["root"])):
        for root in {Path(w["root"]), Path(w["root"]).resolve()}:
            if target.is_relative_to(root):
                return w["name"], target.relative_to(root).as_posix()
    raise ToolError(
        f"{path} is under no workspace's root: pass a path relative to one",
        workspaces={w["name"]: w["root"] for w in listed},
    )
