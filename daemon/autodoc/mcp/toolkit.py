"""What every MCP tool shares: the answer's two forms, running calls at once, notes, finding a document.

Input: the Backend and one call's Args. Output: a tool's (structured answer,
text for the model), the calls' results in order, the document a ref names.

Runs on: the MCP server's event loop (each RPC call on a worker thread).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
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
