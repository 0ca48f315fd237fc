"""`autodoc …`: the command line, for people and for scripts.

Each command is one RPC method. When a daemon holds the store and listens on
a socket, the command is sent to it; otherwise the same service code runs in
this process on the same store. Output for people goes to stdout; logs and
progress bars go to stderr.

Runs on: the main thread (a one-shot command), or becomes the daemon or the language server.
"""

from __future__ import annotations

import os

# The vector scan is memory-bound: OpenBLAS's threads only add stalls under
# load (measured: a 10k search went from 0.7 ms to 12 ms median). Set before
# numpy is imported anywhere in this process.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import logging
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from . import cliargs, cliout, indexcli, sessioncli, storecli
from .config import Settings
from .config.logs import configure_logging
from .connect import call
from .errors import (
    AutodocError,
    InternalError,
    InvalidParams,
    StoreLocked,
    StoreReadOnly,
    StoreTooNew,
    StoreUnreachable,
)
from .refs import parse as parse_ref

log = logging.getLogger("autodoc")

# Exit codes (README, "Exit codes")
EXIT_OK = 0
EXIT_FAILED = 1  # --call answered with an error; the daemon could not start; an OS error; the store's database unreachable or read-only, its schema newer than this AutoDoc's, or the store (a workspace's indexer lock) held by another AutoDoc
EXIT_USAGE = 2  # what was asked cannot be done as asked: bad arguments, unknown workspace or file
EXIT_INTERNAL = 70  # a bug (EX_SOFTWARE)
EXIT_INTERRUPTED = 130

_LINES = re.compile(r"^\s*(\d+)\s*(?:[-:]\s*(\d+)\s*)?$")


class UsageError(Exception):
    """A command line that cannot be carried out as written; its message says what to type."""


