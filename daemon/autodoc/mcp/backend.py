"""Where the MCP server's calls run, and the forgiving match of names a model guessed.

The choice is connect.py's `Backend`, with the MCP server's policy: the
daemon's socket when a daemon holds the store (any number of MCP servers,
editors and scripts then share it); else, unless told not to (`--in-process`),
a daemon started here in the background, so that a second agent started the
same way shares it (two in-process servers could not: the second was a reader
and its writes failed with "this store was opened read-only"); else a Service
in this process — a writer that embeds in the background, or a reader when
another process holds the lease without a socket, whose writes are refused
with a message naming that process and what to do. It never exits on the
lease: a daemon that goes away is replaced by the next choice at the next call.

Runs on: the event loop (async methods); the calls themselves on worker threads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from ..config import Settings
from ..config.pguri import redact
from ..connect import Backend as Link
from ..connect import read_holder, start_daemon
from ..errors import ShuttingDown, StoreReadOnly
from ..suggest import close_names

log = logging.getLogger("autodoc.mcp")

SPAWN_WAIT_S = 30.0
STOP_WAIT_S = 10.0  # a stopping daemon's lease outlives its socket by its shutdown deadline (5 s)
BROWSE_LIMIT = 200  # search.query's largest limit: a facet browse lists at most this many documents


def no_workspace(settings: Settings) -> str:
    """What an empty store answers: which store was looked in, how it was chosen, what to do."""
    hint = (
        "; if your workspaces are in another store, give the server its path in the client's config "
        '(`"env": {"AUTODOC_STORE": "…"}`: a client passes only HOME and PATH on)'
        if settings.store_from == "default"
        else ""
    )
    return (
        f"there is no workspace yet in the store {settings.store_named()}: add one with "
        f"`autodoc workspace add NAME FOLDER`, then `autodoc index NAME`{hint}"
    )


def holder_named(held: dict[str, Any]) -> str:
    """'pid 123 (autodoc mcp --in-process)': the process holding the store's lease, by its command line."""
    pid = held.get("pid")
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        # a connection string typed after --store may hold a password: shown masked
        cmd = " ".join(redact(a.decode(errors="replace")) for a in argv if a)
    except (OSError, ValueError):
        cmd = ""
    if "autodoc.cli" in cmd:  # `python -m autodoc.cli mcp …` reads as the command a person typed
        cmd = "autodoc" + cmd.split("autodoc.cli", 1)[1]
    return f"pid {pid}" + (f" ({cmd})" if cmd else "")


class ToolError(Exception):
    """A tool call the model should redo differently; the message says how."""

    def __init__(self, message: str, **data: Any):
        super().__init__(message)
        self.message = message
        self.data = {k: v for k, v in data.items() if v is not None}


ChangeCallback = Callable[[str, list[dict[str, Any]]], None]


def _spawn(settings: Settings) -> str | None:
    """`autodoc serve --socket` for this store, detached; up once its socket is in the lease.
    Not tried while a process without a socket holds the store: it could not take the lease."""
    held = read_holder(settings.store)
    if held and not held.get("socket"):
        return f"the store is held by {holder_named(held)}, which serves no socket to share"
    log_path = settings.daemon_log
    return start_daemon(settings, log_path, wait_s=SPAWN_WAIT_S, poll_s=0.1, until_answers=False, watch_exit=False)


class Backend:
    def __init__(self, settings: Settings, *, spawn: bool = False):
        self.settings = settings
        self.spawn = spawn
        self.link = Link(
            settings,
            start=_spawn if spawn else None,
            embed_all=True,
            reconnect_on=(OSError, ShuttingDown),
            stop_wait_s=STOP_WAIT_S,
            rechoose_for_writes=True,
            name="mcp",
        )

    @property
    def mode(self) -> str:
        return self.link.mode

    @property
    def socket(self) -> Path | None:
        return self.link.socket

    def on_local_changes(self, fn: ChangeCallback) -> None:
        """Call fn(workspace, changes) after an in-process write (a daemon pushes its own)."""
        self.link.on_local_changes(fn)

    # -- calling -----------------------------------------------------------------------

    def call_sync(self, method: str, params: Any) -> Any:
        try:
            return self.link.call(method, params)
        except StoreReadOnly:  # a database role that may only read: its message names the role
            raise
        except RuntimeError:  # the store's own refusal of a write on a read-only connection
            if not self.link.mode.startswith("in-process (read-only"):
                raise
            held = read_holder(self.settings.store)
            who = holder_named(held) if held else "another process"
            raise ToolError(
                f"cannot write the store {self.settings.store_shown}: {who} holds it without a socket to share it. "
                "Stop that process or wait for it to finish; the next write then starts a daemon that every "
                "agent shares (or start one yourself: `autodoc serve --socket`)",
                holder=held or None,
            ) from None

    async def call(self, method: str, params: Any) -> Any:
        return await anyio.to_thread.run_sync(partial(self.call_sync, method, params))

    def close(self) -> None:
        self.link.close()

    # -- names a model may have guessed -------------------------------------------------

    async def workspaces(self) -> list[str]:
        return [w["name"] for w in (await self.call("workspace.list", {}))["workspaces"]]

    async def descriptions(self) -> dict[str, str]:
        """Each workspace's description (workspace.configure's `description`; "" when none)."""
        listed = (await self.call("workspace.list", {}))["workspaces"]
        return {w["name"]: (w.get("config") or {}).get("description", "") for w in listed}

    async def workspace(self, name: Any, *, many: bool = False) -> list[str]:
        """The workspaces a call is about: the one named (matched without regard to case),
        or, with no name, the only one there is, or with `many` every one."""
        names = await self.workspaces()
        if not names:
            raise ToolError(no_workspace(self.settings), store=self.settings.store_shown)
        if name in (None, "", "*", "all", "ALL"):
            if many or len(names) == 1:
                return names
            about = {n: d for n, d in (await self.descriptions()).items() if d}
            raise ToolError("name a workspace", workspaces=names, about=about or None)
        if not isinstance(name, str):
            raise ToolError(f"workspace must be a name (a string), one of {names}", workspaces=names)
        if name in names:
            return [name]
        folded = [n for n in names if n.lower() == name.lower()]
        if len(folded) == 1:
            return folded
        near = close_names(name, names, 3, cutoff=0.5, fold_case=False)
        raise ToolError(f"no workspace named {name!r}", did_you_mean=near or None, workspaces=names)

    async def documents(
        self, workspace: str, limit: int = BROWSE_LIMIT, after: str | None = None
    ) -> list[dict[str, Any]]:
        """The workspace's documents in path order ({path, title, line_end…}): a facet browse
        with no words, which lists files without ranking them; after: those past this path."""
        opts: dict[str, Any] = {"limit": limit, "scope": "files", **({"after": after} if after is not None else {})}
        answer = await self.call("search.query", [workspace, "", opts])
        return answer["hits"]
