"""`autodoc index`: each workspace's index, its report and what it skipped first; then search by
meaning, which a daemon fills in the background: the one that runs, else one started here once the
words are indexed (issue 38: an in-process run kept a person at the prompt for most of an hour
embedding 30k chunks, with nothing said until it ended). `--wait` embeds before returning, in this
process when no daemon runs (scripts that want every vector before they go on). `--wait-lock`
queues behind another AutoDoc indexing the workspace on a shared PostgreSQL store (CI behind CI).

Runs on: the main thread of `autodoc index`.
"""

from __future__ import annotations

import shlex
import sys
import time
from typing import Any

from . import cliout
from .config import Settings
from .connect import call, daemon_socket, start_daemon
from .errors import StoreLocked

DAEMON_START_S = 60.0  # how long `autodoc index` waits for the daemon it starts to answer
WAIT_LOCK_S = 3600.0  # `--wait-lock` alone: an hour, longer than a team's largest run
LOCK_POLL_S = 1.0  # how often a waiting index tries again


def add_parser(sub: Any) -> None:
    """The `index` command's arguments."""
    i = sub.add_parser("index", help="index a workspace (all when none is named)")
    i.add_argument("name", nargs="?")
    i.add_argument("--full", action="store_true", help="re-chunk every file")
    i.add_argument(
        "--wait",
        action="store_true",
        help="embed before returning (in this process when no daemon runs) instead of leaving it to a daemon",
    )
    i.add_argument(
        "--wait-lock",
        nargs="?",
        type=_seconds_or_name,
        const=WAIT_LOCK_S,
        default=0.0,
        metavar="SECONDS",
        help=f"when another AutoDoc is indexing the workspace (a shared PostgreSQL store), wait up to SECONDS "
        f"(default {WAIT_LOCK_S:.0f}) for it to finish, then index, instead of refusing: CI queues behind it",
    )


def _seconds_or_name(value: str) -> float | str:
    """--wait-lock's optional value: a number of seconds, else (`--wait-lock kb`) the workspace's name,
    which argparse would otherwise fail to read as a number ("invalid float value: 'kb'")."""
    try:
        return float(value)
    except ValueError:
        return value


def name_and_wait_lock(name: str | None, wait_lock: float | str) -> tuple[str | None, float]:
    """The workspace to index and the seconds to wait for another indexer, from the parsed arguments."""
    if isinstance(wait_lock, float):
        return name, wait_lock
    if name is None:
        return wait_lock, WAIT_LOCK_S
    print(f"autodoc index: error: --wait-lock takes SECONDS, not {wait_lock!r}", file=sys.stderr)
    raise SystemExit(2)


def _embedding_line(name: str, emb: dict[str, Any] | None, here: bool, seconds: float) -> str:
    """What the run did for search by meaning: in-process it embeds before answering (minutes on a
    large workspace, which the index's own time leaves out); a daemon embeds in the background."""
    emb = emb or {}
    if not emb.get("available"):
        return f"{name}: search by meaning is off: {emb.get('reason') or 'no embedding model'}"
    n, left = emb.get("embedded", 0), emb.get("skipped", 0)
    if here:
        line = f"{name}: {n} chunks embedded in {max(0.0, seconds):.1f} s"
        return f"{line}; {left} not embedded: {emb.get('reason')}" if left else line
    if left:  # a daemon runs: it embeds them in the background, as status shows (with an ETA)
        why = emb.get("reason") or "the daemon embeds them in the background"
        return f"{name}: search by meaning covers {n} chunks; {left} more to embed ({why}); follow it: autodoc workspace status {shlex.quote(name)}"
    return f"{name}: search by meaning covers all {n} chunks"