def json_arg(what: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(
            f"{what} is not JSON ({e}); quote it for the shell, e.g. '{{\"section_tokens\": 300}}'"
        ) from None


def parse_lines(text: str) -> tuple[int, int] | None:
    """'10-15', '10:15' (the form search prints: path:10-15) or '10' → (start, end)."""
    m = _LINES.match(text)
    if not m:
        return None
    start = int(m.group(1))
    return start, int(m.group(2) or start)


def _flagged(e: AutodocError, typed: dict[str, str]) -> AutodocError:
    """An answer's error about an RPC field (`opts.limit: must be ≤ 200`) told as the flag the
    user typed (`-n 500: must be ≤ 200`)."""
    field = getattr(e, "field", None) or (e.data.get("field") if isinstance(e.data, dict) else None)
    flag = typed.get(re.sub(r"\[\d+\]$", "", field or ""))
    if field and flag:
        e.message = flag + e.message[len(field) :] if e.message.startswith(field) else f"{flag}: {e.message}"
    return e


# set for the process `_out_of_sight` starts again: its AUTODOC_STORE was typed after --store
MOVED = "_AUTODOC_STORE_MOVED"


def _out_of_sight(argv: list[str], store: str) -> None:
    """A password typed after --store is on this process's command line, which every user of the
    machine can read (ps, /proc/PID/cmdline), for as long as a daemon runs: start again at once, the
    same pid and stdio, with the connection string in the environment instead."""
    from .config.pguri import passwords

    if not passwords(store) or os.environ.get(MOVED):
        return
    rest, i = [], 0
    while i < len(argv):
        if argv[i] == "--store" and i + 1 < len(argv) and argv[i + 1] == store:
            i += 2
            continue
        if argv[i] == f"--store={store}":
            i += 1
            continue
        rest.append(argv[i])
        i += 1
    if any(store in a for a in rest):  # typed some other way (an abbreviation): leave it be
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(
        sys.executable, [sys.executable, "-m", "autodoc.cli", *rest], {**os.environ, "AUTODOC_STORE": store, MOVED: "1"}
    )


def main(argv: list[str] | None = None) -> int:
    parser = cliargs.parser()
    args = parser.parse_args(cliargs.words_last(parser, sys.argv[1:] if argv is None else argv))
    if argv is None and args.store:
        _out_of_sight(sys.argv[1:], args.store)
    store = args.store
    if store is None and os.environ.pop(MOVED, ""):
        store = os.environ.get("AUTODOC_STORE")  # as typed after --store, and said so (Settings.store_from)
    # a server's log is its status; a command's output is its answer
    configure_logging(logging.INFO if args.cmd in ("serve", "lsp", "mcp") else logging.WARNING, verbose=args.verbose)
    settings = Settings.from_env(store, args.socket_path)
    try:
        return _run(args, settings)
    except AutodocError as e:
        return _failed(e)
    except UsageError as e:
        print(f"autodoc: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `autodoc search … | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as e:  # a daemon that went away mid-call, a disk that is full, a folder not allowed
        log.debug("the command failed", exc_info=True)
        print(f"autodoc: {e.strerror or e} ({type(e).__name__}); run again with -v for details", file=sys.stderr)
        return EXIT_FAILED
    except Exception as e:  # a bug: one line here, the traceback with -v
        log.debug("the command failed", exc_info=True)
        print(
            f"autodoc: internal error: {type(e).__name__}: {e}; run again with -v for the traceback, "
            "and please report it",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _failed(e: AutodocError) -> int:
    """One line for an error the command raised or the daemon answered, and the names the
    answer suggests (did_you_mean: a misspelt workspace or file) on the next."""
    if isinstance(e, InternalError):  # a bug, here or in the daemon (its log has the traceback)
        where = "the daemon's log" if getattr(e, "relayed", None) else "-v's output"
        print(f"autodoc: internal error: {e.message} ({e.code}); see {where}, and please report it", file=sys.stderr)
        return EXIT_INTERNAL
    print(f"autodoc: {e.message} ({e.code})", file=sys.stderr)
    if isinstance(e, StoreUnreachable):  # not the command's fault: the system's, as a refused socket is
        print("autodoc: `autodoc doctor` checks the connection and says what to fix", file=sys.stderr)
        return EXIT_FAILED
    if isinstance(
        e, (StoreReadOnly, StoreTooNew, StoreLocked)
    ):  # the store refuses (or is busy): the command was right
        return EXIT_FAILED
    near = e.data.get("did_you_mean") if isinstance(e.data, dict) else None
    if isinstance(near, list) and near:
        print("autodoc: did you mean: " + ", ".join(str(x) for x in near), file=sys.stderr)
    return EXIT_USAGE


def _read(settings: Settings, ws: str, path: str, lines: str | None) -> dict[str, Any]:
    """document.read of --lines, clamped to the document as MCP's read clamps it, and said."""
    if not lines:
        return call(settings, "document.read", [ws, path, {}])
    span = parse_lines(lines)
    if span is None:
        raise UsageError(f"--lines wants START-END, START:END or one line number, not {lines!r}")
    if span[1] < span[0]:
        raise UsageError(f"--lines {lines}: the end comes before the start (START:END, 1-based, inclusive)")
    start, end = max(1, span[0]), span[1]
    try:
        return call(settings, "document.read", [ws, path, {"line_start": start, "line_end": end}])
    except InvalidParams as e:
        if not str(getattr(e, "field", "")).startswith("opts.line_"):
            raise
    total = call(settings, "document.read", [ws, path, {"line_start": 1, "line_end": 1}])["total_lines"]
    if start > total:
        start, end = max(1, total - 20), total
        note = f"the document has {total} lines: printed its last lines ({start}-{end}) instead"
    else:
        end = total
        note = f"lines clamped to the document's {total} lines (printed {start}-{end})"
    print(f"autodoc: note: --lines {lines}: {note}", file=sys.stderr)
    return call(settings, "document.read", [ws, path, {"line_start": start, "line_end": end}])


def _read_target(settings: Settings, name: str, path: str | None, lines: str | None) -> tuple[str, str, str | None]:
    """`read REF` (refs.py: what search prints and the TUI copies) or `read NAME PATH`; --lines
    wins over the ref's lines. A ref without its workspace names one only when there is one."""
    if path is not None:
        return name, path, lines
    r = parse_ref(name)
    span = lines or (f"{r.lines[0]}-{r.lines[1]}" if r.lines else None)
    if r.workspace:
        return r.workspace, r.path, span
    names = [w["name"] for w in call(settings, "workspace.list", {})["workspaces"]]
    if len(names) == 1:
        return names[0], r.path, span
    raise UsageError(
        f"{name!r} names no workspace: write it as WORKSPACE:{r.path} (workspaces: {', '.join(names) or 'none yet'})"
    )


def _search_names(settings: Settings, given: str | None) -> list[str]:
    """-w: one name, a comma list, or `*` / none for every workspace (as MCP's search)."""
    if given and given.strip() not in ("*", "all"):
        names = list(dict.fromkeys(n.strip() for n in given.split(",") if n.strip()))
        if names:
            return names  # search.query names one that does not exist, with did_you_mean
    names = [w["name"] for w in call(settings, "workspace.list", {})["workspaces"]]
    if not names:
        raise UsageError("there is no workspace yet: autodoc workspace add NAME FOLDER, then autodoc index NAME")
    return names


def _never_indexed(settings: Settings, got: list[dict[str, Any]]) -> frozenset[str]:
    """The workspaces searched that hold nothing (no document, no session): added, never indexed.
    Asked only when a workspace's search found nothing."""
    if all(a["hits"] for a in got):
        return frozenset()
    listed = call(settings, "workspace.list", {})["workspaces"]
    return frozenset(w["name"] for w in listed if not w.get("documents") and not w.get("chunks"))


def _markdown(ws: dict[str, Any] | None) -> list[str]:
    """A workspace.list entry's `markdown` option: the entries in effect, which a new list replaces."""
    return list(((ws or {}).get("config") or {}).get("markdown") or [])


def _merged(got: list[dict[str, Any]], limit: int, budget: int | None) -> dict[str, Any]:
    """Several workspaces' answers as one list, as MCP's search merges them: compact passages by
    confidence within the budget (mcp/answers.py merge), full hits by confidence too; each workspace's
    own answer, without its hits, under `answers`."""
    from .mcp.answers import merge

    out: dict[str, Any] = {"query": got[0]["query"], "workspaces": [a["workspace"] for a in got]}
    if got[0].get("answer") == "compact":
        hits, truncated, tokens = merge(got, limit, budget or 10**9)
        out.update(answer="compact", tokens=tokens)
    else:
        # confidence is the one score the workspaces' hits share (relevance is each search's own)
        hits = sorted((h for a in got for h in a["hits"]), key=lambda h: -(h.get("confidence") or 0.0))
        truncated = len(hits) > limit
        hits = hits[:limit]
    out.update(hits=hits, truncated=truncated, answerable=any(a.get("answerable") for a in got))
    out["held_back"] = sum(a.get("held_back", 0) for a in got)
    out["answers"] = {a["workspace"]: {k: v for k, v in a.items() if k != "hits"} for a in got}
    return out


def _run(args: argparse.Namespace, settings: Settings) -> int:
    if args.call:
        method, raw = args.call
        try:
            params = json.loads(raw)
        except json.JSONDecodeError as e:
            print(f"autodoc: the params are not JSON: {e}", file=sys.stderr)
            return EXIT_USAGE
        try:
            result = call(settings, method, params)
        except AutodocError as e:  # raised here, or answered by the daemon (relayed as it was)
            print(json.dumps({"error": e.to_rpc()}, ensure_ascii=False, indent=2))
            return EXIT_FAILED
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return EXIT_OK

    if args.cmd == "store":
        return storecli.run(args, settings)

    if args.cmd == "doctor":
        from .doctor import build_instant
        from .doctor import run as doctor

        return build_instant(settings) if args.build_instant else doctor(settings, as_json=args.json)

    if args.cmd == "lsp":
        from .lsp.fast import serve  # initialize answered before pygls is imported

        return serve(settings)

    if args.cmd == "socket":
        return _socket(settings, start=args.start, wait_s=args.wait, as_json=args.json)

    if args.cmd == "tui":
        from .tui import run as tui

        return tui(settings, workspace=args.workspace, start_daemon=not args.in_process)
    if args.cmd == "mcp":
        from .mcp.fast import run as run_mcp  # stdio answers before the SDK is imported

        return run_mcp(settings, http=args.http, spawn=not args.in_process)

    if args.cmd == "serve":
        from .daemon import run_daemon

        sock = None
        if args.serve_socket is not None:
            sock = Path(args.serve_socket) if args.serve_socket else settings.socket
        return run_daemon(settings, stdio=args.stdio or sock is None, socket_path=sock)

    if args.cmd == "workspace":
        if args.wcmd == "add":
            config = json_arg("--config", args.config) if args.config else None
            if args.if_missing:
                existing = (
                    {w["name"]: w["root"] for w in call(settings, "workspace.list", {})["workspaces"]}
                    if settings.postgres or Path(settings.store).exists()
                    else {}
                )
                if args.name in existing:
                    there, here = existing[args.name], str(Path(args.path).resolve())
                    # a CI checkout at a new path each run: the workspace keeps its first root unless moved
                    move = f"autodoc workspace configure {args.name} --root {shlex.quote(here)}"
                    moved = "" if there == here else f" at {there}, not {here} ({move} moves it)"
                    print(f"workspace {args.name} exists{moved}")
                    return EXIT_OK
            ws = call(
                settings,
                "workspace.add",
                {"name": args.name, "root": str(Path(args.path).resolve()), "config": config, "force": args.force},
            )
            print(f"added workspace {ws['name']} → {ws['root']}")
            for line in cliout.overlaps(call(settings, "workspace.list", {})["workspaces"], ws["name"], ws["root"]):
                print(line, file=sys.stderr)
        elif args.wcmd == "list":
            for ws in call(settings, "workspace.list", {})["workspaces"]:
                print(f"{ws['name']}\t{ws['root']}\t{ws['documents']} documents, {ws['chunks']} chunks")
        elif args.wcmd == "remove":
            out = call(settings, "workspace.remove", {"name": args.name})
            print(f"removed workspace {out['removed']}")
        elif args.wcmd == "status":
            listed = {w["name"]: w for w in call(settings, "workspace.list", {})["workspaces"]}
            names = [args.name] if args.name else list(listed)
            answers = [call(settings, "workspace.status", {"workspace": n}) for n in names]
            if args.json:  # one workspace named: its answer; else the list of every one's
                print(json.dumps(answers[0] if args.name else answers, ensure_ascii=False, indent=2))
            elif not answers:
                print("no workspace yet: autodoc workspace add NAME FOLDER")
            else:
                for i, st in enumerate(answers):
                    if i:
                        print()
                    cliout.print_status(st, _markdown(listed.get(st["name"])), shared=settings.postgres)
        elif args.wcmd == "configure":
            if args.options is None and args.root is None:
                raise UsageError("workspace configure: give the options (JSON), --root PATH, or both")
            asked: dict[str, Any] = {"workspace": args.name, "force": args.force}
            if args.options is not None:
                asked["options"] = json_arg("the options", args.options)
            if args.root is not None:  # resolved here: the daemon's working folder is not this shell's
                asked["root"] = str(Path(args.root).expanduser().resolve())
            try:
                out = call(settings, "workspace.configure", asked)
            except AutodocError as e:
                raise _flagged(e, {"root": "--root"}) from None
            if args.root is not None:
                print(f"workspace {out['name']} → {out['root']}")
            if args.options is not None:
                print(json.dumps(out["config"], indent=2))
            if "markdown" in (asked.get("options") or {}):
                # a list replaces the one in effect: what it leaves out is dropped from the index now
                left = call(settings, "workspace.status", {"workspace": out["name"]})["files"].get("left_out")
                for line in cliout.left_out_lines(out["name"], left, out["config"]["markdown"]):
                    print(line, file=sys.stderr)
        return EXIT_OK

    if args.cmd == "index":
        name, wait_lock = indexcli.name_and_wait_lock(args.name, args.wait_lock)
        return indexcli.run(settings, name, full=args.full, wait=args.wait, wait_lock=wait_lock)

    if args.cmd == "search":
        names = _search_names(settings, args.workspace)
        opts: dict[str, Any] = {"limit": args.limit}
        if args.stages:
            opts["stages"] = [s.strip() for s in args.stages.split(",") if s.strip()]
        if args.compact or args.budget is not None:  # a budget is a compact answer's
            opts["answer"] = "compact"
            if args.budget is not None:
                opts["budget_tokens"] = args.budget
        if args.min_confidence is not None:
            opts["min_confidence"] = args.min_confidence
        typed = {"opts.limit": f"-n {args.limit}", "opts.stages": f"--stages {args.stages}"}
        typed["opts.budget_tokens"] = f"--budget {args.budget}"
        typed["opts.min_confidence"] = f"--min-confidence {args.min_confidence}"
        try:
            got = [call(settings, "search.query", [name, " ".join(args.query), opts]) for name in names]
        except AutodocError as e:
            raise _flagged(e, typed) from None
        answer = got[0] if len(got) == 1 else _merged(got, args.limit, args.budget)
        if args.json:
            print(json.dumps(answer, ensure_ascii=False, indent=2))
        else:
            cliout.print_hits(got, answer.get("hits", []), _never_indexed(settings, got))
        return EXIT_OK

    if args.cmd == "read":
        ws, path, lines = _read_target(settings, args.name, args.path, args.lines)
        sys.stdout.write(_read(settings, ws, path, lines)["text"])
        return EXIT_OK

    if args.cmd == "session":
        return sessioncli.run(args, settings)

    cliargs.parser().print_help()
    return EXIT_OK


def _taken(sock: Path) -> str:
    """Why a daemon could not listen on `sock`, when another one does: the store it serves."""
    from .connect import call_socket

    try:
        other = call_socket(sock, "server.info", {}, timeout=2.0).get("store")
    except (OSError, AutodocError, ValueError):
        return ""
    return f"; the daemon of {other} listens on {sock}: give this store's daemon another (AUTODOC_SOCKET)"


def _socket(settings: Settings, *, start: bool, wait_s: float, as_json: bool) -> int:
    """`autodoc socket`: the daemon serving this store, by the rule every client here follows
    (the store's lease names its socket), for a client that runs none of this package's code
    (the Neovim plugin), which would otherwise need its own copy of the rule and of a database
    lease's name; with `start`, the daemon started when none serves it, as `autodoc tui` starts it."""
    import time

    from .connect import daemon_socket, read_holder, start_daemon

    sock, started, why = daemon_socket(settings), False, None
    if sock is None:
        held = read_holder(settings.store)
        if held and not held.get("socket"):
            why = f"pid {held.get('pid')} holds it and serves no socket (serve --stdio, lsp, index); stop it first"
        elif not start:
            why = "none runs; start one: autodoc serve --socket &"
        else:
            deadline = time.monotonic() + wait_s
            why = start_daemon(settings, settings.daemon_log, wait_s=wait_s)
            started = why is None
            # ours lost the lease (or the socket) to a daemon another client started at the same
            # moment (two editors opening at once): that one is the store's, once it listens
            while why and read_holder(settings.store) and not daemon_socket(settings) and time.monotonic() < deadline:
                time.sleep(0.05)
            sock = daemon_socket(settings)
            if sock is None and settings.socket.exists():
                why = f"{why}{_taken(settings.socket)}"
    holder = read_holder(settings.store) if sock is not None else None
    answer = {
        "socket": str(sock) if sock is not None else None,
        "store": settings.store_shown,
        "store_from": settings.store_from,
        "pid": holder.get("pid") if holder else None,
        "started": started,
        "log": str(settings.daemon_log) if started else None,
        "why": None if sock is not None else why or "it did not start",
    }
    if as_json:
        print(json.dumps(answer, ensure_ascii=False))
    elif sock is not None:
        print(sock)
    if sock is None:
        print(f"autodoc: no daemon serves the store {settings.store_named()}: {answer['why']}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