def run(settings: Settings, name: str | None, *, full: bool, wait: bool, wait_lock: float = 0.0) -> int:
    """Index `name` (every workspace when None); the exit status."""
    names = [name] if name else [w["name"] for w in call(settings, "workspace.list", {})["workspaces"]]
    here = daemon_socket(settings) is None
    handed: list[str] = []
    for n in names:
        t0 = time.monotonic()
        rep = _index(settings, n, full=full, wait=wait, wait_lock=wait_lock)
        print(
            f"{n}: {rep['added']} added, {rep['modified']} modified, {rep['renamed']} renamed, "
            f"{rep['deleted']} deleted, {rep['unchanged']} unchanged, {len(rep['skipped'])} skipped; "
            f"{rep['chunks']} chunks in {rep['seconds']} s",
            flush=True,
        )
        for s in rep["skipped"]:
            print(f"  skipped {s['path']}: {s['reason']}", file=sys.stderr)
        for line in cliout.left_out_lines(n, rep.get("left_out"), _markdown(settings, n, rep.get("left_out"))):
            print(line, file=sys.stderr)
        emb = rep.get("embedding") or {}
        if here and not wait and emb.get("available") and emb.get("skipped"):
            handed.append(n)
        else:
            print(_embedding_line(n, emb, here and wait, time.monotonic() - t0 - float(rep["seconds"])))
    if handed:
        _hand_off(settings, handed)
    return 0


def _markdown(settings: Settings, name: str, left: dict[str, Any] | None) -> list[str]:
    """The workspace's `markdown` option in effect, which the hint to take in what it left out keeps
    (a list given replaces it); asked only when something was left out."""
    if not cliout.left_out_lines(name, left, []):
        return []
    listed = {w["name"]: w for w in call(settings, "workspace.list", {})["workspaces"]}
    return list(((listed.get(name) or {}).get("config") or {}).get("markdown") or [])


def _index(settings: Settings, name: str, *, full: bool, wait: bool, wait_lock: float) -> dict[str, Any]:
    """One workspace's run. Refused while another AutoDoc indexes it (StoreLocked naming the holder);
    with `wait_lock`, tried again each LOCK_POLL_S until then. Waited for here, not in the daemon: a
    daemon waiting inside the call would hold its writer slot (its live saves) all that time."""
    deadline = time.monotonic() + wait_lock
    said = False
    while True:
        try:
            return call(
                settings,
                "workspace.reindex" if full else "workspace.index",
                {"workspace": name},
                progress=True,
                embed=wait,
            )
        except StoreLocked as e:
            left = deadline - time.monotonic()
            if left <= 0:
                if not wait_lock:
                    print("autodoc: `autodoc index --wait-lock` waits for it instead", file=sys.stderr)
                raise
            if not said:
                print(f"autodoc: {e.message.split('; wait')[0]}; waiting up to {left:.0f} s", file=sys.stderr)
                said = True
            time.sleep(min(LOCK_POLL_S, left))


def _hand_off(settings: Settings, names: list[str]) -> None:
    """Start a daemon for this store to embed what `names` lack, and say how to follow it; when
    none can start, embed here as before (the reason on stderr)."""
    log_path = settings.daemon_log
    why = start_daemon(settings, log_path, wait_s=DAEMON_START_S)
    if why is not None:
        print(f"autodoc: no daemon to embed in the background ({why}); embedding here", file=sys.stderr)
        for n in names:
            t0 = time.monotonic()
            rep = call(settings, "workspace.index", {"workspace": n}, progress=True)
            print(_embedding_line(n, rep.get("embedding"), True, time.monotonic() - t0 - float(rep["seconds"])))
        return
    pid = call(settings, "server.info", {}).get("pid")
    for n in names:
        emb = call(settings, "workspace.status", {"workspace": n})["embedding"]
        eta = emb.get("eta_seconds")
        left = f", about {eta / 60:.0f} min left" if eta and eta >= 90 else (f", about {eta:.0f} s left" if eta else "")
        print(
            f"{n}: search by meaning fills in the background: the daemon (pid {pid}, log {log_path}) embeds "
            f"{emb.get('pending', 0)} chunks{left}; searches answer meanwhile (by keywords, and by meaning "
            f"where the instant tier or the vectors reach). Follow it, with an ETA: autodoc workspace status {n}"
        )
